//! One decomposed stencil launch (`Halo::launch`) as its steps: pack the faces, the
//! interior, post the exchange on the communication stream, join it, the exteriors.

use super::faces::{raw, Faces};
use super::rank::{Halo, HaloKernels};
use super::timings::{Timed, TIMED_FOLD, TIMED_PENDING};
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::kernels::Kernel;
use crate::backend::cuda::core::kernels::HALO_BLOCK;
use crate::backend::cuda::core::launch::cfg_1d;
use crate::backend::cuda::core::stencil::v3::{launch_v3, V3Kernels, V3Launch};
use crate::backend::cuda::core::timing::{launch, launch_values, GpuStream};
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaStream};
use std::sync::Arc;

/// Face sites per face in launch `l`: both parities (full) or one.
fn per_face(f: &Faces, l: &V3Launch) -> usize {
    let half_fh = |f: &Faces| f.face_sites / 2;
    if l.parity.is_none() {
        f.face_sites
    } else {
        half_fh(f)
    }
}

/// Record timing event `i` of an application on `stream`; nothing when the application
/// is not timed (`events` empty).
fn record_timed(events: &[CudaEvent], i: usize, stream: &CudaStream) -> Result<()> {
    if let Some(e) = events.get(i) {
        e.record(stream).map_err(err("recording a halo event"))?;
    }
    Ok(())
}

impl Halo {
    /// One decomposed stencil launch: `l` as `launch_v3` takes it (the undecomposed
    /// arguments; its boundary masks are replaced by this rank's), here as pack, exchange,
    /// interior and exterior. With `l.s`, the interior and the exterior do nothing unless
    /// the fused CR iteration is active; with `l.partials` also, the interior's epilogue
    /// and the exterior kernels together leave this rank's (y|out) in the scalar block
    /// (CR_LOCAL_RE/IM, kernels/halo.cu) for `cr_global`.
    pub fn launch(&mut self, gpu: &mut GpuStream, stencil: &V3Kernels, l: &V3Launch) -> Result<()> {
        let HaloKernels { pack, exterior } = self.kernels_for(gpu, l)?;
        let stream = gpu.stream.clone();
        // No timing events inside a CUDA graph capture (they would not time the replays).
        let timing = self.timing && !gpu.capturing();
        let events = self.start_timing(gpu, &stream, timing)?;
        let on_comm = gpu.tuning.pack_on == crate::backend::tuning::PackOn::Comm;
        self.pack(gpu, &stream, &pack, l, on_comm, &events)?;
        self.interior(gpu, &stream, stencil, l, &events)?;
        self.post_exchange(gpu, &stream, l, on_comm, &events)?;
        self.join_exchange(gpu, &stream, &events)?;
        self.exteriors(gpu, &stream, &exterior, l)?;
        self.totals.applications += 1;
        self.finish_timing(&stream, events, on_comm)
    }

    /// Refuse what the halo kernels cannot do; the halo kernels of the launch's precision
    /// (single built on first use).
    fn kernels_for(&mut self, gpu: &GpuStream, l: &V3Launch) -> Result<HaloKernels> {
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
        Ok(if l.single {
            self.kernels_s.clone().unwrap()
        } else {
            self.kernels_d.clone()
        })
    }

    /// A timed application's six events (`Timed`'s, spare ones reused first), the first
    /// (start) recorded on the main stream now; none when `timing` is off.
    fn start_timing(
        &mut self,
        gpu: &GpuStream,
        stream: &CudaStream,
        timing: bool,
    ) -> Result<Vec<CudaEvent>> {
        let timed_event = |ctx: &Arc<CudaContext>| -> Result<CudaEvent> {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(err("creating a halo timing event"))
        };
        let mut events = Vec::new();
        if timing {
            for _ in 0..6 {
                events.push(match self.spare.pop() {
                    Some(e) => e,
                    None => timed_event(&gpu.ctx)?,
                });
            }
            events[0]
                .record(stream)
                .map_err(err("recording a halo event"))?;
        }
        Ok(events)
    }

    /// Pack: the input's parity is the other one of the output's. On the communication
    /// stream (after `packed`, which then marks the input ready) or (`pack_on = main`) on
    /// the main stream (before `packed`, which then marks the faces packed).
    fn pack(
        &mut self,
        gpu: &mut GpuStream,
        stream: &Arc<CudaStream>,
        pack: &CudaFunction,
        l: &V3Launch,
        on_comm: bool,
        events: &[CudaEvent],
    ) -> Result<()> {
        let pack_parity: i32 = l.parity.map_or(-1, |p| 1 - p as i32);
        if on_comm {
            self.packed
                .record(stream)
                .map_err(err("recording the halo input event"))?;
            self.comm
                .wait(&self.packed)
                .map_err(err("ordering the pack after the input"))?;
            // The pack's launches go to the communication stream (and are booked there);
            // the main stream is put back below, also when a launch fails.
            gpu.stream = self.comm.clone();
        }
        let packs = self.pack_faces(gpu, stream, pack, l, pack_parity);
        gpu.stream = stream.clone();
        packs?;
        if on_comm {
            record_timed(events, 1, &self.comm)?;
        } else {
            self.packed
                .record(stream)
                .map_err(err("recording the halo pack event"))?;
            record_timed(events, 1, stream)?;
        }
        Ok(())
    }

