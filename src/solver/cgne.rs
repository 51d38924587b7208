//! CG on the normal equations, A^dag A x = A^dag b, in the CGNR form (Saad, Iterative
//! Methods, 8.3.1), which keeps the true-system residual r = b - A x in its recurrence so
//! that the stop rule is ||b - A x|| / ||b|| like every other method's:
//!
//! ```text
//! r = b; z = A^dag r; p = z; zz = (z|z)
//! loop: w = A p; alpha = zz / (w|w); x += alpha p; r -= alpha w
//!       z = A^dag r; zz' = (z|z); beta = zz'/zz; p = z + beta p
//! ```
//! A is g5 D or g5 M_ee: for D x = b it is run on g5 D x = g5 b. Without a twist A is
//! Hermitian (A^dag A = A^2); with one, A^dag is the backend's adjoint form
//! (`WilsonKernels::apply_adjoint`). Two
//! applications per iteration; converges for any non-singular A (A^dag A is positive
//! definite), at the square of A's condition number.

use super::monitor::{Iterate, Monitor, Run, Verdict};
use super::work::Workspace;
use crate::linalg::{LinearOperator, Space};
use crate::{Error, Result};

/// Fields of the workspace: x, r, z, p, w.
pub const FIELDS: usize = 5;

pub struct Cgne<S: Space, A> {
    pub op: A,
    work: Workspace<S>,
}

impl<S: Space, A: LinearOperator<S>> Cgne<S, A> {
    /// Refuses a non-Hermitian operator (A^dag would be needed).
    pub fn new(op: A) -> Result<Self> {
        if !op.hermitian() {
            return Err(Error::internal(format!(
                "CGNE runs on a Hermitian operator (g5 D, g5 M_ee), not {}",
                op.name()
            )));
        }
        Ok(Cgne {
            op,
            work: Workspace::default(),
        })
    }
}

impl<S: Space, A: LinearOperator<S>> Iterate<S> for Cgne<S, A> {
    fn run(
        &mut self,
        space: &mut S,
        b: &S::Field,
        monitor: &mut Monitor,
        start_iter: usize,
        nr0: Option<f64>,
    ) -> Result<Run> {
        let layout = space.layout(b);
        let cost = self.op.stencil_applications();
        let [x, r, z, p, w] = self.work.fields(space, layout, FIELDS)? else {
            unreachable!("the workspace gives the fields asked for")
        };
        space.copy(r, b)?;
        self.op.apply_dagger(space, z, r)?;
        let mut applications = cost;
        space.copy(p, z)?;
        let mut zz = space.norm2(z)?;
        let mut nr = nr0.map_or_else(|| space.norm2(r), Ok)?;
        let mut history = vec![nr];
        let mut iter = start_iter;
        let verdict = loop {
            match monitor.check(iter, nr, true) {
                Verdict::Continue => {}
                v => break v,
            }
            self.op.apply(space, w, p)?;
            let alpha = zz / space.norm2(w)?;
            let a = crate::field::C64::new(alpha, 0.0);
            space.axpy(a, p, x)?;
            space.axpy(-a, w, r)?;
            nr = space.norm2(r)?;
            self.op.apply_dagger(space, z, r)?;
            applications += 2 * cost;
            let zz_new = space.norm2(z)?;
            let beta = crate::field::C64::new(zz_new / zz, 0.0);
            zz = zz_new;
            space.xpay(z, beta, p)?;
            iter += 1;
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
