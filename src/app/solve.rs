//! One solve on any backend as a plan says (the right-hand side, the upload, the solve,
//! the true residual), and everything after it: the CPU check of D x = b, the report, the
//! summary and the outputs. The single-device run and every rank of a split run go through
//! here.

use super::plan::SolvePlan;
use crate::backend::prelude::*;
use crate::backend::{Capabilities, Operator};
use crate::config::{LoadedConfig, Preconditioning};
use crate::dirac;
use crate::error::{Error, Result};
use crate::field::SpinorField;
use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::{self, SolveReport, Timings};
use crate::solver::{self, Method, StopReason};
use std::time::Instant;

/// Solve D x = b (through A = D or g5 D, rhs = b or g5 b) on any backend as `plan` says.
pub fn solve_on<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    plan: &SolvePlan,
) -> Result<SolveResult> {
    solve_on_rank(backend, problem, plan, 0)
}

/// `solve_on` for one rank of a split lattice: `problem` holds the rank's sub-lattice
/// and every rank calls this at once (the reductions are collective); only rank 0 shows
/// progress.
pub fn solve_on_rank<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    plan: &SolvePlan,
    rank: usize,
) -> Result<SolveResult> {
    solve_source_on_rank(backend, problem, &problem.source, plan, rank, &mut None)
}

/// `solve_on` with the right-hand side `source` in place of the problem's (one column of
/// a propagator: the backend, built once, solves every column).
pub fn solve_source_on<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    source: &SpinorField,
    plan: &SolvePlan,
) -> Result<SolveResult> {
    solve_source_on_rank(backend, problem, source, plan, 0, &mut None)
}

/// `solve_source_on` keeping the multigrid of `method = "mg"` in `mg` for the next
/// source (a propagator's columns share one set-up).
pub fn solve_source_kept<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    source: &SpinorField,
    plan: &SolvePlan,
    mg: &mut Option<solver::mg::WilsonHierarchy<B>>,
) -> Result<SolveResult> {
    solve_source_on_rank(backend, problem, source, plan, 0, mg)
}

