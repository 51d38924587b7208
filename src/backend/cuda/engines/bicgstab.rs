//! BiCGStab's iteration with its scalars on the GPU (kernels/bicgstab_fused.cu), kernel
//! 3.0: the engine behind `FusedBiCgStab` for `CudaBackend` (backend::bicgstab). The
//! element-wise passes between the operator's two applications update the device scalar
//! block themselves, so an iteration needs no host read and `FusedCr::repeat` records it
//! as a CUDA graph. The launch geometry and the reductions are the fused CR's (`cr_cfg`,
//! cr_device.cuh). On a decomposed lattice each reducing pass leaves the rank's sums in
//! the block; the backend all-gathers them and `BiEngine::global` finishes the reduction.

use crate::backend::cuda::core::compile::bicgstab_fused_program;
use crate::backend::cuda::core::device::{function, load_module};
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::kernels::BI_SCALARS;
use crate::backend::cuda::core::kernels::{Kernel, CR_MAX_GRID};
use crate::backend::cuda::core::timing::GpuStream;
use crate::backend::cuda::engines::fused::{
    check_history, common_shape, cr_cfg, err, pick, ptr, ptr_mut, read_history, shape, RANK_SUM_CFG,
};
use crate::backend::ledger::{Booking, Ledger, Purpose};
use crate::backend::{BiScalars, Precision};
use crate::error::Result;
use crate::field::C64;
use cudarc::driver::{CudaFunction, CudaSlice};

/// Indices into the device scalar block (kernels/bicgstab_fused.cu BI_*).
pub const BI_RHO_RE: usize = 0;
pub const BI_ALPHA_RE: usize = 2;
pub const BI_OMEGA_RE: usize = 4;
pub const BI_BETA_RE: usize = 6;
pub const BI_NR: usize = 8;
pub const BI_EPS: usize = 9;
pub const BI_ITER: usize = 10;
pub const BI_MAX_ITER: usize = 11;
pub const BI_ACTIVE: usize = 12;
pub const BI_BROKEN: usize = 13;
/// The host's part of the block (`BiScalars`); `BI_SPLIT` and the rank's sums follow.
pub const BI_HOST_SCALARS: usize = 14;
pub const BI_SPLIT: usize = 14;
pub const BI_LOCAL: usize = 15;
/// Doubles a rank contributes to a decomposed reduction's all-gather.
pub const BI_GATHERED: usize = 4;
pub const BI_TICKETS: usize = 4;

/// The reductions of the iteration, as bi_global's `which` (BI_WHICH_*) names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BiReduction {
    Start = 0,
    Alpha = 1,
    Omega = 2,
    Update = 3,
}

/// Doubles of the partial sums: two double2 per block of cr_grid's largest grid.
pub const BI_PARTIALS: usize = 4 * CR_MAX_GRID;

/// Bytes of a fused BiCGStab state with room for `max_iter` iterations: the scalar block,
/// the history, the partial sums, the tickets and (decomposed) the gathered sums of
/// `ranks`.
pub fn bi_state_bytes(max_iter: u64, ranks: Option<usize>) -> u64 {
    let gathered = ranks.map_or(0, |n| BI_GATHERED * n);
    ((BI_SCALARS + max_iter as usize + 1 + BI_PARTIALS + gathered) * 8 + BI_TICKETS * 4) as u64
}

fn to_block(s: &BiScalars) -> [f64; BI_SCALARS] {
    let mut b = [0.0; BI_SCALARS];
    for (i, z) in [
        (BI_RHO_RE, s.rho),
        (BI_ALPHA_RE, s.alpha),
        (BI_OMEGA_RE, s.omega),
        (BI_BETA_RE, s.beta),
    ] {
        b[i] = z.re;
        b[i + 1] = z.im;
    }
    b[BI_NR] = s.nr;
    b[BI_EPS] = s.eps;
    b[BI_ITER] = s.iter as f64;
    b[BI_MAX_ITER] = s.max_iter as f64;
    b[BI_ACTIVE] = if s.active { 1.0 } else { 0.0 };
    b[BI_BROKEN] = if s.broken { 1.0 } else { 0.0 };
    b
}

