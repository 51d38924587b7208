//! `FusedBiCgStab` for `CudaBackend`: where the fused BiCGStab may run (kernel 3.0, one
//! GPU), then the engine (`engines::bicgstab::BiEngine`) on the backend's stream.

use crate::backend::cuda::backend::CudaBackend;
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::timing::GpuStream;
use crate::backend::cuda::engines::bicgstab::{BiEngine, DeviceBiState};
use crate::backend::{unsupported, BiScalars, FusedBiCgStab};
use crate::error::{Error, Result};

impl CudaBackend {
    /// The engine and the stream, where the fused BiCGStab may run: refused where the
    /// fused path is not (the seed versions) and on a decomposed lattice (the sums do not
    /// cross ranks).
    fn bi_engine(&mut self) -> Result<(&mut BiEngine, &mut GpuStream)> {
        if !self.caps.fused_cr {
            return Err(unsupported(self, "the fused BiCGStab iteration"));
        }
        if self.core.halo.is_some() {
            return Err(Error::invalid(
                "solver.iteration",
                "the fused BiCGStab runs on one GPU; a split lattice takes iteration = \"seed\" (the host-driven BiCGStab)",
            ));
        }
        Ok((&mut self.bi, &mut self.core.gpu))
    }

    /// Load the kernels ahead of a solve (`Prepare`), on one GPU.
    pub(crate) fn prepare_bicgstab(&mut self) -> Result<()> {
        if self.core.halo.is_none() {
            let (bi, gpu) = self.bi_engine()?;
            bi.prepare(gpu)?;
        }
        Ok(())
    }
}

impl FusedBiCgStab for CudaBackend {
    type BiState = DeviceBiState;

    fn bi_state(&mut self, s: &BiScalars) -> Result<DeviceBiState> {
        self.bi_engine()?;
        self.bi.state(&self.core.gpu, &self.core.ledger, s)
    }

    fn bi_set(&mut self, state: &mut DeviceBiState, s: &BiScalars) -> Result<()> {
        BiEngine::set(&self.core.gpu, state, s)
    }

    fn bi_get(&mut self, state: &DeviceBiState) -> Result<BiScalars> {
        BiEngine::get(&mut self.core.gpu, state)
    }

    fn bi_history_upto(&mut self, state: &DeviceBiState, iter: u64) -> Result<Vec<f64>> {
        BiEngine::history_upto(&mut self.core.gpu, state, iter)
    }

    fn bi_start(
        &mut self,
        state: &mut DeviceBiState,
        rhs: &DeviceSpinor,
        x: &mut DeviceSpinor,
        r: &mut DeviceSpinor,
        r0: &mut DeviceSpinor,
        p: &mut DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.start(gpu, state, rhs, [x, r, r0, p])
    }

    fn bi_alpha_s(
        &mut self,
        state: &mut DeviceBiState,
        r0: &DeviceSpinor,
        v: &DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.alpha_s(gpu, state, r0, v, r)
    }

    fn bi_omega(
        &mut self,
        state: &mut DeviceBiState,
        t: &DeviceSpinor,
        r: &DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.omega(gpu, state, t, r)
    }

    fn bi_update(
        &mut self,
        state: &mut DeviceBiState,
        p: &DeviceSpinor,
        t: &DeviceSpinor,
        r0: &DeviceSpinor,
        x: &mut DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.update(gpu, state, [p, t, r0], x, r)
    }

    fn bi_p(
        &mut self,
        state: &mut DeviceBiState,
        r: &DeviceSpinor,
        v: &DeviceSpinor,
        p: &mut DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.p(gpu, state, r, v, p)
    }
}
