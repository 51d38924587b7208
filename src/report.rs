//! Reports: the flop and byte models of conventions.md, the JSON solve report, and the
//! human summary printed on stdout.

use crate::config::{Config, LoadedConfig};
use crate::dirac::HOP_FLOPS_PER_SITE;
use crate::run::{Problem, SolveResult};
use serde::Serialize;

/// Effective bytes per site of one dslash with no cache reuse (conventions.md):
/// 8 * (R*P + 24*P) + 24*P for R reals per link and P bytes per real.
pub fn dslash_model_bytes_per_site(reals_per_link: u64, bytes_per_real: u64) -> u64 {
    8 * (reals_per_link * bytes_per_real + 24 * bytes_per_real) + 24 * bytes_per_real
}

/// The DRAM floor: 4 links + 1 input + 1 output spinor per site (960 bytes in double, R=18).
pub fn dslash_floor_bytes_per_site(reals_per_link: u64, bytes_per_real: u64) -> u64 {
    4 * reals_per_link * bytes_per_real + 2 * 24 * bytes_per_real
}

#[derive(Clone, Debug, Serialize)]
pub struct Timings {
    /// Gauge field and source construction (or reading).
    pub setup: f64,
    pub upload: f64,
    /// CR iterations and the download of the solution.
    pub solve: f64,
    pub true_residual: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SolveReport {
    pub program: String,
    pub version: String,
    pub unix_time: u64,
    pub config_file: String,
    pub config: Config,
    pub lattice: [usize; 4],
    pub volume: usize,
    pub gauge: String,
    pub plaquette: f64,
    pub plaquette_spatial: f64,
    pub plaquette_temporal: f64,
    pub link_trace: f64,
    pub kappa: f64,
    pub operator: String,
    pub source: String,
    pub backend: String,
    pub threads: usize,
    pub converged: bool,
    pub stop_reason: String,
    pub iterations: usize,
    pub operator_applications: usize,
    pub tolerance: f64,
    pub iterated_residual: f64,
    /// ||rhs - A x|| / ||rhs|| on the solving backend.
    pub true_residual: f64,
    /// ||b - D x|| / ||b|| recomputed on the CPU (the original system).
    pub true_residual_of_d_cpu: f64,
    pub timings: Timings,
    pub seconds_per_iteration: f64,
    /// Operator flops by the 1320-per-site model over the solve time.
    pub gflops_model_1320: f64,
    /// Operator bytes by the no-reuse model (2880 B/site, double) over the solve time.
    pub gbytes_per_second_model: f64,
    pub peak_memory_bytes: Option<u64>,
    pub residual_history: Vec<f64>,
}

/// Peak resident memory of this process (Linux VmHWM).
pub fn peak_memory_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn build(
    cfg: &LoadedConfig,
    p: &Problem,
    r: &SolveResult,
    backend: &str,
    d_residual: f64,
) -> SolveReport {
    let v = p.lattice.volume() as f64;
    let solve = r.timings.solve.max(1e-12);
    let apps = r.operator_applications as f64;
    SolveReport {
        program: "qcd-solve".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        config_file: cfg.source_name.clone(),
        config: cfg.config.clone(),
        lattice: p.lattice.dims,
        volume: p.lattice.volume(),
        gauge: p.gauge_description.clone(),
        plaquette: p.plaquette.total,
        plaquette_spatial: p.plaquette.spatial,
        plaquette_temporal: p.plaquette.temporal,
        link_trace: p.link_trace,
        kappa: p.kappa,
        operator: p.operator.to_string(),
        source: p.source_description.clone(),
        backend: backend.into(),
        threads: rayon::current_num_threads(),
        converged: r.reason == crate::solver::StopReason::Converged,
        stop_reason: r.reason.describe().into(),
        iterations: r.iterations,
        operator_applications: r.operator_applications,
        tolerance: cfg.config.solver.tolerance,
        iterated_residual: r.history.last().copied().unwrap_or(f64::NAN),
        true_residual: r.true_residual,
        true_residual_of_d_cpu: d_residual,
        timings: r.timings.clone(),
        seconds_per_iteration: solve / (r.iterations.max(1) as f64),
        gflops_model_1320: apps * v * HOP_FLOPS_PER_SITE as f64 / solve / 1e9,
        gbytes_per_second_model: apps * v * dslash_model_bytes_per_site(18, 8) as f64 / solve / 1e9,
        peak_memory_bytes: peak_memory_bytes(),
        residual_history: r.history.clone(),
    }
}

/// The human summary printed on stdout.
pub fn summary(r: &SolveReport) -> String {
    let d = r.lattice;
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:<22} {v}\n"));
    line(
        "lattice",
        format!("{}x{}x{}x{} ({} sites)", d[0], d[1], d[2], d[3], r.volume),
    );
    line("gauge", r.gauge.clone());
    line(
        "plaquette",
        format!(
            "{:.10} (spatial {:.10}, temporal {:.10})",
            r.plaquette, r.plaquette_spatial, r.plaquette_temporal
        ),
    );
    line("kappa", format!("{}", r.kappa));
    line("operator", r.operator.clone());
    line("source", r.source.clone());
    line("backend", r.backend.clone());
    line(
        "result",
        format!("{} after {} iterations", r.stop_reason, r.iterations),
    );
    line(
        "residual",
        format!(
            "iterated {:.3e}, true {:.3e} (tolerance {:.1e})",
            r.iterated_residual, r.true_residual, r.tolerance
        ),
    );
    if r.operator != "D" {
        line(
            "residual of D x = b",
            format!("{:.3e} (recomputed on the CPU)", r.true_residual_of_d_cpu),
        );
    }
    line(
        "time",
        format!(
            "set-up {:.3} s, solve {:.3} s ({:.3} ms/iteration)",
            r.timings.setup,
            r.timings.solve,
            1e3 * r.seconds_per_iteration
        ),
    );
    line(
        "performance",
        format!(
            "{:.2} GFLOP/s (1320 flops/site model), {:.2} GB/s (2880 B/site model)",
            r.gflops_model_1320, r.gbytes_per_second_model
        ),
    );
    if let Some(m) = r.peak_memory_bytes {
        line("peak memory", format!("{:.1} MiB", m as f64 / 1048576.0));
    }
    s.trim_end().to_string()
}
