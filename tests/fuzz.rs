//! Property tests (issue 12, item 10) over the gauge readers (NERSC, ILDG/SciDAC LIME,
//! MILC), the npy reader and the TOML config parser: random bytes and mutated real files
//! (the shared lattices with bytes flipped, set, inserted, deleted, or cut off) never
//! panic, and never allocate more than the file's size justifies.
//!
//! Allocation is measured by a counting global allocator. The tests of this binary run one
//! at a time (`serial()`), so what is counted during a read is that read's (and its rayon
//! workers'). The bound for a read of a file of `len` bytes: peak live memory at most
//! 6 len + 1 MiB. Where it comes from: the links in memory take 144 bytes each, at most
//! 3x the 48 bytes of a two-row 32-bit NERSC link; the streaming buffer is at most the
//! payload (1x); the plaquette's per-site sums add 16 bytes per site (under 0.1x); 1 MiB
//! covers headers, LIME metadata records and the thread pool. A header claiming a lattice
//! its file cannot hold is refused before any large allocation (largest single allocation
//! below 2 len + 64 KiB).
//!
//! Case count: PROPTEST_CASES (default 64 per property here, about 10 s in all in release
//! on 2 cores).

mod common;
use common::shared;
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, TestCaseError};
use qcd_solve::config::LoadedConfig;
use qcd_solve::field::SpinorField;
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::io::{read_gauge_with, read_spinor_npy, write_spinor_npy, GaugeFormat, ReadOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

// ---- allocation accounting -------------------------------------------------------------

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize, size: usize) {
    let live = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(live, Relaxed);
    LARGEST.fetch_max(size, Relaxed);
}

// SAFETY: every call forwards to the system allocator unchanged; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            grew(l.size(), l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            grew(l.size(), l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                grew(new - l.size(), new);
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

static SERIAL: Mutex<()> = Mutex::new(());

/// One test of this binary at a time, so the counters see only its allocations.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` and returns its result, the peak of live bytes above the start, and the
/// largest single allocation during it.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    LARGEST.store(0, Relaxed);
    let r = f();
    (
        r,
        PEAK.load(Relaxed).saturating_sub(base),
        LARGEST.load(Relaxed),
    )
}

fn peak_bound(len: usize) -> usize {
    6 * len + (1 << 20)
}

// ---- inputs ----------------------------------------------------------------------------

const LATTICES: [&str; 8] = [
    "ATB_nersc.l8t4b3360",
    "ATB_ildg.l8t4b3360",
    "milc_lat.sample.l4448",
    "milc_lat.sample.l4448.scidac",
    "milc_lat.sample.l4444",
    "milc_lat.sample.l4444.ildg",
    "ahmidas_conf.48",
    "pyquda_weak_field.lime",
];

/// The shared lattices, read once, and each LIME file once more with its scidac-checksum
/// record renamed, so that payload edits get past the checksum to the value checks
/// (finite, SU(3), header plaquette). A missing folder fails loudly: these tests need it.
fn originals() -> &'static [Vec<u8>] {
    static FILES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let mut out: Vec<Vec<u8>> = LATTICES
            .iter()
            .map(|n| {
                std::fs::read(shared(n)).unwrap_or_else(|e| {
                    panic!("{}: {e} (the fuzz tests mutate the shared lattices)", n)
                })
            })
            .collect();
        let unchecked: Vec<Vec<u8>> = out
            .iter()
            .filter_map(|b| {
                let at = b.windows(15).position(|w| w == b"scidac-checksum")?;
                let mut c = b.clone();
                c[at + 14] = b'X';
                Some(c)
            })
            .collect();
        assert_eq!(unchecked.len(), 5, "LIME files with a checksum record");
        out.extend(unchecked);
        out
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn config() -> PtConfig {
    PtConfig {
        cases: cases(),
        failure_persistence: None,
        ..PtConfig::default()
    }
}

