//! The fused CR's device scalars: the block's layout (kernels/cr_device.cuh), the state a
//! solve keeps on the device (scalars, history, partial sums, tickets), and its size. The
//! stencils' dot epilogue writes into it; the fused engine drives it.

use crate::backend::ledger::Booking;
use crate::backend::CrScalars;
use crate::field::C64;
use cudarc::driver::CudaSlice;

/// Indices into the device scalar block (the same numbers as kernels/cr_device.cuh).
pub const CR_RAR_RE: usize = 0;
pub const CR_RAR_IM: usize = 1;
pub const CR_APAP: usize = 2;
pub const CR_NR: usize = 3;
pub const CR_EPS: usize = 4;
pub const CR_ALPHA_RE: usize = 5;
pub const CR_ALPHA_IM: usize = 6;
pub const CR_BETA_RE: usize = 7;
pub const CR_BETA_IM: usize = 8;
pub const CR_ITER: usize = 9;
pub const CR_MAX_ITER: usize = 10;
pub const CR_ACTIVE: usize = 11;
/// The host's part of the block (`CrScalars`): indices below this.
pub const CR_HOST_SCALARS: usize = 12;
/// Set at creation: 1 on a decomposed lattice (the reducing kernels leave their sum in
/// CR_LOCAL_RE/IM, xr its nr in CR_LOCAL_NR, for `cr_global`).
pub const CR_SPLIT: usize = 12;
pub const CR_LOCAL_RE: usize = 13;
/// The imaginary part and xr's nr follow the real one (the all-gather moves the three,
/// `CR_GATHERED`); kept in step with the header by a test.
#[allow(dead_code)]
pub const CR_LOCAL_IM: usize = 14;
pub const CR_LOCAL_NR: usize = 15;
/// CR_LOCAL_NR when no xr has left its nr for the next apply's `cr_global` (kept in step
/// with the header by a test).
pub const CR_NO_NR: f64 = -1.0;
/// Doubles each rank contributes to a decomposed reduction's all-gather: CR_LOCAL_RE
/// through CR_LOCAL_NR (the header derives it the same way).
pub const CR_GATHERED: usize = CR_LOCAL_NR - CR_LOCAL_RE + 1;
/// Ticket counters (kernels/cr_device.cuh CR_TICKET_*; the kernels pick their own, the
/// host only allocates CR_TICKETS zeroed counters; kept in step with the header by a test).
#[allow(dead_code)]
pub const CR_TICKET_XR: usize = 0;
#[allow(dead_code)]
pub const CR_TICKET_APPLY: usize = 1;
#[allow(dead_code)]
pub const CR_TICKET_P: usize = 2;
pub const CR_TICKETS: usize = 4;

pub use crate::backend::cuda::core::kernels::{cr_grid, CR_BLOCK, CR_MAX_GRID, CR_SCALARS};

/// Doubles of the partial-sum buffer for a lattice of `volume` sites: a double2 per block
/// of any launch of at least 32 threads per block over the full lattice (one thread per
/// site: the stencil's dot epilogue), and of cr_xr and cr_p.
pub fn partials_len(volume: usize) -> usize {
    2 * (volume / 32 + 1).max(CR_MAX_GRID)
}

/// `CrScalars` as the host part of the device block (iter and max_iter as exact doubles,
/// active 1 or 0).
pub fn scalars_to_block(s: &CrScalars) -> [f64; CR_HOST_SCALARS] {
    let mut b = [0.0; CR_HOST_SCALARS];
    b[CR_RAR_RE] = s.rar.re;
    b[CR_RAR_IM] = s.rar.im;
    b[CR_APAP] = s.apap;
    b[CR_NR] = s.nr;
    b[CR_EPS] = s.eps;
    b[CR_ALPHA_RE] = s.alpha.re;
    b[CR_ALPHA_IM] = s.alpha.im;
    b[CR_BETA_RE] = s.beta.re;
    b[CR_BETA_IM] = s.beta.im;
    b[CR_ITER] = s.iter as f64;
    b[CR_MAX_ITER] = s.max_iter as f64;
    b[CR_ACTIVE] = if s.active { 1.0 } else { 0.0 };
    b
}

/// The inverse of `scalars_to_block` (of the block's first CR_HOST_SCALARS entries).
pub fn block_to_scalars(b: &[f64]) -> CrScalars {
    CrScalars {
        rar: C64::new(b[CR_RAR_RE], b[CR_RAR_IM]),
        apap: b[CR_APAP],
        nr: b[CR_NR],
        eps: b[CR_EPS],
        alpha: C64::new(b[CR_ALPHA_RE], b[CR_ALPHA_IM]),
        beta: C64::new(b[CR_BETA_RE], b[CR_BETA_IM]),
        iter: b[CR_ITER] as u64,
        max_iter: b[CR_MAX_ITER] as u64,
        active: b[CR_ACTIVE] != 0.0,
    }
}

/// The device side of one fused CR solve.
pub struct DeviceCrState {
    /// CR_SCALARS doubles.
    pub(crate) scalars: CudaSlice<f64>,
    /// nr of iterations 0..=max_iter.
    pub(crate) history: CudaSlice<f64>,
    /// Per-block partial sums (double2 as pairs), `partials_len(volume)` doubles: room for
    /// any launch of at least 32 threads per block over the full lattice, and for
    /// cr_xr and cr_p.
    pub(crate) partials: CudaSlice<f64>,
    /// CR_TICKETS counters, zero between launches.
    pub(crate) tickets: CudaSlice<u32>,
    /// Decomposed lattice: every rank's (CR_LOCAL_RE, CR_LOCAL_IM, CR_LOCAL_NR), gathered
    /// in rank order (CR_GATHERED doubles per rank); None on one GPU alone.
    pub(crate) gathered: Option<CudaSlice<f64>>,
    /// All of it on the backend's books (`Purpose::CrState`).
    pub(crate) _booking: Booking,
}

/// Bytes of a fused CR state on a lattice of `volume` sites with room for `max_iter`
/// iterations (`ranks`: Some(n) on a decomposed lattice): the scalar block, the history,
/// the partial sums, the tickets and the gathered sums.
pub fn cr_state_bytes(volume: usize, max_iter: u64, ranks: Option<usize>) -> u64 {
    let doubles = CR_SCALARS
        + max_iter as usize
        + 1
        + partials_len(volume)
        + ranks.map_or(0, |n| CR_GATHERED * n.max(1));
    (doubles * 8 + CR_TICKETS * 4) as u64
}

impl DeviceCrState {
    /// Ranks whose sums this state adds (1 when undecomposed).
    pub fn ranks(&self) -> usize {
        self.gathered.as_ref().map_or(1, |g| g.len() / CR_GATHERED)
    }
}

/// The reductions of the fused iteration that end over the ranks (`cr_global`'s
/// `which`): apply's (r|Ar) with xr's nr (nr is first read by p, so xr needs no
/// all-gather of its own), and p's (Ap|Ap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrReduction {
    Apply = 1,
    P = 2,
}