fn from_block(b: &[f64]) -> BiScalars {
    let c = |i: usize| C64::new(b[i], b[i + 1]);
    BiScalars {
        rho: c(BI_RHO_RE),
        alpha: c(BI_ALPHA_RE),
        omega: c(BI_OMEGA_RE),
        beta: c(BI_BETA_RE),
        nr: b[BI_NR],
        eps: b[BI_EPS],
        iter: b[BI_ITER] as u64,
        max_iter: b[BI_MAX_ITER] as u64,
        active: b[BI_ACTIVE] != 0.0,
        broken: b[BI_BROKEN] != 0.0,
    }
}

/// The device side of one fused BiCGStab solve.
pub struct DeviceBiState {
    scalars: CudaSlice<f64>,
    /// nr of iterations 0..=max_iter.
    history: CudaSlice<f64>,
    partials: CudaSlice<f64>,
    /// Zero between launches.
    tickets: CudaSlice<u32>,
    /// Decomposed lattice: every rank's BI_GATHERED sums, in rank order.
    gathered: Option<CudaSlice<f64>>,
    ranks: usize,
    _booking: Booking,
}

impl DeviceBiState {
    /// Decomposed: the device addresses of this rank's sums in the block and of the
    /// gathered array, and the bytes a rank contributes (the all-gather's arguments).
    pub fn gather_args(&self, stream: &cudarc::driver::CudaStream) -> Option<(u64, u64, usize)> {
        let g = self.gathered.as_ref()?;
        let local =
            crate::backend::cuda::core::launch::dptr(&self.scalars, stream) + (8 * BI_LOCAL) as u64;
        let dst = crate::backend::cuda::core::launch::dptr(g, stream);
        Some((local, dst, 8 * BI_GATHERED))
    }
}

/// (double, single) of one kernel.
type Pair = (CudaFunction, CudaFunction);

pub(crate) struct BiKernels {
    alpha: Pair,
    s: Pair,
    omega: Pair,
    update: Pair,
    p: Pair,
    start: Pair,
    global: CudaFunction,
}

impl BiKernels {
    fn load(gpu: &GpuStream) -> Result<Self> {
        let (module, _) = load_module(&gpu.ctx, &bicgstab_fused_program())?;
        let pair = |name: &str| -> Result<Pair> {
            Ok((
                function(&module, &format!("{name}_d"))?,
                function(&module, &format!("{name}_s"))?,
            ))
        };
        Ok(BiKernels {
            alpha: pair("bi_alpha")?,
            s: pair("bi_s")?,
            omega: pair("bi_omega")?,
            update: pair("bi_update")?,
            p: pair("bi_p")?,
            start: pair("bi_start")?,
            global: function(&module, "bi_global")?,
        })
    }
}

fn check(s: &BiScalars, len: usize) -> Result<()> {
    check_history("bi_state", s.iter, s.max_iter, len)
}

/// The engine: its kernels (compiled and loaded on first use) and the passes. The backend
/// checks that it may run (kernel 3.0, one GPU) before it calls any of these.
#[derive(Default)]
pub(crate) struct BiEngine {
    kernels: Option<BiKernels>,
}

impl BiEngine {
    /// Load the kernels ahead of a solve: none is compiled inside a capture.
    pub fn prepare(&mut self, gpu: &GpuStream) -> Result<()> {
        self.kernels(gpu).map(|_| ())
    }

    fn kernels(&mut self, gpu: &GpuStream) -> Result<&BiKernels> {
        if self.kernels.is_none() {
            self.kernels = Some(BiKernels::load(gpu)?);
        }
        Ok(self.kernels.as_ref().unwrap())
    }

