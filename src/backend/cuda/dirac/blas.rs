//! What every stencil of the CUDA backend shares: the stream and its books, the lattice,
//! kappa, the seed's BLAS-1 kernels (xscal, xaxpy) and its deterministic tree reductions
//! (in one launch each, with their buffers: `ReduceBuffers`), and the two pinned staging buffers
//! of the spinor uploads and downloads (`staging`). The stencil objects (`seed`, `fast`) take it by `&mut` in
//! every call, so that `CudaBackend` holds the two side by side.

use crate::backend::cuda::core::device::{err, function};
use crate::backend::cuda::core::fast_layout::{Segment, SpinorChunk, SpinorOrder};
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::kernels::{reduce_blocks, Kernel, BLAS_BLOCK, REDUCE_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr};
use crate::backend::cuda::core::staging::{
    download_through, upload_through, StageShape, StagedTimes, StagingBuffers,
};
use crate::backend::cuda::core::stencil::v3::{launch_v3, V3Kernels, V3Launch};
use crate::backend::cuda::core::timing::{launch, GpuStream};
use crate::backend::cuda::halo::rank::Halo;
use crate::backend::ledger::{Booking, Ledger, Purpose};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use cudarc::driver::{CudaModule, CudaSlice, CudaStream, LaunchConfig};
use std::sync::Arc;

pub(crate) struct BlasKernels {
    pub xscal: cudarc::driver::CudaFunction,
    pub xaxpy: cudarc::driver::CudaFunction,
    pub norm2_partial: cudarc::driver::CudaFunction,
    pub dot_partial: cudarc::driver::CudaFunction,
}

impl BlasKernels {
    pub fn load(blas: &Arc<CudaModule>, reduce: &Arc<CudaModule>) -> Result<Self> {
        Ok(BlasKernels {
            xscal: function(blas, "xscal")?,
            xaxpy: function(blas, "xaxpy")?,
            norm2_partial: function(reduce, "norm2_partial")?,
            dot_partial: function(reduce, "dot_partial")?,
        })
    }
}

/// The buffers of the one-launch reductions (kernels/reduce.cu): the first pass's partial
/// sums, the levels of the climb above them, its tickets (zero between launches) and the
/// result. Room for a reduction over a full double field (double2 values).
pub(crate) struct ReduceBuffers {
    pub level0: CudaSlice<f64>,
    pub upper: CudaSlice<f64>,
    pub tickets: CudaSlice<u32>,
    pub result: CudaSlice<f64>,
    /// All of it on the books (`Purpose::Reductions`).
    pub _booking: Booking,
}

/// `ReduceBuffers` as the kernels' last four arguments (device addresses).
#[derive(Clone, Copy)]
pub(crate) struct ReduceArgs {
    pub level0: u64,
    pub upper: u64,
    pub tickets: u64,
    pub result: u64,
}

impl ReduceBuffers {
    /// Buffers for first passes of at most `blocks` blocks.
    pub fn new(stream: &Arc<CudaStream>, ledger: &Ledger, blocks: usize) -> Result<Self> {
        let upper = crate::backend::cuda::core::kernels::climb_len(blocks).max(1);
        let alloc = |n| {
            stream
                .alloc_zeros::<f64>(n)
                .map_err(err("allocating reduction buffers"))
        };
        Ok(ReduceBuffers {
            level0: alloc(2 * blocks.max(1))?,
            upper: alloc(2 * upper)?,
            tickets: stream
                .alloc_zeros::<u32>(upper)
                .map_err(err("allocating reduction tickets"))?,
            result: alloc(2)?,
            _booking: ledger.book(
                Purpose::Reductions,
                crate::backend::cuda::core::kernels::reduce_buffer_bytes(blocks),
            ),
        })
    }

    pub fn args(&self, stream: &CudaStream) -> ReduceArgs {
        ReduceArgs {
            level0: dptr(&self.level0, stream),
            upper: dptr(&self.upper, stream),
            tickets: dptr(&self.tickets, stream),
            result: dptr(&self.result, stream),
        }
    }
}