fn solve_source_on_rank<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    source: &SpinorField,
    plan: &SolvePlan,
    rank: usize,
    mg: &mut Option<solver::mg::WilsonHierarchy<B>>,
) -> Result<SolveResult> {
    let op = plan.method.iterated_form(problem.operator);
    let rhs = timed("right-hand side (host)", || {
        if op.gamma5() {
            source.gamma5()
        } else {
            source.clone()
        }
    });
    if plan.preconditioning == Preconditioning::EvenOdd {
        problem.lattice.require_even("even-odd preconditioning")?;
    }
    let spec = plan.spec();
    timed("prepare the backend", || {
        backend.prepare(crate::app::tuning::plan_layout(plan), plan.fused)?;
        // The solve's own fields, ahead (the stencil options do not enter them).
        let fields = crate::app::footprint::DevicePlan::of_run(
            problem.lattice.volume(),
            &crate::backend::cuda::CudaOptions::default(),
            plan,
            false,
        );
        backend.reserve(crate::app::footprint::solve_working_bytes(&fields))
    })?;
    // Even-odd: the source goes in alone and is freed once the even right-hand side is
    // made; the form's right-hand side b, which only the final check needs, is uploaded
    // after the solve's fields are gone (app::footprint counts it so).
    let t = Instant::now();
    let (b, source) = timed("upload the source", || -> Result<_> {
        Ok(if spec.even_odd {
            (None, Some(backend.upload(source)?))
        } else {
            (Some(backend.upload(&rhs)?), None)
        })
    })?;
    let mut upload = t.elapsed().as_secs_f64();
    // Split lattice: the ranks start the solve's clock together (their uploads end at
    // different times; the first global sum would otherwise hold the difference inside
    // rank 0's solve time: on 4 GPUs the ranks' solves started up to 18 ms
    // apart, and 14 ms of rank 0's 71.8 ms Schur system were in no timed step). Nothing
    // on one rank.
    timed("wait for every rank", || backend.barrier())?;
    let t_solve = crate::report::timeline::process_seconds();
    let t = Instant::now();
    let progress = if rank == 0 {
        crate::report::progress::SolveProgress::new(plan.method.label(), plan.cr.tol)
    } else {
        crate::report::progress::SolveProgress::silent()
    };
    let mut observe = |k, r| progress.update(k, r);
    let mut multigrid = None;
    let out = match (&b, source) {
        (Some(b), None) if plan.method == Method::Mg => {
            let (out, stats) = solve_multigrid(backend, problem, plan, b, &mut observe, mg)?;
            multigrid = Some(stats);
            out
        }
        (_, Some(source)) => solver::solve_from_source(backend, &spec, op, source, &mut observe)?,
        (Some(b), None) => solver::solve(backend, &spec, op, b, None, &mut observe)?,
        (None, None) => return Err(Error::internal("a solve without a right-hand side")),
    };
    let x = out.x;
    progress.finish();
    // Every path ends on a host read of a scalar (or a reduction), after the last kernel
    // of the solve except the even-odd reconstruction, which the download below waits
    // for: the solve time is taken after a synchronising norm.
    let t_norm = Instant::now();
    let _ = backend.norm2(&x)?;
    tracing::debug!(
        us = crate::solver::micros_since(&t_norm),
        "solve: the final norm (waits for the reconstruction)"
    );
    // The multigrid's set-up is reported apart from its solve.
    let setup = multigrid.as_ref().map_or(0.0, |m| m.setup_seconds);
    let solve = t.elapsed().as_secs_f64() - setup;
    if setup > 0.0 {
        crate::report::timeline::record("multigrid set-up", t_solve, setup);
    }
    crate::report::timeline::record("solve", t_solve + setup, solve);
    let b = match b {
        Some(b) => b,
        None => {
            let t = Instant::now();
            let b = timed("upload the right-hand side", || backend.upload(&rhs))?;
            upload += t.elapsed().as_secs_f64();
            b
        }
    };
    let t = Instant::now();
    let solution = timed("download the solution", || backend.download(&x))?;
    let download = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let true_residual = timed("true residual (backend)", || {
        solver::true_residual(backend, op, &b, &x)
    })?;
    let check = t.elapsed().as_secs_f64();
    // The statistics of the wrappers (and of the fused CR): reliable updates of a mixed
    // solve too when it runs CR's plain loop (half-double).
    let wrapped = plan.fused
        || plan.method != Method::Cr
        || spec.even_odd
        || plan.precision != crate::backend::Precision::Double;
    Ok(SolveResult {
        solution,
        iterations: out.iterations,
        reason: out.reason,
        history: out.history,
        operator_applications: out.operator_applications,
        true_residual,
        timings: Timings {
            setup: problem.setup_seconds,
            upload,
            solve,
            download,
            true_residual: check,
        },
        fused: wrapped.then_some(out.stats),
        plan: plan.describe(),
        multigrid,
    })
}

/// D x = b by multigrid-preconditioned GCR: the hierarchy kept in `cache` from an
/// earlier source, or built here from the problem's links (its coarse operators are
/// Galerkin products of D as dense matrices on the host) and kept; the solve on the
/// backend.
fn solve_multigrid<B: Backend>(
    backend: &mut B,
    problem: &Problem,
    plan: &SolvePlan,
    b: &B::Field,
    observe: &mut dyn FnMut(usize, f64),
    cache: &mut Option<solver::mg::WilsonHierarchy<B>>,
) -> Result<(solver::SolveOutcome<B::Field>, solver::mg::MgStats)> {
    let params = plan
        .multigrid
        .as_ref()
        .ok_or_else(|| Error::internal("method = \"mg\" without its parameters"))?;
    let action = problem.action();
    // The site term only where a set-up reads it; its making on the host is set-up time.
    let building = cache.is_none();
    let prep = Instant::now();
    let terms = (building && action.has_site_term())
        .then(|| {
            timed("multigrid set-up: the site term on the host", || {
                dirac::clover::SiteTerms::new(&problem.gauge, &action)
            })
        })
        .transpose()?;
    let stencil = dirac::coarse::WilsonStencil::new(&problem.gauge, problem.kappa, terms.as_ref());
    let prep = prep.elapsed().as_secs_f64();
    let rules = plan.cr.clone();
    let (out, mut stats) = timed("multigrid set-up and solve", || {
        solver::mg::solve(
            backend,
            &stencil,
            params,
            plan.restart,
            b,
            rules,
            observe,
            cache,
        )
    })?;
    if building {
        stats.setup_seconds += prep;
    }
    Ok((out, stats))
}

