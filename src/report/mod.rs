//! Reports: the flop and byte models of conventions.md, the JSON solve report, and the
//! human summary printed on stdout.

pub mod charts;
pub mod csv;
pub mod meff;
pub mod model;
pub mod progress;
pub mod provenance;
pub mod timeline;

use crate::config::{Config, LoadedConfig};
use crate::dirac::HOP_FLOPS_PER_SITE;
pub use crate::problem::Timings;
use crate::problem::{Problem, SolveResult};
use serde::Serialize;
pub use timeline::{BackendWall, TimeLine};

/// Effective bytes per site of one dslash with no cache reuse (conventions.md):
/// 8 * (R*P + 24*P) + 24*P for R reals per link and P bytes per real.
pub fn dslash_model_bytes_per_site(reals_per_link: u64, bytes_per_real: u64) -> u64 {
    8 * (reals_per_link * bytes_per_real + 24 * bytes_per_real) + 24 * bytes_per_real
}

/// `dslash_model_bytes_per_site` for an iteration in `precision`: half reads f32 links and
/// spinors of 52 bytes (24 16-bit integers and an f32 norm, `linalg::half`) in place of
/// 24 reals.
pub fn iteration_model_bytes_per_site(
    reals_per_link: u64,
    precision: crate::linalg::Precision,
) -> u64 {
    use crate::linalg::Precision;
    match precision {
        Precision::Double => dslash_model_bytes_per_site(reals_per_link, 8),
        Precision::Single => dslash_model_bytes_per_site(reals_per_link, 4),
        Precision::Half => {
            let spinor = crate::linalg::half::SITE_BYTES;
            8 * (reals_per_link * 4 + spinor) + spinor
        }
    }
}

/// The DRAM floor: 4 links + 1 input + 1 output spinor per site (960 bytes in double, R=18).
pub fn dslash_floor_bytes_per_site(reals_per_link: u64, bytes_per_real: u64) -> u64 {
    4 * reals_per_link * bytes_per_real + 2 * 24 * bytes_per_real
}

/// The main job's JSON report (docs/report.md; schema docs/report.schema.json).
#[derive(Clone, Debug, Serialize)]
pub struct SolveReport {
    /// `schema_version`, `kind`, `build`, `host`, `device`, `inputs`.
    #[serde(flatten)]
    pub provenance: provenance::Provenance,
    pub program: String,
    pub version: String,
    pub unix_time: u64,
    pub config_file: String,
    /// Every option in force: the config as validated, with the command line's flags and
    /// every default written out (`provenance::resolved_options`).
    pub config: Config,
    /// The gauge file read (`inputs`' entry), null when the field was not read from a
    /// file; the copy the run writes is `gauge_output_file`.
    pub gauge_file: Option<provenance::InputFile>,
    /// How the solution file holds the solution.
    pub solution_layout: provenance::ArrayLayout,
    pub lattice: [usize; 4],
    pub volume: usize,
    pub gauge: String,
    /// True when the links used differ from the file's: 32-bit links are always projected
    /// onto SU(3) in double; links off SU(3) only with `reunitarise`.
    pub gauge_reunitarised: bool,
    /// What was done, when `gauge_reunitarised`.
    pub gauge_reunitarisation: Option<String>,
    pub plaquette: f64,
    pub plaquette_spatial: f64,
    pub plaquette_temporal: f64,
    pub link_trace: f64,
    pub kappa: f64,
    /// The clover coefficient and the twisted mass (0: none).
    pub csw: f64,
    pub mu: f64,
    /// "Wilson", "Wilson-clover (c_sw = 1)", ...
    pub action: String,
    pub operator: String,
    pub source: String,
    pub backend: String,
    pub threads: usize,
    /// "seed CR", or "fused CR" with its options (even-odd, single-double, check interval).
    pub solver: String,
    /// Fused iteration: host reads of the scalar block.
    pub host_checks: Option<usize>,
    /// Mixed precision: reliable updates, and the double true residual at each
    /// (iteration, ||r||/||b||).
    pub reliable_updates: Option<usize>,
    pub true_residual_at_updates: Vec<(usize, f64)>,
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
    /// The whole process's wall time by phase (`timeline`).
    pub time: TimeLine,
    pub seconds_per_iteration: f64,
    /// Operator flops by the 1320-per-site model over the solve time.
    pub gflops_model_1320: f64,
    /// Flops per site of one operator application in the model: 1320 for the hopping
    /// term, plus 504 for a site term (the clover term or the twist: two 6x6 blocks).
    pub model_flops_per_site: u64,
    /// Operator flops by that model over the solve time.
    pub gflops_model: f64,
    /// Operator bytes by the no-reuse model over the solve time: 8 (R P + 24 P) + 24 P per
    /// site for R reals per link and P bytes per real of the iteration (2880 in double, R 18).
    pub gbytes_per_second_model: f64,
    pub peak_memory_bytes: Option<u64>,
    /// GPU runs only: per-kernel times, stencil rates, bandwidth against triad.
    pub gpu: Option<GpuMetrics>,
    /// Split lattices only: the grid, the communicator and each rank's halo timings.
    pub parallel: Option<ParallelReport>,
    /// `method = "mg"`: the set-up (apart from the solve time) and the coarse levels.
    pub multigrid: Option<crate::solver::mg::MgStats>,
    pub residual_history: Vec<f64>,
}