/// One edit of a byte string; positions are fractions of the current length, so an edit
/// applies to any file.
#[derive(Clone, Debug)]
enum Edit {
    Flip(prop::sample::Index, u8),
    Set(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Delete(prop::sample::Index, usize),
    Truncate(prop::sample::Index),
    /// The same edits near the start, where the headers are.
    HeaderSet(usize, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, v)| Edit::Insert(i, v)),
        (any::<prop::sample::Index>(), 1usize..64).prop_map(|(i, n)| Edit::Delete(i, n)),
        any::<prop::sample::Index>().prop_map(Edit::Truncate),
        (0usize..2048, any::<u8>()).prop_map(|(k, b)| Edit::HeaderSet(k, b)),
    ]
}

fn apply(b: &mut Vec<u8>, e: &Edit) {
    let at = |i: &prop::sample::Index, len: usize| if len == 0 { 0 } else { i.index(len) };
    match e {
        Edit::Flip(i, bit) if !b.is_empty() => {
            let k = at(i, b.len());
            b[k] ^= 1 << bit;
        }
        Edit::Set(i, v) if !b.is_empty() => {
            let k = at(i, b.len());
            b[k] = *v;
        }
        Edit::Insert(i, v) => {
            let k = at(i, b.len() + 1);
            b.splice(k..k, v.iter().copied());
        }
        Edit::Delete(i, n) if !b.is_empty() => {
            let k = at(i, b.len());
            let end = (k + n).min(b.len());
            b.drain(k..end);
        }
        Edit::Truncate(i) => {
            let k = at(i, b.len() + 1);
            b.truncate(k);
        }
        Edit::HeaderSet(k, v) if *k < b.len() => b[*k] = *v,
        _ => {}
    }
}

/// Reads `bytes` as a gauge file with detection and with every format forced, strictly
/// and with reunitarisation, checking the allocation bound; returns how many reads
/// succeeded.
fn read_all_ways(dir: &Path, bytes: &[u8]) -> Result<usize, TestCaseError> {
    let p = dir.join("case");
    std::fs::write(&p, bytes).unwrap();
    let mut ok = 0;
    for format in [
        None,
        Some(GaugeFormat::Nersc),
        Some(GaugeFormat::Lime),
        Some(GaugeFormat::Milc),
        Some(GaugeFormat::OpenQcd),
    ] {
        for reunitarise in [false, true] {
            let (r, peak, _) = measured(|| {
                read_gauge_with(
                    &p,
                    format,
                    None,
                    DEFAULT_BOUNDARY,
                    ReadOptions { reunitarise },
                )
            });
            prop_assert!(
                peak <= peak_bound(bytes.len()),
                "{format:?}: peak {peak} bytes for a {}-byte file",
                bytes.len()
            );
            match r {
                Ok((g, info)) => {
                    // What is accepted is finite and SU(3).
                    prop_assert!(g.max_unitarity_deviation() < 1e-12);
                    prop_assert!(info.plaquette.total.is_finite());
                    ok += 1;
                }
                // Bad content is a format error (exit 4), never anything else: the file
                // exists and is readable.
                Err(e) => prop_assert_eq!(e.exit_code(), 4, "{}", e),
            }
        }
    }
    Ok(ok)
}

// ---- gauge readers ---------------------------------------------------------------------

#[test]
fn random_bytes_never_panic_or_overallocate() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // Random bytes behind each format's magic, so that the readers go past detection.
    let prefixes: Vec<Vec<u8>> = vec![
        vec![],
        b"BEGIN_HEADER\n".to_vec(),
        vec![0x45, 0x67, 0x89, 0xab],
        20103i32.to_be_bytes().to_vec(),
        20103i32.to_le_bytes().to_vec(),
    ];
    let strategy = (
        0..prefixes.len(),
        prop::collection::vec(any::<u8>(), 0..3000),
    );
    proptest::test_runner::TestRunner::new(config())
        .run(&strategy, |(k, tail)| {
            let mut b = prefixes[k].clone();
            b.extend_from_slice(&tail);
            read_all_ways(dir.path(), &b).map(|_| ())
        })
        .unwrap();
}

