//! The launch-geometry tuning cache (QUDA's tunecache, seed 001's brute-force sweep): one
//! TSV file of the best launch parameters found per (device, compute capability, driver
//! version, kernel, lattice dims, precision, program version, kernel-source hash). Later
//! runs reuse an entry only when every key field matches. A file that does not parse is
//! reported and rebuilt from scratch; a file of the older format (v1, no driver column)
//! is reported as stale and rebuilt; entries written by another program version or for
//! other kernel sources are reported as stale and dropped. Never trusted blindly.
//! `geometry_candidates` is what a stencil version's tuner times (no CUDA needed).

use crate::backend::cuda::core::version::StencilVersion;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The free launch geometry of a stencil: `multiple` (sites per block of 1.2 to 2.0),
/// `coarse_block` (threads per block of the one-thread-per-site 1.0 and 3.0) and
/// `link_hint` (3.0's full mode without the dot: which directions' links skip L1, an index
/// into `version::V3_LINK_HINTS`; 0, the default, for every other version and mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub multiple: usize,
    pub coarse_block: usize,
    pub link_hint: usize,
}

const HEADER: &str = "# qcd-solve tune cache v3";
/// The first lines of the older formats (v1: no driver column; v2: no link-hint column):
/// read as stale, rebuilt.
const HEADERS_OLD: [(&str, &str); 2] = [
    ("# qcd-solve tune cache v1", "v1, no driver version"),
    ("# qcd-solve tune cache v2", "v2, no link hint"),
];
const COLUMNS: &str = "device\tcc\tdriver\tkernel\tdims\tprecision\tprogram_version\tsource_hash\tblock\tmultiple\tlink_hint\tmillis";
const FIELDS: usize = 12;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TuneKey {
    pub device: String,
    /// Compute capability "major.minor".
    pub cc: String,
    /// CUDA driver version "major.minor" (`cuda::driver_version`).
    pub driver: String,
    pub kernel: String,
    pub dims: [usize; 4],
    pub precision: String,
    pub program_version: String,
    /// Hash of the kernel source and compile options (hex).
    pub source_hash: String,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Launch {
    /// Threads per block.
    pub block: u32,
    /// Sites per block for the fine-grain versions (1.2+), 1 otherwise.
    pub multiple: u32,
    /// 3.0's full-mode link hint (`Geometry::link_hint`), 0 otherwise.
    pub link_hint: u32,
    /// Time per launch measured for this choice.
    pub millis: f64,
}

#[derive(Debug, Default)]
pub struct TuneCache {
    path: PathBuf,
    entries: BTreeMap<TuneKey, Launch>,
    /// What was wrong with the file when it was loaded (shown to the user).
    pub warnings: Vec<String>,
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

impl TuneCache {
    /// Load `path`; a missing file is an empty cache. Any line that does not parse makes
    /// the whole file untrusted (reported, cache starts empty and is rewritten on save).
    pub fn load(path: &Path, program_version: &str) -> TuneCache {
        let mut cache = TuneCache {
            path: path.to_path_buf(),
            ..Default::default()
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return cache,
            Err(e) => {
                cache
                    .warnings
                    .push(format!("{}: unreadable ({e}); rebuilding", path.display()));
                return cache;
            }
        };
        let mut lines = text.lines();
        if let Some((_, what)) = HEADERS_OLD
            .iter()
            .find(|(h, _)| text.lines().next() == Some(*h))
        {
            cache.warnings.push(format!(
                "{}: a tune cache of an older format ({what}): stale, rebuilding",
                path.display()
            ));
            return cache;
        }
        if lines.next() != Some(HEADER) || lines.next() != Some(COLUMNS) {
            cache.warnings.push(format!(
                "{}: not a qcd-solve tune cache (bad header); rebuilding",
                path.display()
            ));
            return cache;
        }
        let mut stale = 0;
        for (n, line) in lines.enumerate() {
            match parse_line(line) {
                Some((k, v)) => {
                    if k.program_version != program_version {
                        stale += 1;
                    } else {
                        cache.entries.insert(k, v);
                    }
                }
                None => {
                    cache.warnings.push(format!(
                        "{}: line {} is corrupt; discarding the whole cache and rebuilding",
                        path.display(),
                        n + 3
                    ));
                    cache.entries.clear();
                    return cache;
                }
            }
        }
        if stale > 0 {
            cache.warnings.push(format!(
                "{}: {stale} stale entries from another program version dropped",
                path.display()
            ));
        }
        cache
    }

    pub fn get(&self, key: &TuneKey) -> Option<Launch> {
        self.entries.get(key).copied()
    }

    /// An entry for the same kernel and shape but another source hash or driver is stale
    /// too (replaced).
    pub fn insert(&mut self, key: TuneKey, launch: Launch) {
        self.entries.retain(|k, _| {
            !(k.device == key.device
                && k.cc == key.cc
                && k.kernel == key.kernel
                && k.dims == key.dims
                && k.precision == key.precision)
        });
        self.entries.insert(key, launch);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn save(&self) -> Result<()> {
        let mut s = format!("{HEADER}\n{COLUMNS}\n");
        for (k, v) in &self.entries {
            s.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.6}\n",
                clean(&k.device),
                clean(&k.cc),
                clean(&k.driver),
                clean(&k.kernel),
                k.dims.map(|d| d.to_string()).join("x"),
                clean(&k.precision),
                clean(&k.program_version),
                clean(&k.source_hash),
                v.block,
                v.multiple,
                v.link_hint,
                v.millis
            ));
        }
        crate::io::write_atomic(&self.path, s.as_bytes())
    }
}

