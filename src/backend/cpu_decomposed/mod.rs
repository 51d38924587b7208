//! The CPU backend on one rank of a decomposed lattice: the same domain
//! decomposition the GPUs run over NCCL, written plainly so the tests can check it against
//! the undecomposed `CpuBackend` with ranks as threads (`comms::threads`).
//!
//! Provides `DecomposedCpu<C: Comms>` (Space, WilsonKernels, FusedCr as a host loop, and a
//! no-op Prepare) and the typed scatter/gather of fields between the global lattice and a
//! rank's sub-lattice (`scatter_gauge`, `scatter_spinor`, `gather_spinor`; they live here
//! because geometry sits below field in the module graph).
//!
//! The hopping term is applied the QUDA way. For every split direction mu each rank packs
//! the spin-projected half spinors of its two faces (2 spins x 3 colours: 12 reals per
//! face site): (1 - g_mu) psi of its lower face, which its backward neighbour's forward
//! hops read, and (1 + g_mu) psi of its upper face, which its forward neighbour's backward
//! hops read. One `Comms::exchange` moves them (tag 2 mu for faces sent backward, 2 mu + 1
//! for faces sent forward: with two ranks in a direction both neighbours are one rank).
//! Then the interior (every hop that stays on the rank, including the unsplit directions,
//! whose local wrap is the global one) and the exterior (the hops that read a ghost: a
//! forward one multiplies by the own link U_mu(x) and rebuilds the lower spin half, a
//! backward one uses the ghost link U_mu(x - mu)^dagger, exchanged once at construction).
//! Boundary phases are taken where a hop crosses the GLOBAL edge (global coordinates).
//!
//! With the clover term or a twist (`with_site_terms`) a rank holds its sites' part of the
//! site term A (its construction reads links of neighbouring ranks: the caller builds it)
//! and applies D = A - kappa H, the Schur form A_ee - kappa^2 H_eo A_oo^-1 H_oe,
//! A_oo^-1 and A^dag as the single-device `CpuBackend` does; A is site-local, so it adds
//! no exchange.
//!
//! Reductions are a deterministic local sum, then `comms::global_sum` (rank order), so
//! every rank sees the same bits.
//!
//! Files: `rank` (the backend's state and construction, its face lists and halo
//! statistics), `halo` (the ghost links, the face exchange and the hopping term), `space`
//! (the fields and the BLAS-1 and reductions), `kernels` (the Wilson forms).

mod halo;
mod kernels;
mod rank;
mod space;

pub use crate::field::scatter::{gather_spinor, scatter_gauge, scatter_spinor};
pub use rank::{DecomposedCpu, HaloStats, HALF_SPINOR_REALS};
pub use space::DecomposedField;