/// What a solve on a split lattice adds to the report.
#[derive(Clone, Debug, Serialize)]
pub struct ParallelReport {
    pub grid: [usize; 4],
    pub local: [usize; 4],
    /// "threads (4 ranks)", "nccl 2.27.3 (2 ranks)".
    pub comms: String,
    pub ranks: Vec<RankTimes>,
}

/// One rank's halo work over the solve, seconds (each kind summed over applications).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RankTimes {
    pub rank: usize,
    pub coords: [usize; 4],
    pub pack: f64,
    pub exchange: f64,
    pub interior: f64,
    pub exterior: f64,
    /// Waiting for faces after the interior was done (GPU), or in reductions.
    pub wait: f64,
    pub bytes_exchanged: u64,
    pub exchanges: u64,
    pub reductions: u64,
    /// The fused CR's CUDA graph launches on this rank and their event time (s; sampled
    /// launches scaled to all, as the kernel books; 0 on the CPU or without graphs): the
    /// iterations' share of `solve`, the rest being the host-driven steps around them.
    pub graph_launches: u64,
    pub graph_seconds: f64,
}

/// What a GPU solve adds to the report (times from CUDA events).
#[derive(Clone, Debug, Serialize)]
pub struct GpuMetrics {
    pub device: String,
    pub stencil_version: String,
    pub multiple: usize,
    pub compile_ms: f64,
    pub alloc_ms: f64,
    pub upload_ms: f64,
    pub layout_ms: f64,
    /// Tuning the launch geometry on the live backend (0 from the cache or the config).
    pub tune_ms: f64,
    /// Event time of all stencil launches, and per operator application.
    pub stencil_ms: f64,
    pub stencil_us_per_apply: f64,
    /// Stencil flops by the 1320-per-site model and by the version's own executed count.
    pub stencil_gflops_model_1320: f64,
    pub stencil_gflops_own_count: f64,
    /// Stencil bandwidth by the 2880 B/site no-reuse model (conventions.md).
    pub stencil_gbytes_per_second_model: f64,
    /// A triad a = b + s c measured on the same device in the same run (read + write).
    pub triad_gbytes_per_second: f64,
    pub fraction_of_triad: f64,
    pub kernels: Vec<crate::backend::cuda::KernelStat>,
    /// Device memory: the plan's estimate and the backend's books (the main job).
    pub memory: Option<DeviceMemory>,
}

/// A GPU run's device memory: the estimate made from the plan before allocating
/// (`app::footprint`), and what the backend's books (`backend::ledger`: every allocation)
/// held at their peak, the report's triad aside. Bytes per site are of the lattice the
/// backend holds.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceMemory {
    pub estimate_phase: String,
    pub estimate_bytes: u64,
    pub estimate_bytes_per_site: f64,
    pub estimate_parts: Vec<crate::backend::ledger::MemoryLine>,
    pub peak_bytes: u64,
    pub peak_bytes_per_site: f64,
    pub peak_parts: Vec<crate::backend::ledger::MemoryLine>,
}