fn parse_line(line: &str) -> Option<(TuneKey, Launch)> {
    let f: Vec<&str> = line.split('\t').collect();
    if f.len() != FIELDS {
        return None;
    }
    let dims: Vec<usize> = f[4]
        .split('x')
        .map(|d| d.parse().ok())
        .collect::<Option<_>>()?;
    let dims: [usize; 4] = dims.try_into().ok()?;
    let launch = Launch {
        block: f[8].parse().ok().filter(|&b| b > 0 && b <= 1024)?,
        multiple: f[9].parse().ok().filter(|&m| m > 0)?,
        // A hint past 3.0's variants (`V3_LINK_HINTS`) is corrupt, not one to clamp.
        link_hint: f[10].parse().ok().filter(|&h: &u32| {
            (h as usize) < crate::backend::cuda::core::version::V3_LINK_HINTS.len()
        })?,
        millis: f[11]
            .parse()
            .ok()
            .filter(|m: &f64| m.is_finite() && *m > 0.0)?,
    };
    if f[..8].iter().any(|s| s.is_empty()) {
        return None;
    }
    Some((
        TuneKey {
            device: f[0].into(),
            cc: f[1].into(),
            driver: f[2].into(),
            kernel: f[3].into(),
            dims,
            precision: f[5].into(),
            program_version: f[6].into(),
            source_hash: f[7].into(),
        },
        launch,
    ))
}

/// The binary's version as the cache records it: the package version.
pub const PROGRAM_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The candidates of a version's free launch geometry around `base`: for 1.0 and 3.0 (one
/// thread per site) its block size (1.0: powers of two 64..=512; 3.0: warp multiples
/// 32..=512, its launch bound), for 1.2 and later every `multiple` (sites per block, 12
/// threads each) the version accepts, up to 1024 threads per block; 1.1 has none (one site
/// per 16-thread block, by definition): just `base`.
pub fn geometry_candidates(version: StencilVersion, base: Geometry) -> Vec<Geometry> {
    if version.uses_coarse_block() {
        let blocks: &[usize] = if version == StencilVersion::V3_0 {
            &[32, 64, 96, 128, 192, 256, 384, 512]
        } else {
            &[64, 128, 256, 512, 1024]
        };
        return blocks
            .iter()
            .filter(|&&b| b <= version.max_coarse_block())
            .map(|&coarse_block| Geometry {
                coarse_block,
                ..base
            })
            .collect();
    }
    if !version.uses_multiple() {
        return vec![base];
    }
    [1, 2, 4, 8, 12, 16, 21, 24, 32, 42, 48, 64, 85]
        .into_iter()
        .filter(|&m| version.check_multiple(m).is_ok())
        .map(|multiple| Geometry { multiple, ..base })
        .collect()
}

/// The candidates of `cands` whose launches differ on the operator the tuner times: on
/// 3.0's full operator (`full`) the launches without the dot go out at most
/// `V3_FULL_MAX_BLOCK` threads a block (`stencil::v3::launch_block`), so the larger blocks
/// would time the same launch again and the sweep would keep one of them by noise (the
/// dot launches, which take at least 256 threads, are not what it times). Every candidate
/// otherwise.
pub fn distinct_launches(
    version: StencilVersion,
    cands: Vec<Geometry>,
    full: bool,
) -> Vec<Geometry> {
    if version != StencilVersion::V3_0 || !full {
        return cands;
    }
    cands
        .into_iter()
        .filter(|g| g.coarse_block <= crate::backend::cuda::core::version::V3_FULL_MAX_BLOCK)
        .collect()
}

