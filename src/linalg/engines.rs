//! The engines a backend may add beyond the seam (`Space`, `WilsonKernels`): the fused CR
//! and BiCGStab iterations with their scalars where the backend computes them, the set-up
//! a backend can do ahead of a solve, and what a backend can hold (`Capabilities`). The
//! solvers are written against these traits; the backends implement them.

use super::{Layout, Operator, Precision, Space, WilsonKernels};
use crate::field::C64;
use crate::Result;

/// The scalars of the fused CR iteration (solver::cr), as the host sees them. On a GPU
/// they live in device memory and are updated by the kernels themselves; the host reads
/// them (one transfer) only at convergence checks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CrScalars {
    /// (r|Ar) of the current residual.
    pub rar: C64,
    /// (Ap|Ap).
    pub apap: f64,
    /// (r|r), the iterated residual norm squared.
    pub nr: f64,
    /// Stop when nr <= eps (tol^2 (b|b)).
    pub eps: f64,
    /// alpha = conj(rar) / apap, for the next x, r update.
    pub alpha: C64,
    /// beta = rar_new / rar_old, for the next p, Ap update.
    pub beta: C64,
    /// Iterations done (the index of nr in the history).
    pub iter: u64,
    /// No iteration starts once iter reaches this.
    pub max_iter: u64,
    /// Whether the next iteration runs: nr > eps, iter < max_iter and nr finite. Every
    /// kernel of an iteration sees the same value (it is set at the end of the iteration),
    /// so a batch of k iterations queued past convergence changes nothing.
    pub active: bool,
}

impl CrScalars {
    /// active as the kernels compute it.
    pub fn still_active(&self) -> bool {
        self.nr.is_finite() && self.nr > self.eps && self.iter < self.max_iter
    }
}

/// The scalars of the fused BiCGStab iteration (solver::bicgstab `Fused`), as the host sees
/// them; on a GPU they live in device memory (kernels/bicgstab_fused.cu).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BiScalars {
    /// (r0|r) of the current residual and shadow residual.
    pub rho: C64,
    pub alpha: C64,
    pub omega: C64,
    /// For the next p update.
    pub beta: C64,
    /// (r|r), the iterated residual norm squared.
    pub nr: f64,
    /// Stop when nr <= eps.
    pub eps: f64,
    /// Iterations done (the index of nr in the history).
    pub iter: u64,
    pub max_iter: u64,
    /// Whether the next iteration runs (as `CrScalars::active`; also false once broken).
    pub active: bool,
    /// The iteration met a zero (r0|v), a zero omega or a zero (r0|r): the host restarts
    /// the shadow residual.
    pub broken: bool,
}

impl BiScalars {
    /// Whether an iteration should run from these scalars (not counting a breakdown).
    pub fn still_active(&self) -> bool {
        self.nr.is_finite() && self.nr > self.eps && self.iter < self.max_iter
    }
}

/// Whether the recurrence would divide by (u|w) = 0 (or a non-number). On the Wilson
/// operator this happens exactly for a point source with the shadow residual r0 = b: a
/// hop forth and back along one direction is (1 - g)(1 + g) = 0, so (b|r_1) vanishes at
/// the second iteration. (A relative threshold also caught near-zeros on g5 D that the
/// recurrence goes through: measured, so only exact zeros restart.)
pub fn breakdown(uw: C64) -> bool {
    !(uw.norm() > 0.0 && uw.norm().is_finite())
}

