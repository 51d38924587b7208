//! `FusedBiCgStab` for `CudaBackend`: where the fused BiCGStab may run (kernel 3.0, on one
//! GPU or a decomposed lattice), then the engine (`engines::bicgstab::BiEngine`) on the
//! backend's stream. Decomposed, each reduction's rank sums are all-gathered over the
//! exchange (NCCL, or device copies between ranks as threads) and finished by
//! `BiEngine::global`, all enqueued: capturable where the exchange is, as the fused CR's.

use crate::backend::cuda::backend::CudaBackend;
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::timing::GpuStream;
use crate::backend::cuda::engines::bicgstab::{BiEngine, BiReduction, DeviceBiState};
use crate::backend::{unsupported, BiScalars, FusedBiCgStab};
use crate::error::{Error, Result};

impl CudaBackend {
    /// The engine and the stream, where the fused BiCGStab may run: refused where the
    /// fused path is not (the seed versions).
    fn bi_engine(&mut self) -> Result<(&mut BiEngine, &mut GpuStream)> {
        if !self.caps.fused_cr {
            return Err(unsupported(self, "the fused BiCGStab iteration"));
        }
        Ok((&mut self.bi, &mut self.core.gpu))
    }

    /// Load the kernels ahead of a solve (`Prepare`).
    pub(crate) fn prepare_bicgstab(&mut self) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.prepare(gpu)
    }

    /// Decomposed lattice: the ranks' sums of reduction `which` all-gathered into the
    /// state and the reduction finished (`BiEngine::global`); nothing on one GPU.
    fn bi_global(&mut self, state: &mut DeviceBiState, which: BiReduction) -> Result<()> {
        let Some(halo) = &mut self.core.halo else {
            return Ok(());
        };
        let stream = self.core.gpu.stream.clone();
        let Some((src, dst, bytes)) = state.gather_args(&stream) else {
            return Err(Error::internal(
                "a fused BiCGStab state made for one GPU used on a decomposed lattice",
            ));
        };
        halo.exchange.all_gather_on(&stream, src, dst, bytes)?;
        self.core.gpu.mark("all-gather")?;
        self.bi.global(&mut self.core.gpu, state, which)
    }
}

impl FusedBiCgStab for CudaBackend {
    type BiState = DeviceBiState;

    fn bi_state(&mut self, s: &BiScalars) -> Result<DeviceBiState> {
        self.bi_engine()?;
        let ranks = self.core.halo.as_ref().map(|h| h.partition.ranks());
        self.bi.state(&self.core.gpu, &self.core.ledger, s, ranks)
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
        bi.start(gpu, state, rhs, [x, r, r0, p])?;
        self.bi_global(state, BiReduction::Start)
    }

    fn bi_alpha_s(
        &mut self,
        state: &mut DeviceBiState,
        r0: &DeviceSpinor,
        v: &DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.alpha(gpu, state, r0, v)?;
        self.bi_global(state, BiReduction::Alpha)?;
        let (bi, gpu) = self.bi_engine()?;
        bi.s(gpu, state, v, r)
    }

    fn bi_omega(
        &mut self,
        state: &mut DeviceBiState,
        t: &DeviceSpinor,
        r: &DeviceSpinor,
    ) -> Result<()> {
        let (bi, gpu) = self.bi_engine()?;
        bi.omega(gpu, state, t, r)?;
        self.bi_global(state, BiReduction::Omega)
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
        bi.update(gpu, state, [p, t, r0], x, r)?;
        self.bi_global(state, BiReduction::Update)
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
