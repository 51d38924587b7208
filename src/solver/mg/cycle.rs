//! The K-cycle: on each level, the coarse correction (restrict the residual, solve the
//! next level by flexible GCR to a loose tolerance, itself preconditioned by the next
//! level's cycle, prolong and add) between optional pre- and post-smoothing by minimal
//! residual steps. Written once over the seam `dirac::coarse::Coarsen`: the fine level
//! runs on the backend's fields, the coarse levels on the backend's coarse space (the
//! host's `CoarseSpace`, or device fields on a GPU), and the transfers never leave it.

use super::MgParams;
use crate::dirac::coarse::{CoarseOperator, Coarsen, LevelSpace};
use crate::field::C64;
use crate::linalg::{Layout, LinearOperator, Precision, Space, Subset};
use crate::solver::gcr::{orthogonalise, Cycle, Gcr};
use crate::solver::{run_plain, Monitor, StopRules};
use crate::Result;

/// Minimal residual steps on A x = b from x = 0: x += alpha r, r -= alpha A r with alpha
/// = (A r | r) / (A r | A r). Leaves r = b - A x; returns the applications made.
pub fn minimal_residual<S: Space, A: LinearOperator<S>>(
    space: &mut S,
    op: &mut A,
    b: &S::Field,
    [x, r, q]: [&mut S::Field; 3],
    steps: usize,
) -> Result<usize> {
    space.set_zero(x)?;
    space.copy(r, b)?;
    let mut applications = 0;
    for _ in 0..steps {
        op.apply(space, q, r)?;
        applications += op.stencil_applications();
        let qq = space.norm2(q)?;
        if qq == 0.0 {
            break;
        }
        let alpha = space.dot(q, r)? / qq;
        space.axpy(alpha, r, x)?;
        space.axpy(-alpha, q, r)?;
    }
    Ok(applications)
}

/// GCR steps on A x = b from x = 0, without a restart: each step's direction is the
/// current residual, its image A z is orthogonalised against the earlier images (the
/// solver's `orthogonalise`), r -= alpha q with alpha = (q | r) / (q | q), and x is
/// formed once at the end from the directions (`Cycle::update_solution`). After k steps
/// x minimises ||b - A x|| over the Krylov space K_k(A, b), which holds the x of k
/// minimal residual steps: the residual is at most theirs. Leaves r = b - A x; `dirs`: at
/// least 2 `steps` fields (directions, then images); returns the applications made.
pub fn gcr_steps<S: Space, A: LinearOperator<S>>(
    space: &mut S,
    op: &mut A,
    b: &S::Field,
    [x, r]: [&mut S::Field; 2],
    dirs: &mut [S::Field],
    steps: usize,
) -> Result<usize> {
    if dirs.len() < 2 * steps {
        return Err(crate::Error::internal(format!(
            "{steps} GCR smoothing steps need {} direction fields, given {}",
            2 * steps,
            dirs.len()
        )));
    }
    space.set_zero(x)?;
    space.copy(r, b)?;
    let (zs, rest) = dirs.split_at_mut(steps);
    let qs = &mut rest[..steps];
    let mut cycle = Cycle::new(steps);
    let mut applications = 0;
    for j in 0..steps {
        space.copy(&mut zs[j], r)?;
        op.apply(space, &mut qs[j], &zs[j])?;
        applications += op.stencil_applications();
        let (q_done, q_rest) = qs.split_at_mut(j);
        let o = orthogonalise(space, q_done, &cycle.qq, &mut q_rest[0], r)?;
        if o.qq == 0.0 {
            break;
        }
        let alpha = o.qr / o.qq;
        space.axpy(-alpha, &q_rest[0], r)?;
        cycle.push(o, alpha);
    }
    let n = cycle.len();
    cycle.update_solution(space, &zs[..n], x)?;
    Ok(applications)
}

/// The smoother of every level above the coarsest (`[multigrid] smoother`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Smoother {
    /// Minimal residual steps (three fields).
    #[default]
    Mr,
    /// GCR steps without a restart (two more fields a step): a residual at most MR's.
    Gcr,
}

/// The most GCR smoothing steps (each keeps a direction and its image).
pub const GCR_SMOOTHING_MAX: usize = 16;

/// Pre- and post-smoothing steps of a level, and the smoother.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Smoothing {
    pub pre: usize,
    pub post: usize,
    pub smoother: Smoother,
}

impl Smoothing {
    /// The work fields a cycle needs: x, r, q, e, and for GCR 2 fields a step.
    pub fn work_fields(&self) -> usize {
        4 + match self.smoother {
            Smoother::Mr => 0,
            Smoother::Gcr => 2 * self.pre.max(self.post),
        }
    }
}