/// Bytes moved by the triad that the GPU bandwidth is compared with (3 x 256 MiB,
/// far above any L2).
pub const TRIAD_BYTES: usize = 3 << 28;

/// The stencil's rates over everything booked since the backend's stats were last reset,
/// by the models of conventions.md and by the version's own flop count.
#[derive(Clone, Copy, Debug)]
pub struct StencilRates {
    pub millis: f64,
    pub us_per_apply: f64,
    pub gflops_model_1320: f64,
    pub gflops_own_count: f64,
    /// By the 2880 B/site no-reuse model.
    pub gbytes_per_second_model: f64,
}

pub fn stencil_rates(be: &crate::backend::cuda::CudaBackend, volume: usize) -> StencilRates {
    let st = be.stencil_stats();
    // Operator applications, not launches (2.0 launches 17 kernels per application).
    let apps = be.applications().max(1) as f64;
    let secs = (st.millis / 1e3).max(1e-12);
    let v = volume as f64;
    StencilRates {
        millis: st.millis,
        us_per_apply: 1e3 * st.millis / apps,
        gflops_model_1320: apps * v * HOP_FLOPS_PER_SITE as f64 / secs / 1e9,
        gflops_own_count: st.flops as f64 / secs / 1e9,
        gbytes_per_second_model: apps * v * dslash_model_bytes_per_site(18, 8) as f64 / secs / 1e9,
    }
}

/// The GPU part of a solve report; the triad is measured here, on the same device.
pub fn gpu_metrics(
    be: &mut crate::backend::cuda::CudaBackend,
    volume: usize,
) -> crate::Result<GpuMetrics> {
    // Both books include the final true-residual application.
    let r = stencil_rates(be, volume);
    let triad = be.triad_bandwidth(TRIAD_BYTES)?;
    let t = be.setup_times().clone();
    Ok(GpuMetrics {
        device: be.device_name().to_string(),
        stencil_version: be.version().to_string(),
        multiple: be.multiple(),
        compile_ms: t.compile_ms,
        alloc_ms: t.alloc_ms,
        upload_ms: t.upload_ms,
        layout_ms: t.layout_ms,
        tune_ms: t.tune_ms,
        stencil_ms: r.millis,
        stencil_us_per_apply: r.us_per_apply,
        stencil_gflops_model_1320: r.gflops_model_1320,
        stencil_gflops_own_count: r.gflops_own_count,
        stencil_gbytes_per_second_model: r.gbytes_per_second_model,
        triad_gbytes_per_second: triad,
        fraction_of_triad: r.gbytes_per_second_model / triad,
        kernels: be.kernel_stats(),
        memory: None,
    })
}

/// Peak resident memory of this process (Linux VmHWM).
pub fn peak_memory_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The site term's part of the work model: 504 flops (QUDA's count for two 6x6 blocks)
/// and its 72 reals read, per site and application, when the action has one.
fn model_site_term(p: &Problem, precision: crate::linalg::Precision) -> (u64, u64) {
    if !p.action().has_site_term() {
        return (HOP_FLOPS_PER_SITE, 0);
    }
    let real_bytes = match precision {
        crate::linalg::Precision::Double => 8,
        crate::linalg::Precision::Single => 4,
        crate::linalg::Precision::Half => 2,
    };
    (
        HOP_FLOPS_PER_SITE + crate::dirac::clover::CLOVER_FLOPS_PER_SITE,
        crate::dirac::clover::PACKED_SITE as u64 * real_bytes,
    )
}

