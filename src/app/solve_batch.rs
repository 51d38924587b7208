//! A propagator's columns solved as batches (`[solver] batch` > 1): the sources uploaded
//! together, one batched solve (`solver::batch`: CR, or BiCGStab on the plan's engine,
//! each step's operator applied to the batch at once, a converged column leaving it), then each column's
//! solution downloaded and its true residual made on the backend, as `solve::
//! solve_source_on` does for one.

use super::plan::SolvePlan;
use crate::backend::prelude::*;
use crate::error::Result;
use crate::field::SpinorField;
use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::Timings;
use crate::solver;
use std::time::Instant;

/// Solve D x_k = source_k for every source of `sources` as one batch on `backend` as
/// `plan` says; one result per source, its timings the batch's shared equally (the solve
/// time is the batch's wall time over its columns).
pub fn solve_sources_on<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    sources: &[SpinorField],
    plan: &SolvePlan,
) -> Result<Vec<SolveResult>> {
    let n = sources.len().max(1) as f64;
    let op = plan.method.iterated_form(problem.operator);
    // BiCGStab keeps the plan's engine (fused: the passes with the scalars on the
    // device); CR's batch keeps its scalars on the host.
    let mut spec = plan.spec();
    if plan.method != crate::solver::Method::Bicgstab {
        spec.fused = false;
        spec.check_every = 1;
    }
    if spec.even_odd {
        problem.lattice.require_even("even-odd preconditioning")?;
    }
    timed("prepare the backend", || {
        backend.prepare(crate::app::tuning::plan_layout(plan), spec.fused)
    })?;
    // The form's right-hand side: the source for even-odd (prepared on the backend),
    // else the source with g5 where the form has it.
    let rhs = |s: &SpinorField| {
        if op.gamma5() {
            s.gamma5()
        } else {
            s.clone()
        }
    };
    let t = Instant::now();
    let inputs = timed("upload the sources", || {
        sources
            .iter()
            .map(|s| {
                if spec.even_odd {
                    backend.upload(s)
                } else {
                    backend.upload(&rhs(s))
                }
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let upload = t.elapsed().as_secs_f64();
    let t_solve = crate::report::timeline::process_seconds();
    let t = Instant::now();
    let outs = solver::batch::solve_batch(backend, &spec, op, inputs)?;
    if let Some(last) = outs.last() {
        let _ = backend.norm2(&last.x)?; // waits for the reconstructions
    }
    let solve = t.elapsed().as_secs_f64();
    crate::report::timeline::record("batched solve", t_solve, solve);
    let mut results = Vec::with_capacity(outs.len());
    for (out, source) in outs.into_iter().zip(sources) {
        let t = Instant::now();
        let solution = timed("download the solution", || backend.download(&out.x))?;
        let download = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let b = backend.upload(&rhs(source))?;
        let true_residual = timed("true residual (backend)", || {
            solver::true_residual(backend, op, &b, &out.x)
        })?;
        results.push(SolveResult {
            multigrid: None,
            solution,
            iterations: out.iterations,
            reason: out.reason,
            history: out.history,
            operator_applications: out.operator_applications,
            true_residual,
            timings: Timings {
                setup: problem.setup_seconds,
                upload: upload / n,
                solve: solve / n,
                download,
                true_residual: t.elapsed().as_secs_f64(),
            },
            fused: Some(out.stats),
            plan: format!(
                "{}, batched over {} columns",
                plan.describe(),
                sources.len()
            ),
        });
    }
    Ok(results)
}
