//! Version 3.0 on a decomposed lattice: a rank's operator application as
//! pack -> exchange -> interior -> exterior (kernels/halo.cu, stencil_v3's split_mask),
//! with the exchange on a communication stream overlapping the interior kernel:
//!
//! ```text
//! main stream:  record `packed` -> interior -----------------------------------> wait `exchanged` -> exterior (every split mu)
//! comm stream:  wait `packed` -> pack (every split mu) -> DeviceExchange::exchange_on -> record `exchanged`
//! (the pack on the communication stream, so the interior does not wait for it;
//! `[tuning] pack_on = "main"` puts it back on the main stream before `packed`)
//! ```
//!
//! `Halo` holds the partition, the exchange (also the global sums of dot and norm2:
//! gathered on the device, added in rank order, the same bits on every rank), the host
//! communicator (barriers, agreements), the face and ghost
//! buffers (ghost links exchanged once at construction, through the host communicator),
//! the halo kernels and optional event timings (`HaloTimings`). `PeerCopies` is the
//! one-GPU `DeviceExchange`: ranks as threads of one process on the same GPU, faces moved
//! by device-to-device copies ordered by CUDA events (NCCL refuses two ranks on one GPU).

use crate::backend::cuda::core::device::{err, function, load_module};
use crate::backend::cuda::core::fast_layout::stored_link;
use crate::backend::cuda::core::kernels::Kernel;
use crate::backend::cuda::core::kernels::HALO_BLOCK;
use crate::backend::cuda::core::launch::cfg_1d;
use crate::backend::cuda::core::stencil::programs::halo_program;
use crate::backend::cuda::core::stencil::v3::{launch_v3, V3Kernels, V3Launch};
use crate::backend::cuda::core::timing::{launch, launch_values, GpuStream};
use crate::backend::cuda::core::version::Reconstruct;
use crate::backend::ledger::{Booking, Ledger, Purpose};
use crate::comms::{Comms, DeviceExchange, DeviceMessage};
use crate::error::{Error, Result};
use crate::field::GaugeField;
use crate::geometry::lattice::{Boundary, NDIM};
use crate::geometry::partition::Partition;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where the time of the decomposed applications went (CUDA events, when switched on
/// with `CudaBackend::set_halo_timing`), summed over `applications` stencil launches
/// (a Schur operator is two), and the bytes this rank sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct HaloTimings {
    /// Decomposed stencil launches (each one pack, exchange, interior, exterior).
    pub applications: u64,
    /// Packing the faces (main stream).
    pub pack_ms: f64,
    /// From the end of the pack to the received faces (communication stream).
    pub exchange_ms: f64,
    /// The interior kernel (main stream, overlapping the exchange).
    pub interior_ms: f64,
    /// What the main stream waited for the exchange after the interior (0 when hidden).
    pub wait_ms: f64,
    /// The exterior kernels (main stream).
    pub exterior_ms: f64,
    /// Bytes of faces this rank sent (counted whether or not timing is on).
    pub bytes_exchanged: u64,
}

/// The device buffers of one split direction.
struct Faces {
    mu: usize,
    /// Sites on a face perpendicular to mu.
    face_sites: usize,
    send_lo: CudaSlice<f64>,
    send_hi: CudaSlice<f64>,
    recv_lo: CudaSlice<f64>,
    recv_hi: CudaSlice<f64>,
    /// The backward neighbour's upper-face links U_mu (double and single).
    ghost_d: CudaSlice<f64>,
    ghost_s: CudaSlice<f32>,
    /// All six on the backend's books (`Purpose::Halo`).
    _booking: Booking,
}

impl Faces {
    /// The device address of the ghost links in the launch's precision.
    fn ghost(&self, single: bool, stream: &CudaStream) -> u64 {
        if single {
            raw(&self.ghost_s, stream)
        } else {
            raw(&self.ghost_d, stream)
        }
    }
}

/// Bytes of one split direction's device buffers on a sub-lattice whose faces
/// perpendicular to it have `face_sites` sites: four face buffers of 6 complex doubles per
/// face site (both parities), and the ghost links (one per face site, `elems` complex
/// each) in double and in single.
pub(crate) fn face_bytes(face_sites: usize, elems: usize) -> u64 {
    (4 * 12 * face_sites * 8 + elems * face_sites * (16 + 8)) as u64
}

/// Doubles per rank of the global sums' buffer (`Halo::global_sum_device`): a complex
/// reduction's two.
pub(crate) const GATHER_DOUBLES: usize = 2;

/// Bytes of the global sums' buffer of `ranks` ranks (booked with the faces).
pub(crate) fn gathered_bytes(ranks: usize) -> u64 {
    (GATHER_DOUBLES * ranks * std::mem::size_of::<f64>()) as u64
}

/// Events of one timed application, read at `timings`.
struct Timed {
    /// The pack ran on the communication stream (`pack_on_comm`): the interior's time
    /// runs from `start`, not from `packed`.
    pack_on_comm: bool,
    start: CudaEvent,
    packed: CudaEvent,
    interior: CudaEvent,
    waited: CudaEvent,
    exchanged: CudaEvent,
    end: CudaEvent,
}

/// A rank's side of a decomposed 3.0 operator (see the module documentation).
pub(crate) struct Halo {
    pub partition: Partition,
    pub exchange: Box<dyn DeviceExchange>,
    pub comms: Box<dyn Comms>,
    /// Bit mu: direction mu is split.
    split_mask: i32,
    /// Bit mu: this rank's lower / upper edge in mu is a global antiperiodic edge.
    anti_lo: i32,
    anti_hi: i32,
    faces: Vec<Faces>,
    comm: Arc<CudaStream>,
    packed: CudaEvent,
    exchanged: CudaEvent,
    /// The halo kernels per precision: double loaded at construction, single on first use.
    kernels_d: HaloKernels,
    kernels_s: Option<HaloKernels>,
    reconstruct: Reconstruct,
    timing: bool,
    /// Timed applications not yet read (at most TIMED_PENDING + TIMED_FOLD), oldest first.
    timed: Vec<Timed>,
    /// Events of read applications, recorded again by later ones.
    spare: Vec<CudaEvent>,
    totals: HaloTimings,
    /// Every rank's values of a global sum (`global_sum_device`): `GATHER_DOUBLES` a
    /// rank, made at construction and on the books (`Purpose::Halo`).
    gathered: CudaSlice<f64>,
    _gathered_booking: Booking,
    /// The fused CR's sums over peer memory (`cr_peer_sum`), where the exchange has it.
    pub peer_sums: Option<PeerSums>,
}

