//! The device side of multigrid's coarse levels: the programs of kernels/mg_coarse.cu
//! (and reduce.cu's reductions) loaded once per context, device buffers of coarse
//! numbers in double or single precision, and the launches. Every launch goes on the fine
//! backend's stream, so a cycle's kernels run in order with the fine level's.

use super::stage::upload_numbers;
use crate::backend::cuda::core::compile::{Program, MG_COARSE, REDUCE};
use crate::backend::cuda::core::device::{driver_err, function, load_module};
use crate::backend::cuda::core::field::as_f64;
use crate::backend::cuda::core::kernels::{reduce_blocks, REDUCE_BLOCK};
use crate::backend::cuda::core::launch::{cfg_1d, dptr};
use crate::backend::cuda::dirac::blas::ReduceBuffers;
use crate::backend::ledger::{Booking, Ledger, Purpose};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::linalg::Precision;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use rayon::prelude::*;
use std::sync::Arc;

/// Threads per block of the multigrid kernels.
const BLOCK: usize = 128;

/// One kernel in its double and single instances.
pub(crate) struct Pair {
    d: CudaFunction,
    f: CudaFunction,
}

impl Pair {
    fn load(m: &Arc<cudarc::driver::CudaModule>, name: &str) -> Result<Pair> {
        Ok(Pair {
            d: function(m, &format!("{name}_d"))?,
            f: function(m, &format!("{name}_f"))?,
        })
    }
    pub fn of(&self, p: Precision) -> &CudaFunction {
        if p == Precision::Single {
            &self.f
        } else {
            &self.d
        }
    }
}

/// The kernels of the coarse levels.
pub(crate) struct MgKernels {
    pub apply: Pair,
    pub restrict: Pair,
    pub prolong: Pair,
    pub pick: Pair,
    pub axpy: Pair,
    pub axpys: Pair,
    dots: Pair,
    dots_finish: CudaFunction,
    dot: Pair,
    norm2: Pair,
}

impl MgKernels {
    pub fn load(stream: &Arc<CudaStream>) -> Result<Arc<MgKernels>> {
        let ctx = stream.context();
        let (mg, _) = load_module(ctx, &Program::plain(&MG_COARSE))?;
        let (reduce, _) = load_module(ctx, &Program::plain(&REDUCE))?;
        Ok(Arc::new(MgKernels {
            apply: Pair::load(&mg, "coarse_apply")?,
            restrict: Pair::load(&mg, "mg_restrict")?,
            prolong: Pair::load(&mg, "mg_prolong")?,
            pick: Pair::load(&mg, "coarse_pick")?,
            axpy: Pair::load(&mg, "coarse_axpy")?,
            axpys: Pair::load(&mg, "coarse_axpys")?,
            dots: Pair::load(&mg, "coarse_dots")?,
            dots_finish: function(&mg, "coarse_dots_finish")?,
            dot: Pair {
                d: function(&reduce, "dot_partial")?,
                f: function(&reduce, "dot_partial_f")?,
            },
            norm2: Pair {
                d: function(&reduce, "norm2_partial")?,
                f: function(&reduce, "norm2_partial_f")?,
            },
        }))
    }
}

/// Complex numbers on the device in one precision, booked.
pub(crate) struct Buffer {
    pub data: Data,
    /// Complex numbers held.
    pub len: usize,
    _booking: Booking,
}

pub(crate) enum Data {
    Double(CudaSlice<f64>),
    Single(CudaSlice<f32>),
}

impl Buffer {
    /// `len` zero numbers.
    pub fn zeros(
        stream: &Arc<CudaStream>,
        ledger: &Ledger,
        p: Precision,
        len: usize,
    ) -> Result<Buffer> {
        let e = |e| driver_err("allocating a multigrid buffer", e);
        let (data, bytes) = match p {
            Precision::Single => (Data::Single(stream.alloc_zeros(2 * len).map_err(e)?), 8),
            _ => (Data::Double(stream.alloc_zeros(2 * len).map_err(e)?), 16),
        };
        Ok(Buffer {
            data,
            len,
            _booking: ledger.book(Purpose::Multigrid, (bytes * len) as u64),
        })
    }

    /// `values` uploaded in precision `p`.
    pub fn upload(
        stream: &Arc<CudaStream>,
        ledger: &Ledger,
        p: Precision,
        values: &[C64],
    ) -> Result<Buffer> {
        let e = |e| driver_err("uploading a multigrid buffer", e);
        let (data, bytes) = match p {
            Precision::Single => {
                let v: Vec<f32> = values
                    .par_iter()
                    .flat_map_iter(|z| [z.re as f32, z.im as f32])
                    .collect();
                (Data::Single(stream.clone_htod(&v).map_err(e)?), 8)
            }
            _ => (
                Data::Double(stream.clone_htod(as_f64(values)).map_err(e)?),
                16,
            ),
        };
        Ok(Buffer {
            data,
            len: values.len(),
            _booking: ledger.book(Purpose::Multigrid, (bytes * values.len()) as u64),
        })
    }

