//! The multigrid set-up and the fine level's preconditioner: near-null vectors by inverse
//! iteration on each level, the prolongators and Galerkin coarse operators, the adaptive
//! refinement; `Hierarchy` is the result and, as a `LinearOperator` of the fine space, the
//! preconditioner M of the outer flexible GCR.

use super::cycle::{cycle, CoarseCounts, CoarseLevel};
use super::near_null::{self, approximate_solve, near_null, orthonormalise};
use super::MgParams;
use crate::backend::coarse::CoarseSpace;
use crate::clock::timed;
use crate::dirac::coarse::{
    galerkin, Aggregation, CoarseLevelSpace, CoarseOp, CoarseOperator, Coarsen, LevelSpace,
    Prolongator, Stencil,
};
use crate::linalg::engines::FusedCr;
use crate::linalg::{Layout, LinearOperator, Precision, Subset};
use crate::solver::gcr::Gcr;
use crate::solver::StopRules;
use crate::{Error, Result};
use std::sync::Arc;

/// The levels below the fine one and the fine level's cycle: the preconditioner.
pub struct Hierarchy<S: Coarsen, A> {
    /// The fine operator (the Wilson form D on the backend).
    op: A,
    /// The prolongator to the first coarse level, in the fine space's form.
    t: S::Transfer,
    coarse: CoarseLevel<S::Coarse>,
    params: MgParams,
    work: Vec<S::Field>,
    low: Option<[S::Field; 2]>,
    applications: usize,
    /// Wall seconds in the cycles since the last `take_cycle_seconds`.
    cycle_seconds: f64,
    /// The set-up's fine-operator applications and seconds.
    pub setup_applications: usize,
    pub setup_seconds: f64,
}

impl<S: Coarsen, A> Hierarchy<S, A> {
    /// Coarse solves and their iterations per level since the last call.
    pub fn take_counts(&mut self) -> CoarseCounts {
        let mut c = CoarseCounts::default();
        self.coarse.take_counts(&mut c);
        c
    }

    /// Wall seconds in the fine level's cycles (the coarse solves included) since the last
    /// call: the host's clock, which the smoother's and the coarse solves' reductions keep
    /// close to the device's.
    pub fn take_cycle_seconds(&mut self) -> f64 {
        std::mem::take(&mut self.cycle_seconds)
    }

    /// Lattice dimensions and numbers a site of each coarse level, and the bytes of its
    /// operator.
    pub fn describe_levels(&self) -> Vec<([usize; 4], usize, usize)> {
        let mut out = Vec::new();
        let mut level = Some(&self.coarse);
        while let Some(l) = level {
            let op = l.space.op();
            out.push((op.lattice.dims, op.dof, op.bytes()));
            level = l.next();
        }
        out
    }
}

/// Build the hierarchy for the fine operator `op` (the Wilson form D) on `space`, whose
/// host form is `stencil` (the same operator as dense site and hop matrices: the Galerkin
/// products read it).
pub fn setup<S: Coarsen + FusedCr, A: LinearOperator<S> + Clone>(
    space: &mut S,
    op: A,
    stencil: &dyn Stencil,
    params: &MgParams,
) -> Result<Hierarchy<S, A>> {
    check(params, stencil)?;
    let t = std::time::Instant::now();
    let lattice = stencil.lattice();
    let numbers = lattice.volume() * stencil.dof();
    let mut op_work = op.clone();
    let (mut fields, mut applications) = timed("multigrid set-up: near-null vectors", || {
        near_null::fine(
            space,
            &mut op_work,
            lattice,
            numbers,
            params.vectors[0],
            params,
        )
    })?;
    let mut h = build(space, op, stencil, &fields, params)?;
    for pass in 0..params.refine {
        // Inverse iteration with the multigrid-preconditioned solver, then a rebuild.
        let refined = std::time::Instant::now();
        let mut next = Vec::with_capacity(fields.len());
        for x in &fields {
            // A preconditioned iteration does the work of several plain ones: a quarter
            // of the set-up's iteration count (at least 2).
            let mut solver = Gcr::preconditioned(op_work.clone(), params.coarse_restart, h);
            let rules = StopRules::new(1e-14, params.setup_solver_iterations.div_ceil(4).max(2));
            let (y, apps) = approximate_solve(space, &mut solver, x, rules)?;
            applications += apps;
            h = solver.preconditioner;
            next.push(y);
        }
        orthonormalise(space, &mut next)?;
        crate::clock::record_since("multigrid set-up: refinement solves", refined);
        fields = next;
        tracing::debug!(pass, "multigrid: refined the near-null vectors");
        h = build(space, h.op, stencil, &fields, params)?;
    }
    h.setup_applications = applications;
    h.setup_seconds = t.elapsed().as_secs_f64();
    Ok(h)
}