/// Doubles of a rank's slot in `cr_peer_sum`'s buffers (kernels/cr_fused.cu CR_PEER_SLOT).
pub(crate) const PEER_SLOT: usize = 4;

/// Bytes of a rank's `PeerSums`: its slot buffer (two generations of `ranks` slots and its
/// sequence number) and the table of the ranks' buffer addresses.
pub(crate) fn peer_sums_bytes(ranks: usize) -> u64 {
    (8 * (2 * ranks * PEER_SLOT + 1) + 8 * ranks) as u64
}

/// A rank's part of `cr_peer_sum`: its slot buffer, which the other ranks write, and the
/// ranks' buffer addresses in rank order (exchanged once through the host communicator:
/// the ranks are threads of one process, so the addresses are valid in all of them).
pub(crate) struct PeerSums {
    _slots: CudaSlice<f64>,
    table: CudaSlice<u64>,
    _booking: Booking,
}

impl PeerSums {
    fn new(
        stream: &Arc<CudaStream>,
        comms: &mut dyn Comms,
        ranks: usize,
        ledger: &Ledger,
    ) -> Result<Self> {
        let slots = stream
            .alloc_zeros::<f64>(2 * ranks * PEER_SLOT + 1)
            .map_err(err("allocating the peer sums' slots"))?;
        stream
            .synchronize()
            .map_err(err("allocating the peer sums' slots"))?;
        let mine = raw(&slots, stream);
        let all = comms.all_gather(&[f64::from_bits(mine)])?;
        let addresses: Vec<u64> = all.iter().map(|a| a.to_bits()).collect();
        if addresses.len() != ranks {
            return Err(Error::internal("the peer sums' table has a wrong length"));
        }
        let table = stream
            .clone_htod(&addresses)
            .map_err(err("uploading the peer sums' table"))?;
        stream
            .synchronize()
            .map_err(err("uploading the peer sums' table"))?;
        Ok(PeerSums {
            _slots: slots,
            table,
            _booking: ledger.book(Purpose::Halo, peer_sums_bytes(ranks)),
        })
    }

    /// The device address of the ranks' buffer addresses.
    pub fn table(&self, stream: &CudaStream) -> u64 {
        raw(&self.table, stream)
    }
}

/// A long split solve times every application: once this many are pending, the oldest
/// TIMED_FOLD (long finished) are read into the totals and their events reused, so the
/// events held stay bounded (they were kept until the report before).
const TIMED_PENDING: usize = 32;
const TIMED_FOLD: usize = 16;

/// A precision's halo kernels.
#[derive(Clone)]
struct HaloKernels {
    pack: CudaFunction,
    exterior: CudaFunction,
}

/// The communication stream of `ctx`: at the device's highest priority unless
/// `priority` is off (`TuningOptions::comm_priority`). The exchange's kernels and copies
/// become ready with the interior kernel and at the default priority would wait behind
/// its blocks (validate/RESULTS.md: weak scaling on two GPUs 78% -> 83%).
fn comm_stream(ctx: &Arc<CudaContext>, priority: bool) -> Result<Arc<CudaStream>> {
    let what = "creating the communication stream";
    if !priority {
        return ctx.new_stream().map_err(err(what));
    }
    ctx.bind_to_thread().map_err(err(what))?;
    // (least, greatest): the greatest priority is the numerically lowest.
    let (_, greatest) = cudarc::driver::result::stream::get_priority_range().map_err(err(what))?;
    ctx.new_stream_with_priority(greatest).map_err(err(what))
}

/// The bits of the boundary mask that hold at this rank's lower and upper edges: a
/// direction's edge is a global one when the rank is first (lower) or last (upper) in it.
fn edge_masks(partition: &Partition, boundary: &[Boundary; NDIM]) -> (i32, i32) {
    let mut lo = 0;
    let mut hi = 0;
    for mu in 0..NDIM {
        if boundary[mu] == Boundary::Antiperiodic {
            if partition.coords[mu] == 0 {
                lo |= 1 << mu;
            }
            if partition.coords[mu] + 1 == partition.grid[mu] {
                hi |= 1 << mu;
            }
        }
    }
    (lo, hi)
}

/// Face-checkerboard index and parity of local site `c` on a face perpendicular to mu
/// (kernels/v3_core.cuh: the lexicographic index over the other three directions, / 2).
fn face_index(dims: &[usize; NDIM], mu: usize, c: &[usize; NDIM]) -> (usize, usize) {
    let mut f = 0;
    let mut stride = 1;
    for nu in 0..NDIM {
        if nu != mu {
            f += c[nu] * stride;
            stride *= dims[nu];
        }
    }
    (f / 2, c.iter().sum::<usize>() % 2)
}