    /// `len` numbers in precision `p` (half: single), number k `value(k)`, written in
    /// parallel into pinned staging buffers and uploaded from them (`stage`): no host
    /// copy in the device's order or precision is made.
    pub fn upload_with(
        stream: &Arc<CudaStream>,
        ledger: &Ledger,
        p: Precision,
        len: usize,
        value: impl Fn(usize) -> C64 + Sync,
    ) -> Result<Buffer> {
        let mut b = Buffer::zeros(stream, ledger, p, len)?;
        let p = b.precision();
        match &mut b.data {
            Data::Double(d) => upload_numbers(stream, p, len, Some(d), None, value)?,
            Data::Single(f) => upload_numbers(stream, p, len, None, Some(f), value)?,
        }
        Ok(b)
    }

    pub fn precision(&self) -> Precision {
        match self.data {
            Data::Double(_) => Precision::Double,
            Data::Single(_) => Precision::Single,
        }
    }

    pub fn ptr(&self, s: &CudaStream) -> u64 {
        match &self.data {
            Data::Double(d) => dptr(d, s),
            Data::Single(f) => dptr(f, s),
        }
    }

    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<Vec<C64>> {
        let e = |e| driver_err("downloading a multigrid buffer", e);
        let reals: Vec<f64> = match &self.data {
            Data::Double(d) => stream.clone_dtoh(d).map_err(e)?,
            Data::Single(f) => stream
                .clone_dtoh(f)
                .map_err(e)?
                .into_iter()
                .map(f64::from)
                .collect(),
        };
        Ok(reals
            .chunks_exact(2)
            .map(|c| C64::new(c[0], c[1]))
            .collect())
    }

    pub fn zero(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let e = |e| driver_err("zeroing a multigrid buffer", e);
        match &mut self.data {
            Data::Double(d) => stream.memset_zeros(d).map_err(e),
            Data::Single(f) => stream.memset_zeros(f).map_err(e),
        }
    }

    /// self = src (same precision and length).
    pub fn copy_from(&mut self, stream: &Arc<CudaStream>, src: &Buffer) -> Result<()> {
        let e = |e| driver_err("copying a multigrid buffer", e);
        match (&mut self.data, &src.data) {
            (Data::Double(d), Data::Double(s)) => stream.memcpy_dtod(s, d).map_err(e),
            (Data::Single(d), Data::Single(s)) => stream.memcpy_dtod(s, d).map_err(e),
            _ => Err(Error::internal("a multigrid copy between precisions")),
        }
    }
}

/// A 1-d launch of `n` threads.
pub(crate) fn cfg(n: usize) -> LaunchConfig {
    cfg_1d(n, BLOCK, 0)
}

/// Launch `f` with `args` pushed in order (device addresses as u64).
macro_rules! launch_args {
    ($stream:expr, $f:expr, $cfg:expr, [$($a:expr),* $(,)?]) => {{
        use cudarc::driver::PushKernelArg as _;
        let mut b = $stream.launch_builder($f);
        $( b.arg($a); )*
        // SAFETY: the arguments match the kernel's parameters in kernels/mg_coarse.cu
        // (or reduce.cu) in number, order and type; the buffers outlive the launch on
        // the stream.
        unsafe { b.launch($cfg) }
            .map(|_| ())
            .map_err(|e| crate::backend::cuda::core::device::driver_err("a multigrid kernel", e))
    }};
}
pub(crate) use launch_args;

/// Fields a launch of kernels/mg_coarse.cu's `coarse_dots` and `coarse_axpys` takes
/// (its MULTI_MAX).
pub(crate) const MULTI_MAX: usize = 8;
/// Threads a block of `coarse_dots` and `coarse_dots_finish` (its MULTI_BLOCK).
const MULTI_BLOCK: usize = 128;
/// The most blocks of a `coarse_dots` launch (a grid-stride loop covers the rest).
const MULTI_GRID: usize = 256;
/// The most fields one `dots` call sums against (GCR's restart of at most 64, and two).
pub(crate) const MULTI_RESULTS: usize = 72;

/// The reductions of coarse fields: reduce.cu's one-launch tree over `n` numbers, and the
/// buffers of the several-field dots (`coarse_dots`: partial sums, then results).
pub(crate) struct Reductions {
    buffers: ReduceBuffers,
    multi_partial: CudaSlice<f64>,
    multi_result: CudaSlice<f64>,
    _multi_booking: Booking,
}

