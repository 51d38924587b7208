//! `qcd-solve ablate CONFIG`: the seed report's study (its figures 11 to 18: speed-up and
//! GFLOP/s per stencil version) in one reproducible command. One CPU solve on all cores,
//! a triad and an upload measurement on the GPU, then every selected version: launch
//! geometry from the tune cache (or a timed sweep), a validation of its operator against
//! the CPU, a warm-up solve and `repeat` timed solves. A table, CSV, JSON and charts.
//! Every set-up phase has its own column; none is hidden in the solve time. With 3.0, a
//! last table compares the Krylov methods (CR, BiCGStab, GCR, CGNE) on it: iterations,
//! operator applications and time to solution, plain and even-odd + single-double.

use super::tuning::{median_spread, start_options, tune_live};
use crate::app::run::{build_problem, solve_on, thread_pool, Problem, SolvePlan};
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::core::tune::TuneCache;
use crate::backend::cuda::{CudaBackend, CudaOptions, Reconstruct, StencilVersion};
use crate::backend::prelude::*;
use crate::backend::Layout;
use crate::config::LoadedConfig;
use crate::dirac;
use crate::error::{Error, Result};
use crate::field::SpinorField;
use crate::report::charts::{self, Chart};
use crate::report::TRIAD_BYTES;
use crate::solver::{CrParams, Method, StopReason};
use serde::Serialize;
use std::path::Path;

pub use super::tuning::TuneMode;

#[derive(Clone, Debug, Serialize)]
pub struct AblateRow {
    /// The stencil version, or for the fast path's option rows "3.0" plus the options.
    pub version: String,
    /// The solver as run ("seed CR", "fused CR, even-odd, ...").
    pub solver: String,
    /// Launch geometry used (threads per block, sites per block) and where it came from.
    pub block_threads: usize,
    pub multiple: usize,
    pub geometry: String,
    pub valid: bool,
    pub operator_rel_diff: f64,
    pub iterations: usize,
    pub ms_per_iteration_median: f64,
    pub ms_per_iteration_spread: f64,
    pub seconds_to_solution_median: f64,
    pub seconds_to_solution_spread: f64,
    pub speedup_over_cpu: f64,
    pub gflops_model_1320: f64,
    pub gflops_own_count: f64,
    pub gbytes_per_second_model: f64,
    pub fraction_of_triad: f64,
    pub true_residual: f64,
    pub compile_ms: f64,
    pub alloc_ms: f64,
    pub upload_ms: f64,
    pub layout_ms: f64,
    /// Tuning the launch geometry on the live backend (0 from the cache or the config).
    pub tune_ms: f64,
    pub download_ms: f64,
    pub stencil_share_of_solve: f64,
    pub error: Option<String>,
    /// ||r|| / ||b|| per iteration of the last timed solve.
    pub history: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AblateReport {
    pub config_file: String,
    pub lattice: [usize; 4],
    pub kappa: f64,
    pub operator: String,
    pub tolerance: f64,
    pub device: String,
    pub repeat: usize,
    pub cpu_threads: usize,
    pub cpu_seconds: f64,
    pub cpu_iterations: usize,
    pub triad_gbytes_per_second: f64,
    pub upload_pinned_gbytes_per_second: f64,
    pub upload_pageable_gbytes_per_second: f64,
    /// The same byte count copied by the host in parallel (pageable to pageable), and a
    /// pageable buffer registered in place (cuMemHostRegister): registering, the copy
    /// from it, unregistering (`HostUploadPaths`; NaN when the measurement failed).
    pub host_memcpy_gbytes_per_second: f64,
    /// The same copy with streaming (non-temporal) stores.
    pub host_memcpy_streaming_gbytes_per_second: f64,
    pub upload_register_ms: f64,
    pub upload_registered_gbytes_per_second: f64,
    pub upload_unregister_ms: f64,
    pub tune_cache: String,
    pub rows: Vec<AblateRow>,
    /// The methods on kernel 3.0 (empty when 3.0 is not among the versions).
    pub methods: Vec<MethodRow>,
    /// `--upload-dims`: the lattice of the link upload bench (none: not run) and its rows,
    /// each against `upload_pinned_gbytes_per_second`.
    pub link_upload_lattice: Option<[usize; 4]>,
    pub link_uploads: Vec<crate::backend::cuda::UploadBenchRow>,
}

/// One method with one set of options on kernel 3.0 (`ablate`'s per-method table).
#[derive(Clone, Debug, Serialize)]
pub struct MethodRow {
    /// "cr", "bicgstab", "gcr", "cgne".
    pub method: String,
    /// "plain" or "eo+single" (even-odd with single-double).
    pub options: String,
    /// The solver as run ("fused CR, even-odd, single-double (delta 0.1), ...").
    pub solver: String,
    /// The operator form the method iterated (CGNE: g5 D).
    pub operator: String,
    pub iterations: usize,
    /// Applications of the Wilson stencil (CGNE: two per iteration; BiCGStab: two).
    pub operator_applications: usize,
    pub seconds_to_solution_median: f64,
    pub seconds_to_solution_spread: f64,
    pub true_residual: f64,
    /// Converged with a true residual at most 2 tol.
    pub valid: bool,
    pub error: Option<String>,
}

/// How an ablation row tunes its backend: the cache and the mode.
struct Tuning<'a> {
    cache: &'a mut TuneCache,
    mode: TuneMode,
}