/// The shared part of a `CudaBackend` (see the module documentation).
pub(crate) struct Core {
    pub gpu: GpuStream,
    pub lattice: Lattice,
    pub kappa: f64,
    pub device_name: String,
    pub blas: BlasKernels,
    /// The buffers of the one-launch reductions.
    pub reduce: ReduceBuffers,
    /// The books of every device allocation of this backend (`backend::ledger`).
    pub ledger: Ledger,
    /// The pinned staging buffers of spinor uploads and downloads (allocated on first
    /// use, kept: `staging`).
    pub staging: Option<StagingBuffers>,
    /// Operator applications since construction or the last reset.
    pub applications: u64,
    /// Bit mu: fermions antiperiodic in direction mu.
    pub antiperiodic_mask: i32,
    /// The rank's side of a decomposed lattice (3.0 only), None on one GPU alone.
    pub halo: Option<Halo>,
}

impl Core {
    /// One 3.0 stencil launch: on a decomposed lattice the halo's pack, exchange, interior
    /// and exterior, else the kernel alone.
    pub fn launch_v3(&mut self, f: &V3Kernels, l: &V3Launch) -> Result<()> {
        match &mut self.halo {
            Some(h) => h.launch(&mut self.gpu, f, l),
            None => launch_v3(&mut self.gpu, f, l),
        }
    }

    pub fn n_complex(&self) -> usize {
        self.lattice.volume() * 12
    }

    pub fn dims(&self) -> [i32; 4] {
        std::array::from_fn(|mu| self.lattice.dims[mu] as i32)
    }

    /// The staging buffers of the spinor transfers, taken on first use (from the pinned
    /// pool, `staging::StagingBuffers`): two of min(`StageShape::values`, a full double
    /// field), one when the field fits one. The bool says whether this call took them.
    pub fn staging(&mut self) -> Result<(&mut StagingBuffers, bool)> {
        let fresh = self.staging.is_none();
        if fresh {
            let field = 2 * self.n_complex();
            let values = field.clamp(1, StageShape::of(&self.gpu.tuning).values);
            let count = if field > values { 2 } else { 1 };
            self.staging = Some(StagingBuffers::new(&self.gpu.ctx, values, count)?);
        }
        match self.staging.as_mut() {
            Some(b) => Ok((b, fresh)),
            None => Err(Error::internal(
                "the spinor staging buffers were not pinned",
            )),
        }
    }

    /// A full double field from the canonical order [site][12 complex] (f64 pairs) to the
    /// device in `order`, chunk by chunk through the staging buffers: the host lays a
    /// chunk out (in parallel) while the previous one is copied. Returns when the copies
    /// are done; `pin_ms` is the taking of the buffers when this call took them.
    pub fn upload_spinor(
        &mut self,
        order: SpinorOrder,
        canonical: &[f64],
        dst: &mut CudaSlice<f64>,
    ) -> Result<StagedTimes> {
        self.staged(
            "upload",
            order,
            |buffers, stream, lattice, chunks, segments| {
                upload_through(buffers, stream, dst, segments, |k, buf| {
                    order.fill(lattice, canonical, &chunks[k], buf)
                })
            },
        )
    }

    /// The inverse of `upload_spinor`: the copies of a chunk run while the host scatters
    /// the previous one (in parallel) into `canonical`.
    pub fn download_spinor(
        &mut self,
        order: SpinorOrder,
        src: &CudaSlice<f64>,
        canonical: &mut [f64],
    ) -> Result<StagedTimes> {
        self.staged(
            "download",
            order,
            |buffers, stream, lattice, chunks, segments| {
                download_through(buffers, stream, src, segments, |k, buf| {
                    order.scatter(lattice, buf, &chunks[k], canonical)
                })
            },
        )
    }

