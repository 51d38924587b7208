//! The fused CR iteration on the GPU (kernels/cr_fused.cu, kernels/cr_device.cuh): the
//! scalars live in device memory and the kernels update them themselves, so an iteration
//! needs no host read and can be recorded once as a CUDA graph and replayed.
//!
//! - `Fused`: the backend's part (the kernels, loaded on first use, and the graph cache);
//! - `DeviceCrState`: one solve's scalar block, history, reduction partials and tickets;
//! - `scalars_to_block` / `block_to_scalars`: the host <-> device form of `CrScalars`;
//! - `cr_grid`: the fixed launch geometry of the element-wise kernels;
//! - `repeat`: `Backend::repeat` with stream capture into cached CUDA graphs.
//!
//! The operator with its (r|Ar) epilogue (`cr_apply_dot`) is the stencil's (stencil_v3.cu):
//! it uses the same state (scalars, partials from index 0, tickets[CR_TICKET_APPLY]).

use crate::backend::cuda::core::compile::cr_fused_program;
use crate::backend::cuda::core::cr_state::*;
use crate::backend::cuda::core::device::{driver_err, function, load_module};
use crate::backend::cuda::core::field::{RawField, RawFieldMut};
use crate::backend::cuda::core::kernels::Kernel;
use crate::backend::cuda::core::launch::dptr;
use crate::backend::cuda::core::timing::{launch, launch_values, CaptureTally, GpuStream};
use crate::backend::ledger::{Ledger, Purpose};
use crate::backend::{CrScalars, Precision};
use crate::error::{Error, Result};
use cudarc::driver::{
    sys, CudaFunction, CudaGraph, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig,
    SyncOnDrop,
};
use std::collections::HashMap;

/// The launch of cr_xr and cr_p over n complex numbers.
pub(crate) fn cr_cfg(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (cr_grid(n) as u32, 1, 1),
        block_dim: (CR_BLOCK as u32, 1, 1),
        shared_mem_bytes: (CR_BLOCK * 16) as u32,
    }
}

struct FusedKernels {
    xr_d: CudaFunction,
    xr_s: CudaFunction,
    p_d: CudaFunction,
    p_s: CudaFunction,
    load_d: CudaFunction,
    load_s: CudaFunction,
    global: CudaFunction,
    peer_sum: CudaFunction,
}

struct CachedGraph {
    graph: CudaGraph,
    /// The launches it holds (counted at capture).
    tally: CaptureTally,
    /// Its number in the stream's time line (`[tuning] timeline`; else 0) and its
    /// launches so far.
    timeline: u32,
    launches: u32,
}

/// The backend's part of the fused iteration: its kernels (compiled and loaded on first
/// use) and the graphs `repeat` recorded, by (key, times).
#[derive(Default)]
pub(crate) struct Fused {
    kernels: Option<FusedKernels>,
    graphs: HashMap<(u64, usize), CachedGraph>,
}

pub(crate) fn err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| driver_err(what, e)
}

/// The scalars must fit the history: iter <= max_iter < history length.
fn check_scalars(s: &CrScalars, history_len: usize) -> Result<()> {
    check_history("cr_state", s.iter, s.max_iter, history_len)
}

/// iter <= max_iter < history_len, for a state named `what` (the fused CR's and
/// BiCGStab's scalar blocks).
pub(crate) fn check_history(
    what: &str,
    iter: u64,
    max_iter: u64,
    history_len: usize,
) -> Result<()> {
    if iter > max_iter || max_iter as usize >= history_len {
        return Err(Error::invalid(
            what,
            format!(
                "iter {iter} and max_iter {max_iter} do not fit a history of {history_len} entries"
            ),
        ));
    }
    Ok(())
}

/// history[0..=iter] of a fused state's history (clamped to its length): one transfer.
pub(crate) fn read_history(
    gpu: &mut GpuStream,
    history: &CudaSlice<f64>,
    iter: u64,
) -> Result<Vec<f64>> {
    let n = (iter as usize + 1).min(history.len());
    let mut out = vec![0.0f64; n];
    gpu.stream
        .memcpy_dtoh(&history.slice(0..n), &mut out)
        .map_err(err("reading a fused solver's history"))?;
    gpu.sync()?;
    Ok(out)
}

