//! The fused CR's three passes and the fused BiCGStab's passes run on the host, for
//! backends whose fields live in host memory (the CPU backend and its decomposed form):
//! the scalars and the history stay on the host, a batch is a loop. One implementation; a
//! backend opts in with `impl HostFusedCr for ... {}`. The BiCGStab passes are the host
//! loop's own vector-space operations in its order (solver::bicgstab `BiCgStab`), so the
//! fused driver on these backends reproduces it.

use super::{breakdown, BiScalars, CrScalars, FusedBiCgStab, FusedCr, Operator, WilsonKernels};
use crate::field::C64;
use crate::linalg::engines::record;
use crate::Result;

/// A backend whose fused CR is the host loop below.
pub trait HostFusedCr: WilsonKernels {}

/// The host fused solvers' state: the scalars and the residual history (entry k the
/// residual after k iterations, NaN where none was made), for CR and BiCGStab alike.
pub struct HostState<S> {
    s: S,
    history: Vec<f64>,
}

impl<S: Copy> HostState<S> {
    /// A state holding `s`, whose iteration count and residual are `iter` and `nr`, with
    /// room for `max_iter` iterations.
    /// The history grows as the solve goes (`monitor::record`), so `max_iterations`
    /// costs nothing up front.
    fn new(s: S, iter: u64, nr: f64) -> Result<Self> {
        let mut state = HostState {
            s,
            history: Vec::new(),
        };
        record(&mut state.history, iter, nr)?;
        Ok(state)
    }

    /// Replace the scalars (a restart at iteration `iter` with residual `nr`).
    fn set(&mut self, s: S, iter: u64, nr: f64) -> Result<()> {
        self.s = s;
        record(&mut self.history, iter, nr)
    }

    /// The history up to and including iteration `iter` (NaN past what was recorded).
    fn upto(&self, iter: u64) -> Vec<f64> {
        let n = iter as usize + 1;
        let mut h = self.history[..n.min(self.history.len())].to_vec();
        h.resize(n, f64::NAN);
        h
    }
}

/// The host fused-CR state.
pub type HostCrState = HostState<CrScalars>;
/// The host fused-BiCGStab state.
pub type HostBiState = HostState<BiScalars>;

impl<B: HostFusedCr> FusedCr for B {
    type CrState = HostCrState;

    fn fused_cr_available(&self) -> bool {
        true
    }

    fn cr_state(&mut self, s: &CrScalars) -> Result<HostCrState> {
        HostState::new(*s, s.iter, s.nr)
    }

    fn cr_set(&mut self, state: &mut HostCrState, s: &CrScalars) -> Result<()> {
        state.set(*s, s.iter, s.nr)?;
        Ok(())
    }

    fn cr_get(&mut self, state: &HostCrState) -> Result<CrScalars> {
        Ok(state.s)
    }

    fn cr_history(&mut self, state: &HostCrState) -> Result<Vec<f64>> {
        Ok(state.upto(state.s.iter))
    }

    fn cr_update_xr(
        &mut self,
        state: &mut HostCrState,
        p: &Self::Field,
        ap: &Self::Field,
        x: &mut Self::Field,
        r: &mut Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        let alpha = state.s.alpha;
        self.axpy(alpha, p, x)?;
        self.axpy(-alpha, ap, r)?;
        let s = &mut state.s;
        s.nr = self.norm2(r)?;
        s.iter += 1;
        record(&mut state.history, s.iter, s.nr)?;
        Ok(())
    }

    fn cr_apply_dot(
        &mut self,
        op: Operator,
        state: &mut HostCrState,
        r: &Self::Field,
        ar: &mut Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        self.apply(op, ar, r)?;
        let rar = self.dot(r, ar)?;
        state.s.beta = rar / state.s.rar;
        state.s.rar = rar;
        Ok(())
    }