/// The link hints the tuner times after the blocks, at the best block `best`: 3.0's
/// other full-mode hints (`version::V3_LINK_HINTS`) when the tuned operator is the full
/// one (`full`; the even-odd operators' parity launches have none), else nothing.
pub fn link_hint_candidates(version: StencilVersion, best: Geometry, full: bool) -> Vec<Geometry> {
    if version != StencilVersion::V3_0 || !full {
        return Vec::new();
    }
    (0..crate::backend::cuda::core::version::V3_LINK_HINTS.len())
        .filter(|&h| h != best.link_hint)
        .map(|link_hint| Geometry { link_hint, ..best })
        .collect()
}

/// The cache entry of a geometry (threads per block as launched, sites per block).
pub fn launch_of(version: StencilVersion, g: Geometry, millis: f64) -> Launch {
    Launch {
        block: if version.uses_coarse_block() {
            g.coarse_block as u32
        } else {
            version.block_threads(g.multiple) as u32
        },
        multiple: g.multiple as u32,
        link_hint: g.link_hint as u32,
        millis,
    }
}

/// The geometry of a cache entry (the fields the version does not use kept from `base`).
pub fn geometry_of(version: StencilVersion, l: Launch, base: Geometry) -> Geometry {
    Geometry {
        multiple: if version.uses_multiple() {
            l.multiple as usize
        } else {
            base.multiple
        },
        coarse_block: if version.uses_coarse_block() {
            l.block as usize
        } else {
            base.coarse_block
        },
        link_hint: if version == StencilVersion::V3_0 {
            l.link_hint as usize
        } else {
            base.link_hint
        },
    }
}

/// FNV-1a 64-bit of the kernel source and options: the cache's source fingerprint.
pub fn source_hash(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The default cache file: $QCD_SOLVE_TUNE_CACHE, else ~/.cache/qcd-solve/tune.tsv, else
/// ./qcd-solve-tune.tsv.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("QCD_SOLVE_TUNE_CACHE") {
        return PathBuf::from(p);
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache/qcd-solve/tune.tsv"),
        None => PathBuf::from("qcd-solve-tune.tsv"),
    }
}

