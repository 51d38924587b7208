//! The per-version table's rows: one backend per stencil version (or per fast-path option
//! set), its launch geometry tuned, its operator validated, and its timed solves.

use super::report::AblateRow;
use crate::app::run::{solve_on, Problem, SolvePlan};
use crate::app::tuning::TuneMode;
use crate::app::tuning::{median_spread, tune_live};
use crate::backend::cuda::core::tune::TuneCache;
use crate::backend::cuda::{CudaBackend, CudaOptions, Reconstruct, StencilVersion};
use crate::backend::prelude::*;
use crate::dirac;
use crate::error::{Error, Result};
use crate::field::SpinorField;
use crate::solver::StopReason;

/// How an ablation row tunes its backend: the cache and the mode.
pub(super) struct Tuning<'a> {
    pub(super) cache: &'a mut TuneCache,
    pub(super) mode: TuneMode,
}

/// One row: a backend with `opts`, its launch geometry tuned on it (`tune_live`), the
/// operator validated, a warm-up and `repeat` timed solves.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_version(
    p: &Problem,
    opts: CudaOptions,
    tuning: Tuning<'_>,
    params: &SolvePlan,
    repeat: usize,
    cpu_seconds: f64,
    triad: f64,
) -> Result<AblateRow> {
    let version = opts.version;
    let mut be = CudaBackend::new(&p.gauge, p.kappa, &opts)?;
    be.set_action(&p.gauge, &p.action())?;
    let geometry = tune_live(
        &mut be,
        p,
        crate::app::tuning::plan_layout(params),
        tuning.cache,
        tuning.mode,
    )?;
    let setup = be.setup_times().clone();
    // Validation first: the operator on a random vector against the CPU operator.
    let psi = SpinorField::random(p.lattice.volume(), 77, 0);
    let action = p.action();
    let cpu = if action.has_site_term() {
        let terms = dirac::clover::SiteTerms::new(&p.gauge, &action)?;
        dirac::apply_reference_with(p.operator, &p.gauge, p.kappa, Some(&terms), &psi)
    } else {
        let mut cpu = SpinorField::zeros(p.lattice.volume());
        dirac::apply(p.operator, &p.gauge, p.kappa, &psi, &mut cpu);
        cpu
    };
    let d_psi = be.upload(&psi)?;
    let mut d_out = be.alloc()?;
    be.apply(p.operator, &mut d_out, &d_psi)?;
    let rel = be.download(&d_out)?.rel_diff(&cpu);
    let valid_op = rel < 1e-13;

    let _warm = solve_on(&mut be, p, params)?;
    let (mut per_it, mut total) = (vec![], vec![]);
    let mut last = None;
    for _ in 0..repeat {
        be.reset_stats()?;
        let r = solve_on(&mut be, p, params)?;
        per_it.push(1e3 * r.timings.solve / r.iterations.max(1) as f64);
        total.push(r.timings.solve);
        last = Some(r);
    }
    let r = last.expect("repeat >= 1");
    let label = variant_label(version, params, opts.reconstruct);
    // The books cover the last timed solve (reset before it).
    let rates = crate::report::stencil_rates(&be, p.lattice.volume());
    let (pm, ps) = median_spread(per_it);
    let (tm, ts) = median_spread(total);
    let converged = r.reason == StopReason::Converged;
    let true_ok = r.true_residual <= 2.0 * params.cr.tol;
    let mut error = None;
    if !valid_op {
        error = Some(format!("operator differs from the CPU by {rel:.2e}"));
    } else if !converged || !true_ok {
        error = Some(format!(
            "solve {} with true residual {:.2e}",
            r.reason.describe(),
            r.true_residual
        ));
    }
    Ok(AblateRow {
        version: label,
        solver: r.plan.clone(),
        block_threads: be.block_threads(),
        multiple: if version.uses_multiple() {
            be.multiple()
        } else {
            0
        },
        geometry,
        valid: error.is_none(),
        operator_rel_diff: rel,
        iterations: r.iterations,
        ms_per_iteration_median: pm,
        ms_per_iteration_spread: ps,
        seconds_to_solution_median: tm,
        seconds_to_solution_spread: ts,
        speedup_over_cpu: cpu_seconds / tm,
        gflops_model_1320: rates.gflops_model_1320,
        gflops_own_count: rates.gflops_own_count,
        gbytes_per_second_model: rates.gbytes_per_second_model,
        fraction_of_triad: rates.gbytes_per_second_model / triad,
        true_residual: r.true_residual,
        compile_ms: setup.compile_ms,
        alloc_ms: setup.alloc_ms,
        upload_ms: setup.upload_ms,
        layout_ms: setup.layout_ms,
        tune_ms: setup.tune_ms,
        download_ms: 1e3 * r.timings.download,
        stencil_share_of_solve: rates.millis / 1e3 / r.timings.solve,
        error,
        history: r.history,
    })
}