/// The parameters against the fine lattice (the config checks them against the
/// lattice too; this guards the library's callers).
fn check(params: &MgParams, stencil: &dyn Stencil) -> Result<()> {
    let n = params.levels.saturating_sub(1);
    if params.levels < 2 || params.blocks.len() != n || params.vectors.len() != n {
        return Err(Error::invalid(
            "multigrid.levels",
            format!(
                "{} levels need {} blocks and {} vector counts (given {} and {})",
                params.levels,
                n,
                n,
                params.blocks.len(),
                params.vectors.len()
            ),
        ));
    }
    let _ = Aggregation::new(stencil.lattice(), params.blocks[0], "multigrid.blocks")?;
    Ok(())
}

/// The prolongator from the fine vectors (`Coarsen::coarsen`) and every coarse level below
/// it.
fn build<S: Coarsen, A>(
    space: &mut S,
    op: A,
    stencil: &dyn Stencil,
    fields: &[S::Field],
    params: &MgParams,
) -> Result<Hierarchy<S, A>> {
    let agg = Aggregation::new(stencil.lattice(), params.blocks[0], "multigrid.blocks")?;
    let refs: Vec<&S::Field> = fields.iter().collect();
    let (galerkin_op, t) = space.coarsen(stencil, agg, &refs, params.precision)?;
    let coarse_op = level_op(galerkin_op, 1, params)?;
    let coarse = timed("multigrid set-up: coarse levels", || {
        let first = space.coarse_space(Arc::new(coarse_op), params.coarse_precision())?;
        coarse_levels(first, 1, params)
    })?;
    Ok(Hierarchy {
        op,
        t,
        coarse,
        params: params.clone(),
        work: Vec::new(),
        low: None,
        applications: 0,
        cycle_seconds: 0.0,
        setup_applications: 0,
        setup_seconds: 0.0,
    })
}

/// Level `index`'s operator as its level uses it: the coarsest solved even-odd carries
/// its site blocks' inverses.
fn level_op(op: CoarseOp, index: usize, params: &MgParams) -> Result<CoarseOp> {
    if index + 1 == params.levels && params.coarse_even_odd && op.even_odd_possible() {
        timed("multigrid set-up: coarse site inverses", || {
            op.with_site_inverse()
        })
    } else {
        Ok(op)
    }
}

/// Coarse level `index` on `space` (its operator made), and the levels below it. The
/// near-null vectors of an intermediate level and its Galerkin product are made on the
/// host; the level below lives where `space` puts it.
fn coarse_levels<C: LevelSpace>(
    mut space: C,
    index: usize,
    params: &MgParams,
) -> Result<CoarseLevel<C>> {
    if index + 1 == params.levels {
        return Ok(CoarseLevel::coarsest(space, index, params));
    }
    let op = space.op().clone();
    let mut host = CoarseSpace::new(op.clone());
    let layout = Layout::new(Subset::Full, Precision::Double);
    let numbers = op.volume() * op.dof;
    let (fields, _) = near_null(
        &mut host,
        &mut CoarseOperator::full(),
        layout,
        numbers,
        params.vectors[index],
        params,
        index,
    )?;
    let vectors = fields.into_iter().map(|f| f.data).collect::<Vec<_>>();
    let key = "multigrid.blocks";
    let agg = Aggregation::new(&op.lattice, params.blocks[index], key)?;
    let p = Prolongator::new(agg, op.dof, &vectors)?;
    let next_op = level_op(galerkin(op.as_ref(), &p)?, index + 1, params)?;
    let t = space.transfer(&p, params.coarse_precision())?;
    let next_space = space.coarse_space(Arc::new(next_op), params.coarse_precision())?;
    let next = coarse_levels(next_space, index + 1, params)?;
    Ok(CoarseLevel::intermediate(space, index, params, t, next))
}

impl<S: Coarsen, A: LinearOperator<S>> LinearOperator<S> for Hierarchy<S, A> {
    /// out = M inp: one K-cycle in the preconditioner's precision.
    fn apply(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
        let start = std::time::Instant::now();
        let outer = space.layout(inp);
        let layout = outer.with_precision(self.params.precision);
        let smoothing = self.params.smoothing();
        while self.work.len() < smoothing.work_fields() {
            self.work.push(space.alloc_layout(layout)?);
        }
        let same = layout == outer;
        if !same && self.low.is_none() {
            self.low = Some([space.alloc_layout(layout)?, space.alloc_layout(layout)?]);
        }
        let Hierarchy {
            op,
            t,
            coarse,
            work,
            low,
            ..
        } = self;
        let (b, x): (&S::Field, &mut S::Field) = match low {
            Some([b, x]) if !same => {
                space.convert(b, inp)?;
                (b, x)
            }
            _ => (inp, &mut *out),
        };
        self.applications = cycle(space, op, t, smoothing, work, b, x, coarse)?;
        if let Some([_, x]) = &self.low {
            if !same {
                space.convert(out, x)?;
            }
        }
        self.cycle_seconds += start.elapsed().as_secs_f64();
        Ok(())
    }
    fn domain(&self) -> Subset {
        Subset::Full
    }
    fn hermitian(&self) -> bool {
        false
    }
    fn name(&self) -> String {
        format!("{}-level multigrid", self.params.levels)
    }
    fn stencil_applications(&self) -> usize {
        self.applications
    }
}