pub fn build(
    cfg: &LoadedConfig,
    p: &Problem,
    r: &SolveResult,
    backend: &str,
    d_residual: f64,
    gpu: Option<GpuMetrics>,
) -> SolveReport {
    let v = p.lattice.volume() as f64;
    let solve = r.timings.solve.max(1e-12);
    let apps = r.operator_applications as f64;
    let (model_flops, site_bytes) = model_site_term(p, cfg.config.solver.precision.inner());
    let provenance = provenance::Provenance::new(
        "solve",
        gpu.as_ref()
            .map(|g| g.device.clone())
            .or_else(|| provenance::gpu_of_backend(backend)),
    );
    SolveReport {
        gauge_file: None,
        solution_layout: provenance::spinor_layout(
            p.lattice.dims,
            &p.source_description,
            p.source.norm2().sqrt(),
        ),
        provenance,
        program: "qcd-solve".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        config_file: cfg.source_name.clone(),
        config: provenance::resolved_options(&cfg.config),
        lattice: p.lattice.dims,
        volume: p.lattice.volume(),
        gauge: p.gauge_description.clone(),
        gauge_reunitarised: p.gauge_reunitarised.is_some(),
        gauge_reunitarisation: p.gauge_reunitarised.clone(),
        plaquette: p.plaquette.total,
        plaquette_spatial: p.plaquette.spatial,
        plaquette_temporal: p.plaquette.temporal,
        link_trace: p.link_trace,
        kappa: p.kappa,
        csw: p.csw,
        mu: p.mu,
        action: p.action().describe(),
        operator: p.operator.to_string(),
        source: p.source_description.clone(),
        backend: backend.into(),
        threads: rayon::current_num_threads(),
        solver: r.plan.clone(),
        host_checks: r.fused.as_ref().map(|f| f.checks),
        reliable_updates: r
            .fused
            .as_ref()
            .filter(|f| f.reliable_updates > 0)
            .map(|f| f.reliable_updates),
        true_residual_at_updates: r
            .fused
            .as_ref()
            .map(|f| f.true_residuals.clone())
            .unwrap_or_default(),
        converged: r.reason == crate::solver::StopReason::Converged,
        stop_reason: r.reason.describe().into(),
        iterations: r.iterations,
        operator_applications: r.operator_applications,
        tolerance: cfg.config.solver.tolerance,
        iterated_residual: r.history.last().copied().unwrap_or(f64::NAN),
        true_residual: r.true_residual,
        true_residual_of_d_cpu: d_residual,
        timings: r.timings.clone(),
        time: TimeLine::default(),
        seconds_per_iteration: solve / (r.iterations.max(1) as f64),
        gflops_model_1320: apps * v * HOP_FLOPS_PER_SITE as f64 / solve / 1e9,
        model_flops_per_site: model_flops,
        gflops_model: apps * v * model_flops as f64 / solve / 1e9,
        // The iteration's precision and link compression (single-double iterates in f32,
        // half-double on 16-bit spinors with f32 links).
        gbytes_per_second_model: apps
            * v
            * (iteration_model_bytes_per_site(
                cfg.config.backend.reconstruct.reals() as u64,
                cfg.config.solver.precision.inner(),
            ) + site_bytes) as f64
            / solve
            / 1e9,
        peak_memory_bytes: peak_memory_bytes(),
        gpu,
        parallel: None,
        multigrid: r.multigrid.clone(),
        residual_history: r.history.clone(),
    }
}