#[test]
fn mutated_shared_lattices_never_panic_or_overallocate() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let files = originals();
    // The harness reads what it should: every unedited file, and every LIME file without
    // its checksum record, is accepted with detection and with its own format forced,
    // strictly and with reunitarisation (4 of the 10 reads).
    for (k, b) in files.iter().enumerate() {
        assert_eq!(read_all_ways(dir.path(), b).unwrap(), 4, "file {k}");
    }
    let strategy = (0..files.len(), prop::collection::vec(edit(), 1..6));
    let accepted = Cell::new(0);
    let total = Cell::new(0);
    proptest::test_runner::TestRunner::new(config())
        .run(&strategy, |(k, edits)| {
            let mut b = files[k].clone();
            for e in &edits {
                apply(&mut b, e);
            }
            total.set(total.get() + 1);
            accepted.set(accepted.get() + read_all_ways(dir.path(), &b)?);
            Ok(())
        })
        .unwrap();
    let (accepted, total) = (accepted.get(), total.get());
    // Not a tautology: the mutations reach the readers (some edits land in unverified
    // places such as a LIME comment record and read fine; most are refused).
    assert!(total >= cases() as usize, "{total} cases ran");
    eprintln!(
        "mutated lattices: {accepted} of {} reads accepted",
        10 * total
    );
}

/// A ~1 KiB file whose header claims `dims`, in each format.
fn claiming(format: GaugeFormat, dims: [usize; 4]) -> Vec<u8> {
    let mut b = match format {
        GaugeFormat::Nersc => format!(
            "BEGIN_HEADER\nDATATYPE = 4D_SU3_GAUGE_3x3\nDIMENSION_1 = {}\nDIMENSION_2 = {}\n\
             DIMENSION_3 = {}\nDIMENSION_4 = {}\nCHECKSUM = 0\nFLOATING_POINT = IEEE64BIG\n\
             END_HEADER\n",
            dims[0], dims[1], dims[2], dims[3]
        )
        .into_bytes(),
        GaugeFormat::Milc => {
            let mut h = 20103i32.to_be_bytes().to_vec();
            for d in dims {
                h.extend_from_slice(&(d as i32).to_be_bytes());
            }
            h.resize(96, 0);
            h
        }
        GaugeFormat::Lime => {
            let record = |ty: &str, data: &[u8], flags: u16| {
                let mut r = 0x4567_89abu32.to_be_bytes().to_vec();
                r.extend_from_slice(&1u16.to_be_bytes());
                r.extend_from_slice(&flags.to_be_bytes());
                r.extend_from_slice(&(data.len() as u64).to_be_bytes());
                let mut name = ty.as_bytes().to_vec();
                name.resize(128, 0);
                r.extend_from_slice(&name);
                r.extend_from_slice(data);
                r.resize(r.len().div_ceil(8) * 8, 0);
                r
            };
            let xml = format!(
                "<ildgFormat><field>su3gauge</field><precision>64</precision><lx>{}</lx>\
                 <ly>{}</ly><lz>{}</lz><lt>{}</lt></ildgFormat>",
                dims[0], dims[1], dims[2], dims[3]
            );
            let mut b = record("ildg-format", xml.as_bytes(), 0x8000);
            b.extend(record("ildg-binary-data", &[0u8; 576], 0x4000));
            b
        }
        GaugeFormat::OpenQcd => {
            let mut h = Vec::new();
            for d in [dims[3], dims[0], dims[1], dims[2]] {
                h.extend_from_slice(&(d as i32).to_le_bytes());
            }
            h.extend_from_slice(&3.0f64.to_le_bytes());
            h
        }
    };
    b.resize(1024, 0);
    b
}