/// "1.6.1", or "3.0 fused+eo+single+r12" for the option rows ("3.0 eo+half+r12": half-double
/// runs the generic iteration).
pub fn variant_label(
    version: StencilVersion,
    plan: &SolvePlan,
    reconstruct: Reconstruct,
) -> String {
    use crate::backend::Precision;
    let half = plan.precision == Precision::Half;
    let mut tags = Vec::new();
    if plan.fused {
        tags.push("fused");
    }
    if (plan.fused || half) && plan.preconditioning == crate::config::Preconditioning::EvenOdd {
        tags.push("eo");
    }
    if plan.fused && plan.precision == Precision::Single {
        tags.push("single");
    }
    if half {
        tags.push("half");
    }
    if reconstruct.compressed() {
        tags.push(reconstruct.label());
    }
    let mut l = version.to_string();
    if !tags.is_empty() {
        l.push(' ');
        l.push_str(&tags.join("+"));
    }
    l
}

/// The fast path's option rows (kernel 3.0): the fused iteration, then each option on
/// its own and together, so that the table shows each option's own gain (link compression:
/// 12 and 8 reals, on the fused iteration and with every option).
pub fn option_variants(base: &SolvePlan) -> Vec<(SolvePlan, Reconstruct)> {
    use crate::backend::Precision;
    use crate::config::Preconditioning;
    let fused = SolvePlan {
        fused: true,
        ..base.clone()
    };
    let eo = SolvePlan {
        preconditioning: Preconditioning::EvenOdd,
        ..fused.clone()
    };
    let single = SolvePlan {
        precision: Precision::Single,
        ..fused.clone()
    };
    let both = SolvePlan {
        precision: Precision::Single,
        ..eo.clone()
    };
    // Half-double (even-odd): the generic iteration, not the fused one.
    let half = SolvePlan {
        precision: Precision::Half,
        fused: false,
        ..eo.clone()
    };
    vec![
        (fused.clone(), Reconstruct::R18),
        (fused.clone(), Reconstruct::R12),
        (fused, Reconstruct::R8),
        (eo, Reconstruct::R18),
        (single, Reconstruct::R18),
        (both.clone(), Reconstruct::R18),
        (both.clone(), Reconstruct::R12),
        (both, Reconstruct::R8),
        (half.clone(), Reconstruct::R18),
        (half.clone(), Reconstruct::R12),
        (half, Reconstruct::R8),
    ]
}

pub(super) fn failed_row(label: String, e: &Error) -> AblateRow {
    AblateRow {
        version: label,
        solver: String::new(),
        block_threads: 0,
        multiple: 0,
        geometry: String::new(),
        valid: false,
        operator_rel_diff: f64::NAN,
        iterations: 0,
        ms_per_iteration_median: f64::NAN,
        ms_per_iteration_spread: f64::NAN,
        seconds_to_solution_median: f64::NAN,
        seconds_to_solution_spread: f64::NAN,
        speedup_over_cpu: f64::NAN,
        gflops_model_1320: f64::NAN,
        gflops_own_count: f64::NAN,
        gbytes_per_second_model: f64::NAN,
        fraction_of_triad: f64::NAN,
        true_residual: f64::NAN,
        compile_ms: f64::NAN,
        alloc_ms: f64::NAN,
        upload_ms: f64::NAN,
        layout_ms: f64::NAN,
        tune_ms: f64::NAN,
        download_ms: f64::NAN,
        stencil_share_of_solve: f64::NAN,
        error: Some(e.to_string()),
        history: vec![],
    }
}