    /// A new device state holding `s`, booked on `ledger`; `ranks`: those of a
    /// decomposed lattice (its reductions then end in `global`), None on one GPU.
    pub fn state(
        &mut self,
        gpu: &GpuStream,
        ledger: &Ledger,
        s: &BiScalars,
        ranks: Option<usize>,
    ) -> Result<DeviceBiState> {
        self.kernels(gpu)?;
        let len = s.max_iter as usize + 1;
        check(s, len)?;
        let mut history = vec![f64::NAN; len];
        history[s.iter as usize] = s.nr;
        let stream = gpu.stream.clone();
        let mut block = to_block(s);
        if ranks.is_some() {
            block[BI_SPLIT] = 1.0;
        }
        let gathered = ranks
            .map(|n| {
                stream
                    .alloc_zeros::<f64>(BI_GATHERED * n)
                    .map_err(err("allocating the BiCGStab ranks' sums"))
            })
            .transpose()?;
        let booked = bi_state_bytes(s.max_iter, ranks);
        Ok(DeviceBiState {
            gathered,
            ranks: ranks.unwrap_or(1),
            scalars: stream
                .clone_htod(&block)
                .map_err(err("uploading the BiCGStab scalars"))?,
            history: stream
                .clone_htod(&history)
                .map_err(err("uploading the BiCGStab history"))?,
            partials: stream
                .alloc_zeros::<f64>(BI_PARTIALS)
                .map_err(err("allocating the BiCGStab partial sums"))?,
            tickets: stream
                .alloc_zeros::<u32>(BI_TICKETS)
                .map_err(err("allocating the BiCGStab tickets"))?,
            _booking: ledger.book(Purpose::CrState, booked),
        })
    }

    pub fn set(gpu: &GpuStream, state: &mut DeviceBiState, s: &BiScalars) -> Result<()> {
        check(s, state.history.len())?;
        let block = to_block(s);
        let nr = [s.nr];
        let it = s.iter as usize;
        let stream = &gpu.stream;
        // The host's part only: BI_SPLIT stays as the state was made.
        let mut host = state.scalars.slice_mut(0..BI_HOST_SCALARS);
        stream
            .memcpy_htod(&block[..BI_HOST_SCALARS], &mut host)
            .map_err(err("uploading the BiCGStab scalars"))?;
        let mut entry = state.history.slice_mut(it..it + 1);
        // No synchronisation: copies from pageable memory have left the host arrays when
        // they return, and are ordered before the next launch (as `Fused::set`).
        stream
            .memcpy_htod(&nr, &mut entry)
            .map_err(err("uploading a BiCGStab history entry"))
    }

    pub fn get(gpu: &mut GpuStream, state: &DeviceBiState) -> Result<BiScalars> {
        let mut block = [0.0f64; BI_SCALARS];
        gpu.stream
            .memcpy_dtoh(&state.scalars, &mut block)
            .map_err(err("reading the BiCGStab scalars"))?;
        gpu.sync()?;
        Ok(from_block(&block))
    }

    pub fn history_upto(gpu: &mut GpuStream, state: &DeviceBiState, iter: u64) -> Result<Vec<f64>> {
        read_history(gpu, &state.history, iter)
    }

    pub fn start(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        rhs: &DeviceSpinor,
        [x, r, r0, p]: [&mut DeviceSpinor; 4],
    ) -> Result<()> {
        use Arg::{In, Out};
        let fields = &mut [In(rhs), Out(x), Out(r), Out(r0), Out(p)];
        self.pass(
            gpu,
            Kernel::BiStart,
            |k| &k.start,
            fields,
            Tail::Sums,
            state,
        )
    }

    /// alpha = rho / (r0|v) (decomposed: this rank's (r0|v), for `global`).
    pub fn alpha(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        r0: &DeviceSpinor,
        v: &DeviceSpinor,
    ) -> Result<()> {
        let alpha = &mut [Arg::In(r0), Arg::In(v)];
        self.pass(gpu, Kernel::BiAlpha, |k| &k.alpha, alpha, Tail::Sums, state)
    }