    /// What both spinor transfers share: the staging buffers, the field's chunks in
    /// `order` and their device segments, handed to `transfer`; then the pinning time (if
    /// this call pinned) and the log line.
    fn staged(
        &mut self,
        what: &str,
        order: SpinorOrder,
        transfer: impl FnOnce(
            &mut StagingBuffers,
            &Arc<CudaStream>,
            &Lattice,
            &[SpinorChunk],
            &[Vec<Segment>],
        ) -> Result<StagedTimes>,
    ) -> Result<StagedTimes> {
        let t = std::time::Instant::now();
        let volume = self.lattice.volume();
        let lattice = self.lattice.clone();
        let stream = self.gpu.stream.clone();
        let (buffers, fresh) = self.staging()?;
        let chunks = order.chunks(volume, buffers.values());
        let segments: Vec<_> = chunks.iter().map(|c| order.segments(volume, c)).collect();
        let mut times = transfer(buffers, &stream, &lattice, &chunks, &segments)?;
        if fresh {
            times.pin_ms = buffers.pin_ms;
        }
        log_transfer(what, &times, chunks.len(), t);
        Ok(times)
    }

    pub fn check_len(&self, n: usize, what: &str) -> Result<()> {
        if n != self.n_complex() {
            return Err(Error::invalid(
                what,
                format!(
                    "field of {} complex numbers on a lattice that needs {}",
                    n,
                    self.n_complex()
                ),
            ));
        }
        Ok(())
    }

    /// A zeroed double field of n complex numbers.
    pub fn alloc_double(&mut self, n: usize) -> Result<CudaSlice<f64>> {
        self.gpu
            .stream
            .alloc_zeros::<f64>(2 * n)
            .map_err(err("allocating a spinor field"))
    }

    /// y = y + a x over n complex numbers (the seed's xaxpy).
    pub fn axpy_d(
        &mut self,
        a: C64,
        x: &CudaSlice<f64>,
        y: &mut CudaSlice<f64>,
        n: usize,
    ) -> Result<()> {
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        launch!(
            self.gpu,
            Kernel::Xaxpy,
            n,
            &self.blas.xaxpy,
            cfg,
            [x, y, &a.re, &a.im, &ni]
        );
        Ok(())
    }

    /// y = x + a y over n complex numbers the seed's way: y = a y (xscal), then y = y +
    /// 1 x (xaxpy). Shared by the seed versions and 3.0's double fields.
    pub fn xpay_d(
        &mut self,
        x: &CudaSlice<f64>,
        a: C64,
        y: &mut CudaSlice<f64>,
        n: usize,
    ) -> Result<()> {
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        launch!(
            self.gpu,
            Kernel::Xscal,
            n,
            &self.blas.xscal,
            cfg,
            [&mut *y, &a.re, &a.im, &ni]
        );
        let (one, zero) = (1.0f64, 0.0f64);
        launch!(
            self.gpu,
            Kernel::Xaxpy,
            n,
            &self.blas.xaxpy,
            cfg,
            [x, y, &one, &zero, &ni]
        );
        Ok(())
    }

    /// (x|y) over n complex numbers: the seed's tree reduction, in one launch.
    pub fn dot_d(&mut self, x: &CudaSlice<f64>, y: &CudaSlice<f64>, n: usize) -> Result<C64> {
        let ni = n as i32;
        let cfg = reduce_cfg(n);
        let r = self.reduce_args();
        launch!(
            self.gpu,
            Kernel::DotPartial,
            n,
            &self.blas.dot_partial,
            cfg,
            [x, y, &ni, &r.level0, &r.upper, &r.tickets, &r.result]
        );
        let (re, im) = self.read_reduction(true)?;
        Ok(C64::new(re, im))
    }

    /// (x|x) over n complex numbers.
    pub fn norm2_d(&mut self, x: &CudaSlice<f64>, n: usize) -> Result<f64> {
        let ni = n as i32;
        let cfg = reduce_cfg(n);
        let r = self.reduce_args();
        launch!(
            self.gpu,
            Kernel::Norm2Partial,
            n,
            &self.blas.norm2_partial,
            cfg,
            [x, &ni, &r.level0, &r.upper, &r.tickets, &r.result]
        );
        Ok(self.read_reduction(false)?.0)
    }

    /// The reduction buffers' addresses, for a reducing kernel's last four arguments.
    pub fn reduce_args(&self) -> ReduceArgs {
        self.reduce.args(&self.gpu.stream)
    }

