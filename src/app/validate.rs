//! Validation of the CUDA backend against the CPU, version by version, on a random gauge
//! field and random source (both from the project's counter-based RNG, so any machine
//! draws the same fields):
//!
//! 1. the operator: GPU `apply` against `dirac::apply_reference` (the seed-form oracle),
//!    relative difference below 1e-13;
//! 2. the solver: `conjugate_residual` with `CudaBackend` and with `CpuBackend` from the
//!    same source: iteration counts within 1 and every iterated residual of the first 50
//!    iterations within 1e-6 relative;
//! 3. the GPU solution's true residual ||b - A x|| / ||b||, recomputed on the CPU, at most
//!    2 tol.
//!
//! With 3.0 also the fast path's CR variants, and the other methods (BiCGStab, GCR, CGNE;
//! `method_rows`) plain and even-odd + single-double, each on its own default operator:
//! the same plan on the GPU and the CPU, iteration counts within 2, the true residual of
//! D x = b at most 2 tol.
//!
//! With the clover term or a twist (kernel 3.0 only; the seed versions are Wilson-only)
//! the reference, the CPU backend and the GPU backends carry the same site terms; with a
//! twist CR does not apply (g5 D is not Hermitian) and only the method rows run.
//!
//! Use `Operator::G5D` for the solver checks: on the non-Hermitian D the seed's CR
//! (alpha = conj((r|Ar)) / (Ap|Ap)) stagnates on random gauge fields, on the CPU as on
//! the GPU (6x6x6x10, kappa 0.05 to 0.124: stuck at 5e-4 to 1e-1), so rows with D fail on
//! the true residual even when the operator column agrees to rounding.

use crate::app::run::{solve_on, Problem, SolvePlan};
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::device_info;
use crate::backend::cuda::StencilVersion;
use crate::backend::cuda::{CudaBackend, CudaOptions};
use crate::backend::prelude::*;
use crate::backend::{Layout, Operator, Precision, Subset};
use crate::config::Preconditioning;
use crate::dirac;
use crate::dirac::clover::SiteTerms;
use crate::dirac::Action;
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::Lattice;
use crate::solver::{
    conjugate_residual, true_residual, CrParams, Method, SolveOutcome, StopReason,
};

/// Relative difference allowed between the GPU operator and the CPU reference (double).
pub const OPERATOR_TOL: f64 = 1e-13;
/// Relative difference allowed between GPU and CPU iterated residuals.
pub const HISTORY_TOL: f64 = 1e-6;
/// Iterations of the residual histories compared.
pub const HISTORY_COMPARED: usize = 50;
/// Iteration counts may differ by this much.
pub const ITERATION_SLACK: usize = 1;
/// The true residual may exceed the tolerance by this factor.
pub const TRUE_RESIDUAL_FACTOR: f64 = 2.0;

/// One version's validation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ValidateRow {
    pub version: StencilVersion,
    /// "1.6.1", or for 3.0's fast-path rows the options ("3.0 fused+eo+single").
    pub variant: String,
    pub lattice: String,
    pub multiple: usize,
    /// ||A_gpu psi - A_ref psi|| / ||A_ref psi||.
    pub op_rel_diff: f64,
    pub iterations_gpu: usize,
    pub iterations_cpu: usize,
    /// Largest relative difference of the iterated residuals over the first 50 iterations.
    pub history_max_rel_diff: f64,
    /// ||b - A x_gpu|| / ||b|| on the CPU.
    pub true_residual: f64,
    pub tol: f64,
    pub pass: bool,
    /// Why the version could not run (its other numbers are then NaN or 0).
    pub error: Option<String>,
}

fn history_diff(gpu: &[f64], cpu: &[f64]) -> f64 {
    gpu.iter()
        .zip(cpu)
        .take(HISTORY_COMPARED + 1)
        .map(|(g, c)| (g - c).abs() / c.abs().max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max)
}

struct CpuTruth {
    gauge: GaugeField,
    /// The action (kappa, and the clover term and twist, if any) and its site terms.
    action: Action,
    terms: Option<SiteTerms>,
    psi: SpinorField,
    reference: SpinorField,
    b: SpinorField,
    /// The CPU's CR solve (None with a twist: CR needs a Hermitian g5 D).
    cr: Option<SolveOutcome<SpinorField>>,
}