/// This rank's upper-face links U_mu in the ghost layout of halo.cu (complex element e <
/// `elems` of the site of parity q and face index fcb at q*elems*Fh + e*Fh + fcb; elems =
/// 6 with two-row compression: rows 0 and 1 only), as f64 pairs: what its forward
/// neighbour needs for its backward hops.
fn upper_face_links(gauge: &GaugeField, mu: usize, elems: usize) -> Vec<f64> {
    let l = &gauge.lattice;
    let fh = l.volume() / l.dims[mu] / 2;
    let mut out = vec![0.0; 2 * 2 * elems * fh];
    // The upper face's sites only (c[mu] = L - 1), the other three coordinates x fastest,
    // not all 42.5 M sites of a rank of 96^3x192 on four GPUs for each split direction
    // (the ghost links' step, this walk and the exchange, took 2.8-4.1 s a rank there,
    // validate/RESULTS.md; not measured with this walk).
    let others: Vec<usize> = (0..NDIM).filter(|&nu| nu != mu).collect();
    for f in 0..2 * fh {
        let mut c = [0; NDIM];
        c[mu] = l.dims[mu] - 1;
        let mut rest = f;
        for &nu in &others {
            c[nu] = rest % l.dims[nu];
            rest /= l.dims[nu];
        }
        let site = l.index(c);
        let (fcb, q) = face_index(&l.dims, mu, &c);
        let u = stored_link(gauge.link(site, mu), elems);
        for (e, z) in u[..elems].iter().enumerate() {
            let k = q * elems * fh + e * fh + fcb;
            out[2 * k] = z.re;
            out[2 * k + 1] = z.im;
        }
    }
    out
}

impl Halo {
    /// Buffers, ghost links (exchanged now through `comms`), streams and kernels of a
    /// rank whose local gauge field is `gauge` (its lattice: the partition's sub-lattice).
    pub fn new(
        gpu: &GpuStream,
        gauge: &GaugeField,
        partition: Partition,
        exchange: Box<dyn DeviceExchange>,
        mut comms: Box<dyn Comms>,
        reconstruct: Reconstruct,
        ledger: &Ledger,
    ) -> Result<Halo> {
        let lattice = &gauge.lattice;
        let (anti_lo, anti_hi) = edge_masks(&partition, &lattice.boundary);
        let split: Vec<usize> = (0..NDIM).filter(|&mu| partition.is_split(mu)).collect();
        let step = std::time::Instant::now();
        // Ghost links: send the upper face to the forward neighbour (tag mu), receive the
        // backward neighbour's.
        let mine: Vec<Vec<f64>> = split
            .iter()
            .map(|&mu| upper_face_links(gauge, mu, reconstruct.elems()))
            .collect();
        let mut ghosts: Vec<Vec<f64>> = mine.iter().map(|m| vec![0.0; m.len()]).collect();
        {
            let sends: Vec<crate::comms::Outgoing<'_>> = split
                .iter()
                .zip(&mine)
                .map(|(&mu, data)| crate::comms::Outgoing {
                    to: partition.neighbour(mu, true),
                    tag: mu as u32,
                    data,
                })
                .collect();
            let mut recvs: Vec<crate::comms::Incoming<'_>> = split
                .iter()
                .zip(ghosts.iter_mut())
                .map(|(&mu, data)| crate::comms::Incoming {
                    from: partition.neighbour(mu, false),
                    tag: mu as u32,
                    data,
                })
                .collect();
            comms.exchange(&sends, &mut recvs)?;
        }
        let stream = &gpu.stream;
        let mut faces = Vec::new();
        for (&mu, ghost) in split.iter().zip(&ghosts) {
            let face_sites = partition.face_sites(mu);
            // 6 complex per face site, both parities, double: 12 f64 per site.
            let n = 12 * face_sites;
            let alloc = || {
                stream
                    .alloc_zeros::<f64>(n)
                    .map_err(err("allocating a face buffer"))
            };
            let ghost_single: Vec<f32> = ghost.iter().map(|&v| v as f32).collect();
            faces.push(Faces {
                mu,
                face_sites,
                send_lo: alloc()?,
                send_hi: alloc()?,
                recv_lo: alloc()?,
                recv_hi: alloc()?,
                ghost_d: stream
                    .clone_htod(ghost)
                    .map_err(err("uploading the ghost links"))?,
                ghost_s: stream
                    .clone_htod(&ghost_single)
                    .map_err(err("uploading the ghost links"))?,
                _booking: ledger.book(Purpose::Halo, face_bytes(face_sites, reconstruct.elems())),
            });
        }
        stream
            .synchronize()
            .map_err(err("uploading the ghost links"))?;
        crate::clock::record_since("halo: ghost links", step);
        let step = std::time::Instant::now();
        let comm = comm_stream(&gpu.ctx, gpu.tuning.comm_priority)?;
        let event = || {
            gpu.ctx
                .new_event(None)
                .map_err(err("creating a halo event"))
        };
        let kernels_d = Self::load(&gpu.ctx, reconstruct, false)?;
        let ranks = exchange.size();
        let gathered = stream
            .alloc_zeros::<f64>(GATHER_DOUBLES * ranks)
            .map_err(err("allocating the global sums' buffer"))?;
        let peer_sums = if exchange.peer_memory() {
            Some(PeerSums::new(stream, comms.as_mut(), ranks, ledger)?)
        } else {
            None
        };
        let mut halo = Halo {
            split_mask: split.iter().map(|&mu| 1 << mu).sum(),
            anti_lo,
            anti_hi,
            faces,
            comm,
            packed: event()?,
            exchanged: event()?,
            kernels_d,
            kernels_s: None,
            reconstruct,
            timing: false,
            timed: Vec::new(),
            spare: Vec::new(),
            totals: HaloTimings::default(),
            gathered,
            _gathered_booking: ledger.book(Purpose::Halo, gathered_bytes(ranks)),
            peer_sums,
            partition,
            exchange,
            comms,
        };
        crate::clock::record_since("halo: kernels and buffers", step);
        crate::clock::timed("halo: warm-up exchange and capture", || {
            halo.warm_up(stream)
        })?;
        Ok(halo)
    }

