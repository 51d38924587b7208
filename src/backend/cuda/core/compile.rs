//! The one compile path of the CUDA kernels: the `.cu` sources of `kernels/` are embedded
//! in the binary, their `#include "common.cuh"` (and `"cr_device.cuh"`) lines are expanded
//! from the embedded headers (each at most once, as `#pragma once` would), and
//! NVRTC compiles them on first use for the device's architecture. PTX is cached per
//! (source, architecture, options) for the life of the process; a compile error returns
//! `Error::Cuda` with NVRTC's full log. `stencil::programs::compile_all_kernels` runs every source with every
//! define set the program uses through this same path, needing libnvrtc but no GPU.

use crate::error::{Error, Result};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One embedded kernel source file.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelSource {
    pub name: &'static str,
    pub code: &'static str,
}

const COMMON: &str = include_str!("../../../../kernels/common.cuh");
const CR_DEVICE: &str = include_str!("../../../../kernels/cr_device.cuh");
const V3_CORE: &str = include_str!("../../../../kernels/v3_core.cuh");
const HALF: &str = include_str!("../../../../kernels/half.cuh");
const CLOVER: &str = include_str!("../../../../kernels/clover.cuh");
const SU3: &str = include_str!("../../../../kernels/su3.cuh");
/// The embedded headers a source may `#include "..."`.
const HEADERS: [(&str, &str); 6] = [
    ("common.cuh", COMMON),
    ("cr_device.cuh", CR_DEVICE),
    ("v3_core.cuh", V3_CORE),
    ("half.cuh", HALF),
    ("clover.cuh", CLOVER),
    ("su3.cuh", SU3),
];

pub(crate) static BLAS1: KernelSource = KernelSource {
    name: "blas1.cu",
    code: include_str!("../../../../kernels/blas1.cu"),
};
pub(crate) static REDUCE: KernelSource = KernelSource {
    name: "reduce.cu",
    code: include_str!("../../../../kernels/reduce.cu"),
};
pub(crate) static LAYOUT: KernelSource = KernelSource {
    name: "layout.cu",
    code: include_str!("../../../../kernels/layout.cu"),
};
pub(crate) static STENCIL_COARSE: KernelSource = KernelSource {
    name: "stencil_coarse.cu",
    code: include_str!("../../../../kernels/stencil_coarse.cu"),
};
pub(crate) static STENCIL_FINE: KernelSource = KernelSource {
    name: "stencil_fine.cu",
    code: include_str!("../../../../kernels/stencil_fine.cu"),
};
pub(crate) static STENCIL_V3: KernelSource = KernelSource {
    name: "stencil_v3.cu",
    code: include_str!("../../../../kernels/stencil_v3.cu"),
};
/// 3.0's face exchange on a decomposed lattice: pack and exterior kernels.
pub(crate) static HALO: KernelSource = KernelSource {
    name: "halo.cu",
    code: include_str!("../../../../kernels/halo.cu"),
};
pub(crate) static HEATBATH: KernelSource = KernelSource {
    name: "heatbath.cu",
    code: include_str!("../../../../kernels/heatbath.cu"),
};

/// The quenched generator's program: no FMA contraction, so + and * round as on the CPU.
pub(crate) fn heatbath_program() -> Program {
    Program::no_fma(&HEATBATH)
}

pub(crate) static GAUGE_FIX: KernelSource = KernelSource {
    name: "gauge_fix.cu",
    code: include_str!("../../../../kernels/gauge_fix.cu"),
};

/// The gauge fixing's program: no FMA contraction, so + and * round as on the CPU.
pub(crate) fn gauge_fix_program() -> Program {
    Program::no_fma(&GAUGE_FIX)
}

/// The fused CR iteration's element-wise kernels: no FMA contraction, so that the updates
/// round as the CPU backend's.
pub(crate) static CR_FUSED: KernelSource = KernelSource {
    name: "cr_fused.cu",
    code: include_str!("../../../../kernels/cr_fused.cu"),
};

