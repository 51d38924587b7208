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
//!
//! As QUDA's GCR does, only the images q_k are orthogonalised: the directions keep their
//! first form z_k, the coefficients c_jk are kept, and x gains sum_k chi_k z_k once a
//! cycle, chi the solution of the unit upper-triangular system chi_j + sum_{k>j} c_jk chi_k
//! = alpha_j (the p_k of the recurrence above are z (1 + C)^-1). The orthogonalisation is
//! classical Gram-Schmidt through `Space::dots` and `Space::axpys` (a backend reads each
//! field once and waits once for all k coefficients), with a second pass when the first
//! took q_k's norm below 1/sqrt(2) of itself (Daniel, Gragg, Kaufman and Stewart 1976).
//! An iteration waits three times (the coefficients, (q_k|q_k) with (q_k|r), and ||r||)
//! however long the cycle; modified Gram-Schmidt waited k + 3 times.

use super::monitor::{Iterate, Monitor, Run, StopReason, Verdict};
use super::work::Workspace;
use crate::field::C64;
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
        // x, r, then the m directions z_k and their images q_k.
        let fields = self.work.fields(space, layout, fields(m))?;
        let (xr, dirs) = fields.split_at_mut(2);
        let (zs, qs) = dirs.split_at_mut(m);
        let [x, r] = xr else {
            unreachable!("the workspace gives the fields asked for")
        };
        space.copy(r, b)?;
        let mut cycle = Cycle::new(m);
        let mut nr = nr0.map_or_else(|| space.norm2(r), Ok)?;
        let mut history = vec![nr];
        let mut iter = start_iter;
        let mut applications = 0;
        let verdict = loop {
            match monitor.check(iter, nr, true) {
                Verdict::Continue => {}
                v => break v,
            }
            if cycle.len() == m {
                cycle.update_solution(space, &zs[..m], x)?;
            }
            let k = cycle.len();
            let (done_q, rest_q) = qs.split_at_mut(k);
            let (zk, qk) = (&mut zs[k], &mut rest_q[0]);
            self.preconditioner.apply(space, zk, r)?;
            applications += self.preconditioner.stencil_applications();
            self.op.apply(space, qk, zk)?;
            applications += self.op.stencil_applications();
            let o = orthogonalise(space, done_q, &cycle.qq, qk, r)?;
            if o.qq == 0.0 {
                // A z_k lies in the span of the earlier images: no progress is possible.
                break Verdict::Stop(StopReason::Stagnation);
            }
            let alpha = o.qr / o.qq;
            space.axpy(-alpha, qk, r)?;
            cycle.push(o, alpha);
            nr = space.norm2(r)?;
            iter += 1;
            history.push(nr);
        };
        let k = cycle.len();
        cycle.update_solution(space, &zs[..k], x)?;
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

/// One cycle's scalars: (q_k | q_k), the step alpha_k and the coefficients c_jk (column
/// k: those of q_k against q_j, j < k).
pub struct Cycle {
    pub qq: Vec<f64>,
    alpha: Vec<C64>,
    c: Vec<Vec<C64>>,
}

impl Cycle {
    pub fn new(m: usize) -> Cycle {
        Cycle {
            qq: Vec::with_capacity(m),
            alpha: Vec::with_capacity(m),
            c: Vec::with_capacity(m),
        }
    }

    /// Directions taken since the last `update_solution`.
    pub fn len(&self) -> usize {
        self.qq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.qq.is_empty()
    }

    pub fn push(&mut self, o: Orthogonalised, alpha: C64) {
        self.qq.push(o.qq);
        self.alpha.push(alpha);
        self.c.push(o.coefficients);
    }

    /// x += sum_k chi_k z_k for the cycle's directions `zs` (chi by back substitution,
    /// chi_j = alpha_j - sum_{k>j} c_jk chi_k), in one `axpys`; the cycle starts afresh.
    pub fn update_solution<S: Space>(
        &mut self,
        space: &mut S,
        zs: &[S::Field],
        x: &mut S::Field,
    ) -> Result<()> {
        let n = self.len();
        if n > 0 {
            let mut chi = self.alpha.clone();
            for j in (0..n).rev() {
                for k in j + 1..n {
                    let d = self.c[k][j] * chi[k];
                    chi[j] -= d;
                }
            }
            let zs: Vec<&S::Field> = zs[..n].iter().collect();
            space.axpys(&chi, &zs, x)?;
        }
        self.qq.clear();
        self.alpha.clear();
        self.c.clear();
        Ok(())
    }
}

/// What `orthogonalise` leaves: q_k's coefficients against the earlier images (summed
/// over its passes), (q_k | q_k) and (q_k | r) after it.
pub struct Orthogonalised {
    pub coefficients: Vec<C64>,
    pub qq: f64,
    pub qr: C64,
}

/// GCR's orthogonalisation of the image q_k against the earlier images `done_q` (`qq[j]`
/// = (q_j | q_j)): q_k -= sum_j c_j q_j, c_j = (q_j | q_k) / qq[j], by classical
/// Gram-Schmidt (one `dots`, one `axpys`), a second pass when the first took (q_k | q_k)
/// below half of itself; then (q_k | q_k) and (q_k | r) in one more `dots`. Shared by
/// the solver and multigrid's GCR smoother.
pub fn orthogonalise<S: Space>(
    space: &mut S,
    done_q: &[S::Field],
    qq: &[f64],
    qk: &mut S::Field,
    r: &S::Field,
) -> Result<Orthogonalised> {
    let k = done_q.len();
    let mut coefficients = vec![C64::new(0.0, 0.0); k];
    let earlier: Vec<&S::Field> = done_q.iter().collect();
    let mut before = 0.0;
    for pass in 0..2 {
        if k > 0 {
            let mut xs = earlier.clone();
            if pass == 0 {
                xs.push(&*qk);
            }
            let d = space.dots(&xs, qk)?;
            if pass == 0 {
                before = d[k].re;
            }
            let c: Vec<C64> = (0..k).map(|j| d[j] / qq[j]).collect();
            let minus: Vec<C64> = c.iter().map(|c| -c).collect();
            space.axpys(&minus, &earlier, qk)?;
            for (total, c) in coefficients.iter_mut().zip(&c) {
                *total += c;
            }
        }
        let q: &S::Field = qk;
        let e = space.dots(&[q, r], q)?;
        let (n, qr) = (e[0].re, e[1].conj());
        if k == 0 || pass >= 1 || n >= 0.5 * before {
            return Ok(Orthogonalised {
                coefficients,
                qq: n,
                qr,
            });
        }
    }
    unreachable!("the second pass returns")
}
