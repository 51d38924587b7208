//! The set-up's near-null vectors: inverse iteration y ~ A^-1 x from seeded random
//! vectors, each result orthonormalised against the vectors before it (Babich et al.
//! 2010; QUDA's `generateNullVectors`). Two solvers make the approximate solves
//! (`[multigrid] setup_solver`):
//!
//! - `Bicgstab` (the fine level's default): the backend's BiCGStab on all the vectors of a
//!   batch at once (`solver::batch`: each application one batched operator, which on
//!   kernel 3.0 reads the links once for the batch; the fused iteration's scalars on the
//!   device), on the even Schur complement where every extent is even, in the
//!   preconditioner's precision (single for half): QUDA's default set-up solve.
//! - `Gcr`: GCR(`coarse_restart`) on the full operator in the level's precision, one
//!   vector after another (the coarse levels' set-up always).

use super::{MgParams, SetupSolver};
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use crate::linalg::engines::FusedCr;
use crate::linalg::{Layout, LinearOperator, Operator, Precision, Space, Subset};
use crate::rng::Stream;
use crate::solver::batch::solve_batch;
use crate::solver::gcr::Gcr;
use crate::solver::{run_plain, Iterate, Method, Monitor, SolveSpec, StopRules};
use crate::{Error, Result};

/// The approximate solves' relative tolerance: below what their iteration limit reaches,
/// so that `setup_solver_iterations` decides.
const SETUP_TOL: f64 = 1e-14;

/// Vectors a batched set-up solve holds at once (each its BiCGStab fields: about 1 GB a
/// vector at 32^3x64 in single); the batched operator takes up to 16 a launch.
pub const SETUP_BATCH: usize = 12;

/// The fine level's `n` near-null vectors of the Wilson form D (`op` on `space`, full
/// double fields of `numbers` host numbers each, on `lattice`) by the set-up solver
/// `params.setup_solver`. Returns the fields and the stencil applications made.
pub fn fine<S: FusedCr, A: LinearOperator<S> + ?Sized>(
    space: &mut S,
    op: &mut A,
    lattice: &Lattice,
    numbers: usize,
    n: usize,
    params: &MgParams,
) -> Result<(Vec<S::Field>, usize)> {
    match params.setup_solver {
        SetupSolver::Gcr => near_null(space, op, Layout::FULL, numbers, n, params, 0),
        SetupSolver::Bicgstab => batched(space, lattice, numbers, n, params),
    }
}

/// `n` near-null vectors of D by batches of BiCGStab solves (see the module's text),
/// widened to full double fields at the end. Each vector's start is the one `near_null`
/// draws; after each step a vector is orthonormalised against the vectors of the batches
/// before and the ones before it in its own batch.
pub fn batched<S: FusedCr>(
    space: &mut S,
    lattice: &Lattice,
    numbers: usize,
    n: usize,
    params: &MgParams,
) -> Result<(Vec<S::Field>, usize)> {
    let precision = params.coarse_precision();
    let low = Layout::new(Subset::Full, precision);
    let spec = setup_spec(lattice, params);
    let mut found: Vec<S::Field> = Vec::with_capacity(n);
    let mut applications = 0;
    for first in (0..n).step_by(SETUP_BATCH) {
        let columns = first..(first + SETUP_BATCH).min(n);
        let mut xs = columns
            .map(|v| space.field_from_host(random_start(params.seed, 0, v, numbers), low))
            .collect::<Result<Vec<_>>>()?;
        for _ in 0..params.setup_iterations {
            let outs = solve_batch(space, &spec, Operator::D, xs)?;
            xs = Vec::with_capacity(outs.len());
            for out in outs {
                applications += out.operator_applications;
                let mut x = out.x;
                project_out(space, &found, &mut x)?;
                project_out(space, &xs, &mut x)?;
                normalise(space, &mut x)?;
                xs.push(x);
            }
        }
        found.extend(xs);
    }
    if precision == Precision::Double {
        return Ok((found, applications));
    }
    let mut wide = Vec::with_capacity(found.len());
    for x in found {
        let mut d = space.alloc_layout(Layout::FULL)?;
        space.convert(&mut d, &x)?;
        wide.push(d);
    }
    Ok((wide, applications))
}

/// The batched set-up's solve: BiCGStab (fused where the backend has it: the CPU runs the
/// same arithmetic on the host), on the even Schur complement where every extent of
/// `lattice` is even, in the preconditioner's precision, `setup_solver_iterations` a step,
/// the scalars read once a step.
pub fn setup_spec(lattice: &Lattice, params: &MgParams) -> SolveSpec {
    let iterations = params.setup_solver_iterations;
    SolveSpec {
        fused: true,
        check_every: iterations,
        precision: params.coarse_precision(),
        even_odd: lattice.dims.iter().all(|d| d % 2 == 0),
        ..SolveSpec::new(Method::Bicgstab, StopRules::new(SETUP_TOL, iterations))
    }
}

/// `n` near-null vectors of `op` on its level (fields of `layout`, `numbers` host numbers
/// each): from seeded Gaussian random vectors, `setup_iterations` inverse-iteration steps
/// by GCR, each result orthonormalised against the vectors before it. Returns the fields
/// and the applications made.
pub(super) fn near_null<S: Space, A: LinearOperator<S> + ?Sized>(
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
            let rules = StopRules::new(SETUP_TOL, params.setup_solver_iterations);
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
pub(super) fn approximate_solve<S: Space, I: Iterate<S>>(
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
    project_out(space, basis, x)?;
    normalise(space, x)
}

/// x minus its projections on `basis` (orthonormal), one after another (modified
/// Gram-Schmidt).
fn project_out<S: Space>(space: &mut S, basis: &[S::Field], x: &mut S::Field) -> Result<()> {
    for b in basis {
        let c = space.dot(b, x)?;
        space.axpy(-c, b, x)?;
    }
    Ok(())
}

/// x / |x|; a vanished (or non-finite) x is an error.
fn normalise<S: Space>(space: &mut S, x: &mut S::Field) -> Result<()> {
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

pub(super) fn orthonormalise<S: Space>(space: &mut S, fields: &mut [S::Field]) -> Result<()> {
    for k in 0..fields.len() {
        let (done, rest) = fields.split_at_mut(k);
        orthonormalise_against(space, done, &mut rest[0])?;
    }
    Ok(())
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