/// BiCGStab's iteration with its scalars where the backend computes (solver::bicgstab
/// `Fused`): the element-wise passes between the operator's two applications, each a
/// no-op once the iteration is inactive. Host backends run them as the vector-space
/// operations of the host loop (`host_cr`); kernel 3.0 on one GPU as kernels
/// (kernels/bicgstab_fused.cu) replayed in graphs by `FusedCr::repeat`. Available where
/// `FusedCr` is.
pub trait FusedBiCgStab: WilsonKernels {
    type BiState;
    /// A new scalar block holding `s` (history room for s.max_iter + 1 entries).
    fn bi_state(&mut self, s: &BiScalars) -> Result<Self::BiState>;
    /// Overwrite the scalars (and the history entry of s.iter) from the host.
    fn bi_set(&mut self, state: &mut Self::BiState, s: &BiScalars) -> Result<()>;
    /// Read the scalars (one transfer).
    fn bi_get(&mut self, state: &Self::BiState) -> Result<BiScalars>;
    /// nr of iterations 0..=iter (iter the caller's last `bi_get`, nothing queued since).
    fn bi_history_upto(&mut self, state: &Self::BiState, iter: u64) -> Result<Vec<f64>>;
    /// The start of a run (not gated): r = r0 = p = rhs, x = 0, rho = (rhs|rhs).
    fn bi_start(
        &mut self,
        state: &mut Self::BiState,
        rhs: &Self::Field,
        x: &mut Self::Field,
        r: &mut Self::Field,
        r0: &mut Self::Field,
        p: &mut Self::Field,
    ) -> Result<()>;
    /// If active: alpha = rho / (r0|v) and r -= alpha v (r becomes s); a zero or
    /// non-finite (r0|v) instead leaves r and ends the iteration broken.
    fn bi_alpha_s(
        &mut self,
        state: &mut Self::BiState,
        r0: &Self::Field,
        v: &Self::Field,
        r: &mut Self::Field,
    ) -> Result<()>;
    /// If active: omega = (t|s) / (t|t), 0 when (t|t) = 0 (s = r).
    fn bi_omega(
        &mut self,
        state: &mut Self::BiState,
        t: &Self::Field,
        r: &Self::Field,
    ) -> Result<()>;
    /// If active: x += alpha p, x += omega s, r = s - omega t; nr = (r|r), iter += 1,
    /// history; active = still_active; if still active and omega = 0 or (r0|r) is zero
    /// or non-finite: broken; else beta = ((r0|r) / rho)(alpha / omega), rho = (r0|r).
    #[allow(clippy::too_many_arguments)]
    fn bi_update(
        &mut self,
        state: &mut Self::BiState,
        p: &Self::Field,
        t: &Self::Field,
        r0: &Self::Field,
        x: &mut Self::Field,
        r: &mut Self::Field,
    ) -> Result<()>;
    /// If active: p -= omega v; p = r + beta p.
    fn bi_p(
        &mut self,
        state: &mut Self::BiState,
        r: &Self::Field,
        v: &Self::Field,
        p: &mut Self::Field,
    ) -> Result<()>;
}

/// The fused CR iteration as a backend capability: Algorithm 1's three passes with the
/// scalars (alpha, beta, the stop flag, the history) kept where the backend computes, and
/// batches of iterations replayed (a CUDA graph on the GPU). `available` says whether this
/// backend instance (for CUDA: its stencil version) has it; the plan checks it once. The
/// fused BiCGStab comes with it (`FusedBiCgStab`, replayed by the same `repeat`).
pub trait FusedCr: FusedBiCgStab {
    /// Scalars living where the backend computes.
    type CrState;

    /// Whether these kernels exist here (CUDA: kernel 3.0 only).
    fn fused_cr_available(&self) -> bool;

    /// A new scalar block holding `s` (history room for s.max_iter + 1 entries).
    fn cr_state(&mut self, s: &CrScalars) -> Result<Self::CrState>;
    /// Overwrite the scalars (and the history entry of s.iter) from the host.
    fn cr_set(&mut self, state: &mut Self::CrState, s: &CrScalars) -> Result<()>;
    /// Read the scalars: the solve's one host read per convergence check.
    fn cr_get(&mut self, state: &Self::CrState) -> Result<CrScalars>;
    /// nr of iterations 0..=iter (as recorded by the iteration).
    fn cr_history(&mut self, state: &Self::CrState) -> Result<Vec<f64>>;
    /// The same when the caller knows iter (from its last `cr_get`, with nothing queued
    /// since): a backend may then skip reading the scalars.
    fn cr_history_upto(&mut self, state: &Self::CrState, iter: u64) -> Result<Vec<f64>> {
        let mut h = self.cr_history(state)?;
        h.truncate(iter as usize + 1);
        Ok(h)
    }

    /// The start of a run's fields: r = rhs, x = p = Ap = 0 (not gated on `active`). The
    /// default is a copy and three zeroings; a backend may do it in one pass.
    fn cr_load(
        &mut self,
        rhs: &Self::Field,
        r: &mut Self::Field,
        x: &mut Self::Field,
        p: &mut Self::Field,
        ap: &mut Self::Field,
    ) -> Result<()> {
        cr_load_in_steps(self, rhs, r, x, p, ap)
    }

    /// If active: x += alpha p, r -= alpha Ap; nr = (r|r); iter += 1 and history[iter] = nr.
    fn cr_update_xr(
        &mut self,
        state: &mut Self::CrState,
        p: &Self::Field,
        ap: &Self::Field,
        x: &mut Self::Field,
        r: &mut Self::Field,
    ) -> Result<()>;
    /// If active: ar = A r with rar_new = (r|Ar) fused; beta = rar_new / rar; rar = rar_new.
    fn cr_apply_dot(
        &mut self,
        op: Operator,
        state: &mut Self::CrState,
        r: &Self::Field,
        ar: &mut Self::Field,
    ) -> Result<()>;
    /// If active: p = r + beta p, Ap = Ar + beta Ap; apap = (Ap|Ap); alpha =
    /// conj(rar)/apap; then active = nr > eps && iter < max_iter && nr finite.
    fn cr_update_p(
        &mut self,
        state: &mut Self::CrState,
        r: &Self::Field,
        ar: &Self::Field,
        p: &mut Self::Field,
        ap: &mut Self::Field,
    ) -> Result<()>;