/// Complex numbers of each field of a call, and their common precision; all must agree
/// (else Error::InvalidValue).
pub(crate) fn common_shape(
    fields: &[(Precision, usize)],
    what: &str,
) -> Result<(Precision, usize)> {
    let (prec, len) = fields[0];
    if prec == Precision::Half {
        return Err(no_half(what));
    }
    if fields.iter().any(|&f| f != (prec, len)) {
        return Err(Error::invalid(
            "fields",
            format!("{what} needs fields of one precision and length, got {fields:?}"),
        ));
    }
    if len > i32::MAX as usize {
        return Err(Error::invalid(
            "fields",
            format!("{what}: {len} complex numbers do not fit the kernels' int count"),
        ));
    }
    Ok((prec, len))
}

pub(crate) fn shape(f: &RawField<'_>) -> (Precision, usize) {
    match f {
        RawField::Double(d) => (Precision::Double, d.len() / 2),
        RawField::Single(s) => (Precision::Single, s.len() / 2),
        RawField::Half(q) => (Precision::Half, q.len() / 2),
    }
}

pub(crate) fn shape_mut(f: &RawFieldMut<'_>) -> (Precision, usize) {
    match f {
        RawFieldMut::Double(d) => (Precision::Double, d.len() / 2),
        RawFieldMut::Single(s) => (Precision::Single, s.len() / 2),
        RawFieldMut::Half(q) => (Precision::Half, q.len() / 2),
    }
}

fn no_half(what: &str) -> Error {
    Error::invalid(
        "solver.iteration",
        format!(
            "{what}: the fused CR has no half-precision kernels; half-double runs the generic iteration (iteration = \"auto\")"
        ),
    )
}

/// The kernel of a precision: `d` for double, `s` for single (half: refused, as by
/// `common_shape`).
pub(crate) fn pick<'a, T>(prec: Precision, d: &'a T, s: &'a T, what: &str) -> Result<&'a T> {
    match prec {
        Precision::Double => Ok(d),
        Precision::Single => Ok(s),
        Precision::Half => Err(no_half(what)),
    }
}

/// The device address of a field the kernel reads (a `double2*` or `float2*` argument:
/// the same 64-bit pointer either way), with cudarc's guard, which records the read on
/// the stream when dropped: keep it until the launch has been queued. (A no-op while
/// event tracking is off, as on the backend's one stream.)
pub(crate) fn ptr<'a>(f: RawField<'a>, stream: &'a CudaStream) -> (u64, SyncOnDrop<'a>) {
    match f {
        RawField::Double(d) => d.device_ptr(stream),
        RawField::Single(s) => s.device_ptr(stream),
        RawField::Half(q) => q.device_ptr(stream),
    }
}

/// As `ptr`, for a field the kernel writes (the guard records the write).
pub(crate) fn ptr_mut<'a>(f: RawFieldMut<'a>, stream: &'a CudaStream) -> (u64, SyncOnDrop<'a>) {
    match f {
        RawFieldMut::Double(d) => d.device_ptr_mut(stream),
        RawFieldMut::Single(s) => s.device_ptr_mut(stream),
        RawFieldMut::Half(q) => q.device_ptr_mut(stream),
    }
}

impl Fused {
    fn kernels(&mut self, gpu: &GpuStream) -> Result<&FusedKernels> {
        if self.kernels.is_none() {
            let (module, _) = load_module(&gpu.ctx, &cr_fused_program())?;
            self.kernels = Some(FusedKernels {
                xr_d: function(&module, "cr_xr_d")?,
                xr_s: function(&module, "cr_xr_s")?,
                p_d: function(&module, "cr_p_d")?,
                p_s: function(&module, "cr_p_s")?,
                load_d: function(&module, "cr_load_d")?,
                load_s: function(&module, "cr_load_s")?,
                global: function(&module, "cr_global")?,
                peer_sum: function(&module, "cr_peer_sum")?,
            });
        }
        Ok(self.kernels.as_ref().unwrap())
    }

