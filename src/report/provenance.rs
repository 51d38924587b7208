//! What makes a report self-describing (docs/report.md): its schema version, the build
//! (version and git commit), the host and the device it ran on, each input file with
//! its size, SHA-256 and the checks it passed, the options in force (defaults resolved)
//! and the layout of the arrays written. The main job's report and the propagator's
//! carry the same pieces (`Provenance`, flattened into each).

use crate::config::{Config, SolverConfig};
use crate::error::{Error, Result};
use crate::io::checks::{Check, InputChecks};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// The reports' schema version, "MAJOR.MINOR" (docs/report.md, "Versions"): MINOR grows
/// when keys are added, MAJOR when a key is removed or renamed or changes its meaning or
/// units. The reports before this field existed are version 1.
pub const SCHEMA_VERSION: &str = "2.3";

/// How the program was built: its version and the git commit of its source (build.rs).
#[derive(Clone, Debug, Serialize)]
pub struct Build {
    pub program: &'static str,
    pub version: &'static str,
    /// `git rev-parse --short HEAD` at build time; "unknown" without git or `.git`.
    pub git_commit: &'static str,
    /// Tracked files differed from that commit; null when unknown.
    pub git_dirty: Option<bool>,
    /// "release" or "debug".
    pub profile: &'static str,
}