pub(crate) fn cr_fused_program() -> Program {
    Program::no_fma(&CR_FUSED)
}

/// BiCGStab's iteration with device scalars: no FMA contraction, as for the fused CR.
pub(crate) static BICGSTAB_FUSED: KernelSource = KernelSource {
    name: "bicgstab_fused.cu",
    code: include_str!("../../../../kernels/bicgstab_fused.cu"),
};

pub(crate) fn bicgstab_fused_program() -> Program {
    Program::no_fma(&BICGSTAB_FUSED)
}

/// Multigrid's coarse levels: the coarse operator, the transfers, coarse BLAS-1.
pub(crate) static MG_COARSE: KernelSource = KernelSource {
    name: "mg_coarse.cu",
    code: include_str!("../../../../kernels/mg_coarse.cu"),
};

/// Multigrid's set-up: the Galerkin product of the fine Wilson operator, in double.
pub(crate) static MG_GALERKIN: KernelSource = KernelSource {
    name: "mg_galerkin.cu",
    code: include_str!("../../../../kernels/mg_galerkin.cu"),
};

pub(crate) static STENCIL_SPLIT: KernelSource = KernelSource {
    name: "stencil_split.cu",
    code: include_str!("../../../../kernels/stencil_split.cu"),
};

/// A source with one set of preprocessor defines: the unit that is compiled and cached.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Program {
    pub source: &'static KernelSource,
    pub defines: Vec<(&'static str, &'static str)>,
    /// Extra NVRTC flags (the heatbath needs `--fmad=false` to round like the CPU).
    pub flags: Vec<&'static str>,
}

impl Program {
    pub fn plain(source: &'static KernelSource) -> Self {
        Program {
            source,
            defines: Vec::new(),
            flags: Vec::new(),
        }
    }

    /// A source without defines, compiled with no FMA contraction (`--fmad=false`), so
    /// that + and * round as on the CPU.
    pub fn no_fma(source: &'static KernelSource) -> Self {
        Program {
            source,
            defines: Vec::new(),
            flags: vec!["--fmad=false"],
        }
    }

    /// "stencil_fine.cu [LI_SPARSE=1 ...]".
    pub fn label(&self) -> String {
        if self.defines.is_empty() {
            self.source.name.to_string()
        } else {
            let d: Vec<String> = self
                .defines
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{} [{}]", self.source.name, d.join(" "))
        }
    }

    pub(crate) fn options(&self, arch: &str) -> Vec<String> {
        let mut o = vec![
            format!("--gpu-architecture={arch}"),
            "-default-device".to_string(),
            "--std=c++17".to_string(),
        ];
        o.extend(self.defines.iter().map(|(k, v)| format!("-D{k}={v}")));
        o.extend(self.flags.iter().map(|f| f.to_string()));
        o
    }

    /// The source with the shared headers spliced in (each once; `#pragma once` lines
    /// dropped), `#line` directives keeping NVRTC's messages pointing at the right file
    /// and line.
    pub(crate) fn expanded(&self) -> String {
        let mut out = String::with_capacity(COMMON.len() + self.source.code.len() + 128);
        let mut done = Vec::new();
        splice(self.source.name, self.source.code, &mut done, &mut out);
        out
    }
}

/// The header an `#include "name"` line names, if it is one of ours.
fn included_header(line: &str) -> Option<(&'static str, &'static str)> {
    let rest = line.trim().strip_prefix("#include")?.trim();
    let name = rest.strip_prefix('"')?.strip_suffix('"')?;
    HEADERS.iter().copied().find(|(h, _)| *h == name)
}