#[test]
fn headers_claiming_huge_lattices_are_refused_without_allocating() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("claim");
    let check = |format: GaugeFormat, dims: [usize; 4]| -> Result<(), TestCaseError> {
        let b = claiming(format, dims);
        std::fs::write(&p, &b).unwrap();
        // openQCD has no magic: a file shorter than its header claims is not recognised, so
        // its reader is named.
        let forced = (format == GaugeFormat::OpenQcd).then_some(format);
        let (r, peak, largest) = measured(|| {
            read_gauge_with(&p, forced, None, DEFAULT_BOUNDARY, ReadOptions::default())
        });
        let e = match r {
            Err(e) => e,
            Ok(_) => return Err(TestCaseError::fail(format!("{format:?} {dims:?} accepted"))),
        };
        prop_assert_eq!(e.exit_code(), 4, "{}", e);
        let s = e.to_string();
        prop_assert!(
            s.contains("dimensions") || s.contains("truncated") || s.contains("record holds"),
            "{}",
            s
        );
        // The file is 1 KiB: nothing near the claimed payload is allocated.
        prop_assert!(
            largest <= 2 * b.len() + (64 << 10),
            "{format:?} {dims:?}: largest allocation {largest} bytes"
        );
        prop_assert!(
            peak <= peak_bound(b.len()),
            "{format:?} {dims:?}: peak {peak}"
        );
        Ok(())
    };
    // The brief's case, exactly: 10^6 in every direction (10^24 sites), and a volume the
    // program accepts (64^4) that the file cannot hold.
    for format in [
        GaugeFormat::Nersc,
        GaugeFormat::Milc,
        GaugeFormat::Lime,
        GaugeFormat::OpenQcd,
    ] {
        check(format, [1_000_000; 4]).unwrap();
        check(format, [64; 4]).unwrap();
    }
    let strategy = (
        prop_oneof![
            Just(GaugeFormat::Nersc),
            Just(GaugeFormat::Milc),
            Just(GaugeFormat::Lime),
            Just(GaugeFormat::OpenQcd)
        ],
        prop::array::uniform4(2usize..=1_000_000),
    );
    proptest::test_runner::TestRunner::new(config())
        .run(&strategy, |(format, dims)| check(format, dims))
        .unwrap();
}

// ---- npy -------------------------------------------------------------------------------

#[test]
fn mutated_npy_files_never_panic_or_overallocate() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let l = Lattice::new([2, 2, 2, 4], DEFAULT_BOUNDARY).unwrap();
    let p = dir.path().join("b.npy");
    write_spinor_npy(&p, &l, &SpinorField::random(l.volume(), 5, 0)).unwrap();
    let good = std::fs::read(&p).unwrap();
    // Edits of a valid file, or random bytes behind the npy magic.
    let strategy = prop_oneof![
        prop::collection::vec(edit(), 1..6).prop_map(move |edits| {
            let mut b = good.clone();
            for e in &edits {
                apply(&mut b, e);
            }
            b
        }),
        prop::collection::vec(any::<u8>(), 0..600).prop_map(|tail| {
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend(tail);
            b
        }),
    ];
    proptest::test_runner::TestRunner::new(config())
        .run(&strategy, |b| {
            let q = dir.path().join("case.npy");
            std::fs::write(&q, &b).unwrap();
            let (r, peak, _) = measured(|| read_spinor_npy(&q, &l));
            prop_assert!(
                peak <= peak_bound(b.len()),
                "peak {peak} for {} bytes",
                b.len()
            );
            match r {
                Ok(psi) => prop_assert!(psi
                    .data
                    .iter()
                    .all(|z| z.re.is_finite() && z.im.is_finite())),
                Err(e) => prop_assert_eq!(e.exit_code(), 4, "{}", e),
            }
            Ok(())
        })
        .unwrap();
    // A lattice far larger than the file: refused from the header before allocating.
    let big = Lattice::new([64, 64, 64, 64], DEFAULT_BOUNDARY).unwrap();
    let (r, _, largest) = measured(|| read_spinor_npy(&p, &big));
    let e = r.unwrap_err();
    assert!(e.to_string().contains("shape"), "{e}");
    assert!(largest < 64 << 10, "largest allocation {largest}");
}

// ---- TOML config -----------------------------------------------------------------------

/// The shipped configs and the good fixtures: the texts the config mutations start from,
/// each with its folder (its relative paths are resolved there, as a run resolves them).
fn config_texts() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for d in ["configs", "tests/configs/good", "tests/configs/bad"] {
        for e in std::fs::read_dir(root.join(d)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                out.push((std::fs::read_to_string(&p).unwrap(), root.join(d)));
            }
        }
    }
    assert!(out.len() >= 10, "config texts found: {}", out.len());
    out
}