    /// r -= alpha v (r becomes s).
    pub fn s(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        v: &DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        let s = &mut [Arg::Out(r), Arg::In(v)];
        self.pass(gpu, Kernel::BiS, |k| &k.s, s, Tail::Scalars, state)
    }

    /// Decomposed lattice: reduction `which` finished from the ranks' sums, which the
    /// caller has all-gathered into the state (`DeviceBiState::gather_args`); nothing on
    /// one GPU.
    pub fn global(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        which: BiReduction,
    ) -> Result<()> {
        use cudarc::driver::PushKernelArg as _;
        let f = self.kernels(gpu)?.global.clone();
        let ranks = state.ranks;
        let DeviceBiState {
            scalars,
            history,
            gathered,
            ..
        } = state;
        let Some(gathered) = gathered else {
            return Ok(());
        };
        let (w, n) = (which as i32, ranks as i32);
        let stream = gpu.stream.clone();
        let pending = gpu.begin(&Kernel::BiGlobal)?;
        let mut b = stream.launch_builder(&f);
        b.arg(&w);
        b.arg(scalars);
        b.arg(history);
        b.arg(&*gathered);
        b.arg(&n);
        // SAFETY: bi_global(int, double*, double*, const double*, int): the block, the
        // history and the gathered sums of `ranks` ranks are live allocations of this
        // context; one thread works, on these only.
        let launched = unsafe { b.launch(RANK_SUM_CFG) };
        launched.map_err(|e| {
            crate::backend::cuda::core::device::driver_err("launching bi_global", e)
        })?;
        gpu.end(pending, Kernel::BiGlobal, ranks)
    }

    pub fn omega(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        t: &DeviceSpinor,
        r: &DeviceSpinor,
    ) -> Result<()> {
        let fields = &mut [Arg::In(t), Arg::In(r)];
        self.pass(
            gpu,
            Kernel::BiOmega,
            |k| &k.omega,
            fields,
            Tail::Sums,
            state,
        )
    }

    pub fn update(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        [p, t, r0]: [&DeviceSpinor; 3],
        x: &mut DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        use Arg::{In, Out};
        let fields = &mut [Out(x), Out(r), In(p), In(t), In(r0)];
        let tail = Tail::HistorySums;
        self.pass(gpu, Kernel::BiUpdate, |k| &k.update, fields, tail, state)
    }

    pub fn p(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceBiState,
        r: &DeviceSpinor,
        v: &DeviceSpinor,
        p: &mut DeviceSpinor,
    ) -> Result<()> {
        use Arg::{In, Out};
        let fields = &mut [Out(p), In(r), In(v)];
        self.pass(gpu, Kernel::BiP, |k| &k.p, fields, Tail::Scalars, state)
    }
}