fn splice(name: &str, code: &str, done: &mut Vec<&'static str>, out: &mut String) {
    for (n, line) in code.lines().enumerate() {
        if let Some((h, text)) = included_header(line) {
            if !done.contains(&h) {
                done.push(h);
                out.push_str(&format!("#line 1 \"{h}\"\n"));
                splice(h, text, done, out);
                out.push_str(&format!("\n#line {} \"{}\"\n", n + 2, name));
            }
        } else if line.trim() == "#pragma once" {
            out.push('\n');
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// libnvrtc must be loadable before cudarc touches it (cudarc panics otherwise).
pub(crate) fn require_nvrtc() -> Result<()> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Cuda(
            "libnvrtc not found: NVRTC (libnvrtc.so.13, from the CUDA toolkit or `pip install nvidia-cuda-nvrtc`) must be on the loader path (LD_LIBRARY_PATH) to compile the kernels".into(),
        ))
    }
}

pub(crate) fn check_arch(arch: &str) -> Result<()> {
    let digits = arch
        .strip_prefix("sm_")
        .or_else(|| arch.strip_prefix("compute_"))
        .unwrap_or("");
    let core = digits.trim_end_matches(['a', 'f']);
    if core.len() >= 2 && core.chars().all(|c| c.is_ascii_digit()) {
        Ok(())
    } else {
        Err(Error::invalid(
            "arch",
            format!("`{arch}` is not a GPU architecture (expected e.g. sm_90)"),
        ))
    }
}

type CacheKey = (&'static str, String, Vec<String>);

fn ptx_cache() -> &'static Mutex<HashMap<CacheKey, Ptx>> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Ptx>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The programs NVRTC compiled in this process, in order (tests: how often it ran).
#[cfg(test)]
fn nvrtc_runs() -> &'static Mutex<Vec<CacheKey>> {
    static RUNS: OnceLock<Mutex<Vec<CacheKey>>> = OnceLock::new();
    RUNS.get_or_init(Default::default)
}

/// One lock per program: of the threads that miss the cache at once, the first compiles
/// (or reads the disk entry) and the others wait for it and take its PTX. Ranks as threads
/// build their backends at the same moment; without it each compiled every program, and
/// they wrote the same disk entry through one temporary name (the process id's), so one
/// could rename another's half-written file. It saves CPU, not wall time: a cold start on
/// four GPUs spent 11.4 s in the module loads with and without it (validate/RESULTS.md).
fn program_lock(key: &CacheKey) -> std::sync::Arc<Mutex<()>> {
    type Locks = Mutex<HashMap<CacheKey, std::sync::Arc<Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    locks.entry(key.clone()).or_default().clone()
}

/// Compile (or fetch from the in-process cache) one program for `arch`.
pub(crate) fn compile(program: &Program, arch: &str) -> Result<Ptx> {
    check_arch(arch)?;
    require_nvrtc()?;
    let options = program.options(arch);
    let key: CacheKey = (program.source.name, arch.to_string(), options.clone());
    if let Some(ptx) = ptx_cache().lock().unwrap().get(&key) {
        return Ok(ptx.clone());
    }
    let lock = program_lock(&key);
    let _compiling = lock.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ptx) = ptx_cache().lock().unwrap().get(&key) {
        return Ok(ptx.clone());
    }
    let source = program.expanded();
    let disk = disk_entry(&source, &options);
    if let Some(ptx) = disk.as_ref().and_then(|(p, pre)| read_disk_ptx(p, pre)) {
        ptx_cache().lock().unwrap().insert(key, ptx.clone());
        return Ok(ptx);
    }
    #[cfg(test)]
    nvrtc_runs().lock().unwrap().push(key.clone());
    let opts = CompileOptions {
        options: options.clone(),
        name: Some(program.source.name.to_string()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source.clone(), opts).map_err(|e| match e {
        CompileError::CompileError {
            nvrtc,
            options,
            log,
        } => Error::Cuda(format!(
            "NVRTC could not compile {} ({nvrtc:?}) with options {options:?}:\n{}",
            program.label(),
            log.to_string_lossy()
        )),
        other => Error::Cuda(format!("NVRTC failed on {}: {other:?}", program.label())),
    })?;
    if let Some((p, pre)) = &disk {
        write_disk_ptx(p, pre, &ptx.to_src());
    }
    ptx_cache().lock().unwrap().insert(key, ptx.clone());
    Ok(ptx)
}