/// ||b - D x|| / ||b|| recomputed on the CPU with the fast operator: the residual of the
/// original system, whichever operator and backend solved.
/// With a clover term or a twist, D = A - kappa H with A built here (NaN if it cannot be:
/// the backend that solved would have refused it first).
pub fn cpu_residual_of_d(problem: &Problem, x: &SpinorField) -> f64 {
    let mut dx = SpinorField::zeros(problem.lattice.volume());
    let action = problem.action();
    if !action.has_site_term() {
        dirac::apply(Operator::D, &problem.gauge, problem.kappa, x, &mut dx);
        return dx.rel_diff(&problem.source);
    }
    let Ok(terms) = dirac::clover::SiteTerms::new(&problem.gauge, &action) else {
        return f64::NAN;
    };
    dirac::fast::hop(&problem.gauge, x, &mut dx, dirac::Sites::All);
    let mut ax = terms.apply(&problem.lattice, x, None, false, false);
    for (a, h) in ax.data.iter_mut().zip(&dx.data) {
        *a -= problem.kappa * *h;
    }
    ax.rel_diff(&problem.source)
}

/// Everything after the solve: the CPU check of D x = b, the report (with the split
/// lattice's part, if any), the summary, the outputs, and the exit for a solve that did
/// not converge.
pub(crate) fn finish_run(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    backend_description: &str,
    gpu: Option<crate::report::GpuMetrics>,
    parallel: Option<crate::report::ParallelReport>,
    wall: report::BackendWall,
) -> Result<SolveReport> {
    let c = &cfg.config;
    let t = Instant::now();
    let d_residual = timed("CPU check of D x = b", || {
        cpu_residual_of_d(problem, &result.solution)
    });
    let cpu_check = t.elapsed().as_secs_f64();
    let mut rep = timed("build the report", || {
        report::build(cfg, problem, result, backend_description, d_residual, gpu)
    });
    rep.parallel = parallel;
    rep.hash_inputs();
    let r = &result.timings;
    rep.time = report::TimeLine {
        read_generate: r.setup,
        upload: wall.construct + r.upload + r.download,
        tune: wall.tune,
        setup: result.multigrid.as_ref().map_or(0.0, |m| m.setup_seconds),
        solve: r.solve,
        verify: r.true_residual + cpu_check,
        links_upload_bytes: wall.links.map(|(b, _)| b),
        links_upload_gbytes_per_second: wall
            .links
            .filter(|&(_, s)| s > 0.0)
            .map(|(b, s)| b as f64 / s / 1e9),
        ..Default::default()
    };
    // The outputs fill in the write time and close the line before the report is
    // serialised; the summary follows (also when a write failed, with the line so far).
    let written = write_outputs(cfg, problem, result, &mut rep);
    if written.is_err() {
        rep.time.finish(report::timeline::process_seconds());
    }
    // The summary ends with the files written and the boundary conditions; --quiet
    // prints nothing on stdout (the files are those of [output], the report says all).
    let written = written?;
    if !crate::report::progress::is_quiet() {
        println!("{}", report::summary(&rep));
        println!(
            "{}",
            crate::app::outputs::final_lines(cfg, &written).trim_end()
        );
    }
    if result.reason != StopReason::Converged {
        return Err(Error::NotConverged(format!(
            "{} {} after {} iterations (residual {:.3e}, tolerance {:.1e}); the report was written",
            result.plan,
            result.reason.describe(),
            result.iterations,
            result.history.last().copied().unwrap_or(f64::NAN),
            c.solver.tolerance
        )));
    }
    Ok(rep)
}

/// The options a GPU backend for `plan` is built with: `opts`, or where the config tunes,
/// the tuner's start (`tuning::start_options`), checked against what the plan needs.
pub(crate) fn backend_options(
    cfg: &LoadedConfig,
    opts: crate::backend::cuda::CudaOptions,
    plan: &SolvePlan,
) -> Result<crate::backend::cuda::CudaOptions> {
    let opts = if cfg.config.backend.tune {
        crate::app::tuning::start_options(opts.version, &opts, crate::app::tuning::TuneMode::Tune)
    } else {
        opts
    };
    plan.check(Capabilities::of_stencil(opts.version))?;
    Ok(opts)
}

fn write_outputs(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    rep: &mut SolveReport,
) -> Result<crate::app::outputs::Written> {
    crate::app::outputs::write_run(cfg, problem, result, rep)
}
