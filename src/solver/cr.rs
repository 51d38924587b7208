//! Conjugate Residual exactly as the seed's Algorithm 1 (report 004, section I.2):
//!
//! ```text
//! r = b; p = r; x = 0; nr = (r|r); Ap = A p; rar = (r|Ap)
//! while nr > eps:
//!   rarold = rar; alpha = conj(rar) / (Ap|Ap)
//!   x = x + alpha p; r = r - alpha Ap; nr = (r|r)
//!   Ar = A r; rar = (r|Ar); beta = rar / rarold
//!   p = r + beta p; Ap = Ar + beta Ap
//! ```
//! with (u|v) = sum conj(u) v and eps = tol^2 (b|b). One operator application per
//! iteration. Written once, here, as three passes per iteration
//!
//! ```text
//! xr:    x += alpha p; r -= alpha Ap; nr = (r|r)
//! apply: Ar = A r;  rar_new = (r|Ar); beta = rar_new / rar
//! p:     p = r + beta p; Ap = Ar + beta Ap; apap = (Ap|Ap); alpha = conj(rar) / apap
//! ```
//! (alpha and beta are Algorithm 1's quantities, computed at the end of the pass that
//! produces their inputs), driven by an engine: `HostEngine` keeps the scalars on the host
//! and uses only the vector space and the operator, in Algorithm 1's order of operations;
//! `DeviceEngine` is the backend's fused capability (`backend::FusedCr`), whose scalars
//! stay on the device, checked every `check_every` iterations and replayed as a graph.

use super::monitor::{Iterate, Monitor, Run, Verdict};
use crate::field::C64;
use crate::linalg::engines::{CrScalars, FusedCr};
use crate::linalg::{LinearOperator, Operator, Space};
use crate::Result;

/// Where the CR scalars live and how a batch of iterations runs.
pub trait CrEngine<S: Space> {
    /// Overwrite the scalars (creating the block on first use) and the history entry of
    /// s.iter.
    fn set(&mut self, space: &mut S, s: &CrScalars) -> Result<()>;
    fn get(&mut self, space: &mut S) -> Result<CrScalars>;
    /// If active: ar = A r, rar_new = (r|Ar), beta = rar_new / rar, rar = rar_new.
    fn apply_dot(&mut self, space: &mut S, r: &S::Field, ar: &mut S::Field) -> Result<()>;
    /// The start of a run from r (w.r holds it; s holds nr, eps, iter, max_iter): p = r,
    /// Ap = A p, rar = (r|Ap), alpha = conj(rar) / (Ap|Ap), beta = 0, active. Returns the
    /// scalars as far as the host knows them without reading the engine: the first
    /// convergence check needs only nr, iter and active. The default is Algorithm 1's own
    /// order (two host reads); an engine may do better.
    fn start(&mut self, space: &mut S, s: CrScalars, w: &mut CrFields<S>) -> Result<CrScalars> {
        let mut s = s;
        space.copy(&mut w.p, &w.r)?;
        s.active = true;
        self.set(space, &s)?;
        self.apply_dot(space, &w.r, &mut w.ap)?;
        s.rar = self.get(space)?.rar;
        s.apap = space.norm2(&w.ap)?;
        s.alpha = s.rar.conj() / s.apap;
        s.beta = C64::new(0.0, 0.0);
        s.active = s.still_active();
        self.set(space, &s)?;
        Ok(s)
    }
    /// The start of a run's fields: r = rhs, x = 0 (`x_zero`: x is zero already, a fresh
    /// workspace). The default copies and zeroes; an engine may also zero what its `start`
    /// needs zero, in one pass.
    fn load(
        &mut self,
        space: &mut S,
        rhs: &S::Field,
        w: &mut CrFields<S>,
        x_zero: bool,
    ) -> Result<()> {
        space.copy(&mut w.r, rhs)?;
        if !x_zero {
            space.set_zero(&mut w.x)?;
        }
        Ok(())
    }
    /// k iterations (each a no-op once the iteration is inactive).
    fn batch(&mut self, space: &mut S, k: usize, w: &mut CrFields<S>) -> Result<()>;
    /// nr of iterations from..=iter, where iter is the last one the host saw (the last
    /// `get`, or the start's own scalars), with no batch queued since.
    fn history(&mut self, space: &mut S, from: usize, iter: u64) -> Result<Vec<f64>>;
    /// Forget what was recorded on the workspace.
    fn release(&mut self, space: &mut S);
    /// Operator applications per apply (for the counts).
    fn cost(&self) -> usize;
}

