//! Where a split application's time went (`HaloTimings`, read from CUDA events) and the
//! events of one timed application (`Timed`), folded into the totals as they pile up.

use cudarc::driver::CudaEvent;

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

/// Events of one timed application, read at `timings`.
pub(super) struct Timed {
    /// The pack ran on the communication stream (`pack_on_comm`): the interior's time
    /// runs from `start`, not from `packed`.
    pub(super) pack_on_comm: bool,
    pub(super) start: CudaEvent,
    pub(super) packed: CudaEvent,
    pub(super) interior: CudaEvent,
    pub(super) waited: CudaEvent,
    pub(super) exchanged: CudaEvent,
    pub(super) end: CudaEvent,
}

/// A long split solve times every application: once this many are pending, the oldest
/// TIMED_FOLD (long finished) are read into the totals and their events reused, so the
/// events held stay bounded (they were kept until the report before).
pub(super) const TIMED_PENDING: usize = 32;
pub(super) const TIMED_FOLD: usize = 16;