    /// One exchange of every face buffer, whole, in both directions, now (waits for it):
    /// NCCL connects lazily, at a pair's first message in a direction, and on four ranks
    /// along t (the set-up's ghost links go forward only) the backward direction was first
    /// used inside the solve (rank 0 waited 36.5 ms a solve; with this, 8.9 ms; the cause is
    /// our reading, not traced; validate/RESULTS.md). Every rank calls it at construction.
    fn warm_up(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let (sends, recvs) =
            self.face_messages_of(stream, |f| f.send_lo.len() * std::mem::size_of::<f64>());
        if sends.is_empty() {
            return Ok(());
        }
        self.comm
            .join(stream)
            .map_err(err("ordering the first exchange"))?;
        self.exchange.exchange_on(&self.comm, &sends, &recvs)?;
        self.comm
            .synchronize()
            .map_err(err("the first exchange of the faces"))?;
        self.warm_up_capture(stream, &sends, &recvs)
    }

    /// Where the exchange can be captured (NCCL): record, instantiate and drop a graph of
    /// what the solve's graphs hold (an exchange on the communication stream forked from
    /// `stream`, an all-gather on `stream`), never launched. The first graph a rank
    /// records pays a one-time cost that later ones do not: on four H200s the first CR
    /// graph took 0.8-1.4 ms to record and the next 0.1-0.3 ms for half the work,
    /// whichever of the two came first (validate/RESULTS.md). Paid here, at
    /// construction, as NCCL's connections are by the exchange above.
    fn warm_up_capture(
        &mut self,
        stream: &Arc<CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()> {
        if !self.exchange.capturable() {
            return Ok(());
        }
        // An all-gather of two doubles (a reduction's), in place: this rank's part of the
        // global sums' buffer is its source.
        let bytes = GATHER_DOUBLES * std::mem::size_of::<f64>();
        let dst = raw(&self.gathered, stream);
        let src = dst + (self.exchange.rank() * bytes) as u64;
        // NCCL connects a collective's peers at its first call, which a capture refuses
        // ("operation not permitted when stream is capturing"): one all-gather
        // outside it first.
        self.exchange.all_gather_on(stream, src, dst, bytes)?;
        stream.synchronize().map_err(err("the first all-gather"))?;
        let t = std::time::Instant::now();
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(err("beginning the warm-up capture"))?;
        let mut captured = || -> Result<()> {
            self.comm
                .join(stream)
                .map_err(err("forking the warm-up capture"))?;
            self.exchange.exchange_on(&self.comm, sends, recvs)?;
            stream
                .join(&self.comm)
                .map_err(err("joining the warm-up capture"))?;
            self.exchange.all_gather_on(stream, src, dst, bytes)
        };
        let outcome = captured();
        let ended = stream.end_capture(
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY,
        );
        outcome?;
        drop(ended.map_err(err("ending the warm-up capture"))?);
        tracing::debug!(
            ms = 1e3 * t.elapsed().as_secs_f64(),
            "halo: warm-up capture"
        );
        Ok(())
    }

    /// Every split direction's sends and receives (`face_messages`) over the face
    /// buffers, `bytes(face)` each.
    fn face_messages_of(
        &self,
        stream: &CudaStream,
        bytes: impl Fn(&Faces) -> usize,
    ) -> (Vec<DeviceMessage>, Vec<DeviceMessage>) {
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for f in &self.faces {
            let bytes = bytes(f);
            let msg = |(peer, tag, buf)| DeviceMessage {
                peer,
                tag,
                ptr: raw(
                    match buf {
                        FaceBuffer::SendLo => &f.send_lo,
                        FaceBuffer::SendHi => &f.send_hi,
                        FaceBuffer::RecvLo => &f.recv_lo,
                        FaceBuffer::RecvHi => &f.recv_hi,
                    },
                    stream,
                ),
                bytes,
            };
            let [s0, s1, r0, r1] = face_messages(&self.partition, f.mu);
            sends.extend([msg(s0), msg(s1)]);
            recvs.extend([msg(r0), msg(r1)]);
        }
        (sends, recvs)
    }

    fn load(ctx: &Arc<CudaContext>, reconstruct: Reconstruct, single: bool) -> Result<HaloKernels> {
        let (module, _) = load_module(ctx, &halo_program(reconstruct, single))?;
        Ok(HaloKernels {
            pack: function(&module, "halo_pack")?,
            exterior: function(&module, "halo_exterior")?,
        })
    }

    pub fn set_timing(&mut self, on: bool) {
        self.timing = on;
    }

    /// Add one timed application to the totals (waits for its last event) and keep its
    /// events for reuse.
    fn fold(&mut self, t: Timed) -> Result<()> {
        let ms = |a: &CudaEvent, b: &CudaEvent| -> Result<f64> {
            Ok(a.elapsed_ms(b).map_err(err("reading a halo event"))? as f64)
        };
        self.totals.pack_ms += ms(&t.start, &t.packed)?;
        let interior_from = if t.pack_on_comm { &t.start } else { &t.packed };
        self.totals.interior_ms += ms(interior_from, &t.interior)?;
        self.totals.wait_ms += ms(&t.interior, &t.waited)?;
        self.totals.exchange_ms += ms(&t.packed, &t.exchanged)?;
        self.totals.exterior_ms += ms(&t.waited, &t.end)?;
        self.spare
            .extend([t.start, t.packed, t.interior, t.waited, t.exchanged, t.end]);
        Ok(())
    }

    /// The books so far (synchronises the streams to read the events).
    pub fn timings(&mut self) -> Result<HaloTimings> {
        for t in std::mem::take(&mut self.timed) {
            self.fold(t)?;
        }
        Ok(self.totals)
    }

    pub fn reset_timings(&mut self) -> Result<()> {
        self.timings()?;
        self.totals = HaloTimings::default();
        Ok(())
    }

    /// Build the single-precision halo kernels now (else on first use).
    pub fn prepare_single(&mut self, ctx: &Arc<CudaContext>) -> Result<()> {
        if self.kernels_s.is_none() {
            self.kernels_s = Some(Self::load(ctx, self.reconstruct, true)?);
        }
        Ok(())
    }

    /// One decomposed stencil launch: `l` as `launch_v3` takes it (the undecomposed
    /// arguments; its boundary masks are replaced by this rank's), here as pack, exchange,
    /// interior and exterior. With `l.s`, the interior and the exterior do nothing unless
    /// the fused CR iteration is active; with `l.partials` also, the interior's epilogue
    /// and the exterior kernels together leave this rank's (y|out) in the scalar block
    /// (CR_LOCAL_RE/IM, kernels/halo.cu) for `cr_global`.
    pub fn launch(&mut self, gpu: &mut GpuStream, stencil: &V3Kernels, l: &V3Launch) -> Result<()> {
        if l.partials != 0 && (l.s == 0 || l.y == 0 || l.ticket == 0) {
            return Err(Error::internal(
                "a decomposed (y|out) needs the scalar block, y and the ticket",
            ));
        }
        if l.half {
            return Err(Error::invalid(
                "solver.precision",
                "half-double on a decomposed lattice: the halo kernels have no half-precision build; use single-double or one GPU",
            ));
        }
        if l.single {
            self.prepare_single(&gpu.ctx)?;
        }
        let HaloKernels { pack, exterior } = if l.single {
            self.kernels_s.clone().unwrap()
        } else {
            self.kernels_d.clone()
        };
        let stream = gpu.stream.clone();
        let timed_event = |ctx: &Arc<CudaContext>| -> Result<CudaEvent> {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(err("creating a halo timing event"))
        };
        // No timing events inside a CUDA graph capture (they would not time the replays).
        let timing = self.timing && !gpu.capturing();
        let mut events = Vec::new();
        if timing {
            for _ in 0..6 {
                events.push(match self.spare.pop() {
                    Some(e) => e,
                    None => timed_event(&gpu.ctx)?,
                });
            }
            events[0]
                .record(&stream)
                .map_err(err("recording a halo event"))?;
        }
        let [lx, ly, lz, lt] = l.dims;
        let volume = l.volume as i32;
        let half_fh = |f: &Faces| f.face_sites / 2;
        // Face sites per face in this launch: both parities (full) or one.
        let per_face = |f: &Faces| {
            if l.parity.is_none() {
                f.face_sites
            } else {
                half_fh(f)
            }
        };
        let complex_bytes = if l.single { 8 } else { 16 };
        // Pack: the input's parity is the other one of the output's. On the communication
        // stream (after `packed`, which then marks the input ready) or (`pack_on = main`) on
        // the main stream (before `packed`, which then marks the faces packed).
        let pack_parity: i32 = l.parity.map_or(-1, |p| 1 - p as i32);
        let on_comm = gpu.tuning.pack_on == crate::backend::tuning::PackOn::Comm;
        if on_comm {
            self.packed
                .record(&stream)
                .map_err(err("recording the halo input event"))?;
            self.comm
                .wait(&self.packed)
                .map_err(err("ordering the pack after the input"))?;
            // The pack's launches go to the communication stream (and are booked there);
            // the main stream is put back below, also when a launch fails.
            gpu.stream = self.comm.clone();
        }
        let faces = &self.faces;
        let packs = (|| -> Result<()> {
            for f in faces {
                let mu = f.mu as i32;
                let n = 2 * per_face(f);
                let cfg = cfg_1d(n, HALO_BLOCK, 0);
                let (lo, hi) = (raw(&f.send_lo, &stream), raw(&f.send_hi, &stream));
                launch!(
                    gpu,
                    Kernel::HaloPack { single: l.single },
                    n,
                    &pack,
                    cfg,
                    [
                        &l.inp,
                        &lo,
                        &hi,
                        &mu,
                        &pack_parity,
                        &volume,
                        &lx,
                        &ly,
                        &lz,
                        &lt
                    ]
                );
            }
            Ok(())
        })();
        gpu.stream = stream.clone();
        packs?;
        if on_comm {
            if timing {
                events[1]
                    .record(&self.comm)
                    .map_err(err("recording a halo event"))?;
            }
        } else {
            self.packed
                .record(&stream)
                .map_err(err("recording the halo pack event"))?;
            if timing {
                events[1]
                    .record(&stream)
                    .map_err(err("recording a halo event"))?;
            }
        }
        // Interior on the main stream, queued before the host waits for its neighbours
        // in the exchange, so it runs while the faces travel.
        let interior = V3Launch {
            split_mask: self.split_mask,
            anti_lo: self.anti_lo,
            anti_hi: self.anti_hi,
            ..*l
        };
        launch_v3(gpu, stencil, &interior)?;
        if timing {
            events[2]
                .record(&stream)
                .map_err(err("recording a halo event"))?;
        }
        if !on_comm {
            self.comm
                .wait(&self.packed)
                .map_err(err("ordering the exchange after the pack"))?;
        }
        let (sends, recvs) = self.face_messages_of(&stream, |f| 6 * per_face(f) * complex_bytes);
        self.totals.bytes_exchanged += sends.iter().map(|m| m.bytes as u64).sum::<u64>();
        self.exchange.exchange_on(&self.comm, &sends, &recvs)?;
        gpu.mark_on(&self.comm, "exchange")?;
        self.exchanged
            .record(&self.comm)
            .map_err(err("recording the halo exchange event"))?;
        if timing {
            events[4]
                .record(&self.comm)
                .map_err(err("recording a halo event"))?;
        }
        stream
            .wait(&self.exchanged)
            .map_err(err("waiting for the halo exchange"))?;
        gpu.mark("exchange joined")?;
        if timing {
            events[3]
                .record(&stream)
                .map_err(err("recording a halo event"))?;
        }
        let out_parity: i32 = l.parity.map_or(-1, |p| p as i32);
        let g5 = l.g5 as i32;
        let dot = l.partials != 0;
        // The dot's block sums take blockDim.x double2 of shared memory.
        let shared = if dot { 16 * HALO_BLOCK } else { 0 };
        let kernel = Kernel::HaloExterior {
            single: l.single,
            reconstruct: l.reconstruct,
            dot,
        };
        for f in &self.faces {
            let mu = f.mu as i32;
            let n = 2 * per_face(f);
            let cfg = cfg_1d(n, HALO_BLOCK, shared);
            let ghost = f.ghost(l.single, &stream);
            let (lo, hi) = (raw(&f.recv_lo, &stream), raw(&f.recv_hi, &stream));
            launch_values!(
                gpu,
                kernel,
                n,
                &exterior,
                cfg,
                [
                    &lo,
                    &hi,
                    &l.out,
                    &l.links,
                    &ghost,
                    &l.c,
                    &g5,
                    &out_parity,
                    &mu,
                    &self.anti_lo,
                    &self.anti_hi,
                    &volume,
                    &lx,
                    &ly,
                    &lz,
                    &lt,
                    &l.y,
                    &l.s,
                    &l.partials,
                    &l.ticket
                ]
            );
        }
        self.totals.applications += 1;
        if timing {
            events[5]
                .record(&stream)
                .map_err(err("recording a halo event"))?;
            let mut e = events.into_iter();
            let mut next = || e.next().unwrap();
            let (start, packed, interior, waited, exchanged, end) =
                (next(), next(), next(), next(), next(), next());
            self.timed.push(Timed {
                pack_on_comm: on_comm,
                start,
                packed,
                interior,
                waited,
                exchanged,
                end,
            });
            if self.timed.len() >= TIMED_PENDING + TIMED_FOLD {
                for t in self.timed.drain(..TIMED_FOLD).collect::<Vec<_>>() {
                    self.fold(t)?;
                }
            }
        }
        Ok(())
    }

    /// The element-wise sum over ranks of the N doubles at device address `src`, queued
    /// on `stream` behind the kernel that wrote them: the exchange's all-gather into a
    /// device buffer, then one read of every rank's values (waits for the stream), added in
    /// rank order (`comms::sum_in_rank_order`, as `comms::global_sum` adds: the same bits). One wait
    /// for the host instead of three (the local read, then the host communicator's gather
    /// of the lengths and of the values; measured: the four-GPU reliable updates
    /// 6.7-7.0 -> 6.1 ms a solve).
    pub fn global_sum_device<const N: usize>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: u64,
    ) -> Result<[f64; N]> {
        const {
            assert!(
                N <= GATHER_DOUBLES,
                "the global sums' buffer holds GATHER_DOUBLES a rank"
            )
        };
        let need = N * self.exchange.size();
        let dst = raw(&self.gathered, stream);
        self.exchange
            .all_gather_on(stream, src, dst, N * std::mem::size_of::<f64>())?;
        let mut all = vec![0.0f64; need];
        stream
            .memcpy_dtoh(&self.gathered.slice(..need), &mut all)
            .map_err(err("reading the ranks' sums"))?;
        stream
            .synchronize()
            .map_err(err("reading the ranks' sums"))?;
        let mut sum = [0.0f64; N];
        sum.copy_from_slice(&crate::comms::sum_in_rank_order(&all, N));
        Ok(sum)
    }
}

