//! The multigrid set-up and the fine level's preconditioner: near-null vectors by inverse
//! iteration on each level, the prolongators and Galerkin coarse operators, the adaptive
//! refinement; `Hierarchy` is the result and, as a `LinearOperator` of the fine space, the
//! preconditioner M of the outer flexible GCR.

use super::cycle::{cycle, CoarseCounts, CoarseLevel};
use super::MgParams;
use crate::backend::coarse::CoarseSpace;
use crate::clock::timed;
use crate::dirac::coarse::{
    galerkin, Aggregation, CoarseLevelSpace, CoarseOp, CoarseOperator, Coarsen, LevelSpace,
    Prolongator, Stencil,
};
use crate::field::C64;
use crate::linalg::{Layout, LinearOperator, Precision, Space, Subset};
use crate::rng::Stream;
use crate::solver::gcr::Gcr;
use crate::solver::{run_plain, Iterate, Monitor, StopRules};
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

/// Build the hierarchy for the fine operator `op` on `space`, whose host form is
/// `stencil` (the same operator as dense site and hop matrices: the Galerkin products
/// read it).
pub fn setup<S: Coarsen, A: LinearOperator<S> + Clone>(
    space: &mut S,
    op: A,
    stencil: &dyn Stencil,
    params: &MgParams,
) -> Result<Hierarchy<S, A>> {
    check(params, stencil)?;
    let t = std::time::Instant::now();
    let fine_layout = Layout::new(Subset::Full, Precision::Double);
    let volume = stencil.lattice().volume();
    let mut op_work = op.clone();
    let (mut fields, mut applications) = timed("multigrid set-up: near-null vectors", || {
        near_null(
            space,
            &mut op_work,
            fine_layout,
            volume * stencil.dof(),
            params.vectors[0],
            params,
            0,
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

/// `n` near-null vectors of `op` on its level (fields of `layout`, `numbers` host numbers
/// each): from seeded Gaussian random vectors, `setup_iterations` inverse-iteration steps
/// by GCR, each result orthonormalised against the vectors before it. Returns the fields
/// and the applications made.
fn near_null<S: Space, A: LinearOperator<S> + ?Sized>(
    space: &mut S,
    op: &mut A,
    layout: Layout,
    numbers: usize,
    n: usize,
    params: &MgParams,
    level: usize,
) -> Result<(Vec<S::Field>, usize)> {
    let mut found: Vec<S::Field> = Vec::with_capacity(n);
    let mut applications = 0;
    for v in 0..n {
        let start = random_start(params.seed, level, v, numbers);
        let mut x = space.field_from_host(start, layout)?;
        for _ in 0..params.setup_iterations {
            let mut solver = Gcr::new(&mut *op, params.coarse_restart);
            let rules = StopRules::new(1e-14, params.setup_solver_iterations);
            let (y, apps) = approximate_solve(space, &mut solver, &x, rules)?;
            applications += apps;
            x = y;
            orthonormalise_against(space, &found, &mut x)?;
        }
        found.push(x);
    }
    Ok((found, applications))
}

/// Numbers a random stream draws of a start vector (one stream a chunk, so that the
/// chunks are drawn in parallel and the vector is the same for any thread count).
const START_CHUNK: usize = 4096;

/// Near-null vector `v`'s random start on `level`: `numbers` complex Gaussian numbers,
/// chunk k of `START_CHUNK` from the stream (level << 56) | (v << 40) | k of `seed`
/// (vectors < 2^16, chunks < 2^40: 2^52 numbers a vector). Drawn on the host's threads:
/// at 32^3x64 a vector is 25 M numbers, 50 M Box-Muller draws.
fn random_start(seed: u64, level: usize, v: usize, numbers: usize) -> Vec<C64> {
    use rayon::prelude::*;
    let base = ((level as u64) << 56) | ((v as u64 & 0xffff) << 40);
    let mut out = vec![C64::new(0.0, 0.0); numbers];
    out.par_chunks_mut(START_CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut rng = Stream::new(seed, base | k as u64);
            for z in chunk {
                *z = C64::new(rng.gaussian(), rng.gaussian());
            }
        });
    out
}

/// y ~ A^-1 x by the iterations the rules allow.
fn approximate_solve<S: Space, I: Iterate<S>>(
    space: &mut S,
    solver: &mut I,
    x: &S::Field,
    rules: StopRules,
) -> Result<(S::Field, usize)> {
    let nb = space.norm2(x)?;
    let mut quiet = |_: usize, _: f64| {};
    let mut monitor = Monitor::new(rules, nb, &mut quiet);
    let out = run_plain(space, solver, x, &mut monitor)?;
    Ok((out.x, out.operator_applications))
}

/// x minus its projections on `basis` (orthonormal), normalised.
fn orthonormalise_against<S: Space>(
    space: &mut S,
    basis: &[S::Field],
    x: &mut S::Field,
) -> Result<()> {
    for b in basis {
        let c = space.dot(b, x)?;
        space.axpy(-c, b, x)?;
    }
    let norm = space.norm2(x)?.sqrt();
    if !(norm > 0.0 && norm.is_finite()) {
        return Err(Error::internal(
            "multigrid set-up: a near-null vector vanished",
        ));
    }
    let mut scaled = space.alloc_layout(space.layout(x))?;
    space.axpy(C64::new(1.0 / norm, 0.0), x, &mut scaled)?;
    *x = scaled;
    Ok(())
}

fn orthonormalise<S: Space>(space: &mut S, fields: &mut [S::Field]) -> Result<()> {
    for k in 0..fields.len() {
        let (done, rest) = fields.split_at_mut(k);
        orthonormalise_against(space, done, &mut rest[0])?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The start vectors do not depend on the thread count, differ between vectors and
    /// levels, and are standard complex Gaussians: each real component's mean within 5
    /// standard errors of 0 (5 / sqrt(n)) and its variance within 5 of 1 (5 sqrt(2 / n)).
    #[test]
    fn random_starts_are_thread_independent_gaussians() {
        let n = 10 * START_CHUNK + 17;
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| random_start(1, 0, 3, n));
        let many = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap()
            .install(|| random_start(1, 0, 3, n));
        assert_eq!(one, many);
        assert_ne!(one[..8], random_start(1, 0, 4, n)[..8]);
        assert_ne!(one[..8], random_start(1, 1, 3, n)[..8]);
        assert_ne!(one[..8], random_start(2, 0, 3, n)[..8]);
        // Chunks are distinct streams: the second chunk does not repeat the first.
        assert_ne!(one[..8], one[START_CHUNK..START_CHUNK + 8]);
        let reals: Vec<f64> = one.iter().flat_map(|z| [z.re, z.im]).collect();
        let m = reals.len() as f64;
        let mean = reals.iter().sum::<f64>() / m;
        let var = reals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / m;
        assert!(mean.abs() < 5.0 / m.sqrt(), "mean {mean}");
        assert!((var - 1.0).abs() < 5.0 * (2.0 / m).sqrt(), "variance {var}");
    }
}