    /// Read the result of the reduction just launched (`complex`: a double2), waiting for
    /// it. Returns (re, im); on a decomposed lattice, summed over the ranks (on the device
    /// side: `Halo::global_sum_device`), so that a caller never sums it again.
    pub fn read_reduction(&mut self, complex: bool) -> Result<(f64, f64)> {
        if let Some(h) = &mut self.halo {
            let src =
                crate::backend::cuda::core::launch::dptr(&self.reduce.result, &self.gpu.stream);
            let [re, im] = h.global_sum_device::<2>(&self.gpu.stream, src)?;
            self.gpu.collect()?;
            return Ok((re, if complex { im } else { 0.0 }));
        }
        let mut out = [0.0f64; 2];
        self.gpu
            .stream
            .memcpy_dtoh(&self.reduce.result, &mut out)
            .map_err(err("reading a reduction result"))?;
        self.gpu
            .stream
            .synchronize()
            .map_err(err("reading a reduction result"))?;
        // The stream is idle now: read the timing events of everything before.
        self.gpu.collect()?;
        Ok((out[0], if complex { out[1] } else { 0.0 }))
    }

    /// A field's values as f64 pairs in its own order (widened from single).
    pub fn read_raw(&mut self, f: &DeviceSpinor) -> Result<Vec<f64>> {
        use crate::backend::cuda::core::field::DeviceData;
        let stream = self.gpu.stream.clone();
        let v = match &f.data {
            DeviceData::Double(d) => stream
                .clone_dtoh(d)
                .map_err(err("downloading a spinor field"))?,
            DeviceData::Single(s) => stream
                .clone_dtoh(s)
                .map_err(err("downloading a spinor field"))?
                .into_iter()
                .map(f64::from)
                .collect(),
            DeviceData::Half { q, norm } => {
                let q = stream
                    .clone_dtoh(q)
                    .map_err(err("downloading a spinor field"))?;
                let norm = stream
                    .clone_dtoh(norm)
                    .map_err(err("downloading a spinor field"))?;
                stream
                    .synchronize()
                    .map_err(err("downloading a spinor field"))?;
                let vh = match f.layout.subset {
                    crate::linalg::Subset::Full => norm.len() / 2,
                    _ => norm.len(),
                };
                half_to_f64(&q, &norm, vh)
            }
        };
        stream
            .synchronize()
            .map_err(err("downloading a spinor field"))?;
        Ok(v)
    }
}

/// A half field's values (`linalg::half::dequantize`) in the structure of arrays of the
/// f64 fields: element k of site cb of parity block p at complex index (p*12 + k)*vh + cb,
/// the site's norm at p*vh + cb.
fn half_to_f64(q: &[i16], norm: &[f32], vh: usize) -> Vec<f64> {
    let mut out = vec![0.0; q.len()];
    for (c, pair) in out.chunks_exact_mut(2).enumerate() {
        let (p, rest) = (c / (12 * vh), c % (12 * vh));
        let n = norm[p * vh + rest % vh];
        pair[0] = crate::linalg::half::dequantize(q[2 * c], n);
        pair[1] = crate::linalg::half::dequantize(q[2 * c + 1], n);
    }
    out
}

/// A staged spinor transfer's bytes, rate and breakdown at debug level.
fn log_transfer(what: &str, times: &StagedTimes, chunks: usize, start: std::time::Instant) {
    let seconds = start.elapsed().as_secs_f64();
    tracing::debug!(
        "spinor {what}: {} bytes in {chunks} chunks, {:.1} ms ({:.2} GB/s; pinning {:.1} ms, host layout {:.1} ms, waiting for copies {:.1} ms)",
        times.bytes,
        1e3 * seconds,
        times.bytes as f64 / seconds.max(1e-9) / 1e9,
        times.pin_ms,
        times.fill_ms,
        times.wait_ms
    );
}

/// The first pass of a reduction over n complex numbers.
pub(crate) fn reduce_cfg(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (reduce_blocks(n) as u32, 1, 1),
        block_dim: (REDUCE_BLOCK as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}