    /// Run `body` `times` times. A GPU backend may record the first call's launches as a
    /// graph under `key` and replay it: the caller promises that equal keys mean the same
    /// launches on the same fields (only device-resident scalars change between calls).
    fn repeat(
        &mut self,
        key: u64,
        times: usize,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()>
    where
        Self: Sized;
    /// Forget recorded graphs (the fields they name are about to be freed).
    fn forget_graphs(&mut self);
}

/// `FusedCr::cr_load` by its parts (a copy and three zeroings): the default, and the
/// fallback of a backend without the one-pass kernel for some fields.
pub fn cr_load_in_steps<S: Space + ?Sized>(
    space: &mut S,
    rhs: &S::Field,
    r: &mut S::Field,
    x: &mut S::Field,
    p: &mut S::Field,
    ap: &mut S::Field,
) -> Result<()> {
    space.copy(r, rhs)?;
    space.set_zero(x)?;
    space.set_zero(p)?;
    space.set_zero(ap)
}

/// What a backend (for CUDA: a stencil version) can hold and run beyond full double fields
/// and the Wilson forms on them; the plan is checked against it once, before the solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub name: &'static str,
    /// Even and odd half-lattice fields, the Schur forms and the even-odd hops.
    pub half_lattice: bool,
    /// Single-precision fields.
    pub single: bool,
    /// Half-precision fields (16-bit with a per-site norm, `linalg::half`).
    pub half: bool,
    /// The fused CR and BiCGStab iterations (`FusedCr`, `FusedBiCgStab` with
    /// device-resident scalars).
    pub fused_cr: bool,
    /// A site-local term beside the hopping term: the clover term and the twisted mass
    /// (`dirac::Action`; `WilsonKernels::site_inverse`, `apply_adjoint`).
    pub site_term: bool,
}

impl Capabilities {
    pub const ALL_CPU: Capabilities = Capabilities {
        name: "the CPU backend",
        half_lattice: true,
        single: true,
        half: true,
        fused_cr: true,
        site_term: true,
    };

    /// The first of the asked options this backend lacks, as ([solver] key, what is
    /// missing): the one rule both the config check (with its line) and the plan check use.
    pub fn missing(
        &self,
        even_odd: bool,
        precision: Precision,
        fused: bool,
    ) -> Option<(&'static str, &'static str)> {
        if even_odd && !self.half_lattice {
            Some(("preconditioning", "half-lattice fields"))
        } else if precision == Precision::Single && !self.single {
            Some(("precision", "single-precision fields"))
        } else if precision == Precision::Half && !self.half {
            Some(("precision", "half-precision fields"))
        } else if fused && !self.fused_cr {
            Some(("iteration", "the fused iterations"))
        } else {
            None
        }
    }
}

/// Set-up a backend can do ahead of a solve so that the solve's time holds no first-use
/// costs (and no set-up happens during a graph capture).
pub trait Prepare {
    /// Compile, load and build what a solve iterating on fields of `layout` (its precision;
    /// half fields: the even-odd operators) and (if `fused`) the fused iteration will need.
    fn prepare(&mut self, layout: Layout, fused: bool) -> Result<()>;
    /// Make `bytes` of short-lived allocations cheap for the solve that follows (the
    /// GPU: grow its memory pool by that much now, so that the solve's fields are carved
    /// from memory already mapped). Nothing to do where allocation is cheap.
    fn reserve(&mut self, _bytes: u64) -> Result<()> {
        Ok(())
    }
    /// On a decomposed lattice: return once every rank has called it (a collective), so
    /// that the ranks start a timed phase together; nothing for one rank.
    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The error of a capability this backend does not have.
pub fn unsupported<B: Space + ?Sized>(backend: &B, what: &str) -> crate::Error {
    unsupported_described(&backend.describe(), what)
}

/// The same, for a backend known by its description.
pub fn unsupported_described(described: &str, what: &str) -> crate::Error {
    crate::Error::invalid(
        "backend",
        format!(
            "{what}: this needs the fast path (kernel = \"3.0\", or the CPU), which {described} does not have"
        ),
    )
}

/// Store `nr` as entry `iter` of a residual history that grows as the solve goes (gaps
/// are NaN). The growth is fallible: a history that cannot grow is out of host memory
/// (exit 6), never an abort.
pub fn record(history: &mut Vec<f64>, iter: u64, nr: f64) -> crate::Result<()> {
    let k = usize::try_from(iter)
        .map_err(|_| crate::Error::HostMemory(format!("iteration {iter} has no history slot")))?;
    if history.len() <= k {
        let more = k + 1 - history.len();
        // Doubling keeps the amortised cost per iteration constant.
        let want = more.max(history.len());
        if history.try_reserve(want).is_err() && history.try_reserve_exact(more).is_err() {
            return Err(crate::Error::HostMemory(format!(
                "a residual history of {} entries ({} bytes) cannot be allocated",
                k + 1,
                (k as u64 + 1) * 8
            )));
        }
        history.resize(k + 1, f64::NAN);
    }
    history[k] = nr;
    Ok(())
}