    /// A new state for a lattice of `volume` sites holding `s` (history of s.max_iter + 1
    /// entries, NaN except history[s.iter] = s.nr; tickets zero). Loads the kernels.
    /// `ranks`: Some(n) on a decomposed lattice of n ranks (the reducing kernels then
    /// leave their sums for `global`), None on one GPU alone.
    pub fn new_state(
        &mut self,
        gpu: &mut GpuStream,
        ledger: &Ledger,
        volume: usize,
        s: &CrScalars,
        ranks: Option<usize>,
    ) -> Result<DeviceCrState> {
        self.kernels(gpu)?;
        let hlen = s.max_iter as usize + 1;
        check_scalars(s, hlen)?;
        let stream = gpu.stream.clone();
        let mut history = vec![f64::NAN; hlen];
        history[s.iter as usize] = s.nr;
        let mut block = [0.0; CR_SCALARS];
        block[..CR_HOST_SCALARS].copy_from_slice(&scalars_to_block(s));
        block[CR_SPLIT] = if ranks.is_some() { 1.0 } else { 0.0 };
        block[CR_LOCAL_NR] = CR_NO_NR;
        let gathered = match ranks {
            Some(n) => Some(
                stream
                    .alloc_zeros::<f64>(CR_GATHERED * n.max(1))
                    .map_err(err("allocating the gathered CR sums"))?,
            ),
            None => None,
        };
        let state = DeviceCrState {
            scalars: stream
                .clone_htod(&block)
                .map_err(err("uploading the CR scalars"))?,
            history: stream
                .clone_htod(&history)
                .map_err(err("uploading the CR history"))?,
            partials: stream
                .alloc_zeros::<f64>(partials_len(volume))
                .map_err(err("allocating the CR partial sums"))?,
            tickets: stream
                .alloc_zeros::<u32>(CR_TICKETS)
                .map_err(err("allocating the CR tickets"))?,
            gathered,
            _booking: ledger.book(Purpose::CrState, cr_state_bytes(volume, s.max_iter, ranks)),
        };
        // The host vectors are temporaries, but a copy from pageable host memory has left
        // them when cuMemcpyHtoDAsync returns (see `set`): no synchronisation.
        Ok(state)
    }

    /// Overwrite the scalars (the host part of the block) and history[s.iter] = s.nr.
    pub fn set(gpu: &mut GpuStream, state: &mut DeviceCrState, s: &CrScalars) -> Result<()> {
        check_scalars(s, state.history.len())?;
        let block = scalars_to_block(s);
        let nr = [s.nr];
        let it = s.iter as usize;
        let mut host_part = state.scalars.slice_mut(0..CR_HOST_SCALARS);
        gpu.stream
            .memcpy_htod(&block, &mut host_part)
            .map_err(err("uploading the CR scalars"))?;
        let mut entry = state.history.slice_mut(it..it + 1);
        gpu.stream
            .memcpy_htod(&nr, &mut entry)
            .map_err(err("uploading a CR history entry"))?;
        // No synchronisation: a copy from pageable host memory has left `block` and `nr`
        // (staged by the driver) when cuMemcpyHtoDAsync returns (CUDA's "API
        // synchronization behavior"), and the copies are ordered before the next launch
        // on this stream.
        Ok(())
    }

    /// The scalars: one device-to-host transfer of the block (waits for queued work).
    pub fn get(gpu: &mut GpuStream, state: &DeviceCrState) -> Result<CrScalars> {
        let mut block = [0.0f64; CR_SCALARS];
        gpu.stream
            .memcpy_dtoh(&state.scalars, &mut block)
            .map_err(err("reading the CR scalars"))?;
        gpu.sync()?;
        Ok(block_to_scalars(&block))
    }

    /// history[0..=iter].
    pub fn history(gpu: &mut GpuStream, state: &DeviceCrState) -> Result<Vec<f64>> {
        let s = Self::get(gpu, state)?;
        Self::history_upto(gpu, state, s.iter)
    }

    /// history[0..=iter] for an iter the caller has read (one transfer, no read of the
    /// block).
    pub fn history_upto(gpu: &mut GpuStream, state: &DeviceCrState, iter: u64) -> Result<Vec<f64>> {
        read_history(gpu, &state.history, iter)
    }

