//! The ablation's report: one row per stencil version or option set, one per method, and
//! the measurements they are compared with.

use serde::Serialize;

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