impl CpuTruth {
    /// A 3.0 (or seed) backend with the truth's site terms.
    fn gpu(&self, opts: &CudaOptions) -> Result<CudaBackend> {
        let mut g = CudaBackend::new(&self.gauge, self.action.kappa, opts)?;
        if let Some(terms) = &self.terms {
            g.set_site_terms(&self.gauge.lattice, terms)?;
        }
        Ok(g)
    }

    /// The CPU backend of the truth's action.
    fn cpu(&self) -> Result<CpuBackend<'_>> {
        CpuBackend::with_action(&self.gauge, &self.action)
    }

    fn cr(&self) -> Result<&SolveOutcome<SpinorField>> {
        self.cr
            .as_ref()
            .ok_or_else(|| Error::internal("a CR row with a twisted mass"))
    }
}

/// Validate each version of `versions` on `lattice`. Fails (Error::Cuda) only when there
/// is no usable GPU at all; a version that cannot run gives a failing row with its error.
#[allow(clippy::too_many_arguments)]
pub fn validate(
    lattice: &Lattice,
    action: &Action,
    tol: f64,
    max_iter: usize,
    op: Operator,
    versions: &[StencilVersion],
    multiple: usize,
    seed: u64,
) -> Result<Vec<ValidateRow>> {
    device_info()?;
    let kappa = action.kappa;
    let gauge = GaugeField::random(lattice, seed);
    let v = lattice.volume();
    let psi = SpinorField::random(v, seed, 1 << 40);
    let terms = if action.has_site_term() {
        Some(SiteTerms::new(&gauge, action)?)
    } else {
        None
    };
    let reference = dirac::apply_reference_with(op, &gauge, kappa, terms.as_ref(), &psi);
    let b = SpinorField::random(v, seed, 2 << 40);
    let params = CrParams::new(tol, max_iter);
    let cr = if action.mu == 0.0 {
        let mut cpu = CpuBackend::with_action(&gauge, action)?;
        let cpu_b = cpu.upload(&b)?;
        let solved = conjugate_residual(&mut cpu, op, &cpu_b, &params)?;
        // Only the scalars of the CPU run are compared; keep the outcome in host layout.
        Some(SolveOutcome {
            x: cpu.download(&solved.x)?,
            iterations: solved.iterations,
            reason: solved.reason,
            history: solved.history,
            operator_applications: solved.operator_applications,
            stats: solved.stats,
        })
    } else {
        None
    };
    let truth = CpuTruth {
        gauge,
        action: *action,
        terms,
        psi,
        reference,
        b,
        cr,
    };
    // With a twist only the methods other than CR; the CR rows need the CPU's CR.
    let cr_rows = truth.cr.is_some();
    let cr_iterations = truth.cr.as_ref().map_or(0, |c| c.iterations);
    let mut rows = Vec::new();
    for &version in versions.iter().filter(|_| cr_rows) {
        let opts = CudaOptions {
            version,
            multiple,
            ..CudaOptions::default()
        };
        let row = match validate_one(&truth, op, &params, &opts) {
            Ok(row) => row,
            Err(e) => failed_row(version, version.to_string(), lattice, multiple, tol, &e)
                .with_cpu_iterations(cr_iterations),
        };
        rows.push(row);
    }
    if versions.contains(&StencilVersion::V3_0) {
        let variants = crate::app::ablate::option_variants(&SolvePlan::seed(params.clone()));
        for (plan, reconstruct) in variants.into_iter().filter(|_| cr_rows) {
            let opts = CudaOptions {
                version: StencilVersion::V3_0,
                multiple,
                reconstruct,
                ..CudaOptions::default()
            };
            let variant =
                crate::app::ablate::variant_label(StencilVersion::V3_0, &plan, reconstruct);
            let row = validate_variant(&truth, op, &plan, &opts, &variant).unwrap_or_else(|e| {
                failed_row(StencilVersion::V3_0, variant, lattice, multiple, tol, &e)
            });
            rows.push(row);
        }
        for (plan, variant) in method_plans(&params) {
            let opts = CudaOptions {
                version: StencilVersion::V3_0,
                multiple,
                ..CudaOptions::default()
            };
            let row = validate_method(&truth, &plan, &opts, &variant).unwrap_or_else(|e| {
                failed_row(StencilVersion::V3_0, variant, lattice, multiple, tol, &e)
            });
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The row of a check that could not run: every number NaN or 0, the error kept.
fn failed_row(
    version: StencilVersion,
    variant: String,
    lattice: &Lattice,
    multiple: usize,
    tol: f64,
    e: &Error,
) -> ValidateRow {
    ValidateRow {
        version,
        variant,
        lattice: lattice.dims_string(),
        multiple,
        op_rel_diff: f64::NAN,
        iterations_gpu: 0,
        iterations_cpu: 0,
        history_max_rel_diff: f64::NAN,
        true_residual: f64::NAN,
        tol,
        pass: false,
        error: Some(e.to_string()),
    }
}

impl ValidateRow {
    fn with_cpu_iterations(self, iterations_cpu: usize) -> ValidateRow {
        ValidateRow {
            iterations_cpu,
            ..self
        }
    }
}

/// Iteration counts of the method rows (GPU against CPU, same plan) may differ by this
/// much: the operators differ by ~1e-16, which the recurrences amplify until the last
/// iterations, where the crossing of the tolerance can move.
pub const METHOD_ITERATION_SLACK: usize = 2;

/// The non-CR methods' rows on 3.0: plain, and even-odd + single-double; "3.0 bicgstab",
/// "3.0 bicgstab+eo+single"; BiCGStab also fused ("3.0 bicgstab+fused",
/// "3.0 bicgstab+fused+eo+single").
pub fn method_plans(params: &CrParams) -> Vec<(SolvePlan, String)> {
    let mut out = Vec::new();
    for method in [Method::Bicgstab, Method::Gcr, Method::Cgne] {
        let plain = SolvePlan {
            method,
            ..SolvePlan::seed(params.clone())
        };
        let both = SolvePlan {
            preconditioning: Preconditioning::EvenOdd,
            precision: Precision::Single,
            ..plain.clone()
        };
        out.push((plain.clone(), format!("{} {method}", StencilVersion::V3_0)));
        out.push((
            both.clone(),
            format!("{} {method}+eo+single", StencilVersion::V3_0),
        ));
        if method == Method::Bicgstab {
            // And the fused iteration (what "auto" runs on 3.0), checked every 10.
            for (p, l) in [(plain, ""), (both, "+eo+single")] {
                let fused = SolvePlan {
                    fused: true,
                    check_every: 10,
                    ..p
                };
                out.push((fused, format!("{} {method}+fused{l}", StencilVersion::V3_0)));
            }
        }
    }
    // Half-double, once (BiCGStab, even-odd): the same generic path as the other methods.
    let half = SolvePlan {
        method: Method::Bicgstab,
        preconditioning: Preconditioning::EvenOdd,
        precision: Precision::Half,
        ..SolvePlan::seed(params.clone())
    };
    out.push((half, format!("{} bicgstab+eo+half", StencilVersion::V3_0)));
    out
}

/// The problem of the solver rows: the truth's gauge field and source, operator `op`.
fn problem_of(t: &CpuTruth, op: Operator) -> Problem {
    Problem {
        lattice: t.gauge.lattice.clone(),
        gauge: t.gauge.clone(),
        gauge_description: "random".into(),
        gauge_reunitarised: None,
        plaquette: t.gauge.plaquette(),
        link_trace: t.gauge.link_trace(),
        kappa: t.action.kappa,
        csw: t.action.csw,
        mu: t.action.mu,
        operator: op,
        source: t.b.clone(),
        source_description: "random".into(),
        gauge_fixing: None,
        setup_seconds: 0.0,
    }
}

/// ||A_gpu psi - A_cpu psi|| / ||A_cpu psi|| for A the operator a plan iterates (the full
/// form, or its Schur form on an even field), in the plan's precision.
fn plan_operator_diff(
    gpu: &mut CudaBackend,
    cpu: &mut CpuBackend,
    psi: &SpinorField,
    op: Operator,
    plan: &SolvePlan,
) -> Result<f64> {
    let eo = plan.preconditioning == Preconditioning::EvenOdd;
    let layout = Layout::new(if eo { Subset::Even } else { Subset::Full }, plan.precision);
    let aop = if eo { op.schur() } else { op };
    let d_psi = gpu.upload(psi)?;
    let mut d_in = gpu.alloc_layout(layout)?;
    gpu.convert(&mut d_in, &d_psi)?;
    let mut d_out = gpu.alloc_layout(layout)?;
    gpu.apply(aop, &mut d_out, &d_in)?;
    let c_psi = cpu.upload(psi)?;
    let mut c_in = cpu.alloc_layout(layout)?;
    cpu.convert(&mut c_in, &c_psi)?;
    let mut c_out = cpu.alloc_layout(layout)?;
    cpu.apply(aop, &mut c_out, &c_in)?;
    Ok(gpu.download(&d_out)?.rel_diff(&cpu.download(&c_out)?))
}

/// One method row: the operator the method iterates (its default form, CGNE's g5 D)
/// against the CPU backend, the same plan solved on both backends, the GPU solution's true
/// residual of D x = b on the CPU. Passes when the operators agree (1e-13 double, 1e-6
/// single), both solves converge, the iteration counts are within
/// METHOD_ITERATION_SLACK and the true residual is at most 2 tol. The history column is
/// reported, not judged (the CR rows hold histories to 1e-6).
fn validate_method(
    t: &CpuTruth,
    plan: &SolvePlan,
    opts: &CudaOptions,
    variant: &str,
) -> Result<ValidateRow> {
    let op = plan.method.iterated_form(plan.method.default_operator());
    let mut gpu = t.gpu(opts)?;
    let mut cpu = t.cpu()?;
    let op_rel_diff = plan_operator_diff(&mut gpu, &mut cpu, &t.psi, op, plan)?;
    let problem = problem_of(t, op);
    let g = solve_on(&mut gpu, &problem, plan)?;
    let c = solve_on(&mut cpu, &problem, plan)?;
    let true_res = crate::app::run::cpu_residual_of_d(&problem, &g.solution);
    let (op_tol, _, slack) = tolerances(plan.precision, c.iterations);
    let converged = g.reason == StopReason::Converged && c.reason == StopReason::Converged;
    let pass = op_rel_diff < op_tol
        && converged
        && g.iterations.abs_diff(c.iterations) <= slack.max(METHOD_ITERATION_SLACK)
        && true_res <= TRUE_RESIDUAL_FACTOR * plan.cr.tol;
    Ok(ValidateRow {
        version: opts.version,
        variant: variant.to_string(),
        lattice: t.gauge.lattice.dims_string(),
        multiple: opts.multiple,
        op_rel_diff,
        iterations_gpu: g.iterations,
        iterations_cpu: c.iterations,
        history_max_rel_diff: history_diff(&g.history, &c.history),
        true_residual: true_res,
        tol: plan.cr.tol,
        pass,
        error: None,
    })
}

/// Allowed relative difference of GPU and CPU operators and histories in single precision
/// (the CPU rounds stored values to f32 but computes in f64; the GPU computes in f32).
pub const SINGLE_TOL: f64 = 1e-6;
/// Single-double iteration counts may differ by this much (rounding moves the reliable
/// updates).
pub const SINGLE_ITERATION_SLACK: usize = 5;
/// Allowed relative difference of GPU and CPU operators in half precision: both round
/// each output site once to 16 bits (a step is 1/32767 = 3.1e-5 of the site's largest
/// real), from float (GPU) or double (CPU) arithmetic; they differ by at most a step per
/// real, and norm-wise by less (validate/emu/run_v3eo.sh, tests/gpu_half.rs).
pub const HALF_TOL: f64 = 1e-4;

/// (operator, history, iteration slack) tolerances of a GPU-vs-CPU comparison in
/// `precision`, the CPU having taken `cpu_iterations`. Half: the roundings differ by a
/// step here and there, which moves the reliable updates (and the restarts' CR directions)
/// far more than single's: a quarter of the iterations (at least SINGLE_ITERATION_SLACK;
/// measured on an H100, validate/RESULTS.md: CR even-odd on the seed's 16^3x32 problem 58-59
/// GPU against 70 CPU iterations, both converged, operators 1.6e-5 apart); histories not
/// judged.
fn tolerances(precision: Precision, cpu_iterations: usize) -> (f64, f64, usize) {
    match precision {
        Precision::Double => (OPERATOR_TOL, HISTORY_TOL, ITERATION_SLACK),
        Precision::Single => (SINGLE_TOL, SINGLE_TOL.sqrt(), SINGLE_ITERATION_SLACK),
        Precision::Half => (
            HALF_TOL,
            f64::INFINITY,
            (cpu_iterations / 4).max(SINGLE_ITERATION_SLACK),
        ),
    }
}

/// One fast-path variant of 3.0: its operator (the full one, or the Schur operator on an
/// even field, in the variant's precision) against the CPU backend, which tests/fast.rs
/// holds to the seed-form reference; the same solve (solve_on with the same plan) on both
/// backends; the GPU solution's true residual of D x = b on the CPU.
fn validate_variant(
    t: &CpuTruth,
    op: Operator,
    plan: &SolvePlan,
    opts: &CudaOptions,
    variant: &str,
) -> Result<ValidateRow> {
    let mut gpu = t.gpu(opts)?;
    let mut cpu = t.cpu()?;
    let op_rel_diff = plan_operator_diff(&mut gpu, &mut cpu, &t.psi, op, plan)?;
    let problem = problem_of(t, op);
    let g = solve_on(&mut gpu, &problem, plan)?;
    let c = solve_on(&mut cpu, &problem, plan)?;
    let true_res = crate::app::run::cpu_residual_of_d(&problem, &g.solution);
    let history_max_rel_diff = history_diff(&g.history, &c.history);
    // Mixed precision: the histories are reported, not judged (rounding moves them).
    let mixed = plan.precision != Precision::Double;
    let (op_tol, hist_tol, slack) = tolerances(plan.precision, c.iterations);
    let pass = op_rel_diff < op_tol
        && g.iterations.abs_diff(c.iterations) <= slack
        && (mixed || history_max_rel_diff <= hist_tol)
        && g.reason == StopReason::Converged
        && true_res <= TRUE_RESIDUAL_FACTOR * plan.cr.tol;
    Ok(ValidateRow {
        version: opts.version,
        variant: variant.to_string(),
        lattice: t.gauge.lattice.dims_string(),
        multiple: opts.multiple,
        op_rel_diff,
        iterations_gpu: g.iterations,
        iterations_cpu: c.iterations,
        history_max_rel_diff,
        true_residual: true_res,
        tol: plan.cr.tol,
        pass,
        error: None,
    })
}

fn validate_one(
    t: &CpuTruth,
    op: Operator,
    params: &CrParams,
    opts: &CudaOptions,
) -> Result<ValidateRow> {
    let mut gpu = t.gpu(opts)?;
    let d_psi = gpu.upload(&t.psi)?;
    let mut d_out = gpu.alloc()?;
    gpu.apply(op, &mut d_out, &d_psi)?;
    let out = gpu.download(&d_out)?;
    let op_rel_diff = out.rel_diff(&t.reference);

    let d_b = gpu.upload(&t.b)?;
    let solved = conjugate_residual(&mut gpu, op, &d_b, params)?;
    let x = gpu.download(&solved.x)?;
    let mut cpu = t.cpu()?;
    let (cpu_b, cpu_x) = (cpu.upload(&t.b)?, cpu.upload(&x)?);
    let true_res = true_residual(&mut cpu, op, &cpu_b, &cpu_x)?;
    let truth = t.cr()?;
    let history_max_rel_diff = history_diff(&solved.history, &truth.history);

    let pass = op_rel_diff < OPERATOR_TOL
        && solved.iterations.abs_diff(truth.iterations) <= ITERATION_SLACK
        && history_max_rel_diff <= HISTORY_TOL
        && true_res <= TRUE_RESIDUAL_FACTOR * params.tol;
    Ok(ValidateRow {
        version: opts.version,
        variant: opts.version.to_string(),
        lattice: t.gauge.lattice.dims_string(),
        multiple: opts.multiple,
        op_rel_diff,
        iterations_gpu: solved.iterations,
        iterations_cpu: truth.iterations,
        history_max_rel_diff,
        true_residual: true_res,
        tol: params.tol,
        pass,
        error: None,
    })
}

/// The rows as a fixed-width table, errors listed after it.
pub fn format_table(rows: &[ValidateRow]) -> String {
    let mut s = format!(
        "{:<22} {:<12} {:>4} {:>10} {:>9} {:>10} {:>10} {:>6}\n",
        "version", "lattice", "mult", "op rel", "iter g/c", "hist rel", "true res", "result"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<22} {:<12} {:>4} {:>10.2e} {:>9} {:>10.2e} {:>10.2e} {:>6}\n",
            r.variant,
            r.lattice,
            r.multiple,
            r.op_rel_diff,
            format!("{}/{}", r.iterations_gpu, r.iterations_cpu),
            r.history_max_rel_diff,
            r.true_residual,
            if r.pass { "pass" } else { "FAIL" }
        ));
    }
    for r in rows.iter().filter(|r| r.error.is_some()) {
        s.push_str(&format!(
            "{} on {}: {}\n",
            r.variant,
            r.lattice,
            r.error.as_deref().unwrap_or("")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_difference_is_relative_and_bounded_to_50() {
        let cpu: Vec<f64> = (0..100).map(|k| 0.5f64.powi(k)).collect();
        let mut gpu = cpu.clone();
        gpu[3] *= 1.0 + 1e-9;
        gpu[80] *= 2.0; // beyond the compared window
        let d = history_diff(&gpu, &cpu);
        assert!((d - 1e-9).abs() < 1e-12, "{d}");
    }

    #[test]
    fn method_rows_are_the_three_other_methods_plain_and_eo_single_bicgstab_fused_and_eo_half() {
        let plans = method_plans(&CrParams::new(1e-10, 500));
        let labels: Vec<&str> = plans.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(
            labels,
            [
                "3.0 bicgstab",
                "3.0 bicgstab+eo+single",
                "3.0 bicgstab+fused",
                "3.0 bicgstab+fused+eo+single",
                "3.0 gcr",
                "3.0 gcr+eo+single",
                "3.0 cgne",
                "3.0 cgne+eo+single",
                "3.0 bicgstab+eo+half"
            ]
        );
        for (p, l) in &plans {
            assert_eq!(p.fused, l.contains("+fused"), "{l}");
            assert_eq!(p.cr.tol, 1e-10);
            let both = l.ends_with("+eo+single");
            let half = l.ends_with("+eo+half");
            assert_eq!(
                p.preconditioning == Preconditioning::EvenOdd,
                both || half,
                "{l}"
            );
            assert_eq!(p.precision == Precision::Single, both, "{l}");
            assert_eq!(p.precision == Precision::Half, half, "{l}");
            // Every row runs on 3.0, which has every capability.
            p.check(crate::backend::Capabilities::of_stencil(
                StencilVersion::V3_0,
            ))
            .unwrap();
        }
    }

    #[test]
    fn table_marks_failures_and_lists_errors() {
        let row = ValidateRow {
            version: StencilVersion::V1_6,
            variant: "1.6".into(),
            lattice: "4x4x4x4".into(),
            multiple: 64,
            op_rel_diff: f64::NAN,
            iterations_gpu: 0,
            iterations_cpu: 10,
            history_max_rel_diff: f64::NAN,
            true_residual: f64::NAN,
            tol: 1e-8,
            pass: false,
            error: Some("shared memory".into()),
        };
        let t = format_table(&[row]);
        assert!(t.contains("FAIL"));
        assert!(t.contains("1.6 on 4x4x4x4: shared memory"));
    }
}