    /// If active: x += alpha p, r -= alpha Ap; nr = (r|r); iter += 1, history[iter] = nr.
    pub fn update_xr(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceCrState,
        p: RawField<'_>,
        ap: RawField<'_>,
        x: RawFieldMut<'_>,
        r: RawFieldMut<'_>,
    ) -> Result<()> {
        let (prec, n) = common_shape(
            &[shape(&p), shape(&ap), shape_mut(&x), shape_mut(&r)],
            "cr_update_xr",
        )?;
        let k = self.kernels(gpu)?;
        let f = pick(prec, &k.xr_d, &k.xr_s, "cr_update_xr")?;
        let ni = n as i32;
        let cfg = cr_cfg(n);
        let DeviceCrState {
            scalars,
            history,
            partials,
            tickets,
            ..
        } = state;
        // The guards (_x, ...) live until the function returns, after the launch is queued.
        let stream = gpu.stream.clone();
        let (x, _x) = ptr_mut(x, &stream);
        let (r, _r) = ptr_mut(r, &stream);
        let (p, _p) = ptr(p, &stream);
        let (ap, _ap) = ptr(ap, &stream);
        let (scalars, _s) = scalars.device_ptr_mut(&stream);
        let (history, _h) = history.device_ptr_mut(&stream);
        let (partials, _pa) = partials.device_ptr_mut(&stream);
        let (tickets, _t) = tickets.device_ptr_mut(&stream);
        launch_values!(
            gpu,
            Kernel::CrXr(prec),
            n,
            f,
            cfg,
            [&x, &r, &p, &ap, &ni, &scalars, &history, &partials, &tickets]
        );
        Ok(())
    }

    /// If active: p = r + beta p, Ap = Ar + beta Ap; apap = (Ap|Ap); alpha = conj(rar)/apap;
    /// active = nr > eps && iter < max_iter && nr finite.
    pub fn update_p(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceCrState,
        r: RawField<'_>,
        ar: RawField<'_>,
        p: RawFieldMut<'_>,
        ap: RawFieldMut<'_>,
    ) -> Result<()> {
        let (prec, n) = common_shape(
            &[shape(&r), shape(&ar), shape_mut(&p), shape_mut(&ap)],
            "cr_update_p",
        )?;
        let k = self.kernels(gpu)?;
        let f = pick(prec, &k.p_d, &k.p_s, "cr_update_p")?;
        let ni = n as i32;
        let cfg = cr_cfg(n);
        let DeviceCrState {
            scalars,
            partials,
            tickets,
            ..
        } = state;
        // The guards (_p, ...) live until the function returns, after the launch is queued.
        let stream = gpu.stream.clone();
        let (p, _p) = ptr_mut(p, &stream);
        let (ap, _ap) = ptr_mut(ap, &stream);
        let (r, _r) = ptr(r, &stream);
        let (ar, _ar) = ptr(ar, &stream);
        let (scalars, _s) = scalars.device_ptr_mut(&stream);
        let (partials, _pa) = partials.device_ptr_mut(&stream);
        let (tickets, _t) = tickets.device_ptr_mut(&stream);
        launch_values!(
            gpu,
            Kernel::CrP(prec),
            n,
            f,
            cfg,
            [&p, &ap, &r, &ar, &ni, &scalars, &partials, &tickets]
        );
        Ok(())
    }

    /// r = rhs, x = p = Ap = 0 in one pass (the start of a run's fields; not gated).
    pub fn load(
        &mut self,
        gpu: &mut GpuStream,
        rhs: RawField<'_>,
        r: RawFieldMut<'_>,
        x: RawFieldMut<'_>,
        p: RawFieldMut<'_>,
        ap: RawFieldMut<'_>,
    ) -> Result<()> {
        let (prec, n) = common_shape(
            &[
                shape(&rhs),
                shape_mut(&r),
                shape_mut(&x),
                shape_mut(&p),
                shape_mut(&ap),
            ],
            "cr_load",
        )?;
        let k = self.kernels(gpu)?;
        let f = pick(prec, &k.load_d, &k.load_s, "cr_load")?;
        let ni = n as i32;
        let cfg = LaunchConfig {
            shared_mem_bytes: 0,
            ..cr_cfg(n)
        };
        // The guards (_rhs, ...) live until the function returns, after the launch is
        // queued.
        let stream = gpu.stream.clone();
        let (rhs, _rhs) = ptr(rhs, &stream);
        let (r, _r) = ptr_mut(r, &stream);
        let (x, _x) = ptr_mut(x, &stream);
        let (p, _p) = ptr_mut(p, &stream);
        let (ap, _ap) = ptr_mut(ap, &stream);
        launch!(
            gpu,
            Kernel::CrLoad(prec),
            n,
            f,
            cfg,
            [&rhs, &r, &x, &p, &ap, &ni]
        );
        Ok(())
    }