    fn cr_update_p(
        &mut self,
        state: &mut HostCrState,
        r: &Self::Field,
        ar: &Self::Field,
        p: &mut Self::Field,
        ap: &mut Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        let beta = state.s.beta;
        self.xpay(r, beta, p)?;
        self.xpay(ar, beta, ap)?;
        let s = &mut state.s;
        s.apap = self.norm2(ap)?;
        s.alpha = s.rar.conj() / s.apap;
        s.active = s.still_active();
        Ok(())
    }

    fn repeat(
        &mut self,
        _key: u64,
        times: usize,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        for _ in 0..times {
            body(self)?;
        }
        Ok(())
    }

    fn forget_graphs(&mut self) {}
}

impl<B: HostFusedCr> FusedBiCgStab for B {
    type BiState = HostBiState;

    fn bi_state(&mut self, s: &BiScalars) -> Result<HostBiState> {
        HostState::new(*s, s.iter, s.nr)
    }

    fn bi_set(&mut self, state: &mut HostBiState, s: &BiScalars) -> Result<()> {
        state.set(*s, s.iter, s.nr)?;
        Ok(())
    }

    fn bi_get(&mut self, state: &HostBiState) -> Result<BiScalars> {
        Ok(state.s)
    }

    fn bi_history_upto(&mut self, state: &HostBiState, iter: u64) -> Result<Vec<f64>> {
        Ok(state.upto(iter))
    }

    fn bi_start(
        &mut self,
        state: &mut HostBiState,
        rhs: &Self::Field,
        x: &mut Self::Field,
        r: &mut Self::Field,
        r0: &mut Self::Field,
        p: &mut Self::Field,
    ) -> Result<()> {
        self.copy(r, rhs)?;
        self.copy(r0, rhs)?;
        self.copy(p, rhs)?;
        self.set_zero(x)?;
        state.s.rho = self.dot(r0, r)?;
        Ok(())
    }

    fn bi_alpha_s(
        &mut self,
        state: &mut HostBiState,
        r0: &Self::Field,
        v: &Self::Field,
        r: &mut Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        let r0v = self.dot(r0, v)?;
        if breakdown(r0v) {
            state.s.active = false;
            state.s.broken = true;
            return Ok(());
        }
        state.s.alpha = state.s.rho / r0v;
        self.axpy(-state.s.alpha, v, r)
    }

    fn bi_omega(
        &mut self,
        state: &mut HostBiState,
        t: &Self::Field,
        r: &Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        let tt = self.norm2(t)?;
        state.s.omega = if tt > 0.0 {
            self.dot(t, r)? / tt
        } else {
            C64::new(0.0, 0.0)
        };
        Ok(())
    }

    fn bi_update(
        &mut self,
        state: &mut HostBiState,
        p: &Self::Field,
        t: &Self::Field,
        r0: &Self::Field,
        x: &mut Self::Field,
        r: &mut Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        let (alpha, omega) = (state.s.alpha, state.s.omega);
        self.axpy(alpha, p, x)?;
        self.axpy(omega, r, x)?;
        self.axpy(-omega, t, r)?;
        let nr = self.norm2(r)?;
        let rho_new = self.dot(r0, r)?;
        let s = &mut state.s;
        s.nr = nr;
        s.iter += 1;
        record(&mut state.history, s.iter, nr)?;
        if !s.still_active() {
            s.active = false;
        } else if omega == C64::new(0.0, 0.0) || breakdown(rho_new) {
            s.active = false;
            s.broken = true;
        } else {
            s.beta = (rho_new / s.rho) * (alpha / omega);
            s.rho = rho_new;
        }
        Ok(())
    }

    fn bi_p(
        &mut self,
        state: &mut HostBiState,
        r: &Self::Field,
        v: &Self::Field,
        p: &mut Self::Field,
    ) -> Result<()> {
        if !state.s.active {
            return Ok(());
        }
        self.axpy(-state.s.omega, v, p)?;
        self.xpay(r, state.s.beta, p)
    }
}
