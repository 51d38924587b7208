//! Building a rank's `Halo`: the ghost links exchanged and uploaded with the face
//! buffers, the communication stream, events and kernels, then the warm-up exchange.

use super::faces::{face_bytes, Faces};
use super::ghost::{edge_masks, exchange_ghost_links};
use super::peer_sums::PeerSums;
use super::rank::{gathered_bytes, Halo, GATHER_DOUBLES};
use super::timings::HaloTimings;
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::timing::GpuStream;
use crate::backend::cuda::core::version::Reconstruct;
use crate::backend::ledger::{Ledger, Purpose};
use crate::comms::{Comms, DeviceExchange};
use crate::error::Result;
use crate::field::GaugeField;
use crate::geometry::lattice::NDIM;
use crate::geometry::partition::Partition;
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

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
        let ghosts = exchange_ghost_links(
            gauge,
            &partition,
            &split,
            comms.as_mut(),
            reconstruct.elems(),
        )?;
        let stream = &gpu.stream;
        let faces = upload_faces(stream, &partition, &split, &ghosts, reconstruct, ledger)?;
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
}

/// Every split direction's face buffers (zeroed) and ghost links (double and single) on
/// the device, on the books; waits for the uploads.
fn upload_faces(
    stream: &Arc<CudaStream>,
    partition: &Partition,
    split: &[usize],
    ghosts: &[Vec<f64>],
    reconstruct: Reconstruct,
    ledger: &Ledger,
) -> Result<Vec<Faces>> {
    let mut faces = Vec::new();
    for (&mu, ghost) in split.iter().zip(ghosts) {
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
    Ok(faces)
}