/// Keep the best of several timed candidates (smallest time; ties to the first).
pub fn best(candidates: &[Launch]) -> Result<Launch> {
    candidates
        .iter()
        .copied()
        .filter(|c| c.millis.is_finite())
        .min_by(|a, b| a.millis.total_cmp(&b.millis))
        .ok_or_else(|| Error::CheckFailed("autotuning found no launch geometry that ran".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: &str) -> TuneKey {
        TuneKey {
            device: "NVIDIA H100 80GB HBM3".into(),
            cc: "9.0".into(),
            driver: "13.0".into(),
            kernel: "stencil-1.2".into(),
            dims: [16, 16, 16, 32],
            precision: "double".into(),
            program_version: v.into(),
            source_hash: source_hash(&["src", "-arch"]),
        }
    }

    #[test]
    fn round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        let mut c = TuneCache::load(&p, "0.1.0");
        assert!(c.is_empty() && c.warnings.is_empty());
        let l = Launch {
            block: 192,
            multiple: 16,
            link_hint: 0,
            millis: 0.123456,
        };
        c.insert(key("0.1.0"), l);
        c.save().unwrap();
        let c2 = TuneCache::load(&p, "0.1.0");
        assert!(c2.warnings.is_empty(), "{:?}", c2.warnings);
        assert_eq!(c2.get(&key("0.1.0")), Some(l));
    }

    #[test]
    fn corrupt_file_is_reported_and_not_trusted() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        let mut c = TuneCache::load(&p, "0.1.0");
        c.insert(
            key("0.1.0"),
            Launch {
                block: 128,
                multiple: 1,
                link_hint: 0,
                millis: 1.0,
            },
        );
        c.save().unwrap();
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("garbage\tline\n");
        std::fs::write(&p, &text).unwrap();
        let c2 = TuneCache::load(&p, "0.1.0");
        assert!(c2.is_empty());
        assert!(c2.warnings[0].contains("corrupt"), "{:?}", c2.warnings);
        // A block size of 0 is corrupt too, not a launch to reuse.
        std::fs::write(
            &p,
            text.replace("\t128\t", "\t0\t")
                .replace("garbage\tline\n", ""),
        )
        .unwrap();
        assert!(TuneCache::load(&p, "0.1.0").is_empty());
        // So is a link hint past 3.0's three variants (0, 1, 2); the last one is kept.
        let clean = text.replace("garbage\tline\n", "");
        let hint = |h: u32| clean.replace("\t128\t1\t0\t", &format!("\t128\t1\t{h}\t"));
        assert_ne!(
            hint(2),
            clean,
            "the entry's block, multiple and hint columns"
        );
        std::fs::write(&p, hint(2)).unwrap();
        assert_eq!(
            TuneCache::load(&p, "0.1.0")
                .get(&key("0.1.0"))
                .map(|l| l.link_hint),
            Some(2)
        );
        std::fs::write(&p, hint(3)).unwrap();
        let c3 = TuneCache::load(&p, "0.1.0");
        assert!(
            c3.is_empty() && c3.warnings[0].contains("corrupt"),
            "{:?}",
            c3.warnings
        );
        std::fs::write(&p, "not a cache\n").unwrap();
        assert!(TuneCache::load(&p, "0.1.0").warnings[0].contains("bad header"));
    }

    #[test]
    fn stale_entries_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        let mut c = TuneCache::load(&p, "0.0.9");
        c.insert(
            key("0.0.9"),
            Launch {
                block: 64,
                multiple: 1,
                link_hint: 0,
                millis: 2.0,
            },
        );
        c.save().unwrap();
        let c2 = TuneCache::load(&p, "0.1.0");
        assert!(c2.is_empty());
        assert!(c2.warnings[0].contains("stale"));
        // A new source hash for the same kernel replaces the old entry.
        let mut c3 = TuneCache::load(&p, "0.0.9");
        let mut k = key("0.0.9");
        k.source_hash = source_hash(&["other source"]);
        c3.insert(
            k.clone(),
            Launch {
                block: 32,
                multiple: 1,
                link_hint: 0,
                millis: 3.0,
            },
        );
        assert_eq!(c3.len(), 1);
        assert!(c3.get(&key("0.0.9")).is_none());
    }

    #[test]
    fn best_takes_the_fastest() {
        let c = [
            Launch {
                block: 64,
                multiple: 1,
                link_hint: 0,
                millis: 2.0,
            },
            Launch {
                block: 128,
                multiple: 1,
                link_hint: 0,
                millis: 1.5,
            },
            Launch {
                block: 256,
                multiple: 1,
                link_hint: 0,
                millis: 1.7,
            },
        ];
        assert_eq!(best(&c).unwrap().block, 128);
        assert!(best(&[]).is_err());
    }

    #[test]
    fn the_driver_is_part_of_the_key_and_saved() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        let mut c = TuneCache::load(&p, "0.1.0");
        let l = Launch {
            block: 96,
            multiple: 1,
            link_hint: 0,
            millis: 0.5,
        };
        c.insert(key("0.1.0"), l);
        c.save().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("# qcd-solve tune cache v3\ndevice\tcc\tdriver\t"));
        assert!(text.contains("\t13.0\tstencil-1.2\t"), "{text}");
        let c2 = TuneCache::load(&p, "0.1.0");
        let mut other = key("0.1.0");
        other.driver = "12.8".into();
        assert!(c2.get(&other).is_none());
        assert_eq!(c2.get(&key("0.1.0")), Some(l));
        // A result under another driver replaces the old entry.
        let mut c3 = TuneCache::load(&p, "0.1.0");
        c3.insert(other.clone(), l);
        assert_eq!(c3.len(), 1);
        assert_eq!(c3.get(&other), Some(l));
    }

    #[test]
    fn a_v1_file_is_reported_stale_and_rebuilt() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        std::fs::write(
            &p,
            "# qcd-solve tune cache v1\ndevice\tcc\tkernel\tdims\tprecision\tprogram_version\tsource_hash\tblock\tmultiple\tmillis\nH100\t9.0\tstencil-3.0\t4x4x4x4\tdouble\t0.1.0\tabc\t128\t1\t0.1\n",
        )
        .unwrap();
        let c = TuneCache::load(&p, "0.1.0");
        assert!(c.is_empty());
        assert!(
            c.warnings[0].contains("older format (v1"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn a_v2_file_is_reported_stale_and_rebuilt() {
        // v2 had no link-hint column: its 3.0 entries were timed with the default hint only.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        std::fs::write(
            &p,
            "# qcd-solve tune cache v2\ndevice\tcc\tdriver\tkernel\tdims\tprecision\tprogram_version\tsource_hash\tblock\tmultiple\tmillis\nH100\t9.0\t13.0\tstencil-3.0\t4x4x4x4\tdouble\t0.1.0\tabc\t128\t1\t0.1\n",
        )
        .unwrap();
        let c = TuneCache::load(&p, "0.1.0");
        assert!(c.is_empty());
        assert!(
            c.warnings[0].contains("older format (v2"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn the_full_operator_of_3_0_times_only_blocks_it_launches() {
        let base = Geometry {
            multiple: 1,
            coarse_block: 128,
            link_hint: 0,
        };
        let all = geometry_candidates(StencilVersion::V3_0, base);
        let full = distinct_launches(StencilVersion::V3_0, all.clone(), true);
        // Blocks above the full entries' bound would launch at 128 threads again.
        assert_eq!(
            full.iter().map(|g| g.coarse_block).collect::<Vec<_>>(),
            [32, 64, 96, 128]
        );
        assert_eq!(
            crate::backend::cuda::core::stencil::v3::launch_block(512, false, true),
            crate::backend::cuda::core::version::V3_FULL_MAX_BLOCK
        );
        // Even-odd (parity launches) and the other versions keep every candidate.
        assert_eq!(
            distinct_launches(StencilVersion::V3_0, all.clone(), false),
            all
        );
        let v1 = geometry_candidates(StencilVersion::V1_0, base);
        assert_eq!(
            distinct_launches(StencilVersion::V1_0, v1.clone(), true),
            v1
        );
    }

    #[test]
    fn link_hints_are_tried_for_the_full_operator_of_3_0_only() {
        let best = Geometry {
            multiple: 1,
            coarse_block: 128,
            link_hint: 0,
        };
        let c = link_hint_candidates(StencilVersion::V3_0, best, true);
        let n = crate::backend::cuda::core::version::V3_LINK_HINTS.len();
        // Every hint but the one already timed, at the best block.
        assert_eq!(
            c.iter().map(|g| g.link_hint).collect::<Vec<_>>(),
            (1..n).collect::<Vec<_>>()
        );
        assert!(c.iter().all(|g| g.coarse_block == 128 && g.multiple == 1));
        assert!(link_hint_candidates(StencilVersion::V3_0, best, false).is_empty());
        assert!(link_hint_candidates(StencilVersion::V1_0, best, true).is_empty());
        // A hint survives the cache (saved and loaded as its own column).
        let g = c[0];
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.tsv");
        let mut cache = TuneCache::load(&p, "0.1.0");
        cache.insert(key("0.1.0"), launch_of(StencilVersion::V3_0, g, 0.25));
        cache.save().unwrap();
        let back = TuneCache::load(&p, "0.1.0").get(&key("0.1.0")).unwrap();
        assert_eq!(geometry_of(StencilVersion::V3_0, back, best), g);
    }

    #[test]
    fn candidates_per_version() {
        let base = Geometry {
            multiple: 16,
            coarse_block: 256,
            link_hint: 0,
        };
        let c = geometry_candidates(StencilVersion::V3_0, base);
        assert_eq!(
            c.iter().map(|g| g.coarse_block).collect::<Vec<_>>(),
            [32, 64, 96, 128, 192, 256, 384, 512]
        );
        assert!(c.iter().all(|g| g.multiple == 16));
        let c = geometry_candidates(StencilVersion::V1_0, base);
        assert_eq!(
            c.iter().map(|g| g.coarse_block).collect::<Vec<_>>(),
            [64, 128, 256, 512]
        );
        assert_eq!(geometry_candidates(StencilVersion::V1_1, base), vec![base]);
        for &v in StencilVersion::all() {
            for g in geometry_candidates(v, base) {
                assert!(v.check_multiple(g.multiple).is_ok(), "{v} {g:?}");
                // A cache entry gives back the geometry it was made from.
                assert_eq!(geometry_of(v, launch_of(v, g, 1.0), base), g, "{v}");
            }
        }
        let l = launch_of(
            StencilVersion::V1_5,
            Geometry {
                multiple: 8,
                ..base
            },
            1.0,
        );
        assert_eq!((l.block, l.multiple), (96, 8));
    }
}