/// One row: a backend with `opts`, its launch geometry tuned on it (`tune_live`), the
/// operator validated, a warm-up and `repeat` timed solves.
#[allow(clippy::too_many_arguments)]
fn run_version(
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
    let geometry = tune_live(
        &mut be,
        p,
        super::tuning::plan_layout(params),
        tuning.cache,
        tuning.mode,
    )?;
    let setup = be.setup_times().clone();
    // Validation first: the operator on a random vector against the CPU operator.
    let psi = SpinorField::random(p.lattice.volume(), 77, 0);
    let mut cpu = SpinorField::zeros(p.lattice.volume());
    dirac::apply(p.operator, &p.gauge, p.kappa, &psi, &mut cpu);
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

/// The per-method table's option sets: plain, and even-odd with single-double and with
/// half-double.
pub fn method_options() -> [(
    &'static str,
    crate::config::Preconditioning,
    crate::backend::Precision,
); 3] {
    use crate::backend::Precision;
    use crate::config::Preconditioning;
    [
        ("plain", Preconditioning::None, Precision::Double),
        ("eo+single", Preconditioning::EvenOdd, Precision::Single),
        ("eo+half", Preconditioning::EvenOdd, Precision::Half),
    ]
}

/// The plan of `method` with the config's [solver] options (tolerance, restart, delta,
/// check_every; CR fused as `iteration = "auto"` makes it on 3.0), preconditioning and
/// precision as given; and the operator form it starts from (the config's, else the
/// method's default).
pub fn method_plan(
    c: &crate::config::Config,
    method: Method,
    pre: crate::config::Preconditioning,
    precision: crate::backend::Precision,
) -> (SolvePlan, crate::backend::Operator) {
    let mut c = c.clone();
    c.solver.method = method;
    c.solver.preconditioning = pre;
    c.solver.precision = crate::config::SolverPrecision::of_inner(precision);
    (SolvePlan::from_config(&c, true), c.solver.operator())
}

/// One method row: a warm-up solve, then `repeat` timed solves (median and spread of the
/// solve time); iterations and applications of the last one.
fn run_method(
    p: &Problem,
    be: &mut CudaBackend,
    method: Method,
    options: &str,
    plan: &SolvePlan,
    repeat: usize,
) -> Result<MethodRow> {
    let _warm = solve_on(be, p, plan)?;
    let mut total = Vec::new();
    let mut last = None;
    for _ in 0..repeat {
        let r = solve_on(be, p, plan)?;
        total.push(r.timings.solve);
        last = Some(r);
    }
    let r = last.expect("repeat >= 1");
    let (tm, ts) = median_spread(total);
    let converged = r.reason == StopReason::Converged;
    let true_residual = crate::app::run::cpu_residual_of_d(p, &r.solution);
    let error = if !converged || true_residual.is_nan() || true_residual > 2.0 * plan.cr.tol {
        Some(format!(
            "solve {} with true residual of D x = b {:.2e}",
            r.reason.describe(),
            true_residual
        ))
    } else {
        None
    };
    Ok(MethodRow {
        method: method.name().into(),
        options: options.into(),
        solver: r.plan.clone(),
        operator: method.iterated_form(p.operator).to_string(),
        iterations: r.iterations,
        operator_applications: r.operator_applications,
        seconds_to_solution_median: tm,
        seconds_to_solution_spread: ts,
        true_residual,
        valid: error.is_none(),
        error,
    })
}

fn failed_method_row(method: Method, options: &str, e: &Error) -> MethodRow {
    MethodRow {
        method: method.name().into(),
        options: options.into(),
        solver: String::new(),
        operator: String::new(),
        iterations: 0,
        operator_applications: 0,
        seconds_to_solution_median: f64::NAN,
        seconds_to_solution_spread: f64::NAN,
        true_residual: f64::NAN,
        valid: false,
        error: Some(e.to_string()),
    }
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

fn failed_row(label: String, e: &Error) -> AblateRow {
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

pub fn measure(
    cfg: &LoadedConfig,
    versions: &[StencilVersion],
    repeat: usize,
    mode: TuneMode,
    cache_path: &Path,
    upload_dims: Option<[usize; 4]>,
) -> Result<(AblateReport, Vec<f64>)> {
    let info = match crate::backend::cuda::device_info() {
        Ok(i) => i,
        Err(e) => {
            return Err(Error::Cuda(format!(
                "nothing to ablate: the study compares GPU stencil versions and no GPU is usable here ({e})"
            )))
        }
    };
    let c = &cfg.config;
    let pool = thread_pool(0)?;
    let mut problem = pool.install(|| build_problem(cfg))?;
    let params = SolvePlan::seed(CrParams::new(
        c.solver.tolerance,
        c.solver.max_iterations as usize,
    ));
    // The CPU reference time: all cores, once.
    let cpu = pool.install(|| {
        let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
        solve_on(&mut be, &problem, &params)
    })?;
    tracing::info!(seconds = cpu.timings.solve, "CPU solve done");
    let triad = crate::backend::cuda::triad_bandwidth(TRIAD_BYTES)?;
    let (pinned, pageable) = crate::backend::cuda::upload_bandwidth(1 << 28)?;
    let host_paths = pool
        .install(|| crate::backend::cuda::host_upload_paths(1 << 28))
        .unwrap_or_else(|e| {
            eprintln!("warning: the host upload paths were not measured: {e}");
            crate::backend::cuda::HostUploadPaths::unknown()
        });
    let link_uploads = match upload_dims {
        Some(d) => pool.install(|| link_upload_bench(d, repeat))?,
        None => Vec::new(),
    };
    let mut cache = TuneCache::load(cache_path, env!("CARGO_PKG_VERSION"));
    for w in &cache.warnings {
        eprintln!("warning: {w}");
    }
    let bar = crate::report::progress::counter("ablate", versions.len() as u64);
    let mut rows = Vec::new();
    for &v in versions {
        if let Some(b) = &bar {
            b.set_message(format!("version {v}"));
        }
        let base = crate::app::run::cuda_options(cfg)?;
        let opts = start_options(v, &base, mode);
        let tuning = Tuning {
            cache: &mut cache,
            mode,
        };
        let row = run_version(
            &problem,
            opts,
            tuning,
            &params,
            repeat.max(1),
            cpu.timings.solve,
            triad,
        )
        .unwrap_or_else(|e| failed_row(v.to_string(), &e));
        rows.push(row);
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    // The fast path's options, on 3.0's tuned geometry.
    if versions.contains(&StencilVersion::V3_0) {
        let base = crate::app::run::cuda_options(cfg)?;
        let fast = SolvePlan {
            check_every: c.solver.check_every as usize,
            reliable_delta: c.solver.reliable_delta,
            ..params.clone()
        };
        for (plan, reconstruct) in option_variants(&fast) {
            let label = variant_label(StencilVersion::V3_0, &plan, reconstruct);
            if let Some(b) = &bar {
                b.set_message(label.clone());
            }
            let opts = CudaOptions {
                reconstruct,
                ..start_options(StencilVersion::V3_0, &base, mode)
            };
            let tuning = Tuning {
                cache: &mut cache,
                mode,
            };
            let row = run_version(
                &problem,
                opts,
                tuning,
                &plan,
                repeat.max(1),
                cpu.timings.solve,
                triad,
            )
            .unwrap_or_else(|e| failed_row(label, &e));
            rows.push(row);
        }
    }
    // The methods on 3.0's tuned geometry, each with the config's options.
    let mut methods = Vec::new();
    if versions.contains(&StencilVersion::V3_0) {
        let base = crate::app::run::cuda_options(cfg)?;
        let configured = problem.operator;
        let mut opened = CudaBackend::new(
            &problem.gauge,
            problem.kappa,
            &start_options(StencilVersion::V3_0, &base, mode),
        )
        .and_then(|mut be| {
            tune_live(&mut be, &problem, Layout::FULL, &mut cache, mode)?;
            Ok(be)
        });
        for method in Method::ALL {
            for (options, pre, precision) in method_options() {
                if let Some(b) = &bar {
                    b.set_message(format!("3.0 {method} {options}"));
                }
                let (plan, op) = method_plan(c, method, pre, precision);
                problem.operator = op;
                let row = match &mut opened {
                    Ok(be) => run_method(&problem, be, method, options, &plan, repeat.max(1)),
                    Err(e) => Err(Error::Cuda(format!("kernel 3.0: {e}"))),
                }
                .unwrap_or_else(|e| failed_method_row(method, options, &e));
                methods.push(row);
            }
        }
        problem.operator = configured;
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if mode == TuneMode::Tune {
        cache.save()?;
    }
    let report = AblateReport {
        config_file: cfg.source_name.clone(),
        lattice: problem.lattice.dims,
        kappa: problem.kappa,
        operator: problem.operator.to_string(),
        tolerance: c.solver.tolerance,
        device: info.name.clone(),
        repeat: repeat.max(1),
        cpu_threads: pool.current_num_threads(),
        cpu_seconds: cpu.timings.solve,
        cpu_iterations: cpu.iterations,
        triad_gbytes_per_second: triad,
        upload_pinned_gbytes_per_second: pinned,
        upload_pageable_gbytes_per_second: pageable,
        host_memcpy_gbytes_per_second: host_paths.memcpy_gbytes_per_second,
        host_memcpy_streaming_gbytes_per_second: host_paths.memcpy_streaming_gbytes_per_second,
        upload_register_ms: host_paths.register_ms,
        upload_registered_gbytes_per_second: host_paths.registered_gbytes_per_second,
        upload_unregister_ms: host_paths.unregister_ms,
        tune_cache: cache_path.display().to_string(),
        rows,
        methods,
        link_upload_lattice: upload_dims,
        link_uploads,
    };
    Ok((report, cpu.history))
}

/// The link upload bench (`--upload-dims`): a random gauge field of `dims` (seed 1),
/// its double 12-real links uploaded as the main job's construction does, with the
/// default (`workers`, 3 MiB x2 buffers each, chunks from a queue) and the workers' other
/// shapes worth comparing (buffers of 2-4 MiB, two or three each), `repeat` times each,
/// interleaved.
fn link_upload_bench(
    dims: [usize; 4],
    repeat: usize,
) -> Result<Vec<crate::backend::cuda::UploadBenchRow>> {
    use crate::backend::cuda::{LinkUpload, StageShape};
    let lattice =
        crate::geometry::lattice::Lattice::new(dims, crate::geometry::lattice::DEFAULT_BOUNDARY)?;
    let gauge = crate::clock::timed("link upload bench: random gauge field", || {
        crate::field::GaugeField::random(&lattice, 1)
    });
    let lane = |mib: usize, lane_buffers| StageShape {
        lane_values: (mib << 20) / 8,
        lane_buffers,
        ..StageShape::default()
    };
    let variants = [
        (LinkUpload::Workers, StageShape::default()),
        (LinkUpload::Workers, lane(2, 2)),
        (LinkUpload::Workers, lane(3, 3)),
        (LinkUpload::Workers, lane(4, 2)),
        (LinkUpload::Workers, lane(4, 3)),
    ];
    crate::backend::cuda::bench_link_upload(&gauge, Reconstruct::R12, &variants, repeat)
}

fn fmt(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "-".into()
    }
}

pub fn table(r: &AblateReport) -> String {
    let mut s = format!(
        "ablation on {}: {}x{}x{}x{}, {} kappa {} tol {:.0e}; CPU {:.3} s ({}, {} iterations); triad {:.0} GB/s; upload pinned {:.1} GB/s, pageable {:.1} GB/s\n",
        r.device, r.lattice[0], r.lattice[1], r.lattice[2], r.lattice[3], r.operator, r.kappa,
        r.tolerance, r.cpu_seconds, crate::threads::count(r.cpu_threads), r.cpu_iterations, r.triad_gbytes_per_second,
        r.upload_pinned_gbytes_per_second, r.upload_pageable_gbytes_per_second
    );
    if let (Some(d), false) = (r.link_upload_lattice, r.link_uploads.is_empty()) {
        s.push_str(&format!(
            "link upload, {}x{}x{}x{} double 12-real links ({:.2} GB), median of {}:\n",
            d[0],
            d[1],
            d[2],
            d[3],
            r.link_uploads[0].bytes as f64 / 1e9,
            r.link_uploads[0].wall_ms.len()
        ));
        for u in &r.link_uploads {
            let rate = u.gbytes_per_second();
            s.push_str(&format!(
                "  {:<30} {:>6} GB/s {:>5}% of pinned (copy {} ms, wait {} ms, queue {} ms, spread {} ms, kernels {} ms, buffers {} + {} ms)\n",
                u.variant,
                fmt(rate, 1),
                fmt(100.0 * rate / r.upload_pinned_gbytes_per_second, 1),
                fmt(u.copy_ms, 1),
                fmt(u.wait_ms, 1),
                fmt(u.queue_ms, 1),
                fmt(u.spread_ms, 1),
                fmt(u.kernel_ms, 1),
                fmt(u.pin_ms, 1),
                fmt(u.unpin_ms, 1),
            ));
        }
    }
    s.push_str(&format!(
        "host paths (256 MiB): parallel memcpy {} GB/s ({} GB/s with streaming stores); registered in place {} ms, then upload {} GB/s, unregistered {} ms\n",
        fmt(r.host_memcpy_gbytes_per_second, 1),
        fmt(r.host_memcpy_streaming_gbytes_per_second, 1),
        fmt(r.upload_register_ms, 1),
        fmt(r.upload_registered_gbytes_per_second, 1),
        fmt(r.upload_unregister_ms, 1)
    ));
    s.push_str(&format!(
        "{:<24} {:>5} {:>4} {:>5} {:>14} {:>14} {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>8} {:>7} {:>7} {}\n",
        "ver", "block", "mult", "iter", "ms/iter (sprd)", "s total (sprd)", "speedup", "GF 1320",
        "GF own", "GB/s", "triad", "true res", "comp ms", "up ms", "lay ms", "status"
    ));
    for x in &r.rows {
        s.push_str(&format!(
            "{:<24} {:>5} {:>4} {:>5} {:>7} ({:>5}) {:>7} ({:>5}) {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>8} {:>7} {:>7} {}\n",
            x.version,
            x.block_threads,
            x.multiple,
            x.iterations,
            fmt(x.ms_per_iteration_median, 3),
            fmt(x.ms_per_iteration_spread, 3),
            fmt(x.seconds_to_solution_median, 4),
            fmt(x.seconds_to_solution_spread, 4),
            fmt(x.speedup_over_cpu, 1),
            fmt(x.gflops_model_1320, 0),
            fmt(x.gflops_own_count, 0),
            fmt(x.gbytes_per_second_model, 0),
            fmt(x.fraction_of_triad, 2),
            if x.true_residual.is_finite() { format!("{:.2e}", x.true_residual) } else { "-".into() },
            fmt(x.compile_ms, 1),
            fmt(x.upload_ms, 1),
            fmt(x.layout_ms, 1),
            match &x.error {
                None => format!("ok ({})", x.geometry),
                Some(e) => format!("FAILED: {e}"),
            }
        ));
    }
    s.push_str(&gains_table(r));
    s.push_str(&methods_table(r));
    s
}

/// The Krylov methods on kernel 3.0 (median of the timed solves), plain and even-odd +
/// single-double; "x CR" is each row's time against CR's with the same options.
pub fn methods_table(r: &AblateReport) -> String {
    if r.methods.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\nmethods on kernel 3.0 (median of {} solves):\n{:<9} {:<10} {:<5} {:>5} {:>6} {:>9} {:>9} {:>6} {:>9} {}\n",
        r.repeat, "method", "options", "op", "iter", "A apps", "ms", "spread", "x CR", "true res", "solver"
    );
    for x in &r.methods {
        let cr = r
            .methods
            .iter()
            .find(|y| y.method == "cr" && y.options == x.options && y.valid);
        s.push_str(&format!(
            "{:<9} {:<10} {:<5} {:>5} {:>6} {:>9} {:>9} {:>6} {:>9} {}\n",
            x.method,
            x.options,
            x.operator,
            x.iterations,
            x.operator_applications,
            fmt(1e3 * x.seconds_to_solution_median, 3),
            fmt(1e3 * x.seconds_to_solution_spread, 3),
            cr.map(|c| fmt(
                c.seconds_to_solution_median / x.seconds_to_solution_median,
                2
            ))
            .unwrap_or_else(|| "-".into()),
            if x.true_residual.is_finite() {
                format!("{:.2e}", x.true_residual)
            } else {
                "-".into()
            },
            match &x.error {
                None => x.solver.clone(),
                Some(e) => format!("FAILED: {e}"),
            }
        ));
    }
    s
}

/// The per-method table as CSV (ablation-methods.csv).
pub fn methods_csv(r: &AblateReport) -> String {
    let mut s = String::from(
        "method,options,solver,operator,iterations,operator_applications,seconds_to_solution_median,seconds_to_solution_spread,true_residual,valid,error\n",
    );
    for x in &r.methods {
        s.push_str(&format!(
            "{},{},\"{}\",{},{},{},{},{},{:e},{},\"{}\"\n",
            x.method,
            x.options,
            x.solver,
            x.operator,
            x.iterations,
            x.operator_applications,
            x.seconds_to_solution_median,
            x.seconds_to_solution_spread,
            x.true_residual,
            x.valid,
            x.error.clone().unwrap_or_default().replace('"', "'")
        ));
    }
    s
}

/// Time to solution of every row against the fastest seed version (1.0 to 2.0) and
/// against 3.0 with the seed's CR: what each step and each option buys.
pub fn gains_table(r: &AblateReport) -> String {
    let seed_best = r
        .rows
        .iter()
        .filter(|x| x.valid && !x.version.starts_with("3.0"))
        .min_by(|a, b| {
            a.seconds_to_solution_median
                .total_cmp(&b.seconds_to_solution_median)
        });
    let v3 = r.rows.iter().find(|x| x.valid && x.version == "3.0");
    let Some(best) = seed_best else {
        return String::new();
    };
    let mut s = format!(
        "\ntime to solution against the fastest seed version ({}, {:.2} ms, {} iterations):\n{:<24} {:>5} {:>9} {:>9} {:>11} {}\n",
        best.version,
        1e3 * best.seconds_to_solution_median,
        best.iterations,
        "variant",
        "iter",
        "ms",
        "x seed",
        "x 3.0 seed",
        "solver"
    );
    for x in r.rows.iter().filter(|x| x.version.starts_with("3.0")) {
        let t = x.seconds_to_solution_median;
        s.push_str(&format!(
            "{:<24} {:>5} {:>9} {:>9} {:>11} {}\n",
            x.version,
            x.iterations,
            fmt(1e3 * t, 3),
            fmt(best.seconds_to_solution_median / t, 2),
            v3.map(|v| fmt(v.seconds_to_solution_median / t, 2))
                .unwrap_or_else(|| "-".into()),
            if x.valid {
                x.solver.clone()
            } else {
                format!("FAILED: {}", x.error.clone().unwrap_or_default())
            }
        ));
    }
    s
}

pub fn csv(r: &AblateReport) -> String {
    let mut s = String::from(
        "version,solver,block_threads,multiple,geometry,valid,operator_rel_diff,iterations,ms_per_iteration_median,ms_per_iteration_spread,seconds_to_solution_median,seconds_to_solution_spread,speedup_over_cpu,gflops_model_1320,gflops_own_count,gbytes_per_second_model,fraction_of_triad,true_residual,compile_ms,alloc_ms,upload_ms,layout_ms,tune_ms,download_ms,stencil_share_of_solve,error\n",
    );
    for x in &r.rows {
        s.push_str(&format!(
            "{},\"{}\",{},{},{},{},{:e},{},{},{},{},{},{},{},{},{},{},{:e},{},{},{},{},{},{},{},\"{}\"\n",
            x.version,
            x.solver,
            x.block_threads,
            x.multiple,
            x.geometry,
            x.valid,
            x.operator_rel_diff,
            x.iterations,
            x.ms_per_iteration_median,
            x.ms_per_iteration_spread,
            x.seconds_to_solution_median,
            x.seconds_to_solution_spread,
            x.speedup_over_cpu,
            x.gflops_model_1320,
            x.gflops_own_count,
            x.gbytes_per_second_model,
            x.fraction_of_triad,
            x.true_residual,
            x.compile_ms,
            x.alloc_ms,
            x.upload_ms,
            x.layout_ms,
            x.tune_ms,
            x.download_ms,
            x.stencil_share_of_solve,
            x.error.clone().unwrap_or_default().replace('"', "'")
        ));
    }
    s
}

/// Draw the three charts of the study into `out`.
pub fn draw_charts(
    r: &AblateReport,
    cpu_history: &[f64],
    out: &Path,
) -> Result<Vec<std::path::PathBuf>> {
    let bars = |f: &dyn Fn(&AblateRow) -> f64| -> Vec<(String, f64, bool)> {
        r.rows
            .iter()
            .map(|x| (x.version.clone(), f(x), x.valid))
            .collect()
    };
    let title = format!(
        "{} {}x{}x{}x{}",
        r.device, r.lattice[0], r.lattice[1], r.lattice[2], r.lattice[3]
    );
    let mut files = charts::draw(
        &out.join("speedup"),
        &Chart::Bars {
            title: &format!(
                "Speed-up over the CPU ({}), {title}",
                crate::threads::count(r.cpu_threads)
            ),
            y_label: "speed-up (time to solution)",
            bars: &bars(&|x| x.speedup_over_cpu),
        },
    )?;
    files.extend(charts::draw(
        &out.join("gflops"),
        &Chart::Bars {
            title: &format!("Stencil GFLOP/s (1320 flops/site model), {title}"),
            y_label: "GFLOP/s",
            bars: &bars(&|x| x.gflops_model_1320),
        },
    )?);
    files.extend(charts::draw(
        &out.join("gflops_own"),
        &Chart::Bars {
            title: &format!("Stencil GFLOP/s (each version's own count), {title}"),
            y_label: "GFLOP/s",
            bars: &bars(&|x| x.gflops_own_count),
        },
    )?);
    let mut series: Vec<(String, Vec<(f64, f64)>)> = vec![(
        "CPU".into(),
        cpu_history
            .iter()
            .enumerate()
            .map(|(k, &y)| (k as f64, y))
            .collect(),
    )];
    for x in r.rows.iter().filter(|x| x.valid) {
        series.push((
            x.version.clone(),
            x.history
                .iter()
                .enumerate()
                .map(|(k, &y)| (k as f64, y))
                .collect(),
        ));
    }
    files.extend(charts::draw(
        &out.join("residuals"),
        &Chart::Lines {
            title: &format!("CR residual history, {title}"),
            x_label: "iteration",
            y_label: "||r|| / ||b||",
            series: &series,
            log_y: true,
        },
    )?);
    Ok(files)
}

pub fn run(
    cfg: &LoadedConfig,
    versions: &[StencilVersion],
    repeat: usize,
    mode: TuneMode,
    cache_path: &Path,
    out: &Path,
    upload_dims: Option<[usize; 4]>,
) -> Result<()> {
    let (r, cpu_history) = measure(cfg, versions, repeat, mode, cache_path, upload_dims)?;
    print!("{}", table(&r));
    crate::io::write_atomic(&out.join("ablation.csv"), csv(&r).as_bytes())?;
    if !r.methods.is_empty() {
        crate::io::write_atomic(
            &out.join("ablation-methods.csv"),
            methods_csv(&r).as_bytes(),
        )?;
    }
    let json = serde_json::to_vec_pretty(&r).expect("report serialises");
    crate::io::write_atomic(&out.join("ablation.json"), &json)?;
    for f in draw_charts(&r, &cpu_history, out)? {
        println!("wrote {}", f.display());
    }
    println!("wrote {}", out.join("ablation.csv").display());
    if !r.methods.is_empty() {
        println!("wrote {}", out.join("ablation-methods.csv").display());
    }
    let failed: Vec<String> = r
        .rows
        .iter()
        .filter(|x| !x.valid)
        .map(|x| x.version.clone())
        .chain(
            r.methods
                .iter()
                .filter(|x| !x.valid)
                .map(|x| format!("3.0 {} {}", x.method, x.options)),
        )
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::CheckFailed(format!(
            "versions failing validation in the ablation: {}",
            failed.join(", ")
        )))
    }
}