/// The four face buffers of a split direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FaceBuffer {
    SendLo,
    SendHi,
    RecvLo,
    RecvHi,
}

/// The messages of direction mu for this rank, as (peer, tag, buffer): sends, then
/// receives. The lower face (1 - g projected) goes to the backward neighbour with tag
/// 2 mu, where it is the forward hops' ghost (recv_hi); the upper face to the forward
/// neighbour with tag 2 mu + 1 (its recv_lo). Two ranks in mu make both neighbours one
/// rank: the tags tell the two faces apart.
fn face_messages(p: &Partition, mu: usize) -> [(usize, u32, FaceBuffer); 4] {
    let (fwd, bwd) = (p.neighbour(mu, true), p.neighbour(mu, false));
    let lo_tag = 2 * mu as u32;
    [
        (bwd, lo_tag, FaceBuffer::SendLo),
        (fwd, lo_tag + 1, FaceBuffer::SendHi),
        (fwd, lo_tag, FaceBuffer::RecvHi),
        (bwd, lo_tag + 1, FaceBuffer::RecvLo),
    ]
}

/// The device address of an allocation (the backend's streams are ordered by events, and
/// event tracking is off).
fn raw<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    crate::backend::cuda::core::launch::dptr(s, stream)
}

/// Let each of GPUs 0..gpus reach the others' memory directly, for
/// `PeerCopies::world_across_gpus`: cuCtxEnablePeerAccess between their primary contexts,
/// and read-write access of each GPU to the others' default memory pools (the stream-
/// ordered allocations the fields and face buffers come from; without it a copy between
/// two GPUs' pool memory is refused, CUDA_ERROR_INVALID_VALUE). Returns the pairs that
/// cannot reach each other (not supported: the caller refuses them).
pub fn enable_peer_access(gpus: usize) -> Result<Vec<(usize, usize)>> {
    let ctxs = (0..gpus)
        .map(crate::backend::cuda::core::device::open_context)
        .collect::<Result<Vec<_>>>()?;
    let mut without = Vec::new();
    for (i, a) in ctxs.iter().enumerate() {
        for (j, b) in ctxs.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut can = 0;
            // SAFETY: a valid out-pointer and two device handles of this driver.
            unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.cu_device(), b.cu_device()) }
                .result()
                .map_err(err("asking whether two GPUs can reach each other"))?;
            if can == 0 {
                without.push((i, j));
                continue;
            }
            a.bind_to_thread().map_err(err("binding a GPU's context"))?;
            // SAFETY: b's context is live (held in ctxs); flags must be 0.
            match unsafe { sys::cuCtxEnablePeerAccess(b.cu_ctx(), 0) } {
                sys::CUresult::CUDA_SUCCESS
                | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => {
                    return Err(Error::Cuda(format!(
                        "enabling GPU {i}'s access to GPU {j}'s memory: {e:?}"
                    )))
                }
            }
            let pool = crate::backend::cuda::core::device::default_pool(b)?;
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: i as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: a pool handle of GPU j and one valid descriptor.
            unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) }
                .result()
                .map_err(err("giving a GPU access to another's memory pool"))?;
        }
    }
    Ok(without)
}

