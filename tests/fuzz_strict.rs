//! Bounded property tests of the strict readers (docs/reliability.md): LIME record flags
//! set at random on the shared LIME files are accepted exactly when they frame the
//! messages (first MB, last ME, MB after every ME; the last ME may be clear on a closing
//! scidac-checksum record); mutated LIME files read strictly are
//! either refused with exit 4 or carry a verified checksum; config files of random bytes
//! are a config error (exit 2) or an I/O error (3), never a panic; npy headers with keys
//! repeated or reordered are read or refused (exit 4), never a panic.
//!
//! Case count: PROPTEST_CASES (default 32 per property, a few seconds in release on 2
//! cores).

mod safety_common;
use proptest::prelude::*;
use proptest::test_runner::Config as PtConfig;
use qcd_solve::config::LoadedConfig;
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::io::{read_gauge_checked, read_spinor_npy, ReadOptions};
use safety_common::shared;

const LIME: [&str; 5] = [
    "ATB_ildg.l8t4b3360",
    "milc_lat.sample.l4444.ildg",
    "milc_lat.sample.l4448.scidac",
    "ahmidas_conf.48",
    "pyquda_weak_field.lime",
];

fn config() -> PtConfig {
    PtConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(32),
        failure_persistence: None,
        ..PtConfig::default()
    }
}

/// Offsets of the record headers of a LIME file.
fn record_offsets(b: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 144 <= b.len() {
        out.push(off);
        let len = u64::from_be_bytes(b[off + 8..off + 16].try_into().unwrap()) as usize;
        off += 144 + len.div_ceil(8) * 8;
    }
    out
}

/// The framing rule, restated from the LIME layout: first MB, last ME, MB after ME.
fn framed(flags: &[(bool, bool)]) -> bool {
    flags.first().is_some_and(|f| f.0)
        && flags.last().is_some_and(|f| f.1)
        && flags.windows(2).all(|w| !w[0].1 || w[1].0)
}

/// What the strict reader takes: framed messages, or (as tmLQCD 5.1 writes its files) a
/// last record that is a scidac-checksum with its ME flag clear and framed otherwise.
fn accepted(flags: &[(bool, bool)], last_is_checksum: bool) -> bool {
    let mut closed = flags.to_vec();
    if let Some(l) = closed.last_mut() {
        l.1 = true;
    }
    framed(flags) || (last_is_checksum && framed(&closed))
}

/// The type name of the record at `off`.
fn record_type(b: &[u8], off: usize) -> String {
    let name = &b[off + 16..off + 144];
    let end = name.iter().position(|&c| c == 0).unwrap_or(128);
    String::from_utf8_lossy(&name[..end]).into_owned()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lime_flags_are_accepted_exactly_when_they_frame_the_messages(
        file in 0usize..LIME.len(),
        bits in prop::collection::vec((any::<bool>(), any::<bool>()), 16),
    ) {
        let mut b = std::fs::read(shared(LIME[file])).unwrap();
        let offs = record_offsets(&b);
        let flags: Vec<(bool, bool)> = offs.iter().zip(&bits).map(|(_, f)| *f).collect();
        for (off, (mb, me)) in offs.iter().zip(&flags) {
            b[off + 6] = (if *mb { 0x80 } else { 0 }) | (if *me { 0x40 } else { 0 });
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.lime");
        std::fs::write(&p, &b).unwrap();
        let r = read_gauge_checked(&p, None, None, DEFAULT_BOUNDARY, ReadOptions::default(), false);
        let last_is_checksum = offs.last().is_some_and(|&o| record_type(&b, o) == "scidac-checksum");
        let ok = accepted(&flags, last_is_checksum);
        match r {
            Ok(_) => prop_assert!(ok, "{flags:?} accepted"),
            Err(e) => {
                prop_assert!(!ok, "{flags:?}: {e}");
                prop_assert_eq!(e.exit_code(), 4);
                prop_assert!(e.to_string().contains("--accept-unchecked"), "{}", e);
            }
        }
        // Asked to, the same file is read whatever its flags (the links are intact).
        let lenient = read_gauge_checked(&p, None, None, DEFAULT_BOUNDARY, ReadOptions::default(), true);
        prop_assert!(lenient.is_ok(), "{:?}", lenient.err());
    }

    #[test]
    fn strict_reads_of_cut_or_damaged_lime_files_verify_or_refuse(
        file in 0usize..LIME.len(),
        cut in 0.0f64..1.0,
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut b = std::fs::read(shared(LIME[file])).unwrap();
        let k = flip.index(b.len());
        b[k] ^= 1 << bit;
        b.truncate(((b.len() as f64) * (0.5 + cut / 2.0)) as usize);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.lime");
        std::fs::write(&p, &b).unwrap();
        match read_gauge_checked(&p, None, None, DEFAULT_BOUNDARY, ReadOptions::default(), false) {
            Ok((_, info)) => {
                let names: Vec<&str> = info.checks.iter().map(|c| c.check.as_str()).collect();
                prop_assert!(names.contains(&"checksum suma"), "{names:?}");
            }
            Err(e) => prop_assert_eq!(e.exit_code(), 4, "{}", e),
        }
    }

    #[test]
    fn config_files_of_random_bytes_are_config_or_io_errors(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        prefix in prop::sample::select(vec!["", "[lattice]\nLX = ", "[solver]\ntolerance = "]),
    ) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.toml");
        let mut all = prefix.as_bytes().to_vec();
        all.extend_from_slice(&bytes);
        std::fs::write(&p, &all).unwrap();
        if let Err(e) = LoadedConfig::from_file(&p) {
            prop_assert!(matches!(e.exit_code(), 2), "{}", e);
            prop_assert!(e.to_string().len() < 8192);
        }
    }

    #[test]
    fn npy_headers_with_keys_repeated_or_reordered_never_panic(
        keys in prop::collection::vec(0usize..3, 1..6),
        dtype in prop::sample::select(vec!["<c16", "<f8", ">c16", "<c8"]),
    ) {
        let lattice = Lattice::new([2, 2, 2, 2], DEFAULT_BOUNDARY).unwrap();
        let entries = ["'descr': 'DT'", "'fortran_order': False", "'shape': (2, 2, 2, 2, 4, 3)"];
        let mut header = String::from("{");
        for k in &keys {
            header.push_str(&entries[*k].replace("DT", dtype));
            header.push_str(", ");
        }
        header.push('}');
        let b = safety_common::npy_bytes(&header, 16 * 12 * 16);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.npy");
        std::fs::write(&p, &b).unwrap();
        let once = (0..3).all(|k| keys.iter().filter(|&&x| x == k).count() == 1);
        match read_spinor_npy(&p, &lattice) {
            Ok(_) => prop_assert!(once && dtype == "<c16", "{header}"),
            Err(e) => {
                prop_assert_eq!(e.exit_code(), 4, "{}", e);
                prop_assert!(!(once && dtype == "<c16"), "{header}: {e}");
            }
        }
    }
}