    /// The end of reduction `which` on a decomposed lattice: if active, the ranks' sums in
    /// rank order and the scalar update (apply's with xr's when an xr left its nr). With
    /// `peer` None, every rank's (CR_LOCAL_RE, CR_LOCAL_IM, CR_LOCAL_NR) must already be
    /// in `state.gathered` (rank order; `cr_global`); with Some((slots, rank)), the kernel
    /// gathers them itself over peer memory (`cr_peer_sum`: `slots` is the device address
    /// of the ranks' slot-buffer addresses, `halo::peer_sums::PeerSums`, and every rank must launch
    /// it at the same point of its sequence of reductions). A no-op for an undecomposed
    /// state.
    pub fn global(
        &mut self,
        gpu: &mut GpuStream,
        state: &mut DeviceCrState,
        which: CrReduction,
        peer: Option<(u64, usize)>,
    ) -> Result<()> {
        let ranks = state.ranks();
        let k = self.kernels(gpu)?;
        let DeviceCrState {
            scalars,
            history,
            gathered,
            ..
        } = state;
        let Some(gathered) = gathered else {
            return Ok(());
        };
        let cfg = RANK_SUM_CFG;
        let (w, n) = (which as i32, ranks as i32);
        let stream = gpu.stream.clone();
        let (scalars, history) = (dptr(scalars, &stream), dptr(history, &stream));
        match peer {
            None => {
                let gathered = dptr(gathered, &stream);
                launch_values!(
                    gpu,
                    Kernel::CrGlobal,
                    ranks,
                    &k.global,
                    cfg,
                    [&w, &scalars, &history, &gathered, &n]
                );
            }
            Some((slots, rank)) => {
                let r = rank as i32;
                launch_values!(
                    gpu,
                    Kernel::CrPeerSum,
                    ranks,
                    &k.peer_sum,
                    cfg,
                    [&w, &scalars, &history, &slots, &r, &n]
                );
            }
        }
        Ok(())
    }

    /// Drop the recorded graphs (an in-flight graph is freed when it completes).
    pub fn forget_graphs(&mut self) {
        self.graphs.clear();
    }
}

/// The stat a graph launch is booked under (its launches' flops and bytes).
pub const GRAPH_STAT: &str = "cr graph";

/// The launch of the kernels that add the ranks' sums (cr_global, cr_peer_sum,
/// bi_global): one warp of one block.
pub(crate) const RANK_SUM_CFG: LaunchConfig = LaunchConfig {
    grid_dim: (1, 1, 1),
    block_dim: (32, 1, 1),
    shared_mem_bytes: 0,
};

fn launch_graph(gpu: &mut GpuStream, g: &mut CachedGraph) -> Result<()> {
    let pending = gpu.begin_named(GRAPH_STAT, false)?;
    g.graph.launch().map_err(err("launching a CUDA graph"))?;
    gpu.end_work(pending, g.tally.flops, g.tally.bytes)?;
    g.launches += 1;
    if g.timeline != 0 && g.launches == crate::backend::cuda::core::timeline::SNAPSHOT_AT {
        gpu.timeline_snapshot(g.timeline)?;
    }
    Ok(())
}