/// One of an exchange's posts in `PeerShared`: a sender's face (address, length, the
/// event after which it is ready) or a receiver's acknowledgement (the event after which
/// its copy is done).
struct Post {
    ptr: u64,
    bytes: usize,
    event: CudaEvent,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum PostKind {
    Face,
    Copied,
}

type PostKey = (PostKind, usize, usize, u32);

#[derive(Default)]
struct PeerShared {
    /// (kind, from, to, tag) -> posts in order.
    posts: Mutex<HashMap<PostKey, VecDeque<Post>>>,
    arrived: Condvar,
}

/// The one-GPU `DeviceExchange`: the ranks are threads of one process sharing one GPU
/// (the same CUDA context), and a face moves by a device-to-device copy that the
/// receiver enqueues on its stream after the sender's "packed" event. The receiver then
/// posts a "copied" event on which the sender's stream waits before it goes on, so a
/// sender never packs the next face over one not yet copied (the pack follows the
/// exterior, which follows the exchange on the sender's main stream). The host waits
/// only for the posts (never for the GPU): each rank posts its faces first, then takes
/// its neighbours', then their acknowledgements, so the ranks cannot deadlock as long as
/// they exchange in the same order (as every SPMD solve does).
///
/// The same posts serve ranks on several GPUs of one process (`across_gpus`, rank r on
/// GPU r): a face then crosses on the copy engines (cuMemcpyAsync between the GPUs'
/// unified addresses, direct over NVLink once `enable_peer_access` has run), ordered by
/// events of the other GPU's stream, and no kernel of the exchange takes an SM from the
/// interior kernel. Not capturable (host-side posts), so the fused CR runs without graphs.
pub struct PeerCopies {
    rank: usize,
    size: usize,
    shared: Arc<PeerShared>,
    patience: Duration,
    /// Rank r on GPU r (else every rank on one GPU).
    across_gpus: bool,
}

impl PeerCopies {
    /// The `size` ranks of one world on one GPU (move each to its thread).
    pub fn world(size: usize) -> Vec<PeerCopies> {
        Self::make(size, false)
    }

