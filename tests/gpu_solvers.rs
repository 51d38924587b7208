//! GPU execution tests of the four Krylov methods (CR, BiCGStab, GCR(m), CGNE) through the
//! one generic solver (`app::run::solve_on`), each plain, even-odd, single-double and
//! both, on kernel 3.0, and the three non-CR methods plain on a seed version (1.6.1, full
//! double fields). Built only with `--features gpu-tests` (Cargo.toml); every test opens
//! the GPU first and fails loudly when there is none (`require_gpu`).
//!
//! Problems: random SU(3) gauge fields and random Gaussian sources from the project's
//! counter-based RNG (any machine draws the same fields) on 8x8x8x8 and 6x6x6x10 (extents
//! that are not powers of two), kappa 0.12, tolerance 1e-10.
//!
//! Expected values and tolerances:
//! - the GPU solve stops on `Converged`;
//! - its true residual ||b - D x|| / ||b|| of the original system, recomputed from scratch
//!   on the CPU (`cpu_residual_of_d`), is at most tol for the single-double solves (they
//!   end on a double-precision true residual) and at most 2 tol for the double ones (the
//!   iterated residual drifts from the true one by rounding; validate's factor);
//! - double solves: the same plan on the CPU backend is the expected value. The GPU
//!   operator differs from the CPU's by ~1e-16 relative (summation order, no FMA
//!   difference in the stores; tests/gpu_fast.rs holds it to 1e-13), and a Krylov
//!   recurrence amplifies such differences by roughly the growth of its scalars per
//!   iteration, so the iterated residuals ||r_k|| / ||b|| agree to 1e-8 relative over the
//!   first 20 iterations (an error of 1e-16 would need a growth of 10^8 to reach that),
//!   and the iteration counts to within 2 (the last iterations sit on the tolerance,
//!   where the accumulated drift can move the crossing by an iteration or two);
//! - every solve: the GPU solution agrees with the CPU's to 1e-8 relative. Both have a
//!   true residual <= 2e-10, so ||x_gpu - x_cpu|| <= ||D^-1|| (4e-10) ||b||, and
//!   ||x|| >= ||b|| / ||D||: the relative difference is at most cond(D) 4e-10; at kappa
//!   0.12, ||kappa H|| <= 0.96 bounds cond(D) by 1.96 / 0.04 = 49, i.e. 2e-8 in the worst
//!   case, and random gauge fields are far from it: on the CPU, the solutions of one
//!   method's four variants on these two problems differ from each other by 4e-11 to
//!   2e-10 (measured when this test was written), so 1e-8 has a margin of about 50.
//!
//! On the CPU these 32 solves all converge (BiCGStab 8-18 iterations, GCR(10) 16-35, CGNE
//! 22-53, CR 44-100) with true residuals of D x = b from 5e-12 to 9.9e-11.

use qcd_solve::app::run::{
    build_problem, cpu_residual_of_d, solve_on, Problem, SolvePlan, SolveResult,
};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{device_info, CudaBackend, CudaOptions, StencilVersion};
use qcd_solve::config::{LoadedConfig, Preconditioning, SolverPrecision};
use qcd_solve::linalg::Precision;
use qcd_solve::solver::{Method, StopReason};
use std::path::PathBuf;

const KAPPA: f64 = 0.12;
const TOL: f64 = 1e-10;
/// Relative difference allowed per entry of the double solves' residual histories.
const HISTORY_TOL: f64 = 1e-8;
/// Iterations of the histories compared.
const HISTORY_COMPARED: usize = 20;
/// Iteration counts (double solves) may differ by this much.
const ITERATION_SLACK: usize = 2;
/// Relative difference allowed between the GPU and CPU solutions.
const SOLUTION_TOL: f64 = 1e-8;

/// The loud error every test starts with: these tests need an NVIDIA GPU, its driver and
/// libnvrtc, and must never pass where there is none.
fn require_gpu() -> Result<(), String> {
    match device_info() {
        Ok(info) => {
            eprintln!("GPU: {} (sm_{}{})", info.name, info.cc.0, info.cc.1);
            Ok(())
        }
        Err(e) => Err(format!(
            "the gpu tests need an NVIDIA GPU with its driver and libnvrtc: {e}"
        )),
    }
}

/// The (preconditioning, precision) variants every method runs on kernel 3.0.
fn variants() -> Vec<(&'static str, Preconditioning, Precision)> {
    vec![
        ("plain", Preconditioning::None, Precision::Double),
        ("even-odd", Preconditioning::EvenOdd, Precision::Double),
        ("single-double", Preconditioning::None, Precision::Single),
        ("eo+single", Preconditioning::EvenOdd, Precision::Single),
    ]
}

fn config(dims: [usize; 4], seed: u64) -> LoadedConfig {
    let text = format!(
        "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n[gauge]\ntype = \"random\"\nseed = {seed}\n\
         [dirac]\nkappa = {KAPPA}\n[source]\ntype = \"random\"\nseed = {}\n\
         [solver]\ntolerance = {TOL:e}\nmax_iterations = 3000\n[backend]\ndevice = \"cpu\"\n\
         [output]\n",
        dims[0],
        dims[1],
        dims[2],
        dims[3],
        seed + 1
    );
    LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap()
}