/// A field of a pass, in the kernel's argument order: read, or written.
enum Arg<'a> {
    In(&'a DeviceSpinor),
    Out(&'a mut DeviceSpinor),
}

/// A pass's arguments after its fields and n: the scalar block, then (reducing passes)
/// the partial sums and tickets, with the history before them for the update.
#[derive(Clone, Copy, PartialEq)]
enum Tail {
    Scalars,
    Sums,
    HistorySums,
}

impl BiEngine {
    /// One launch of the pass `kind` (`which` picks its kernel pair) over `fields`, all
    /// of one precision and length, with the state's `tail`; booked as `kind(precision)`.
    fn pass(
        &mut self,
        gpu: &mut GpuStream,
        kind: fn(Precision) -> Kernel,
        which: fn(&BiKernels) -> &Pair,
        fields: &mut [Arg<'_>],
        tail: Tail,
        state: &mut DeviceBiState,
    ) -> Result<()> {
        use cudarc::driver::PushKernelArg as _;
        let shapes: Vec<_> = fields
            .iter()
            .map(|a| match a {
                Arg::In(f) => shape(&f.raw()),
                Arg::Out(f) => shape(&f.raw()),
            })
            .collect();
        let kernel = kind(Precision::Double);
        let name = kernel.name();
        let (prec, n) = common_shape(&shapes, &name)?;
        let kernel = kind(prec);
        let pair = which(self.kernels(gpu)?);
        let f = pick(prec, &pair.0, &pair.1, &name)?.clone();
        let stream = gpu.stream.clone();
        // The guards live until the launch is queued (see `fused::ptr`).
        let (ptrs, _guards): (Vec<u64>, Vec<_>) = fields
            .iter_mut()
            .map(|a| match a {
                Arg::In(f) => ptr(f.raw(), &stream),
                Arg::Out(f) => ptr_mut(f.raw_mut(), &stream),
            })
            .unzip();
        let ni = n as i32;
        let pending = gpu.begin(&kernel)?;
        let mut b = stream.launch_builder(&f);
        for p in &ptrs {
            b.arg(p);
        }
        b.arg(&ni);
        b.arg(&mut state.scalars);
        if tail == Tail::HistorySums {
            b.arg(&mut state.history);
        }
        if tail != Tail::Scalars {
            b.arg(&mut state.partials);
            b.arg(&mut state.tickets);
        }
        // SAFETY: the fields, n and the tail are kernels/bicgstab_fused.cu's signature of
        // this pass (BI_KERNELS), every buffer is a live allocation of this context sized
        // for n (common_shape) or for cr_grid's blocks (BI_PARTIALS), and the kernels
        // guard their indices.
        let launched = unsafe { b.launch(cr_cfg(n)) };
        launched.map_err(|e| {
            crate::backend::cuda::core::device::driver_err(
                &format!("launching {}", kernel.name()),
                e,
            )
        })?;
        gpu.end(pending, kernel, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The indices are the kernel source's.
    #[test]
    fn scalar_indices_match_the_kernel_source() {
        let src = include_str!("../../../../kernels/bicgstab_fused.cu");
        for (name, value) in [
            ("BI_RHO_RE", BI_RHO_RE),
            ("BI_ALPHA_RE", BI_ALPHA_RE),
            ("BI_OMEGA_RE", BI_OMEGA_RE),
            ("BI_BETA_RE", BI_BETA_RE),
            ("BI_NR", BI_NR),
            ("BI_EPS", BI_EPS),
            ("BI_ITER", BI_ITER),
            ("BI_MAX_ITER", BI_MAX_ITER),
            ("BI_ACTIVE", BI_ACTIVE),
            ("BI_BROKEN", BI_BROKEN),
            ("BI_HOST_SCALARS", BI_HOST_SCALARS),
            ("BI_SPLIT", BI_SPLIT),
            ("BI_LOCAL", BI_LOCAL),
            ("BI_SCALARS", BI_SCALARS),
            ("BI_GATHERED", BI_GATHERED),
            ("BI_WHICH_START", BiReduction::Start as usize),
            ("BI_WHICH_ALPHA", BiReduction::Alpha as usize),
            ("BI_WHICH_OMEGA", BiReduction::Omega as usize),
            ("BI_WHICH_UPDATE", BiReduction::Update as usize),
            ("BI_TICKETS", BI_TICKETS),
        ] {
            assert!(
                src.contains(&format!("#define {name} {value}\n")),
                "{name} is not {value} in bicgstab_fused.cu"
            );
        }
    }

    /// The host block round-trips every field (iter and max_iter as exact doubles).
    #[test]
    fn scalars_round_trip_through_the_block() {
        let s = BiScalars {
            rho: C64::new(1.5, -2.0),
            alpha: C64::new(0.25, 3.0),
            omega: C64::new(-1.0, 0.5),
            beta: C64::new(7.0, -7.5),
            nr: 1e-3,
            eps: 1e-20,
            iter: 17,
            max_iter: 2000,
            active: true,
            broken: false,
        };
        assert_eq!(from_block(&to_block(&s)), s);
        let t = BiScalars {
            active: false,
            broken: true,
            ..s
        };
        assert_eq!(from_block(&to_block(&t)), t);
    }
}