    /// The `size` ranks of one world, rank r on GPU r of this process (call
    /// `enable_peer_access` for those GPUs first).
    pub fn world_across_gpus(size: usize) -> Vec<PeerCopies> {
        Self::make(size, true)
    }

    fn make(size: usize, across_gpus: bool) -> Vec<PeerCopies> {
        let shared = Arc::new(PeerShared::default());
        (0..size)
            .map(|rank| PeerCopies {
                rank,
                size,
                shared: shared.clone(),
                patience: Duration::from_secs(120),
                across_gpus,
            })
            .collect()
    }

    fn post(&self, key: PostKey, p: Post) {
        let mut posts = self.shared.posts.lock().unwrap();
        posts.entry(key).or_default().push_back(p);
        self.shared.arrived.notify_all();
    }

    fn take(&self, key: PostKey) -> Result<Post> {
        let deadline = Instant::now() + self.patience;
        let mut posts = self.shared.posts.lock().unwrap();
        loop {
            if let Some(p) = posts.get_mut(&key).and_then(|q| q.pop_front()) {
                return Ok(p);
            }
            let now = Instant::now();
            if now >= deadline {
                let (kind, from, _, tag) = key;
                return Err(Error::internal(format!(
                    "rank {} waited {:.0} s for {} tag {tag} from rank {from} (PeerCopies: do all ranks apply the operator in the same order?)",
                    self.rank,
                    self.patience.as_secs_f64(),
                    if kind == PostKind::Face { "the face" } else { "the copy acknowledgement" }
                )));
            }
            posts = self
                .shared
                .arrived
                .wait_timeout(posts, deadline - now)
                .unwrap()
                .0;
        }
    }
}

impl DeviceExchange for PeerCopies {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn describe(&self) -> String {
        if self.across_gpus && self.size > 1 {
            format!(
                "device copies between {} GPUs (copy engines, ranks as threads)",
                self.size
            )
        } else {
            format!("device copies on one GPU ({} ranks as threads)", self.size)
        }
    }