/// The problems: 8^4 and 6x6x6x10, each with its own gauge field and source.
fn problems() -> Vec<(LoadedConfig, Problem)> {
    [([8, 8, 8, 8], 31), ([6, 6, 6, 10], 41)]
        .into_iter()
        .map(|(dims, seed)| {
            let cfg = config(dims, seed);
            let p = build_problem(&cfg).unwrap();
            (cfg, p)
        })
        .collect()
}

/// The config's plan for `method` with the variant's options; `fast_kernel` as
/// `run` passes it (kernel 3.0 makes CR's `iteration = "auto"` fused).
fn plan(
    cfg: &LoadedConfig,
    method: Method,
    pre: Preconditioning,
    prec: Precision,
    fast_kernel: bool,
) -> SolvePlan {
    let mut c = cfg.config.clone();
    c.solver.method = method;
    c.solver.preconditioning = pre;
    c.solver.precision = SolverPrecision::of_inner(prec);
    SolvePlan::from_config(&c, fast_kernel)
}

fn gpu(problem: &Problem, version: StencilVersion) -> Result<CudaBackend, String> {
    let opts = CudaOptions {
        version,
        multiple: 16,
        ..CudaOptions::default()
    };
    CudaBackend::new(&problem.gauge, problem.kappa, &opts)
        .map_err(|e| format!("opening the GPU ({version}): {e}"))
}

fn history_diff(gpu: &[f64], cpu: &[f64]) -> f64 {
    gpu.iter()
        .zip(cpu)
        .take(HISTORY_COMPARED + 1)
        .map(|(g, c)| (g - c).abs() / c.abs().max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max)
}

/// Solve `problem` by `plan` on the GPU and on the CPU; the failures found, as lines.
fn compare(label: &str, problem: &Problem, plan: &SolvePlan, gpu: &mut CudaBackend) -> Vec<String> {
    let mut fails = Vec::new();
    let g: SolveResult = match solve_on(gpu, problem, plan) {
        Ok(r) => r,
        Err(e) => return vec![format!("{label}: GPU solve failed: {e}")],
    };
    let mut cpu = CpuBackend::new(&problem.gauge, problem.kappa);
    let c = match solve_on(&mut cpu, problem, plan) {
        Ok(r) => r,
        Err(e) => return vec![format!("{label}: CPU solve failed: {e}")],
    };
    let mixed = plan.precision == Precision::Single;
    let tr = cpu_residual_of_d(problem, &g.solution);
    let hist = history_diff(&g.history, &c.history);
    let sol = g.solution.rel_diff(&c.solution);
    eprintln!(
        "{label} [{}]: iterations gpu {} cpu {}, applications gpu {} cpu {}, true residual {tr:.2e}, history {hist:.1e}, solution {sol:.1e}",
        g.plan, g.iterations, c.iterations, g.operator_applications, c.operator_applications
    );
    if g.reason != StopReason::Converged {
        fails.push(format!("{label}: GPU solve {}", g.reason.describe()));
    }
    if c.reason != StopReason::Converged {
        fails.push(format!("{label}: CPU solve {}", c.reason.describe()));
    }
    let bound = if mixed { TOL } else { 2.0 * TOL };
    if tr.is_nan() || tr > bound {
        fails.push(format!(
            "{label}: true residual of D x = b {tr:.3e} > {bound:.1e}"
        ));
    }
    if sol.is_nan() || sol > SOLUTION_TOL {
        fails.push(format!(
            "{label}: GPU and CPU solutions differ by {sol:.3e} > {SOLUTION_TOL:e}"
        ));
    }
    if !mixed {
        let compared = (HISTORY_COMPARED + 1)
            .min(g.history.len())
            .min(c.history.len());
        if compared < 2 {
            fails.push(format!(
                "{label}: histories too short to compare ({} and {} entries)",
                g.history.len(),
                c.history.len()
            ));
        }
        if hist.is_nan() || hist > HISTORY_TOL {
            fails.push(format!(
                "{label}: residual histories differ by {hist:.3e} > {HISTORY_TOL:e} in the first {HISTORY_COMPARED} iterations"
            ));
        }
        if g.iterations.abs_diff(c.iterations) > ITERATION_SLACK {
            fails.push(format!(
                "{label}: iterations gpu {} cpu {} differ by more than {ITERATION_SLACK}",
                g.iterations, c.iterations
            ));
        }
    }
    fails
}

fn verdict(fails: Vec<String>) -> Result<(), String> {
    if fails.is_empty() {
        Ok(())
    } else {
        Err(format!("{} failures:\n{}", fails.len(), fails.join("\n")))
    }
}

/// Every method with every wrapper on kernel 3.0, both lattices (`fused`: Some to force
/// the iteration, None for what `iteration = "auto"` picks on 3.0).
fn fast_path_method(method: Method) -> Result<(), String> {
    fast_path_method_as(method, None)
}