/// The folder of the on-disk PTX cache: `QCD_SOLVE_PTX_CACHE` (a folder, or `off`), else
/// `~/.cache/qcd-solve/ptx`. A process that finds its programs there skips NVRTC (the
/// warm-up, context included, took 0.52-0.54 s without it and 0.25 s with it on an H100
/// host: validate/RESULTS.md).
fn disk_cache_dir() -> Option<std::path::PathBuf> {
    match std::env::var_os("QCD_SOLVE_PTX_CACHE") {
        Some(v) if v == "off" => None,
        Some(v) => Some(v.into()),
        None => std::env::var_os("HOME")
            .map(|h| std::path::PathBuf::from(h).join(".cache/qcd-solve/ptx")),
    }
}

/// What a cached PTX was compiled from: NVRTC's version, the options and the expanded
/// source. The file stores this whole text before the PTX, and an entry is used only when
/// it matches exactly (the file name's hash only finds it).
fn disk_preamble(nvrtc: (i32, i32), source: &str, options: &[String]) -> String {
    format!(
        "// qcd-solve PTX cache\n// nvrtc {}.{}\n// options {}\n{source}\n// end of source\n",
        nvrtc.0,
        nvrtc.1,
        options.join(" ")
    )
}

fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes two ints; `compile` checked that NVRTC is present.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (major, minor)
}

/// Off for `kernels --check`, which must run NVRTC on every program.
static DISK_CACHE_OFF: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make every later `compile` of this process run NVRTC (no on-disk PTX).
pub(crate) fn bypass_disk_cache() {
    DISK_CACHE_OFF.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// 64-bit FNV-1a (stable across builds, unlike std's hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Where a program's PTX is cached on disk, with the preamble it must start with.
fn disk_entry(source: &str, options: &[String]) -> Option<(std::path::PathBuf, String)> {
    if DISK_CACHE_OFF.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let dir = disk_cache_dir()?;
    let preamble = disk_preamble(nvrtc_version(), source, options);
    let h = fnv1a(preamble.as_bytes());
    Some((dir.join(format!("{h:016x}.ptx")), preamble))
}

fn read_disk_ptx(path: &std::path::Path, preamble: &str) -> Option<Ptx> {
    let text = std::fs::read_to_string(path).ok()?;
    let ptx = text.strip_prefix(preamble)?;
    (!ptx.is_empty()).then(|| Ptx::from_src(ptx))
}

/// Store a compiled PTX: written under a temporary name and renamed (no fsync: a cache
/// entry lost to a crash only costs a compilation, and a torn one fails the preamble
/// check). A failure is logged, not returned.
fn write_disk_ptx(path: &std::path::Path, preamble: &str, ptx: &str) {
    let tmp = path.with_extension(format!("ptx.tmp{}", std::process::id()));
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&tmp, preamble.to_string() + ptx))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::debug!(
            "the PTX cache entry {} was not written: {e}",
            path.display()
        );
    }
}