/// Characters that make TOML interesting: structure, quotes, digits, signs, letters of
/// the keys and values, and a few non-ASCII ones.
const TOML_CHARS: &[char] = &[
    '[', ']', '{', '}', '=', '"', '\'', ',', '.', '\n', ' ', '#', '-', '+', '_', '0', '1', '9',
    'e', 'x', 'L', 'X', 'T', 'a', 'n', 'i', 'f', 't', 'r', 'u', '\\', 'é', '\u{0}', '∞',
];

#[test]
fn mutated_configs_never_panic() {
    let _g = serial();
    let texts = config_texts();
    let n = texts.len();
    let strategy = prop_oneof![
        // Edits of a real config: replace, insert or delete characters, drop a line, or
        // set a value to a random number.
        (
            0..n,
            prop::collection::vec(
                (
                    0u8..5,
                    any::<prop::sample::Index>(),
                    0..TOML_CHARS.len(),
                    any::<i64>()
                ),
                1..4
            )
        )
            .prop_map(move |(k, edits)| {
                let mut c: Vec<char> = texts[k].0.chars().collect();
                for (op, i, ch, num) in edits {
                    let at = if c.is_empty() { 0 } else { i.index(c.len()) };
                    match op {
                        0 if !c.is_empty() => c[at] = TOML_CHARS[ch],
                        1 => c.insert(at.min(c.len()), TOML_CHARS[ch]),
                        2 if !c.is_empty() => {
                            c.remove(at);
                        }
                        3 => {
                            // Cut the line at `at` out.
                            let s = c[..at]
                                .iter()
                                .rposition(|&x| x == '\n')
                                .map_or(0, |p| p + 1);
                            let e = c[at..]
                                .iter()
                                .position(|&x| x == '\n')
                                .map_or(c.len(), |p| at + p);
                            c.drain(s..e);
                        }
                        _ => {
                            // Replace the value after the next '=' by a random integer.
                            if let Some(eq) = c[at..].iter().position(|&x| x == '=') {
                                let s = at + eq + 1;
                                let e = c[s..]
                                    .iter()
                                    .position(|&x| x == '\n')
                                    .map_or(c.len(), |p| s + p);
                                c.splice(s..e, format!(" {num}").chars());
                            }
                        }
                    }
                }
                (c.into_iter().collect::<String>(), texts[k].1.clone())
            }),
        // Random text from the TOML alphabet.
        prop::collection::vec(0..TOML_CHARS.len(), 0..300).prop_map(|v| {
            (
                v.into_iter().map(|i| TOML_CHARS[i]).collect::<String>(),
                PathBuf::from("."),
            )
        }),
    ];
    let loaded = Cell::new(0);
    let total = Cell::new(0);
    proptest::test_runner::TestRunner::new(config())
        .run(&strategy, |(text, dir)| {
            total.set(total.get() + 1);
            match LoadedConfig::from_str(&text, "fuzz.toml", dir.clone()) {
                Ok(cfg) => {
                    loaded.set(loaded.get() + 1);
                    // A config that loads gives a lattice or a clear error, and the plan's
                    // check accepts it or refuses it by key.
                    if let Err(e) = cfg.lattice() {
                        prop_assert_eq!(e.exit_code(), 2, "{}", e);
                    }
                    if let Err(e) = qcd_solve::app::plan::check(&cfg) {
                        prop_assert_eq!(e.exit_code(), 2, "{}", e);
                    }
                }
                // A config without all four extents takes them from its gauge file's
                // header, so a mutated path (3: cannot be opened) or a file the header
                // read refuses (4) are the README's exit codes for files; the error then
                // names that file. Anything else is a config error (2).
                Err(e) => match &e {
                    qcd_solve::Error::Io { path, .. } | qcd_solve::Error::Format { path, .. } => {
                        prop_assert!(
                            path.starts_with(&dir) && path != &dir,
                            "a file error names a file under the config's folder: {}",
                            e
                        )
                    }
                    _ => prop_assert_eq!(e.exit_code(), 2, "{}", e),
                },
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "mutated configs: {} of {} loaded",
        loaded.get(),
        total.get()
    );
}
