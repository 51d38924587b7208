//! The fused CR's three passes run on the host, for backends whose fields live in host
//! memory (the CPU backend and its decomposed form): the scalars and the history stay on
//! the host, a batch is a loop. One implementation; a backend opts in with
//! `impl HostFusedCr for ... {}`.

use super::{CrScalars, FusedCr, Operator, WilsonKernels};
use crate::Result;

/// A backend whose fused CR is the host loop below.
pub trait HostFusedCr: WilsonKernels {}

/// The host fused-CR state: the scalars and the history.
pub struct HostCrState {
    s: CrScalars,
    history: Vec<f64>,
}

impl<B: HostFusedCr> FusedCr for B {
    type CrState = HostCrState;

    fn fused_cr_available(&self) -> bool {
        true
    }

    fn cr_state(&mut self, s: &CrScalars) -> Result<HostCrState> {
        let mut history = vec![f64::NAN; s.max_iter as usize + 1];
        history[s.iter as usize] = s.nr;
        Ok(HostCrState { s: *s, history })
    }

    fn cr_set(&mut self, state: &mut HostCrState, s: &CrScalars) -> Result<()> {
        state.s = *s;
        state.history[s.iter as usize] = s.nr;
        Ok(())
    }

    fn cr_get(&mut self, state: &HostCrState) -> Result<CrScalars> {
        Ok(state.s)
    }

    fn cr_history(&mut self, state: &HostCrState) -> Result<Vec<f64>> {
        Ok(state.history[..=state.s.iter as usize].to_vec())
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
        state.history[s.iter as usize] = s.nr;
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