    /// The pack kernels, one a split direction, on `gpu`'s stream as it is set.
    fn pack_faces(
        &self,
        gpu: &mut GpuStream,
        stream: &CudaStream,
        pack: &CudaFunction,
        l: &V3Launch,
        pack_parity: i32,
    ) -> Result<()> {
        let [lx, ly, lz, lt] = l.dims;
        let volume = l.volume as i32;
        for f in &self.faces {
            let mu = f.mu as i32;
            let n = 2 * per_face(f, l);
            let cfg = cfg_1d(n, HALO_BLOCK, 0);
            let (lo, hi) = (raw(&f.send_lo, stream), raw(&f.send_hi, stream));
            launch!(
                gpu,
                Kernel::HaloPack { single: l.single },
                n,
                pack,
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
    }

    /// Interior on the main stream, queued before the host waits for its neighbours
    /// in the exchange, so it runs while the faces travel.
    fn interior(
        &self,
        gpu: &mut GpuStream,
        stream: &CudaStream,
        stencil: &V3Kernels,
        l: &V3Launch,
        events: &[CudaEvent],
    ) -> Result<()> {
        let interior = V3Launch {
            split_mask: self.split_mask,
            anti_lo: self.anti_lo,
            anti_hi: self.anti_hi,
            ..*l
        };
        launch_v3(gpu, stencil, &interior)?;
        record_timed(events, 2, stream)
    }

    /// The exchange of the packed faces on the communication stream (after the pack),
    /// then `exchanged` recorded there.
    fn post_exchange(
        &mut self,
        gpu: &mut GpuStream,
        stream: &CudaStream,
        l: &V3Launch,
        on_comm: bool,
        events: &[CudaEvent],
    ) -> Result<()> {
        if !on_comm {
            self.comm
                .wait(&self.packed)
                .map_err(err("ordering the exchange after the pack"))?;
        }
        let complex_bytes = if l.single { 8 } else { 16 };
        let (sends, recvs) = self.face_messages_of(stream, |f| 6 * per_face(f, l) * complex_bytes);
        self.totals.bytes_exchanged += sends.iter().map(|m| m.bytes as u64).sum::<u64>();
        self.exchange.exchange_on(&self.comm, &sends, &recvs)?;
        gpu.mark_on(&self.comm, "exchange")?;
        self.exchanged
            .record(&self.comm)
            .map_err(err("recording the halo exchange event"))?;
        record_timed(events, 4, &self.comm)
    }

    /// The main stream waits for the exchange.
    fn join_exchange(
        &self,
        gpu: &mut GpuStream,
        stream: &CudaStream,
        events: &[CudaEvent],
    ) -> Result<()> {
        stream
            .wait(&self.exchanged)
            .map_err(err("waiting for the halo exchange"))?;
        gpu.mark("exchange joined")?;
        record_timed(events, 3, stream)
    }

    /// The exterior kernels, one a split direction, on the main stream: the hops over the
    /// received faces and the ghost links.
    fn exteriors(
        &self,
        gpu: &mut GpuStream,
        stream: &CudaStream,
        exterior: &CudaFunction,
        l: &V3Launch,
    ) -> Result<()> {
        let [lx, ly, lz, lt] = l.dims;
        let volume = l.volume as i32;
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
            let n = 2 * per_face(f, l);
            let cfg = cfg_1d(n, HALO_BLOCK, shared);
            let ghost = f.ghost(l.single, stream);
            let (lo, hi) = (raw(&f.recv_lo, stream), raw(&f.recv_hi, stream));
            launch_values!(
                gpu,
                kernel,
                n,
                exterior,
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
        Ok(())
    }

    /// A timed application's end recorded on the main stream and its events kept; once
    /// TIMED_PENDING + TIMED_FOLD are pending, the oldest TIMED_FOLD are read into the
    /// totals. Nothing when the application is not timed (`events` empty).
    fn finish_timing(
        &mut self,
        stream: &CudaStream,
        events: Vec<CudaEvent>,
        on_comm: bool,
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        events[5]
            .record(stream)
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
        Ok(())
    }
}