impl SolveReport {
    /// Hash every input this process read into `inputs` and `gauge_file` (the process
    /// that writes the report, before it does).
    pub fn hash_inputs(&mut self) {
        self.provenance.hash_inputs();
        self.gauge_file = self.provenance.gauge_file();
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
    if let Some(note) = &r.gauge_reunitarisation {
        line("gauge reunitarised", note.clone());
    }
    line(
        "plaquette",
        format!(
            "{:.10} (spatial {:.10}, temporal {:.10})",
            r.plaquette, r.plaquette_spatial, r.plaquette_temporal
        ),
    );
    line("kappa", format!("{}", r.kappa));
    line("action", r.action.clone());
    line("operator", r.operator.clone());
    line("source", r.source.clone());
    line("backend", r.backend.clone());
    line("solver", r.solver.clone());
    let mut result = format!("{} after {} iterations", r.stop_reason, r.iterations);
    if let Some(n) = r.reliable_updates {
        result.push_str(&format!(" ({n} reliable updates in double)"));
    }
    if let Some(n) = r.host_checks {
        result.push_str(&format!(", {n} host checks"));
    }
    line("result", result);
    if let Some(m) = &r.multigrid {
        line("multigrid", m.describe());
    }
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
            "{}; {:.3} ms/iteration",
            r.time.describe(),
            1e3 * r.seconds_per_iteration
        ),
    );
    line(
        "performance",
        format!(
            "{:.2} GFLOP/s ({} flops/site model), {:.2} GB/s (no-reuse byte model)",
            r.gflops_model, r.model_flops_per_site, r.gbytes_per_second_model
        ),
    );
    if let Some(g) = &r.gpu {
        line(
            "GPU set-up",
            format!(
                "compile {:.1} ms, alloc {:.1} ms, upload {:.1} ms, layout {:.1} ms, tuning {:.1} ms",
                g.compile_ms, g.alloc_ms, g.upload_ms, g.layout_ms, g.tune_ms
            ),
        );
        line(
            "stencil",
            format!(
                "{:.1} us/apply, {:.1} GFLOP/s (1320 model), {:.1} GFLOP/s (version's own count)",
                g.stencil_us_per_apply, g.stencil_gflops_model_1320, g.stencil_gflops_own_count
            ),
        );
        line(
            "bandwidth",
            format!(
                "{:.0} GB/s (2880 B/site model) = {:.2} of the triad ({:.0} GB/s, same run)",
                g.stencil_gbytes_per_second_model, g.fraction_of_triad, g.triad_gbytes_per_second
            ),
        );
        for k in &g.kernels {
            line(
                &format!("  kernel {}", k.name),
                if k.timed == k.launches {
                    format!("{} launches, {:.3} ms", k.launches, k.millis)
                } else if k.timed == 0 {
                    format!("{} launches, not timed", k.launches)
                } else {
                    format!(
                        "{} launches, {:.3} ms (from the {} timed, by bytes)",
                        k.launches, k.millis, k.timed
                    )
                },
            );
        }
        if let Some(m) = &g.memory {
            line(
                "device memory",
                format!(
                    "estimate {} bytes = {:.1} B/site at the peak ({}); held at the peak {} bytes = {:.1} B/site",
                    m.estimate_bytes,
                    m.estimate_bytes_per_site,
                    m.estimate_phase,
                    m.peak_bytes,
                    m.peak_bytes_per_site
                ),
            );
            line(
                "  at the peak",
                crate::backend::ledger::describe_lines(&m.peak_parts),
            );
        }
    }
    if let Some(p) = &r.parallel {
        let g = p.grid;
        let l = p.local;
        line(
            "decomposition",
            format!(
                "grid {}x{}x{}x{}, local {}x{}x{}x{}, {}",
                g[0], g[1], g[2], g[3], l[0], l[1], l[2], l[3], p.comms
            ),
        );
        for t in &p.ranks {
            let graphs = if t.graph_launches > 0 {
                format!(
                    "; {} CR graphs in {:.2} ms",
                    t.graph_launches,
                    1e3 * t.graph_seconds
                )
            } else {
                String::new()
            };
            line(
                &format!("  rank {} {:?}", t.rank, t.coords),
                format!(
                    "pack {:.2} ms, exchange {:.2} ms, interior {:.2} ms, exterior {:.2} ms, wait {:.2} ms; {:.2} MB in {} exchanges, {} reductions{graphs}",
                    1e3 * t.pack,
                    1e3 * t.exchange,
                    1e3 * t.interior,
                    1e3 * t.exterior,
                    1e3 * t.wait,
                    t.bytes_exchanged as f64 / 1e6,
                    t.exchanges,
                    t.reductions
                ),
            );
        }
    }
    if let Some(m) = r.peak_memory_bytes {
        line("peak memory", format!("{:.1} MiB", m as f64 / 1048576.0));
    }
    s.trim_end().to_string()
}
