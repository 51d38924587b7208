//! GCR(m), the Generalised Conjugate Residual method (Eisenstat, Elman and Schultz 1983)
//! for a general A, restarted every m directions:
//!
//! ```text
//! r = b
//! repeat: for k = 0..m:
//!           p_k = r; q_k = A p_k
//!           for j < k: c = (q_j|q_k)/(q_j|q_j); q_k -= c q_j; p_k -= c p_j
//!           alpha = (q_k|r)/(q_k|q_k); x += alpha p_k; r -= alpha q_k
//! ```
//! One application per iteration; 2m fields of storage. It minimises ||r|| over the
//! Krylov space of each cycle, so the residual never grows. With a preconditioner M the
//! direction is p_k = M r instead of r (flexible GCR: M may change from one application
//! to the next, as multigrid's K-cycle does), and everything else stays.

use super::monitor::{Iterate, Monitor, Run, Verdict};
use super::work::Workspace;
use crate::linalg::{LinearOperator, Space};
use crate::Result;

/// Fields of the workspace of GCR(m): x, r, and the m directions p_k with their images
/// q_k = A p_k.
pub fn fields(m: usize) -> usize {
    2 + 2 * m
}

pub struct Gcr<S: Space, A, M = Identity> {
    pub op: A,
    /// Directions kept before a restart.
    pub restart: usize,
    /// The preconditioner: p_k = M r.
    pub preconditioner: M,
    work: Workspace<S>,
}

/// No preconditioner: p_k = r.
pub struct Identity;

impl<S: Space> LinearOperator<S> for Identity {
    fn apply(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
        space.copy(out, inp)
    }
    fn domain(&self) -> crate::linalg::Subset {
        crate::linalg::Subset::Full
    }
    fn hermitian(&self) -> bool {
        true
    }
    fn name(&self) -> String {
        "1".into()
    }
    fn stencil_applications(&self) -> usize {
        0
    }
}

impl<S: Space, A: LinearOperator<S>> Gcr<S, A> {
    pub fn new(op: A, restart: usize) -> Self {
        Gcr::preconditioned(op, restart, Identity)
    }
}

impl<S: Space, A: LinearOperator<S>, M: LinearOperator<S>> Gcr<S, A, M> {
    /// Flexible GCR(m) with the preconditioner `m` (its `stencil_applications` read after
    /// each application count the applications it made).
    pub fn preconditioned(op: A, restart: usize, m: M) -> Self {
        Gcr {
            op,
            restart: restart.max(1),
            preconditioner: m,
            work: Workspace::default(),
        }
    }
}

impl<S: Space, A: LinearOperator<S>, M: LinearOperator<S>> Iterate<S> for Gcr<S, A, M> {
    fn run(
        &mut self,
        space: &mut S,
        b: &S::Field,
        monitor: &mut Monitor,
        start_iter: usize,
        nr0: Option<f64>,
    ) -> Result<Run> {
        let layout = space.layout(b);
        let m = self.restart;
        // x, r, then the m directions p_k and their images q_k = A p_k.
        let fields = self.work.fields(space, layout, fields(m))?;
        let (xr, dirs) = fields.split_at_mut(2);
        let (ps, qs) = dirs.split_at_mut(m);
        let [x, r] = xr else {
            unreachable!("the workspace gives the fields asked for")
        };
        space.copy(r, b)?;
        let mut qq = vec![0.0; m];
        let mut nr = nr0.map_or_else(|| space.norm2(r), Ok)?;
        let mut history = vec![nr];
        let mut iter = start_iter;
        let mut applications = 0;
        let mut k = 0;
        let verdict = loop {
            match monitor.check(iter, nr, true) {
                Verdict::Continue => {}
                v => break v,
            }
            if k == m {
                k = 0;
            }
            let (done_p, rest_p) = ps.split_at_mut(k);
            let (done_q, rest_q) = qs.split_at_mut(k);
            let (pk, qk) = (&mut rest_p[0], &mut rest_q[0]);
            self.preconditioner.apply(space, pk, r)?;
            applications += self.preconditioner.stencil_applications();
            self.op.apply(space, qk, pk)?;
            applications += self.op.stencil_applications();
            qq[k] = orthogonalise(space, done_p, done_q, &qq[..k], pk, qk)?;
            let alpha = space.dot(qk, r)? / qq[k];
            space.axpy(alpha, pk, x)?;
            space.axpy(-alpha, qk, r)?;
            nr = space.norm2(r)?;
            iter += 1;
            k += 1;
            history.push(nr);
        };
        Ok(Run {
            iter,
            history,
            verdict,
            applications,
            checks: iter - start_iter + 1,
        })
    }

    fn solution(&self) -> Option<&S::Field> {
        self.work.solution()
    }
    fn take_solution(&mut self) -> Option<S::Field> {
        self.work.take_solution()
    }
    fn release(&mut self, _space: &mut S) {
        self.work.release();
    }
}

/// GCR's orthogonalisation of a new direction p_k and its image q_k = A p_k against the
/// earlier ones (modified Gram-Schmidt; `qq[j]` = (q_j | q_j)): q_k -= c_j q_j and
/// p_k -= c_j p_j with c_j = (q_j | q_k) / qq[j], so that A p_k = q_k still holds. Returns
/// (q_k | q_k). Shared by the solver and multigrid's GCR smoother.
pub fn orthogonalise<S: Space>(
    space: &mut S,
    done_p: &[S::Field],
    done_q: &[S::Field],
    qq: &[f64],
    pk: &mut S::Field,
    qk: &mut S::Field,
) -> Result<f64> {
    for j in 0..qq.len() {
        let c = space.dot(&done_q[j], qk)? / qq[j];
        space.axpy(-c, &done_q[j], qk)?;
        space.axpy(-c, &done_p[j], pk)?;
    }
    space.norm2(qk)
}
