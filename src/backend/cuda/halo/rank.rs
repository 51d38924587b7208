//! `Halo`, a rank's side of a decomposed 3.0 operator: its state, its halo kernels per
//! precision, and the books of its timings. Built in `construct`, run in `launch`.

use super::faces::Faces;
use super::peer_sums::PeerSums;
use super::timings::{HaloTimings, Timed};
use crate::backend::cuda::core::device::{err, function, load_module};
use crate::backend::cuda::core::stencil::programs::halo_program;
use crate::backend::cuda::core::version::Reconstruct;
use crate::backend::ledger::Booking;
use crate::comms::{Comms, DeviceExchange};
use crate::error::Result;
use crate::geometry::partition::Partition;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream};
use std::sync::Arc;

/// Doubles per rank of the global sums' buffer (`Halo::global_sum_device`): a complex
/// reduction's two.
pub(crate) const GATHER_DOUBLES: usize = 2;

/// Bytes of the global sums' buffer of `ranks` ranks (booked with the faces).
pub(crate) fn gathered_bytes(ranks: usize) -> u64 {
    (GATHER_DOUBLES * ranks * std::mem::size_of::<f64>()) as u64
}

/// A rank's side of a decomposed 3.0 operator (see the `halo` module's documentation).
pub(crate) struct Halo {
    pub partition: Partition,
    pub exchange: Box<dyn DeviceExchange>,
    pub comms: Box<dyn Comms>,
    /// Bit mu: direction mu is split.
    pub(super) split_mask: i32,
    /// Bit mu: this rank's lower / upper edge in mu is a global antiperiodic edge.
    pub(super) anti_lo: i32,
    pub(super) anti_hi: i32,
    pub(super) faces: Vec<Faces>,
    pub(super) comm: Arc<CudaStream>,
    pub(super) packed: CudaEvent,
    pub(super) exchanged: CudaEvent,
    /// The halo kernels per precision: double loaded at construction, single on first use.
    pub(super) kernels_d: HaloKernels,
    pub(super) kernels_s: Option<HaloKernels>,
    pub(super) reconstruct: Reconstruct,
    pub(super) timing: bool,
    /// Timed applications not yet read (at most TIMED_PENDING + TIMED_FOLD), oldest first.
    pub(super) timed: Vec<Timed>,
    /// Events of read applications, recorded again by later ones.
    pub(super) spare: Vec<CudaEvent>,
    pub(super) totals: HaloTimings,
    /// Every rank's values of a global sum (`global_sum_device`): `GATHER_DOUBLES` a
    /// rank, made at construction and on the books (`Purpose::Halo`).
    pub(super) gathered: CudaSlice<f64>,
    pub(super) _gathered_booking: Booking,
    /// The fused CR's sums over peer memory (`cr_peer_sum`), where the exchange has it.
    pub peer_sums: Option<PeerSums>,
}

/// A precision's halo kernels.
#[derive(Clone)]
pub(super) struct HaloKernels {
    pub(super) pack: CudaFunction,
    pub(super) exterior: CudaFunction,
}

impl Halo {
    pub(super) fn load(
        ctx: &Arc<CudaContext>,
        reconstruct: Reconstruct,
        single: bool,
    ) -> Result<HaloKernels> {
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
    pub(super) fn fold(&mut self, t: Timed) -> Result<()> {
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
}