/// Every kernel source and the shared header, for fingerprinting (the tune cache keys its
/// entries by a hash of these: any kernel edit makes old launch timings stale).
pub fn all_sources() -> Vec<&'static str> {
    let mut v = vec![COMMON, CR_DEVICE, V3_CORE, HALF, CLOVER];
    v.extend(
        [
            &CR_FUSED,
            &BLAS1,
            &REDUCE,
            &LAYOUT,
            &STENCIL_COARSE,
            &STENCIL_FINE,
            &STENCIL_SPLIT,
            &STENCIL_V3,
            &HALO,
            &MG_COARSE,
            &MG_GALERKIN,
        ]
        .iter()
        .map(|s| s.code),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_ptx_is_used_only_for_the_same_compiler_options_and_source() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("sub").join("x.ptx");
        let opts = vec!["--gpu-architecture=sm_90".to_string(), "-DX=1".to_string()];
        let pre = disk_preamble((13, 0), "source text", &opts);
        write_disk_ptx(&path, &pre, ".version 9.0\n.target sm_90\n");
        let got = read_disk_ptx(&path, &pre).expect("the entry just written");
        assert_eq!(got.to_src(), ".version 9.0\n.target sm_90\n");
        // Another NVRTC, other options or another source: not used.
        for other in [
            disk_preamble((13, 1), "source text", &opts),
            disk_preamble((13, 0), "source text", &opts[..1]),
            disk_preamble((13, 0), "source text!", &opts),
        ] {
            assert!(read_disk_ptx(&path, &other).is_none());
        }
        // A torn entry (the preamble cut short, or nothing after it) is not used either.
        std::fs::write(&path, &pre[..pre.len() / 2]).unwrap();
        assert!(read_disk_ptx(&path, &pre).is_none());
        std::fs::write(&path, &pre).unwrap();
        assert!(read_disk_ptx(&path, &pre).is_none());
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1);
        // The hash is FNV-1a 64 (its published test vectors).
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn threads_that_miss_at_once_compile_a_program_once() {
        // Four threads ask at once for a program no one has compiled (a define of its own,
        // so neither cache has it): NVRTC runs once, and all get the same PTX. Without
        // libnvrtc every call names the library (and CI=true, where it is on the loader
        // path, fails).
        // SAFETY: only tries to dlopen the library by its usual names.
        let nvrtc = unsafe { cudarc::nvrtc::sys::is_culib_present() };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let value: &'static str =
            Box::leak(format!("{}{stamp}", std::process::id()).into_boxed_str());
        let mut program = Program::plain(&BLAS1);
        program.defines.push(("QCD_TEST_ONE_COMPILE", value));
        let barrier = std::sync::Barrier::new(4);
        let got: Vec<Result<String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        compile(&program, "sm_90").map(|p| p.to_src())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        if !nvrtc {
            for r in &got {
                assert!(
                    matches!(r, Err(Error::Cuda(m)) if m.contains("libnvrtc not found")),
                    "{:?}",
                    r.as_ref().err()
                );
            }
            eprintln!("SKIPPED: threads_that_miss_at_once_compile_a_program_once: libnvrtc is not on the loader path (see .ci/run)");
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but libnvrtc is not on the loader path"
            );
            return;
        }
        let ptx: Vec<String> = got.into_iter().map(|r| r.unwrap()).collect();
        assert!(ptx.iter().all(|p| p == &ptx[0] && p.contains(".entry ")));
        let key: CacheKey = (BLAS1.name, "sm_90".into(), program.options("sm_90"));
        let runs = nvrtc_runs()
            .lock()
            .unwrap()
            .iter()
            .filter(|k| **k == key)
            .count();
        assert_eq!(runs, 1, "NVRTC ran {runs} times for one program");
    }

    const INCLUDE_LINE: &str = "#include \"common.cuh\"";

    #[test]
    fn header_is_spliced_with_line_directives() {
        let p = Program::plain(&BLAS1);
        let s = p.expanded();
        assert!(!s.contains(INCLUDE_LINE));
        assert!(s.contains("#line 1 \"common.cuh\""));
        assert!(s.contains("#line") && s.contains("\"blas1.cu\""));
        assert!(s.contains("c_madd"));
    }

    #[test]
    fn nested_headers_are_spliced_once() {
        let s = cr_fused_program().expanded();
        assert!(!s.contains("#include \""), "an include was left");
        assert_eq!(s.matches("#line 1 \"common.cuh\"").count(), 1);
        assert_eq!(s.matches("#line 1 \"cr_device.cuh\"").count(), 1);
        assert!(s.find("c_madd").unwrap() < s.find("cr_reduce_last").unwrap());
        assert!(s.contains("\"cr_fused.cu\""));
    }

    #[test]
    fn arch_strings_are_checked() {
        assert!(check_arch("sm_90").is_ok());
        assert!(check_arch("sm_90a").is_ok());
        assert!(check_arch("compute_80").is_ok());
        assert!(check_arch("90").is_err());
        assert!(check_arch("sm_").is_err());
    }
}