/// `steps` of the smoother on A x = b from x = 0 into x, leaving r = b - A x; `q` and
/// `dirs` are scratch. Returns the applications made.
fn smooth<S: Space, A: LinearOperator<S>>(
    space: &mut S,
    op: &mut A,
    smoother: Smoother,
    b: &S::Field,
    [x, r, q]: [&mut S::Field; 3],
    dirs: &mut [S::Field],
    steps: usize,
) -> Result<usize> {
    match smoother {
        Smoother::Mr => minimal_residual(space, op, b, [x, r, q], steps),
        Smoother::Gcr => gcr_steps(space, op, b, [x, r], dirs, steps),
    }
}

/// One cycle of a level: x = M b for the level operator `op`, the transfer `t` to the
/// next level and that level's (approximate) solve. `work`: `smoothing.work_fields()`
/// fields of b's layout. Returns the applications of `op` made.
#[allow(clippy::too_many_arguments)]
pub fn cycle<S: Coarsen, A: LinearOperator<S>>(
    space: &mut S,
    op: &mut A,
    t: &S::Transfer,
    smoothing: Smoothing,
    work: &mut [S::Field],
    b: &S::Field,
    x: &mut S::Field,
    coarse: &mut CoarseLevel<S::Coarse>,
) -> Result<usize> {
    if work.len() < smoothing.work_fields() {
        return Err(crate::Error::internal(format!(
            "a cycle needs {} work fields, given {}",
            smoothing.work_fields(),
            work.len()
        )));
    }
    let (head, dirs) = work.split_at_mut(4);
    let [xs, r, q, e] = head else {
        unreachable!("split at four")
    };
    let kind = smoothing.smoother;
    let mut applications = smooth(space, op, kind, b, [xs, r, q], dirs, smoothing.pre)?;
    // The coarse correction of the residual r = b - A xs, prolonged into q.
    let mut rc = coarse.take_rhs()?;
    let restricted = space.restrict(t, r, &mut coarse.space, &mut rc);
    let ec = restricted.and_then(|_| coarse.solve(&rc));
    coarse.rhs = Some(rc);
    space.prolong(t, &mut coarse.space, &ec?, q)?;
    space.copy(x, xs)?;
    space.axpy(C64::new(1.0, 0.0), q, x)?;
    if smoothing.post > 0 {
        // e = b - A x, then x += MR(e).
        op.apply(space, e, x)?;
        applications += op.stencil_applications();
        space.xpay(b, C64::new(-1.0, 0.0), e)?;
        applications += smooth(space, op, kind, e, [xs, r, q], dirs, smoothing.post)?;
        space.axpy(C64::new(1.0, 0.0), xs, x)?;
    }
    Ok(applications)
}

/// What the coarse levels did, summed over a solve (the report's multigrid lines).
#[derive(Clone, Debug, Default)]
pub struct CoarseCounts {
    /// Coarse solves per level (index 0: the first coarse level).
    pub solves: Vec<usize>,
    /// Krylov iterations per level.
    pub iterations: Vec<usize>,
    /// Wall seconds in each level's solves (the levels below included; the host's clock,
    /// which the solves' reductions keep in step with the device).
    pub seconds: Vec<f64>,
}

/// A coarse level and everything below it: its space and operator, and either the next
/// level (an intermediate level: flexible GCR preconditioned by its cycle) or nothing
/// (the coarsest: GCR, on the even Schur complement where the lattice allows).
pub struct CoarseLevel<C: LevelSpace> {
    pub space: C,
    /// Index from 1 (the first coarse level).
    pub index: usize,
    precision: Precision,
    rules: StopRules,
    restart: usize,
    even_odd: bool,
    /// The right-hand side the level above restricts into (kept between cycles).
    rhs: Option<C::Field>,
    /// Solves, Krylov iterations and seconds since the last `take_counts`.
    counts: (usize, usize, f64),
    solver: LevelSolver<C>,
}

enum LevelSolver<C: LevelSpace> {
    Coarsest,
    Intermediate(Box<Gcr<C, CoarseOperator, CoarseCycle<C>>>),
}

impl<C: LevelSpace> CoarseLevel<C> {
    /// The coarsest level.
    pub fn coarsest(space: C, index: usize, params: &MgParams) -> CoarseLevel<C> {
        let even_odd = params.coarse_even_odd && space.op().even_odd_possible();
        CoarseLevel::new(space, index, params, even_odd, LevelSolver::Coarsest)
    }