fn fast_path_method_as(method: Method, fused: Option<bool>) -> Result<(), String> {
    require_gpu()?;
    let mut fails = Vec::new();
    for (cfg, mut problem) in problems() {
        problem.operator = method.default_operator();
        let mut g = gpu(&problem, StencilVersion::V3_0)?;
        for (name, pre, prec) in variants() {
            let mut p = plan(&cfg, method, pre, prec, true);
            if let Some(f) = fused {
                p.fused = f;
            }
            let label = format!("3.0 {method} {name} {}", problem.lattice.dims_string());
            fails.extend(compare(&label, &problem, &p, &mut g));
        }
    }
    verdict(fails)
}

#[test]
fn cr_on_kernel_3_0_matches_the_cpu() -> Result<(), String> {
    fast_path_method(Method::Cr)
}

#[test]
fn bicgstab_on_kernel_3_0_matches_the_cpu() -> Result<(), String> {
    // "auto" on 3.0 is the fused BiCGStab (kernels/bicgstab_fused.cu); the CPU runs the
    // same plan through the host form of its passes (the host loop's arithmetic).
    let mut c = problems().remove(0).0.config;
    c.solver.method = Method::Bicgstab;
    assert!(SolvePlan::from_config(&c, true).fused);
    fast_path_method(Method::Bicgstab)
}

#[test]
fn bicgstab_host_loop_on_kernel_3_0_matches_the_cpu() -> Result<(), String> {
    fast_path_method_as(Method::Bicgstab, Some(false))
}

#[test]
fn fused_bicgstab_on_a_point_source_survives_the_exact_breakdown_on_the_gpu() -> Result<(), String>
{
    // A point source on D: (r0|r_1) is exactly zero (tests/solvers.rs explains why), so the
    // device's update pass must flag the breakdown and the host restart the shadow
    // residual. Expected: the CPU's iteration count for the same plan (the host loop's
    // arithmetic) within ITERATION_SLACK, Converged, and the true residual of D x = b
    // recomputed on the CPU <= tol (single-double) or 2 tol (double), as `compare`.
    require_gpu()?;
    let mut fails = Vec::new();
    let mut cfg = config([8, 8, 8, 8], 11);
    cfg.config.source = qcd_solve::config::SourceConfig::Point {
        site: [1, 2, 0, 3],
        spin: qcd_solve::config::Index::One(2),
        colour: qcd_solve::config::Index::One(1),
        smearing: None,
    };
    let mut problem = build_problem(&cfg).map_err(|e| e.to_string())?;
    problem.operator = Method::Bicgstab.default_operator();
    let mut g = gpu(&problem, StencilVersion::V3_0)?;
    for (name, pre, prec) in variants() {
        let p = plan(&cfg, Method::Bicgstab, pre, prec, true);
        if !p.fused {
            fails.push(format!("{name}: the plan is not fused"));
        }
        let label = format!("3.0 fused bicgstab point {name}");
        let before = fails.len();
        fails.extend(compare(&label, &problem, &p, &mut g));
        // The history test of `compare` holds for double solves; the iteration counts
        // here for every variant.
        if fails.len() == before && prec == Precision::Single {
            let gr = solve_on(&mut g, &problem, &p).map_err(|e| e.to_string())?;
            let mut cpu = CpuBackend::new(&problem.gauge, problem.kappa);
            let cr = solve_on(&mut cpu, &problem, &p).map_err(|e| e.to_string())?;
            if gr.iterations.abs_diff(cr.iterations) > ITERATION_SLACK {
                fails.push(format!(
                    "{label}: iterations gpu {} cpu {}",
                    gr.iterations, cr.iterations
                ));
            }
        }
    }
    verdict(fails)
}

#[test]
fn gcr_on_kernel_3_0_matches_the_cpu() -> Result<(), String> {
    fast_path_method(Method::Gcr)
}

#[test]
fn cgne_on_kernel_3_0_matches_the_cpu() -> Result<(), String> {
    fast_path_method(Method::Cgne)
}

#[test]
fn non_cr_methods_on_seed_version_1_6_1_match_the_cpu() -> Result<(), String> {
    // The seed versions hold full double fields only: the methods run plain there
    // (SolvePlan::check refuses the wrappers). 1.6.1 with multiple 16 (the default).
    require_gpu()?;
    let mut fails = Vec::new();
    for (cfg, mut problem) in problems() {
        let mut g = gpu(&problem, StencilVersion::V1_6_1)?;
        for method in [Method::Bicgstab, Method::Gcr, Method::Cgne] {
            problem.operator = method.default_operator();
            let p = plan(
                &cfg,
                method,
                Preconditioning::None,
                Precision::Double,
                false,
            );
            let label = format!("1.6.1 {method} plain {}", problem.lattice.dims_string());
            fails.extend(compare(&label, &problem, &p, &mut g));
        }
    }
    verdict(fails)
}