impl Reductions {
    /// Room for fields of up to `n` complex numbers.
    pub fn new(stream: &Arc<CudaStream>, ledger: &Ledger, n: usize) -> Result<Reductions> {
        let e = |e| driver_err("allocating multigrid reduction buffers", e);
        let (partial, result) = (2 * MULTI_MAX * MULTI_GRID, 2 * MULTI_RESULTS);
        Ok(Reductions {
            buffers: ReduceBuffers::new(stream, ledger, reduce_blocks(n))?,
            multi_partial: stream.alloc_zeros(partial).map_err(e)?,
            multi_result: stream.alloc_zeros(result).map_err(e)?,
            _multi_booking: ledger.book(Purpose::Reductions, 8 * (partial + result) as u64),
        })
    }

    /// (x_j | y) for every x_j (y's precision and length): `coarse_dots` on at most
    /// MULTI_MAX fields a launch, each launch's partial sums finished before the next,
    /// then one read of all the results.
    pub fn dots(
        &mut self,
        stream: &Arc<CudaStream>,
        k: &MgKernels,
        xs: &[&Buffer],
        y: &Buffer,
    ) -> Result<Vec<C64>> {
        if xs.len() > MULTI_RESULTS {
            return Err(Error::internal(format!(
                "{} fields in one coarse dots call, at most {MULTI_RESULTS}",
                xs.len()
            )));
        }
        if xs.is_empty() {
            return Ok(Vec::new());
        }
        let n = y.len as i64;
        let p = y.precision();
        let grid = y.len.div_ceil(MULTI_BLOCK).clamp(1, MULTI_GRID);
        let cfg = LaunchConfig {
            grid_dim: (grid as u32, 1, 1),
            block_dim: (MULTI_BLOCK as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let yp = y.ptr(stream);
        let partial = dptr(&self.multi_partial, stream);
        let result = dptr(&self.multi_result, stream);
        let blocks = grid as i32;
        for (c, chunk) in xs.chunks(MULTI_MAX).enumerate() {
            let m = chunk.len() as i32;
            let ptrs: [u64; MULTI_MAX] =
                std::array::from_fn(|j| chunk.get(j).map_or(0, |x| x.ptr(stream)));
            let [x0, x1, x2, x3, x4, x5, x6, x7] = ptrs;
            launch_args!(
                stream,
                k.dots.of(p),
                cfg,
                [&x0, &x1, &x2, &x3, &x4, &x5, &x6, &x7, &yp, &m, &n, &partial]
            )?;
            let out = result + (16 * c * MULTI_MAX) as u64;
            let finish = LaunchConfig {
                grid_dim: (chunk.len() as u32, 1, 1),
                block_dim: (MULTI_BLOCK as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            launch_args!(stream, &k.dots_finish, finish, [&partial, &blocks, &out])?;
        }
        let mut out = vec![0.0f64; 2 * xs.len()];
        let e = |e| driver_err("reading a multigrid reduction", e);
        let view = self.multi_result.slice(..2 * xs.len());
        stream.memcpy_dtoh(&view, &mut out).map_err(e)?;
        stream.synchronize().map_err(e)?;
        Ok(out.chunks_exact(2).map(|c| C64::new(c[0], c[1])).collect())
    }

    /// (x|y), or (x|x) when y is None.
    pub fn run(
        &mut self,
        stream: &Arc<CudaStream>,
        k: &MgKernels,
        x: &Buffer,
        y: Option<&Buffer>,
    ) -> Result<C64> {
        let n = x.len as i32;
        let r = self.buffers.args(stream);
        let cfg = LaunchConfig {
            grid_dim: (reduce_blocks(x.len).max(1) as u32, 1, 1),
            block_dim: (REDUCE_BLOCK as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let p = x.precision();
        let xp = x.ptr(stream);
        match y {
            Some(y) => {
                let yp = y.ptr(stream);
                launch_args!(
                    stream,
                    k.dot.of(p),
                    cfg,
                    [&xp, &yp, &n, &r.level0, &r.upper, &r.tickets, &r.result]
                )?
            }
            None => launch_args!(
                stream,
                k.norm2.of(p),
                cfg,
                [&xp, &n, &r.level0, &r.upper, &r.tickets, &r.result]
            )?,
        }
        let mut out = [0.0f64; 2];
        let e = |e| driver_err("reading a multigrid reduction", e);
        stream
            .memcpy_dtoh(&self.buffers.result, &mut out)
            .map_err(e)?;
        stream.synchronize().map_err(e)?;
        Ok(C64::new(out[0], if y.is_some() { out[1] } else { 0.0 }))
    }
}