    /// An intermediate level over `next` through the transfer `t` (this level to the
    /// next).
    pub fn intermediate(
        space: C,
        index: usize,
        params: &MgParams,
        t: C::Transfer,
        next: CoarseLevel<C>,
    ) -> CoarseLevel<C> {
        let precision = params.coarse_precision();
        let cycle = CoarseCycle {
            t,
            next: Box::new(next),
            op: CoarseOperator::full(),
            smoothing: params.smoothing(),
            work: Vec::new(),
            applications: 0,
            precision,
        };
        let gcr = Gcr::preconditioned(CoarseOperator::full(), params.coarse_restart, cycle);
        CoarseLevel::new(
            space,
            index,
            params,
            false,
            LevelSolver::Intermediate(Box::new(gcr)),
        )
    }

    fn new(
        space: C,
        index: usize,
        params: &MgParams,
        even_odd: bool,
        solver: LevelSolver<C>,
    ) -> CoarseLevel<C> {
        CoarseLevel {
            space,
            index,
            precision: params.coarse_precision(),
            rules: StopRules::new(params.coarse_tol, params.coarse_max_iterations),
            restart: params.coarse_restart,
            even_odd,
            rhs: None,
            counts: (0, 0, 0.0),
            solver,
        }
    }

    /// The full field the level above restricts its residual into.
    fn take_rhs(&mut self) -> Result<C::Field> {
        match self.rhs.take() {
            Some(f) => Ok(f),
            None => self
                .space
                .alloc_layout(Layout::new(Subset::Full, self.precision)),
        }
    }

    /// Approximately solve this level's D_c x = b (b and x full fields of this level).
    pub fn solve(&mut self, b: &C::Field) -> Result<C::Field> {
        let start = std::time::Instant::now();
        let (rhs, b_o) = if self.even_odd {
            let (rhs, b_o) = self.space.schur_source(b)?;
            (Some(rhs), Some(b_o))
        } else {
            (None, None)
        };
        let rhs = rhs.as_ref().unwrap_or(b);
        let nb = self.space.norm2(rhs)?;
        let mut quiet = |_: usize, _: f64| {};
        let mut monitor = Monitor::new(self.rules.clone(), nb, &mut quiet);
        let out = match &mut self.solver {
            LevelSolver::Coarsest => {
                let op = if self.even_odd {
                    CoarseOperator::schur()
                } else {
                    CoarseOperator::full()
                };
                let mut gcr = Gcr::new(op, self.restart);
                run_plain(&mut self.space, &mut gcr, rhs, &mut monitor)?
            }
            LevelSolver::Intermediate(gcr) => {
                run_plain(&mut self.space, gcr.as_mut(), rhs, &mut monitor)?
            }
        };
        self.counts.0 += 1;
        self.counts.1 += out.iterations;
        let x = match b_o {
            Some(b_o) => self.space.schur_reconstruct(&out.x, &b_o),
            None => Ok(out.x),
        };
        self.counts.2 += start.elapsed().as_secs_f64();
        x
    }

    /// The level below (None on the coarsest).
    pub fn next(&self) -> Option<&CoarseLevel<C>> {
        match &self.solver {
            LevelSolver::Coarsest => None,
            LevelSolver::Intermediate(gcr) => Some(&gcr.preconditioner.next),
        }
    }

    /// Solves and iterations of this level and the ones below, since the last call.
    pub fn take_counts(&mut self, into: &mut CoarseCounts) {
        let (n, it, seconds) = std::mem::take(&mut self.counts);
        into.solves.push(n);
        into.iterations.push(it);
        into.seconds.push(seconds);
        if let LevelSolver::Intermediate(gcr) = &mut self.solver {
            gcr.preconditioner.next.take_counts(into);
        }
    }
}

/// The cycle of an intermediate coarse level as the preconditioner of its flexible GCR.
pub struct CoarseCycle<C: LevelSpace> {
    t: C::Transfer,
    next: Box<CoarseLevel<C>>,
    op: CoarseOperator,
    smoothing: Smoothing,
    work: Vec<C::Field>,
    applications: usize,
    precision: Precision,
}

impl<C: LevelSpace> LinearOperator<C> for CoarseCycle<C> {
    fn apply(&mut self, space: &mut C, out: &mut C::Field, inp: &C::Field) -> Result<()> {
        let layout = Layout::new(Subset::Full, self.precision);
        while self.work.len() < self.smoothing.work_fields() {
            self.work.push(space.alloc_layout(layout)?);
        }
        self.applications = cycle(
            space,
            &mut self.op,
            &self.t,
            self.smoothing,
            &mut self.work,
            inp,
            out,
            &mut self.next,
        )?;
        Ok(())
    }
    fn domain(&self) -> Subset {
        Subset::Full
    }
    fn hermitian(&self) -> bool {
        false
    }
    fn name(&self) -> String {
        "coarse K-cycle".into()
    }
    fn stencil_applications(&self) -> usize {
        self.applications
    }
}