/// This build (build.rs sets the two git variables).
pub fn build() -> Build {
    Build {
        program: "qcd-solve",
        version: env!("CARGO_PKG_VERSION"),
        git_commit: env!("QCD_SOLVE_GIT_COMMIT"),
        git_dirty: match env!("QCD_SOLVE_GIT_DIRTY") {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    }
}

/// The machine that ran the process.
#[derive(Clone, Debug, Serialize)]
pub struct Host {
    /// The node name (uname).
    pub name: String,
    /// Kernel name and release (uname), e.g. "Linux 6.8.0".
    pub os: String,
    /// The distribution's PRETTY_NAME (/etc/os-release), when there is one.
    pub os_release: Option<String>,
    pub arch: &'static str,
    /// The CPU model (/proc/cpuinfo), when known.
    pub cpu_model: Option<String>,
    /// Logical CPUs this process may use.
    pub cpus: usize,
    /// Threads of the pool the solve ran in.
    pub threads: usize,
}

/// The host this process runs on.
pub fn host() -> Host {
    let u = rustix::system::uname();
    let text = |c: &std::ffi::CStr| c.to_string_lossy().into_owned();
    Host {
        name: text(u.nodename()),
        os: format!("{} {}", text(u.sysname()), text(u.release())),
        os_release: os_release(),
        arch: std::env::consts::ARCH,
        cpu_model: cpu_model(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        threads: rayon::current_num_threads(),
    }
}

fn os_release() -> Option<String> {
    let s = std::fs::read_to_string("/etc/os-release").ok()?;
    let v = s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="))?;
    Some(v.trim().trim_matches('"').to_string())
}

fn cpu_model() -> Option<String> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// The device that solved: the CPU, or a GPU with its driver.
#[derive(Clone, Debug, Serialize)]
pub struct Device {
    /// "cpu" or "cuda".
    pub kind: &'static str,
    /// The GPU's name, or the CPU model.
    pub name: String,
    /// GPU: the NVIDIA kernel driver's version (/proc/driver/nvidia/version), when known.
    pub driver_version: Option<String>,
    /// GPU: the highest CUDA version the driver supports (cuDriverGetVersion).
    pub cuda_version: Option<String>,
    /// GPU: CUDA_VISIBLE_DEVICES as set for the process.
    pub visible_devices: Option<String>,
}

/// The CPU as the device.
pub fn cpu_device(host: &Host) -> Device {
    Device {
        kind: "cpu",
        name: host
            .cpu_model
            .clone()
            .unwrap_or_else(|| host.arch.to_string()),
        driver_version: None,
        cuda_version: None,
        visible_devices: None,
    }
}

/// A GPU named `name` as the device (its driver asked here: the process has used it).
pub fn gpu_device(name: &str) -> Device {
    Device {
        kind: "cuda",
        name: name.to_string(),
        driver_version: nvidia_driver_version(),
        cuda_version: crate::backend::cuda::driver_version().ok(),
        visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
    }
}

/// The NVIDIA kernel driver's version from /proc/driver/nvidia/version.
fn nvidia_driver_version() -> Option<String> {
    let s = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    driver_version_of(&s)
}

/// "580.159.04" from the "NVRM version: ..." line of /proc/driver/nvidia/version: its
/// first word of digits and dots (the proprietary module writes "NVIDIA UNIX x86_64
/// Kernel Module  570.86.15  ...", the open one "NVIDIA UNIX Open Kernel Module for
/// x86_64  580.159.04  ...").
fn driver_version_of(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// One input file read by the process: what it is, where, its bytes and their SHA-256
/// (read again from the file when the report is made), and the checks its reader made.
#[derive(Clone, Debug, Serialize)]
pub struct InputFile {
    /// "config", "gauge file", "heatbath cache", "source file".
    pub input: String,
    /// Absolute (the current folder prefixed to a relative one).
    pub path: String,
    /// Null (with `unreadable`) when the file could not be read again for its hash.
    pub bytes: Option<u64>,
    /// Lower-case hex.
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
    /// Each check and its result ("ok: ...", "accepted unchecked: ...", "none stored").
    pub checks: Vec<Check>,
}

/// The length and SHA-256 (lower-case hex) of the file at `path`.
pub fn file_sha256(path: &Path) -> Result<(u64, String)> {
    let io = |e: std::io::Error| Error::io(path, e);
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bytes += n as u64;
    }
    let hex = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((bytes, hex))
}

/// Every input this process read (`io::checks::recorded`), each hashed.
pub fn inputs() -> Vec<InputFile> {
    let recorded = crate::io::checks::recorded();
    crate::clock::timed("SHA-256 of the inputs", || {
        recorded.into_iter().map(input_file).collect()
    })
}

fn input_file(r: InputChecks) -> InputFile {
    let (bytes, sha256, unreadable) = match file_sha256(Path::new(&r.path)) {
        Ok((b, h)) => (Some(b), Some(h), None),
        Err(e) => (None, None, Some(e.to_string())),
    };
    // Absolute, as the process saw it (links and `..` kept).
    let path = std::path::absolute(&r.path).map_or(r.path, |p| p.display().to_string());
    InputFile {
        input: r.input,
        path,
        bytes,
        sha256,
        unreadable,
        checks: r.checks,
    }
}

/// The options in force: `c` with what its absence means written out (the operator the
/// method iterates on, the multigrid's defaults when `method = "mg"`).
pub fn resolved_options(c: &Config) -> Config {
    let mut c = c.clone();
    c.solver = SolverConfig {
        operator: Some(c.solver.operator()),
        ..c.solver
    };
    if c.solver.method == crate::solver::Method::Mg && c.multigrid.is_none() {
        c.multigrid = Some(Default::default());
    }
    c
}

/// How an array file is laid out.
#[derive(Clone, Debug, Serialize)]
pub struct ArrayLayout {
    /// "npy" (NumPy format 1.0).
    pub format: &'static str,
    /// Axis names, slowest first (C order).
    pub axes: Vec<&'static str>,
    pub shape: Vec<usize>,
    /// "complex128": (re, im) pairs of IEEE-754 doubles.
    pub dtype: &'static str,
    /// "little".
    pub byte_order: &'static str,
    /// What the numbers are: the operator's normalisation and the source's.
    pub normalisation: String,
    /// ||b||, the 2-norm of the source (of its first column where it has several: the
    /// 12 columns of a point source share it).
    pub source_norm: f64,
}

/// The normalisation the solutions share (docs/conventions.md).
const KAPPA_NORMALISATION: &str = "x = D^-1 b with D = A - kappa H (kappa normalisation: \
     A = 1 for plain Wilson; the mass-normalised D_m = D / (2 kappa), so D_m^-1 b = 2 kappa x)";

/// A solution spinor's `.npy` on lattice extents `dims` (x, y, z, t).
pub fn spinor_layout(dims: [usize; 4], source: &str, source_norm: f64) -> ArrayLayout {
    ArrayLayout {
        format: "npy",
        axes: vec!["t", "z", "y", "x", "spin", "colour"],
        shape: vec![dims[3], dims[2], dims[1], dims[0], 4, 3],
        dtype: "complex128",
        byte_order: "little",
        normalisation: format!("{KAPPA_NORMALISATION}; b: {source}"),
        source_norm,
    }
}

/// A propagator's `.npy`: the 12 columns of a point-like source as `[.., spin', colour']`,
/// other sources' `n` columns as `[.., column]`.
pub fn propagator_layout(
    dims: [usize; 4],
    columns: Option<usize>,
    source: &str,
    source_norm: f64,
) -> ArrayLayout {
    let mut l = spinor_layout(dims, source, source_norm);
    match columns {
        None => {
            l.axes.extend(["source_spin", "source_colour"]);
            l.shape.extend([4, 3]);
        }
        Some(n) => {
            l.axes.push("column");
            l.shape.push(n);
        }
    }
    l
}

/// The pieces every report carries (flattened into it).
#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    pub schema_version: &'static str,
    /// "solve" (the main job) or "propagator".
    pub kind: &'static str,
    pub build: Build,
    pub host: Host,
    pub device: Device,
    pub inputs: Vec<InputFile>,
}

impl Provenance {
    /// For a report of `kind`, solved on the GPU named `gpu` or on the CPU; `inputs`
    /// empty until `hash_inputs` (only the process that writes the report reads its
    /// inputs again).
    pub fn new(kind: &'static str, gpu: Option<String>) -> Provenance {
        let host = host();
        let device = match gpu {
            Some(name) => gpu_device(&name),
            None => cpu_device(&host),
        };
        Provenance {
            schema_version: SCHEMA_VERSION,
            kind,
            build: build(),
            host,
            device,
            inputs: Vec::new(),
        }
    }

    /// Fill `inputs` with every input this process read, hashed.
    pub fn hash_inputs(&mut self) {
        self.inputs = inputs();
    }

    /// The gauge file read, if any (the report's `gauge_file`).
    pub fn gauge_file(&self) -> Option<InputFile> {
        self.inputs
            .iter()
            .find(|i| i.input == "gauge file")
            .cloned()
    }
}

/// The GPU's name in a backend's description ("cuda NAME (stencil ...)"), `None` for
/// the CPU's.
pub fn gpu_of_backend(described: &str) -> Option<String> {
    let rest = described.strip_prefix("cuda ")?;
    Some(rest.split(" (").next().unwrap_or(rest).to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_driver_version_is_read_from_either_kernel_modules_line() {
        // The two forms of /proc/driver/nvidia/version's first line: the open kernel
        // module's puts "for x86_64" before the version (a GPU report of 2026-11-28 read
        // "for" as the version), the proprietary one "x86_64 Kernel Module". The words
        // after the version are illustrative.
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  \
                    Release Build\nGCC version:  gcc version 12.3.0";
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Fri Jan 24 \
                      2025\n";
        assert_eq!(driver_version_of(open).as_deref(), Some("580.159.04"));
        assert_eq!(driver_version_of(closed).as_deref(), Some("570.86.15"));
        assert_eq!(driver_version_of("no such line"), None);
    }

    use super::*;

    #[test]
    fn sha256_matches_the_standards_check_values() {
        // FIPS 180-2 appendix B.1 ("abc") and the empty message's digest.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            file_sha256(&p).unwrap(),
            (
                3,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into()
            )
        );
        std::fs::write(&p, b"").unwrap();
        assert_eq!(
            file_sha256(&p).unwrap().1,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn an_unreadable_input_is_reported_not_fatal() {
        let f = input_file(InputChecks {
            input: "gauge file".into(),
            path: "/nonexistent/qcd-solve/gauge".into(),
            checks: Vec::new(),
        });
        assert!(f.sha256.is_none() && f.bytes.is_none());
        assert!(f
            .unreadable
            .unwrap()
            .contains("/nonexistent/qcd-solve/gauge"));
    }

    #[test]
    fn the_layout_is_t_slowest_and_the_propagators_adds_the_sources_indices() {
        let l = propagator_layout([4, 6, 8, 10], None, "point", 1.0);
        assert_eq!(l.shape, [10, 8, 6, 4, 4, 3, 4, 3]);
        assert_eq!(l.axes.len(), l.shape.len());
        let n = propagator_layout([4, 6, 8, 10], Some(5), "noise", 2.0);
        assert_eq!(n.shape.last(), Some(&5));
    }

    #[test]
    fn the_gpu_is_named_from_the_backends_description() {
        // The two descriptions of app::parallel (one.rs, gpu.rs).
        assert_eq!(
            gpu_of_backend("cuda NVIDIA H200 (stencil 3.0, multiple 2)").as_deref(),
            Some("NVIDIA H200")
        );
        assert_eq!(gpu_of_backend("cpu fast (8 threads)"), None);
    }
}
