//! `qcd-solve ablate CONFIG`: the seed report's study (its figures 11 to 18: speed-up and
//! GFLOP/s per stencil version) in one reproducible command. One CPU solve on all cores,
//! a triad and an upload measurement on the GPU, then every selected version: launch
//! geometry from the tune cache (or a timed sweep), a validation of its operator against
//! the CPU, a warm-up solve and `repeat` timed solves. A table, CSV, JSON and charts.
//! Every set-up phase has its own column; none is hidden in the solve time. With 3.0, a
//! last table compares the Krylov methods (CR, BiCGStab, GCR, CGNE) on it: iterations,
//! operator applications and time to solution, plain and even-odd + single-double.

mod methods;
mod output;
mod report;
mod upload;
mod versions;

use self::methods::{failed_method_row, run_method};
use self::upload::link_upload_bench;
use self::versions::{failed_row, run_version, Tuning};
use super::tuning::{start_options, tune_live};
use crate::app::run::{build_problem, solve_on, thread_pool, SolvePlan};
use crate::backend::cpu::CpuBackend;
use crate::backend::cuda::core::tune::TuneCache;
use crate::backend::cuda::{CudaBackend, CudaOptions, StencilVersion};
use crate::backend::Layout;
use crate::config::LoadedConfig;
use crate::error::{Error, Result};
use crate::report::TRIAD_BYTES;
use crate::solver::{CrParams, Method};
use std::path::Path;

pub use self::methods::{method_options, method_plan};
pub use self::output::{csv, draw_charts, gains_table, methods_csv, methods_table, table};
pub use self::report::{AblateReport, AblateRow, MethodRow};
pub use self::versions::{option_variants, variant_label};
pub use super::tuning::TuneMode;

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
        let mut be = CpuBackend::with_action(&problem.gauge, &problem.action())?;
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
        let base = crate::app::run::cuda_options(cfg);
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
        let base = crate::app::run::cuda_options(cfg);
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
        let base = crate::app::run::cuda_options(cfg);
        let configured = problem.operator;
        let mut opened = CudaBackend::new(
            &problem.gauge,
            problem.kappa,
            &start_options(StencilVersion::V3_0, &base, mode),
        )
        .and_then(|mut be| {
            be.set_action(&problem.gauge, &problem.action())?;
            tune_live(&mut be, &problem, Layout::FULL, &mut cache, mode)?;
            Ok(be)
        });
        // CR needs a Hermitian g5 D (not with a twist; `study_versions` refuses one).
        // Multigrid is not a kernel's ablation (its own benchmark: validate/RESULTS.md).
        for method in Method::ALL.into_iter().filter(|&m| m != Method::Mg) {
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
/// Every file `run` writes in `out` (tables, JSON, charts), checked before the work.
pub fn side_outputs(out: &Path) -> Vec<std::path::PathBuf> {
    let mut outputs: Vec<_> = ["ablation.csv", "ablation-methods.csv", "ablation.json"]
        .iter()
        .map(|n| out.join(n))
        .collect();
    for chart in ["speedup", "gflops", "gflops_own", "residuals"] {
        outputs.extend(["svg", "png"].map(|e| out.join(format!("{chart}.{e}"))));
    }
    outputs.push(out.join("residuals.csv"));
    outputs
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
    crate::app::outputs::prepare_side(cfg, &side_outputs(out))?;
    let (r, cpu_history) = measure(cfg, versions, repeat, mode, cache_path, upload_dims)?;
    print!("{}", table(&r));
    crate::io::write_atomic(&out.join("ablation.csv"), csv(&r)?.as_bytes())?;
    if !r.methods.is_empty() {
        crate::io::write_atomic(
            &out.join("ablation-methods.csv"),
            methods_csv(&r)?.as_bytes(),
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