    fn exchange_on(
        &mut self,
        stream: &Arc<CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()> {
        let me = self.rank;
        for s in sends {
            let event = stream
                .record_event(None)
                .map_err(err("recording a face's ready event"))?;
            self.post(
                (PostKind::Face, me, s.peer, s.tag),
                Post {
                    ptr: s.ptr,
                    bytes: s.bytes,
                    event,
                },
            );
        }
        for r in recvs {
            let face = self.take((PostKind::Face, r.peer, me, r.tag))?;
            if face.bytes != r.bytes {
                return Err(Error::internal(format!(
                    "rank {me}: face tag {} from rank {} has {} bytes, expected {}",
                    r.tag, r.peer, face.bytes, r.bytes
                )));
            }
            stream
                .wait(&face.event)
                .map_err(err("waiting for a neighbour's face"))?;
            // SAFETY: both ranges are live device allocations of these bytes (the sender's
            // face buffer, this rank's receive buffer), on one GPU or on two of this
            // process (unified addresses: cuMemcpyAsync finds their devices); the sender
            // does not touch its buffer until it has waited on the event below.
            unsafe { sys::cuMemcpyAsync(r.ptr, face.ptr, r.bytes, stream.cu_stream()).result() }
                .map_err(err("copying a face between ranks"))?;
            let event = stream
                .record_event(None)
                .map_err(err("recording a face's copied event"))?;
            self.post(
                (PostKind::Copied, me, r.peer, r.tag),
                Post {
                    ptr: 0,
                    bytes: 0,
                    event,
                },
            );
        }
        for s in sends {
            let ack = self.take((PostKind::Copied, s.peer, me, s.tag))?;
            stream
                .wait(&ack.event)
                .map_err(err("waiting for a neighbour's copy"))?;
        }
        // Dropping another GPU's event (a post taken above) makes its context current on
        // this thread; the caller's launches that follow expect this rank's own.
        stream
            .context()
            .bind_to_thread()
            .map_err(err("binding the rank's context after an exchange"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};

    #[test]
    fn edge_masks_keep_the_global_edges_only() {
        // t antiperiodic, split in 2: rank 0 holds the lower global edge, rank 1 the upper.
        let lo = Partition::new([4, 4, 4, 8], [1, 1, 1, 2], 0).unwrap();
        let hi = Partition::new([4, 4, 4, 8], [1, 1, 1, 2], 1).unwrap();
        assert_eq!(edge_masks(&lo, &DEFAULT_BOUNDARY), (8, 0));
        assert_eq!(edge_masks(&hi, &DEFAULT_BOUNDARY), (0, 8));
        // Not split: both edges are global.
        let one = Partition::single([4, 4, 4, 8]);
        assert_eq!(edge_masks(&one, &DEFAULT_BOUNDARY), (8, 8));
    }

    #[test]
    fn face_indices_cover_each_parity_once() {
        let dims = [4, 6, 2, 4];
        for mu in 0..NDIM {
            let f: usize = (0..NDIM).filter(|&n| n != mu).map(|n| dims[n]).product();
            let mut seen = vec![0u32; f];
            let l = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
            for s in 0..l.volume() {
                let c = l.coords(s);
                if c[mu] == 0 {
                    let (fcb, q) = face_index(&dims, mu, &c);
                    seen[q * f / 2 + fcb] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "mu {mu}: {seen:?}");
        }
    }

    /// The site the kernels' v3_face_site (kernels/v3_core.cuh) gives for face index fcb
    /// and parity p on the face c[mu] = cmu, written again here from that code.
    fn kernel_face_site(
        dims: &[usize; 4],
        mu: usize,
        cmu: usize,
        p: usize,
        fcb: usize,
    ) -> [usize; 4] {
        let mut c = [0; 4];
        let mut f = 2 * fcb;
        let mut first = None;
        for nu in 0..4 {
            if nu == mu {
                c[nu] = cmu;
                continue;
            }
            first.get_or_insert(nu);
            c[nu] = f % dims[nu];
            f /= dims[nu];
        }
        c[first.unwrap()] += (c.iter().sum::<usize>() + p) % 2;
        c
    }

    #[test]
    fn ghost_links_sit_where_the_exterior_kernel_reads_them() {
        // halo_exterior reads element e of the ghost link of its output site (parity p,
        // face index fcb, c[mu] = 0) at (1 - p)*E*Fh + e*Fh + fcb (E = 9, or 6 with
        // two-row compression): the backward neighbour's link U_mu at the site
        // v3_face_site(mu, L-1, 1 - p, fcb).
        let dims = [4, 6, 2, 4];
        let l = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::random(&l, 9);
        for (mu, elems) in (0..NDIM).flat_map(|mu| [(mu, 9), (mu, 6)]) {
            let buf = upper_face_links(&g, mu, elems);
            let fh = l.volume() / dims[mu] / 2;
            assert_eq!(buf.len(), 2 * 2 * elems * fh);
            // The books count the ghost links in double and single beside 4 face buffers
            // of 12 doubles per face site.
            let face_sites = 2 * fh;
            assert_eq!(
                face_bytes(face_sites, elems),
                (4 * 12 * face_sites * 8 + buf.len() * 8 + buf.len() * 4) as u64
            );
            for q in 0..2 {
                for fcb in 0..fh {
                    let c = kernel_face_site(&dims, mu, dims[mu] - 1, q, fcb);
                    assert_eq!(c.iter().sum::<usize>() % 2, q);
                    let site = c[0] + dims[0] * (c[1] + dims[1] * (c[2] + dims[2] * c[3]));
                    let u = g.link(site, mu).0.as_flattened();
                    for (e, z) in u[..elems].iter().enumerate() {
                        let k = q * elems * fh + e * fh + fcb;
                        assert_eq!(
                            (buf[2 * k], buf[2 * k + 1]),
                            (z.re, z.im),
                            "mu {mu} q {q} fcb {fcb} e {e}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_receive_pairs_with_the_right_neighbours_face() {
        // recv_hi must hold the forward neighbour's lower face, recv_lo the backward
        // neighbour's upper face; each (sender, receiver, tag) once per exchange.
        for grid in [[1, 1, 1, 2], [2, 1, 1, 3], [2, 2, 2, 2], [1, 3, 1, 1]] {
            let global = [4, 6, 4, 6].map(|l: usize| l * 2);
            let parts: Vec<Partition> = (0..grid.iter().product())
                .map(|r| Partition::new(global, grid, r).unwrap())
                .collect();
            for me in &parts {
                for mu in (0..NDIM).filter(|&mu| me.is_split(mu)) {
                    let mut keys = std::collections::HashSet::new();
                    for (from, tag, buf) in &face_messages(me, mu)[2..] {
                        let sender = &parts[*from];
                        let sent: Vec<_> = (0..NDIM)
                            .filter(|&nu| sender.is_split(nu))
                            .flat_map(|nu| face_messages(sender, nu)[..2].to_vec())
                            .filter(|(to, t, _)| *to == me.rank() && t == tag)
                            .collect();
                        assert_eq!(sent.len(), 1, "grid {grid:?} rank {} mu {mu}", me.rank());
                        let want = match buf {
                            FaceBuffer::RecvHi => {
                                assert_eq!(*from, me.neighbour(mu, true));
                                FaceBuffer::SendLo
                            }
                            _ => {
                                assert_eq!(*from, me.neighbour(mu, false));
                                FaceBuffer::SendHi
                            }
                        };
                        assert_eq!(sent[0].2, want);
                        assert!(keys.insert((*from, *tag)));
                    }
                }
            }
        }
    }
}