/// `Backend::repeat` on the GPU. The first call with a (key, times) captures `times` runs
/// of `body` into one CUDA graph (thread-local capture mode: the body must queue work
/// only, never synchronise or read to the host), instantiates and caches it, and launches
/// it; later calls launch the cached graph. Inside a capture (a nested repeat) the body is
/// simply run `times` times into the outer graph. `parts` gives the backend's stream and
/// fused state.
pub(crate) fn repeat<B>(
    backend: &mut B,
    parts: for<'a> fn(&'a mut B) -> (&'a mut GpuStream, &'a mut Fused),
    key: u64,
    times: usize,
    body: &mut dyn FnMut(&mut B) -> Result<()>,
) -> Result<()> {
    if times == 0 {
        return Ok(());
    }
    let (gpu, fused) = parts(backend);
    if gpu.capturing() {
        for _ in 0..times {
            body(backend)?;
        }
        return Ok(());
    }
    if let Some(g) = fused.graphs.get_mut(&(key, times)) {
        return launch_graph(gpu, g);
    }
    let t0 = std::time::Instant::now();
    gpu.stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(err("beginning a CUDA graph capture"))?;
    gpu.begin_capture();
    let mut outcome = Ok(());
    for _ in 0..times {
        outcome = body(backend);
        if outcome.is_err() {
            break;
        }
    }
    let (gpu, fused) = parts(backend);
    let tally = gpu.end_capture();
    let t1 = std::time::Instant::now();
    // Each node keeps the priority of the stream it was captured from (the decomposed
    // operator's communication stream is the device's highest, `halo::comm_priority`).
    let ended = gpu
        .stream
        .end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    let t2 = std::time::Instant::now();
    outcome.map_err(|e| match e {
        Error::Cuda(m) => Error::Cuda(format!(
            "while capturing CUDA graph {key} (x{times}): {m} (a captured body may only queue work: no synchronisation, no host reads)"
        )),
        other => other,
    })?;
    let graph = ended
        .map_err(err(
            "capturing a CUDA graph (a captured body may only queue work: no synchronisation, no host reads)",
        ))?
        .ok_or_else(|| Error::Cuda(format!("capturing CUDA graph {key} gave no graph")))?;
    let timeline = gpu.timeline_graph();
    let cached = fused.graphs.entry((key, times)).or_insert(CachedGraph {
        graph,
        tally,
        timeline,
        launches: 0,
    });
    let launched = launch_graph(gpu, cached);
    tracing::debug!(
        key,
        times,
        record_ms = 1e3 * (t1 - t0).as_secs_f64(),
        instantiate_ms = 1e3 * (t2 - t1).as_secs_f64(),
        first_launch_ms = 1e3 * t2.elapsed().as_secs_f64(),
        "CUDA graph recorded"
    );
    launched
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::core::kernels::CR_PER_THREAD;
    use crate::field::C64;

    #[test]
    fn scalars_round_trip_through_the_block() {
        let s = CrScalars {
            rar: C64::new(1.5, -2.25),
            apap: 3.0e-7,
            nr: 1.0e-21,
            eps: 4.0e-22,
            alpha: C64::new(-0.125, 7.0),
            beta: C64::new(0.3, f64::MIN_POSITIVE),
            iter: 123_456,
            max_iter: 1 << 40,
            active: true,
        };
        let b = scalars_to_block(&s);
        assert_eq!(b[CR_ITER], 123_456.0);
        assert_eq!(b[CR_ACTIVE], 1.0);
        assert_eq!(b[CR_ALPHA_IM], 7.0);
        assert_eq!(block_to_scalars(&b), s);
        let off = CrScalars { active: false, ..s };
        assert_eq!(scalars_to_block(&off)[CR_ACTIVE], 0.0);
        assert_eq!(block_to_scalars(&scalars_to_block(&off)), off);
        assert_eq!(
            block_to_scalars(&scalars_to_block(&CrScalars::default())),
            CrScalars::default()
        );
    }

    #[test]
    fn indices_match_the_device_header() {
        let header = include_str!("../../../../kernels/cr_device.cuh");
        for (name, value) in [
            ("CR_RAR_RE", CR_RAR_RE),
            ("CR_RAR_IM", CR_RAR_IM),
            ("CR_APAP", CR_APAP),
            ("CR_NR", CR_NR),
            ("CR_EPS", CR_EPS),
            ("CR_ALPHA_RE", CR_ALPHA_RE),
            ("CR_ALPHA_IM", CR_ALPHA_IM),
            ("CR_BETA_RE", CR_BETA_RE),
            ("CR_BETA_IM", CR_BETA_IM),
            ("CR_ITER", CR_ITER),
            ("CR_MAX_ITER", CR_MAX_ITER),
            ("CR_ACTIVE", CR_ACTIVE),
            ("CR_HOST_SCALARS", CR_HOST_SCALARS),
            ("CR_SPLIT", CR_SPLIT),
            ("CR_LOCAL_RE", CR_LOCAL_RE),
            ("CR_LOCAL_IM", CR_LOCAL_IM),
            ("CR_LOCAL_NR", CR_LOCAL_NR),
            ("CR_SCALARS", CR_SCALARS),
            ("CR_TICKET_XR", CR_TICKET_XR),
            ("CR_TICKET_APPLY", CR_TICKET_APPLY),
            ("CR_TICKET_P", CR_TICKET_P),
            ("CR_TICKETS", CR_TICKETS),
            (
                "CR_PEER_SLOT",
                crate::backend::cuda::halo::peer_sums::PEER_SLOT,
            ),
        ] {
            let line = format!("#define {name} {value}\n");
            assert!(
                header.contains(&line),
                "cr_device.cuh lacks `{}`",
                line.trim()
            );
        }
        assert!(header.contains(&format!("#define CR_NO_NR ({CR_NO_NR:.1})\n")));
    }

    #[test]
    fn grid_depends_on_n_only_and_is_bounded() {
        assert_eq!(cr_grid(0), 1);
        assert_eq!(cr_grid(1), 1);
        assert_eq!(cr_grid(CR_BLOCK * CR_PER_THREAD), 1);
        assert_eq!(cr_grid(CR_BLOCK * CR_PER_THREAD + 1), 2);
        // 16^4 sites, 12 complex each: 786432 / 2048 = 384 blocks of 8 elements a thread.
        assert_eq!(cr_grid(16usize.pow(4) * 12), 384);
        // 32^4 and larger: capped, more elements per thread.
        assert_eq!(cr_grid(32usize.pow(4) * 12), CR_MAX_GRID);
        assert_eq!(cr_grid(usize::MAX / 2), CR_MAX_GRID);
        let cfg = cr_cfg(1000);
        assert_eq!(cfg.block_dim.0 as usize, CR_BLOCK);
        assert_eq!(cfg.shared_mem_bytes as usize, CR_BLOCK * 16);
        // Partials cover the grid and a one-thread-per-site launch of 32-thread blocks.
        for v in [16, 4096, 65536, 1 << 20] {
            assert!(partials_len(v) >= 2 * (v / 32 + 1));
            assert!(partials_len(v) >= 2 * cr_grid(v * 12));
        }
    }

    #[test]
    fn scalars_that_do_not_fit_the_history_are_refused() {
        let s = CrScalars {
            iter: 5,
            max_iter: 4,
            ..CrScalars::default()
        };
        assert!(matches!(
            check_scalars(&s, 5),
            Err(Error::InvalidValue { .. })
        ));
        let s = CrScalars {
            iter: 4,
            max_iter: 4,
            ..CrScalars::default()
        };
        assert!(check_scalars(&s, 5).is_ok());
        assert!(check_scalars(&s, 4).is_err());
    }

    #[test]
    fn mixed_fields_are_refused() {
        let ok = [(Precision::Double, 12); 4];
        assert_eq!(common_shape(&ok, "x").unwrap(), (Precision::Double, 12));
        let mut bad = ok;
        bad[2] = (Precision::Single, 12);
        assert!(matches!(
            common_shape(&bad, "x"),
            Err(Error::InvalidValue { .. })
        ));
        bad[2] = (Precision::Double, 24);
        assert!(common_shape(&bad, "x").is_err());
        // Half fields have no fused kernels: refused by the shape, and by the kernel pick.
        let half = [(Precision::Half, 12); 4];
        assert!(matches!(
            common_shape(&half, "x"),
            Err(Error::InvalidValue { .. })
        ));
        assert!(matches!(
            pick(Precision::Half, &1, &2, "x"),
            Err(Error::InvalidValue { .. })
        ));
        assert_eq!(pick(Precision::Double, &1, &2, "x").unwrap(), &1);
        assert_eq!(pick(Precision::Single, &1, &2, "x").unwrap(), &2);
    }
}
