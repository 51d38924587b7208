//! Memory before work: the bytes a run will need, estimated from the lattice before any
//! large allocation, against the memory this process may still take (host), or the free
//! memory of the GPU (device). A run that cannot fit is refused at once with both numbers
//! (exit 6), instead of aborting in the allocator halfway through.
//!
//! Host memory available = the smaller of /proc/meminfo `MemAvailable` and the cgroup's
//! remaining allowance (v2 `memory.max - memory.current`, v1 `memory.limit_in_bytes -
//! memory.usage_in_bytes`). `QCD_SOLVE_MEMORY_LIMIT=<bytes>` replaces that measurement
//! (tests force a refusal with it at small sizes).

use crate::config::{Device, GaugeConfig, LoadedConfig};
use crate::error::{Error, Result};
use crate::geometry::lattice::Lattice;
use std::path::Path;

/// Bytes of one complex double.
const C16: u64 = 16;
/// A gauge field in double: 4 links of 3x3 complex per site.
pub const GAUGE_BYTES_PER_SITE: u64 = 4 * 9 * C16;
/// A spinor field in double: 4 spins x 3 colours per site.
pub const SPINOR_BYTES_PER_SITE: u64 = 12 * C16;

pub const MEMORY_LIMIT_ENV: &str = "QCD_SOLVE_MEMORY_LIMIT";

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Host memory this process may still use, and where the number came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Available {
    pub bytes: u64,
    pub source: String,
}

/// "12884901888 bytes (12.00 GiB)".
pub fn bytes_str(b: u64) -> String {
    format!("{b} bytes ({:.2} GiB)", b as f64 / GIB)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The cgroup's remaining allowance, if it has a limit (v2 first, then v1).
fn cgroup_remaining() -> Option<(u64, String)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut v2_rel = None;
    let mut v1_rel = None;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
        if id == "0" && ctrl.is_empty() {
            v2_rel = Some(path.trim_start_matches('/').to_string());
        } else if ctrl.split(',').any(|c| c == "memory") {
            v1_rel = Some(path.trim_start_matches('/').to_string());
        }
    }
    // A namespaced cgroup mount shows the process's own group at the root: try the
    // path from /proc/self/cgroup first, then the root of the mount.
    let candidates = |base: &str, rel: &Option<String>| {
        let mut c = Vec::new();
        if let Some(r) = rel {
            if !r.is_empty() {
                c.push(Path::new(base).join(r));
            }
        }
        c.push(Path::new(base).to_path_buf());
        c
    };
    const UNLIMITED: u64 = 1 << 60;
    for dir in candidates("/sys/fs/cgroup", &v2_rel) {
        let max = dir.join("memory.max");
        if let Ok(s) = std::fs::read_to_string(&max) {
            let s = s.trim();
            if s == "max" {
                return None;
            }
            let limit: u64 = s.parse().ok()?;
            let current = read_u64(&dir.join("memory.current")).unwrap_or(0);
            return Some((
                limit.saturating_sub(current),
                format!("cgroup v2 {} minus memory.current", max.display()),
            ));
        }
    }
    for dir in candidates("/sys/fs/cgroup/memory", &v1_rel) {
        let lim = dir.join("memory.limit_in_bytes");
        if let Some(limit) = read_u64(&lim) {
            if limit >= UNLIMITED {
                return None;
            }
            let usage = read_u64(&dir.join("memory.usage_in_bytes")).unwrap_or(0);
            return Some((
                limit.saturating_sub(usage),
                format!("cgroup v1 {} minus memory.usage_in_bytes", lim.display()),
            ));
        }
    }
    None
}

/// What the address-space limit (`ulimit -v`, RLIMIT_AS) leaves: the soft limit of
/// /proc/self/limits minus VmSize of /proc/self/status. None without a limit.
fn address_space_remaining() -> Option<(u64, String)> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let vm = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kb: u64 = vm.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        soft.saturating_sub(kb * 1024),
        "the address-space limit (ulimit -v) minus VmSize".to_string(),
    ))
}

fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Host memory available to this process now (see the module doc); None when nothing
/// can be measured (not Linux), in which case no check is made.
pub fn host_available() -> Result<Option<Available>> {
    if let Ok(v) = std::env::var(MEMORY_LIMIT_ENV) {
        let bytes = v.trim().parse::<u64>().map_err(|_| {
            Error::invalid(
                MEMORY_LIMIT_ENV,
                format!("must be a number of bytes, got \"{v}\""),
            )
        })?;
        return Ok(Some(Available {
            bytes,
            source: MEMORY_LIMIT_ENV.to_string(),
        }));
    }
    let meminfo = mem_available().map(|b| (b, "/proc/meminfo MemAvailable".to_string()));
    let best = [meminfo, cgroup_remaining(), address_space_remaining()]
        .into_iter()
        .flatten()
        .min_by_key(|(b, _)| *b);
    Ok(best.map(|(bytes, source)| Available { bytes, source }))
}

/// The host need of a run, itemised for the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    pub what: String,
    pub bytes: u64,
    pub items: Vec<(&'static str, u64)>,
}

impl Need {
    fn new(what: String, items: Vec<(&'static str, u64)>) -> Need {
        let bytes = items.iter().map(|i| i.1).sum();
        Need { what, bytes, items }
    }
}

/// Bytes per site the main job holds on the host at its peak, by part. CPU solve: the
/// gauge field (576 B/site), its vectorised copy (576), the source and g5 source (2 x 192),
/// the solver's fields on the backend (CR's x, r, p, Ap, Ar and b; the fused iteration's
/// extra temporaries, even-odd halves and single-precision copies: 10 full fields in all,
/// an upper bound over the plans), the downloaded solution, the true-residual and
/// D-residual temporaries (4 x 192). On the GPU the solver's fields live on the device:
/// the host keeps the gauge field and a layout copy for the upload, the source, the g5
/// source, the solution and residual temporaries. A gauge file's reader holds its bytes
/// (576) beside the field; a heatbath field its generator (a copy for saving, geometry 40).
pub fn run_need(dims_string: &str, volume: u64, gauge: &GaugeConfig, device: Device) -> Need {
    let v = volume;
    let mut items = vec![
        ("gauge field", GAUGE_BYTES_PER_SITE * v),
        ("source and g5 source", 2 * SPINOR_BYTES_PER_SITE * v),
        (
            "solution, true-residual and D-residual temporaries",
            4 * SPINOR_BYTES_PER_SITE * v,
        ),
    ];
    match gauge {
        GaugeConfig::File { .. } => items.push(("gauge file bytes", GAUGE_BYTES_PER_SITE * v)),
        GaugeConfig::Heatbath(_) => {
            items.push(("heatbath generator", (GAUGE_BYTES_PER_SITE + 40) * v))
        }
        _ => {}
    }
    if device == Device::Cpu {
        items.extend(cpu_backend_items(volume));
    } else {
        items.push(("gauge layout copy for the GPU", GAUGE_BYTES_PER_SITE * v));
    }
    Need::new(format!("the run on {dims_string}"), items)
}

/// What the CPU backend adds to the host need (its vectorised gauge copy and the solver's
/// fields).
pub fn cpu_backend_items(volume: u64) -> Vec<(&'static str, u64)> {
    vec![
        ("vectorised gauge copy", GAUGE_BYTES_PER_SITE * volume),
        (
            "solver fields (10 spinors)",
            10 * SPINOR_BYTES_PER_SITE * volume,
        ),
    ]
}

/// `bench`: gauge field and its vectorised copy, four spinors (canonical and blocked
/// input and output) and the triad's three arrays over the 960 B/site floor's bytes.
pub fn bench_need(dims_string: &str, volume: u64) -> Need {
    let v = volume;
    Need::new(
        format!("bench on {dims_string}"),
        vec![
            (
                "gauge field and vectorised copy",
                2 * GAUGE_BYTES_PER_SITE * v,
            ),
            ("four spinor fields", 4 * SPINOR_BYTES_PER_SITE * v),
            ("triad arrays", 960 * v),
        ],
    )
}

/// `generate`: the field, the generator's geometry (40 B/site), the copy taken for each
/// save, and a sweep's new links for half the sites of one direction (72 B/site); the
/// NERSC writer streams.
pub fn generate_need(dims_string: &str, volume: u64) -> Need {
    let v = volume;
    Need::new(
        format!("generate on {dims_string}"),
        vec![
            ("gauge field", GAUGE_BYTES_PER_SITE * v),
            ("generator geometry", 40 * v),
            ("field copy for saving", GAUGE_BYTES_PER_SITE * v),
            ("sweep temporaries", 72 * v),
        ],
    )
}

/// Compare a need with what is available; the refusal names both numbers and the parts.
pub fn check_fits(need: &Need, available: &Available) -> Result<()> {
    if need.bytes <= available.bytes {
        return Ok(());
    }
    let parts: Vec<String> = need
        .items
        .iter()
        .map(|(n, b)| format!("{n} {:.2} GiB", *b as f64 / GIB))
        .collect();
    Err(Error::HostMemory(format!(
        "{} needs {} ({}) but {} are available ({}); use a smaller lattice or a machine with more memory",
        need.what,
        bytes_str(need.bytes),
        parts.join(", "),
        bytes_str(available.bytes),
        available.source
    )))
}

/// Check a need against the host's available memory now.
pub fn check_host(need: &Need) -> Result<()> {
    match host_available()? {
        Some(a) => {
            tracing::debug!(need = need.bytes, available = a.bytes, "host memory check");
            check_fits(need, &a)
        }
        None => Ok(()),
    }
}

/// The main job's check, before anything large is allocated.
pub fn check_run(cfg: &LoadedConfig) -> Result<()> {
    let lattice = cfg.lattice()?;
    check_host(&run_need(
        &lattice.dims_string(),
        lattice.volume() as u64,
        &cfg.config.gauge.field,
        cfg.config.backend.device,
    ))
}

/// The CPU backend's part, checked when a run that could have gone to a GPU falls back
/// to the CPU (the gauge field and source are already allocated then).
pub fn check_cpu_backend(lattice: &Lattice) -> Result<()> {
    if std::env::var_os(MEMORY_LIMIT_ENV).is_some() {
        // The override stands for the whole run's allowance, already checked.
        return Ok(());
    }
    check_host(&Need::new(
        format!("the CPU solve on {}", lattice.dims_string()),
        cpu_backend_items(lattice.volume() as u64),
    ))
}

/// What lowers a GPU run's need, for the refusal message: the options the plan does not
/// use yet (kernel 3.0, then even-odd, single-double, 12- or 8-real links), then a smaller
/// lattice, a larger GPU or more GPUs.
pub fn device_advice(
    version: crate::backend::cuda::StencilVersion,
    layout: crate::linalg::Layout,
    reconstruct: crate::backend::cuda::Reconstruct,
) -> String {
    let last =
        "use a smaller lattice, a GPU with more memory, or more GPUs ([parallel] grid, kernel 3.0)";
    if !version.is_fast_path() {
        return format!(
            "kernel 3.0 stores 4 links per site instead of 8 (--kernel 3.0; with it even-odd \
             preconditioning --preconditioning even-odd, single-double fields --precision \
             single-double and 12-real links --reconstruct 12 shrink the need further, to \
             about 1350 B/site with all three); otherwise {last}"
        );
    }
    let mut options = Vec::new();
    if layout.subset == crate::linalg::Subset::Full {
        options.push("even-odd preconditioning (--preconditioning even-odd)");
    }
    if layout.precision == crate::linalg::Precision::Double {
        options.push("single-double fields (--precision single-double)");
    }
    match reconstruct {
        crate::backend::cuda::Reconstruct::R18 => {
            options.push("12- or 8-real links (--reconstruct 12 or 8)")
        }
        crate::backend::cuda::Reconstruct::R12 => options.push("8-real links (--reconstruct 8)"),
        crate::backend::cuda::Reconstruct::R8 => {}
    }
    if options.is_empty() {
        last.to_string()
    } else {
        format!("{} lower it; otherwise {last}", options.join(", "))
    }
}

/// A GPU plan's need against a free-memory figure: pure, so that it is tested without a
/// GPU. `what` names the run ("lattice 64x64x64x128 with stencil 3.0, fused CR, even-odd"),
/// `detail` says where the need comes from (the estimate's peak and parts).
pub fn check_device_fits(
    what: &str,
    need: u64,
    detail: &str,
    free: u64,
    total: u64,
    advice: &str,
) -> Result<()> {
    if need <= free {
        return Ok(());
    }
    Err(Error::DeviceMemory(format!(
        "{what} needs {} on the GPU ({detail}) but it has {} free of {}; {advice}",
        bytes_str(need),
        bytes_str(free),
        bytes_str(total),
    )))
}

/// Before tuning or building the GPU backend: refuse a plan whose need (the estimate made
/// from it, `app::footprint`) does not fit in GPU `device`'s free memory.
pub fn check_device(
    what: &str,
    need: u64,
    detail: &str,
    advice: &str,
    device: usize,
) -> Result<()> {
    let (free, total) = crate::backend::cuda::device_free_memory(device)?;
    tracing::debug!(need, free, total, "device memory check");
    check_device_fits(what, need, detail, free, total, advice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::{Reconstruct, StencilVersion};

    const GIB_U: u64 = 1 << 30;

    #[test]
    fn a_refusal_names_both_numbers_the_parts_and_what_lowers_the_need() {
        let l = crate::linalg::Layout::FULL;
        let need = 104_740_159_488;
        let free = 79 * GIB_U;
        let advice = device_advice(StencilVersion::V1_6_1, l, Reconstruct::R18);
        match check_device_fits(
            "lattice 64x64x64x128",
            need,
            "parts",
            free,
            80 * GIB_U,
            &advice,
        ) {
            Err(Error::DeviceMemory(m)) => {
                assert!(m.contains(&format!("needs {need} bytes")), "{m}");
                assert!(m.contains(&format!("{free} bytes")), "{m}");
                assert!(m.contains("(parts)"), "{m}");
                assert!(m.contains("more GPUs"), "{m}");
                assert!(m.contains("--kernel 3.0"), "{m}");
                assert!(m.contains("--preconditioning even-odd"), "{m}");
                assert!(m.contains("--reconstruct 12"), "{m}");
            }
            other => panic!("expected DeviceMemory, got {other:?}"),
        }
        // Exit 6, as documented.
        let e = check_device_fits("x", need, "", free, 80 * GIB_U, "").unwrap_err();
        assert_eq!(e.exit_code(), 6);
        // An H200's 141 GiB holds it.
        assert!(check_device_fits("x", need, "", 140 * GIB_U, 141 * GIB_U, "").is_ok());
        // On 3.0 the advice names only the options not yet used.
        let eo_single = crate::linalg::Layout::new(
            crate::linalg::Subset::Even,
            crate::linalg::Precision::Single,
        );
        let a = device_advice(StencilVersion::V3_0, eo_single, Reconstruct::R18);
        assert!(
            a.contains("--reconstruct 12") && !a.contains("even-odd"),
            "{a}"
        );
        let a = device_advice(StencilVersion::V3_0, eo_single, Reconstruct::R12);
        assert!(
            a.contains("--reconstruct 8") && !a.contains("--reconstruct 12"),
            "{a}"
        );
        let a = device_advice(StencilVersion::V3_0, eo_single, Reconstruct::R8);
        assert!(a.starts_with("use a smaller lattice"), "{a}");
    }

    #[test]
    fn the_cpu_estimate_is_a_per_site_sum() {
        // run_need for a random gauge on the CPU: 576 + 2*192 + 4*192 + 576 + 10*192.
        let n = run_need(
            "4x4x4x4",
            256,
            &GaugeConfig::Random { seed: 1 },
            Device::Cpu,
        );
        assert_eq!(n.bytes, 256 * 4224);
        // On the GPU the solver's fields are on the device: 576 + 2*192 + 4*192 + 576.
        let g = run_need(
            "4x4x4x4",
            256,
            &GaugeConfig::Random { seed: 1 },
            Device::Cuda,
        );
        assert_eq!(g.bytes, 256 * 2304);
        let a = Available {
            bytes: n.bytes - 1,
            source: "test".into(),
        };
        assert_eq!(check_fits(&n, &a).unwrap_err().exit_code(), 6);
        assert!(check_fits(&g, &a).is_ok());
    }
}