/// Fields of CR's workspace (`CrFields`): x, r, p, Ap, Ar.
pub const FIELDS: usize = 5;

/// The workspace: x, r, p, Ap, Ar of one layout (`FIELDS`). A reused workspace (mixed
/// precision's restarts) sets x to zero in place.
pub struct CrFields<S: Space> {
    pub x: S::Field,
    pub r: S::Field,
    pub p: S::Field,
    pub ap: S::Field,
    pub ar: S::Field,
}

/// Scalars on the host; any linear operator.
pub struct HostEngine<A> {
    pub op: A,
    s: CrScalars,
    history: Vec<f64>,
}

impl<A> HostEngine<A> {
    pub fn new(op: A) -> Self {
        HostEngine {
            op,
            s: CrScalars::default(),
            history: Vec::new(),
        }
    }
}

impl<S: Space, A: LinearOperator<S>> CrEngine<S> for HostEngine<A> {
    fn set(&mut self, _space: &mut S, s: &CrScalars) -> Result<()> {
        self.s = *s;
        super::monitor::record(&mut self.history, s.iter, s.nr)
    }

    fn get(&mut self, _space: &mut S) -> Result<CrScalars> {
        Ok(self.s)
    }

    fn apply_dot(&mut self, space: &mut S, r: &S::Field, ar: &mut S::Field) -> Result<()> {
        if !self.s.active {
            return Ok(());
        }
        self.op.apply(space, ar, r)?;
        let rar = space.dot(r, ar)?;
        self.s.beta = rar / self.s.rar;
        self.s.rar = rar;
        Ok(())
    }

    fn batch(&mut self, space: &mut S, k: usize, w: &mut CrFields<S>) -> Result<()> {
        for _ in 0..k {
            if !self.s.active {
                break;
            }
            // xr
            let alpha = self.s.alpha;
            space.axpy(alpha, &w.p, &mut w.x)?;
            space.axpy(-alpha, &w.ap, &mut w.r)?;
            self.s.nr = space.norm2(&w.r)?;
            self.s.iter += 1;
            super::monitor::record(&mut self.history, self.s.iter, self.s.nr)?;
            // apply
            self.apply_dot(space, &w.r, &mut w.ar)?;
            // p
            let beta = self.s.beta;
            space.xpay(&w.r, beta, &mut w.p)?;
            space.xpay(&w.ar, beta, &mut w.ap)?;
            let s = &mut self.s;
            s.apap = space.norm2(&w.ap)?;
            s.alpha = s.rar.conj() / s.apap;
            s.active = s.still_active();
        }
        Ok(())
    }

    fn history(&mut self, _space: &mut S, from: usize, _iter: u64) -> Result<Vec<f64>> {
        Ok(self.history[from..=self.s.iter as usize].to_vec())
    }

    fn release(&mut self, _space: &mut S) {}

    fn cost(&self) -> usize {
        self.op.stencil_applications()
    }
}

static GRAPH_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Iterations per recorded graph: a batch of k iterations launches k / 2 graphs of two
/// iterations (and one of one for an odd k). Recording and instantiating a graph costs
/// more per node the larger it is (0.39-0.74 ms for 10-16 iterations, 0.14-0.27 ms for two:
/// validate/RESULTS.md), and the launches cost no measurable device time.
const GRAPH_ITERATIONS: usize = 2;

/// The backend's fused iteration: scalars where the backend computes, batches replayed
/// under one graph key per workspace.
pub struct DeviceEngine<S: FusedCr> {
    form: Operator,
    state: Option<S::CrState>,
    key: u64,
    /// The start's graph (one apply and one p pass; its own key, as `repeat` caches by
    /// key and count and a batch's remainder may also be 1).
    start_key: u64,
}

impl<S: FusedCr> DeviceEngine<S> {
    /// The fused kernels apply one Wilson form; other operators have no fused path.
    pub fn new<A: LinearOperator<S>>(op: &A) -> Result<Self> {
        let form = op.wilson_form().ok_or_else(|| {
            crate::Error::internal(format!(
                "the fused CR applies Wilson forms only, not {}",
                op.name()
            ))
        })?;
        Ok(DeviceEngine {
            form,
            state: None,
            key: GRAPH_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            start_key: GRAPH_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    fn state(&mut self) -> Result<&mut S::CrState> {
        self.state
            .as_mut()
            .ok_or_else(|| crate::Error::internal("fused CR state used before it was set"))
    }
}

impl<S: FusedCr> CrEngine<S> for DeviceEngine<S> {
    fn set(&mut self, space: &mut S, s: &CrScalars) -> Result<()> {
        match &mut self.state {
            Some(st) => space.cr_set(st, s),
            None => {
                self.state = Some(space.cr_state(s)?);
                Ok(())
            }
        }
    }

    fn get(&mut self, space: &mut S) -> Result<CrScalars> {
        let st = self.state()?;
        space.cr_get(st)
    }

    fn apply_dot(&mut self, space: &mut S, r: &S::Field, ar: &mut S::Field) -> Result<()> {
        let form = self.form;
        let st = self.state()?;
        space.cr_apply_dot(form, st, r, ar)
    }

    /// r = rhs and x = p = Ap = 0 in one pass (`FusedCr::cr_load`): `start` needs p and
    /// Ap zero.
    fn load(
        &mut self,
        space: &mut S,
        rhs: &S::Field,
        w: &mut CrFields<S>,
        _x_zero: bool,
    ) -> Result<()> {
        space.cr_load(rhs, &mut w.r, &mut w.x, &mut w.p, &mut w.ap)
    }

    /// The start as the tail of an iteration, with no host read: p = Ap = 0 (from `load`),
    /// rar = 1, then the apply pass (Ar = A r, rar = (r|Ar)) and the p pass (p = r + beta 0
    /// = r, Ap = Ar, apap, alpha, active), so the first check needs nothing from the device.
    /// The two passes are one graph (`repeat`), recorded at the first start and replayed at
    /// the mixed solver's restarts (the same workspace and scalar block): on a split
    /// lattice their exchanges and all-gathers are then not queued one by one by the host.
    fn start(&mut self, space: &mut S, s: CrScalars, w: &mut CrFields<S>) -> Result<CrScalars> {
        let mut s = s;
        s.rar = C64::new(1.0, 0.0);
        s.alpha = C64::new(0.0, 0.0);
        s.beta = C64::new(0.0, 0.0);
        s.active = s.still_active();
        self.set(space, &s)?;
        let (form, key) = (self.form, self.start_key);
        let st = self.state()?;
        space.repeat(key, 1, &mut |sp: &mut S| {
            sp.cr_apply_dot(form, st, &w.r, &mut w.ar)?;
            sp.cr_update_p(st, &w.r, &w.ar, &mut w.p, &mut w.ap)
        })?;
        Ok(s)
    }

    fn batch(&mut self, space: &mut S, k: usize, w: &mut CrFields<S>) -> Result<()> {
        let (form, key) = (self.form, self.key);
        let st = self.state()?;
        let g = GRAPH_ITERATIONS;
        let mut body = |sp: &mut S| {
            sp.cr_update_xr(st, &w.p, &w.ap, &mut w.x, &mut w.r)?;
            sp.cr_apply_dot(form, st, &w.r, &mut w.ar)?;
            sp.cr_update_p(st, &w.r, &w.ar, &mut w.p, &mut w.ap)
        };
        for _ in 0..k / g {
            space.repeat(key, g, &mut body)?;
        }
        space.repeat(key, k % g, &mut body)
    }

    fn history(&mut self, space: &mut S, from: usize, iter: u64) -> Result<Vec<f64>> {
        let st = self.state()?;
        let h = space.cr_history_upto(st, iter)?;
        h.get(from..)
            .map(<[f64]>::to_vec)
            .ok_or_else(|| crate::Error::internal("fused CR history shorter than its start"))
    }

    fn release(&mut self, space: &mut S) {
        space.forget_graphs();
        self.state = None;
    }

    fn cost(&self) -> usize {
        1
    }
}

/// Conjugate Residual over an engine. A Hermitian operator is assumed (the seed's short
/// recurrence); on D it stagnates (README, Solver).
pub struct Cr<S: Space, E> {
    pub engine: E,
    /// Read the scalars every this many iterations (1: Algorithm 1's own loop).
    pub check_every: usize,
    work: Option<CrFields<S>>,
}

impl<S: Space, E: CrEngine<S>> Cr<S, E> {
    pub fn new(engine: E, check_every: usize) -> Self {
        Cr {
            engine,
            check_every: check_every.max(1),
            work: None,
        }
    }

    /// The workspace for `rhs`'s layout (made, and the engine's records of the old one
    /// released, when it does not fit); fields of `Cr` passed apart so that the engine
    /// stays usable beside the returned fields.
    fn workspace<'w>(
        work: &'w mut Option<CrFields<S>>,
        engine: &mut E,
        space: &mut S,
        rhs: &S::Field,
    ) -> Result<&'w mut CrFields<S>> {
        let layout = space.layout(rhs);
        let fits = matches!(work, Some(w) if space.layout(&w.x) == layout);
        if !fits {
            engine.release(space);
            *work = Some(CrFields {
                x: space.alloc_layout(layout)?,
                r: space.alloc_layout(layout)?,
                p: space.alloc_layout(layout)?,
                ap: space.alloc_layout(layout)?,
                ar: space.alloc_layout(layout)?,
            });
        }
        work.as_mut()
            .ok_or_else(|| crate::Error::internal("the CR workspace was not made"))
    }
}

impl<S: Space, E: CrEngine<S>> Iterate<S> for Cr<S, E> {
    fn run(
        &mut self,
        space: &mut S,
        rhs: &S::Field,
        monitor: &mut Monitor,
        start_iter: usize,
        nr0: Option<f64>,
    ) -> Result<Run> {
        let clock = std::time::Instant::now();
        let fresh = self.work.is_none();
        let w = Self::workspace(&mut self.work, &mut self.engine, space, rhs)?;
        self.engine.load(space, rhs, w, fresh)?;
        let nr = nr0.map_or_else(|| space.norm2(&w.r), Ok)?;
        let s = CrScalars {
            rar: C64::new(1.0, 0.0),
            nr,
            eps: monitor.eps,
            iter: start_iter as u64,
            max_iter: monitor.rules.max_iterations as u64,
            active: true,
            ..Default::default()
        };
        // p = r, Ap = A p, the scalars; the first check uses what the host knows.
        let mut known = Some(self.engine.start(space, s, w)?);
        tracing::debug!(
            us = super::micros_since(&clock),
            "cr: workspace, load and start (queued)"
        );
        let mut checks = 0;
        let (verdict, last_iter) = loop {
            let s = match known.take() {
                Some(s) => s,
                None => {
                    checks += 1;
                    let t = std::time::Instant::now();
                    let s = self.engine.get(space)?;
                    tracing::debug!(
                        us = super::micros_since(&t),
                        "cr: check (host read of the scalars)"
                    );
                    s
                }
            };
            match monitor.check(s.iter as usize, s.nr, s.active) {
                Verdict::Continue => {}
                v => break (v, s.iter),
            }
            let t = std::time::Instant::now();
            self.engine.batch(space, self.check_every, w)?;
            tracing::debug!(us = super::micros_since(&t), "cr: batch (queued)");
        };
        let t = std::time::Instant::now();
        let history = self.engine.history(space, start_iter, last_iter)?;
        tracing::debug!(us = super::micros_since(&t), "cr: history read");
        let iter = start_iter + history.len() - 1;
        Ok(Run {
            iter,
            applications: (history.len()) * self.engine.cost(),
            history,
            verdict,
            checks,
        })
    }

    fn solution(&self) -> Option<&S::Field> {
        self.work.as_ref().map(|w| &w.x)
    }

    fn take_solution(&mut self) -> Option<S::Field> {
        self.work.take().map(|w| w.x)
    }

    fn release(&mut self, space: &mut S) {
        self.engine.release(space);
        self.work = None;
    }
}
