//! Bad input is refused by name: truncated, corrupted, edited or garbage files, wrong
//! dimensions, missing paths, failed writes, and random corruptions never panic.

mod common;
use common::io::{copy_modified, format_error, lattice};
use common::{replace, shared};
use qcd_solve::field::GaugeField;
use qcd_solve::geometry::lattice::DEFAULT_BOUNDARY;
use qcd_solve::io::{
    read_gauge, read_spinor_npy, write_atomic, write_nersc, GaugeFormat, NerscWrite,
};
use qcd_solve::Error;
use std::path::Path;

#[test]
fn truncated_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "ATB_nersc.l8t4b3360",
        "ATB_ildg.l8t4b3360",
        "milc_lat.sample.l4448",
        "milc_lat.sample.l4448.scidac",
    ] {
        let p = copy_modified(dir.path(), name, |b| b.truncate(b.len() - 1000));
        let e = format_error(&p, None);
        assert!(e.contains("truncated"), "{name}: {e}");
        // Truncated inside the header too.
        let p = copy_modified(dir.path(), name, |b| b.truncate(50));
        let e = format_error(&p, None);
        assert!(
            e.contains("truncated") || e.contains("END_HEADER"),
            "{name}: {e}"
        );
    }
}

/// The offset of a byte in the middle of the gauge payload: for LIME files from the
/// record list, for NERSC and MILC counted back from the end (the payload is last).
fn payload_byte(name: &str, len: usize) -> usize {
    match qcd_solve::io::lime::records(&shared(name)) {
        Ok(recs) => {
            let r = recs
                .iter()
                .find(|r| r.type_name.ends_with("binary-data"))
                .unwrap();
            (r.data_offset + r.data_len / 2) as usize
        }
        Err(_) => len - 5,
    }
}

#[test]
fn a_flipped_payload_byte_fails_the_checksum() {
    let dir = tempfile::tempdir().unwrap();
    for (name, key) in [
        ("ATB_nersc.l8t4b3360", "CHECKSUM"),
        ("ATB_ildg.l8t4b3360", "suma"),
        ("milc_lat.sample.l4448", "sum29"),
        ("milc_lat.sample.l4444", "sum29"),
        ("milc_lat.sample.l4448.scidac", "suma"),
        ("milc_lat.sample.l4444.ildg", "suma"),
        ("ahmidas_conf.48", "suma"),
        ("pyquda_weak_field.lime", "suma"),
    ] {
        let p = copy_modified(dir.path(), name, |b| {
            let k = payload_byte(name, b.len());
            b[k] ^= 0x01;
        });
        let e = format_error(&p, None);
        assert!(e.contains(key), "{name}: {e}");
        assert!(e.contains("mismatch"), "{name}: {e}");
    }
}

/// Replaces the first occurrence of `from` in a file's bytes by `to`.

#[test]
fn edited_nersc_header_values_are_refused_with_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let name = "ATB_nersc.l8t4b3360";
    // 0.5038664469 -> 0.5039664469: 2e-4 relative, far outside the 1e-5 tolerance.
    let p = copy_modified(dir.path(), name, |b| {
        replace(b, "PLAQUETTE = 0.5038664469", "PLAQUETTE = 0.5039664469")
    });
    let e = format_error(&p, None);
    assert!(e.contains("PLAQUETTE"), "{e}");
    assert!(e.contains("0.5039664469"), "stated value: {e}");
    assert!(e.contains("0.50386644695"), "computed value: {e}");

    // 3e-6 off: outside the 1e-6 absolute link-trace tolerance.
    let p = copy_modified(dir.path(), name, |b| {
        replace(
            b,
            "LINK_TRACE = 0.005406083858",
            "LINK_TRACE = 0.005409083858",
        )
    });
    let e = format_error(&p, None);
    assert!(
        e.contains("LINK_TRACE") && e.contains("0.005409083858"),
        "{e}"
    );

    let p = copy_modified(dir.path(), name, |b| {
        replace(b, "CHECKSUM = b379560a", "CHECKSUM = b379560b")
    });
    let e = format_error(&p, None);
    assert!(
        e.contains("CHECKSUM") && e.contains("b379560b") && e.contains("b379560a"),
        "{e}"
    );

    let p = copy_modified(dir.path(), name, |b| replace(b, "IEEE64BIG", "IEEE80BIG"));
    let e = format_error(&p, None);
    assert!(
        e.contains("FLOATING_POINT") && e.contains("IEEE80BIG"),
        "{e}"
    );

    let p = copy_modified(dir.path(), name, |b| {
        replace(b, "DIMENSION_3 = 8", "DIMENSION_3 = eight")
    });
    let e = format_error(&p, None);
    assert!(e.contains("DIMENSION_3") && e.contains("eight"), "{e}");

    let p = copy_modified(dir.path(), name, |b| {
        replace(b, "CHECKSUM = b379560a\n", "")
    });
    let e = format_error(&p, None);
    assert!(e.contains("no CHECKSUM"), "{e}");

    // Header keys in any order: move CHECKSUM to the top, the file still reads.
    let p = copy_modified(dir.path(), name, |b| {
        replace(b, "CHECKSUM = b379560a\n", "");
        replace(b, "BEGIN_HEADER\n", "BEGIN_HEADER\nCHECKSUM = b379560a\n");
    });
    read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap();
}

#[test]
fn wrong_expected_dims_are_refused() {
    for name in [
        "ATB_nersc.l8t4b3360",
        "ATB_ildg.l8t4b3360",
        "milc_lat.sample.l4444",
        "milc_lat.sample.l4448.scidac",
    ] {
        let e = format_error(&shared(name), Some([4, 4, 4, 6]));
        assert!(e.contains("dimensions"), "{name}: {e}");
        assert!(e.contains("expected 4x4x4x6"), "{name}: {e}");
    }
}

#[test]
fn a_missing_file_is_an_io_error_naming_the_path() {
    let p = Path::new("/nonexistent/dir/conf.1000");
    let e = read_gauge(p, None, None, DEFAULT_BOUNDARY).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert_eq!(e.exit_code(), 3);
    assert!(e.to_string().contains("/nonexistent/dir/conf.1000"), "{e}");
    let e = read_gauge(p, Some(GaugeFormat::Nersc), None, DEFAULT_BOUNDARY).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    let e = read_spinor_npy(p, &lattice([2, 2, 2, 2])).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
}

#[test]
fn garbage_files_are_refused_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("garbage");
    std::fs::write(&p, b"this is not a gauge configuration\n\x00\x01\x02").unwrap();
    let e = format_error(&p, None);
    assert!(e.contains("unrecognised gauge file format"), "{e}");
    std::fs::write(&p, b"").unwrap();
    let e = format_error(&p, None);
    assert!(e.contains("empty"), "{e}");
    // Each reader, forced on garbage and on every prefix of a real header, errors cleanly.
    let real = std::fs::read(shared("milc_lat.sample.l4444.ildg")).unwrap();
    let nersc = std::fs::read(shared("ATB_nersc.l8t4b3360")).unwrap();
    let milc = std::fs::read(shared("milc_lat.sample.l4444")).unwrap();
    for len in (0..1200).step_by(7) {
        for (src, fmt) in [
            (&real, GaugeFormat::Lime),
            (&nersc, GaugeFormat::Nersc),
            (&milc, GaugeFormat::Milc),
        ] {
            std::fs::write(&p, &src[..len.min(src.len())]).unwrap();
            assert!(read_gauge(&p, Some(fmt), None, DEFAULT_BOUNDARY).is_err());
        }
    }
    // Absurd dimensions are refused as a format error, not an allocation failure.
    let huge = copy_modified(dir.path(), "milc_lat.sample.l4444", |b| {
        b[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
    });
    let e = format_error(&huge, None);
    assert!(e.contains("dimensions"), "{e}");
    // A LIME record whose length runs past the end of the file.
    let long = copy_modified(dir.path(), "milc_lat.sample.l4444.ildg", |b| {
        b[8..16].copy_from_slice(&u64::MAX.to_be_bytes());
    });
    let e = format_error(&long, None);
    assert!(
        e.contains("truncated") && e.contains("scidac-private-file-xml"),
        "{e}"
    );
}

#[test]
fn milc_non_lexicographic_order_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let p = copy_modified(dir.path(), "milc_lat.sample.l4448", |b| {
        b[84..88].copy_from_slice(&1i32.to_be_bytes());
    });
    let e = format_error(&p, None);
    assert!(
        e.contains("order = 1") && e.contains("lexicographic"),
        "{e}"
    );
}

#[test]
fn a_failed_write_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let g = GaugeField::random(&lattice([2, 2, 2, 2]), 1);
    // The target is an existing directory: the final rename fails.
    let target = dir.path().join("taken");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), b"x").unwrap();
    let e = write_nersc(&target, &g, NerscWrite::default()).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(target.is_dir(), "the directory is untouched");
    // The parent is a regular file: nothing can be created.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, b"x").unwrap();
    let under = blocker.join("out.nersc");
    assert!(write_nersc(&under, &g, NerscWrite::default()).is_err());
    assert!(!under.exists());
    let e = write_atomic(&under, b"data").unwrap_err();
    assert!(e.to_string().contains("blocker"), "{e}");
    // No temporary file is left anywhere.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".tmp-")),
        "leftover temp: {names:?}"
    );
    let mut names = names;
    names.sort();
    assert_eq!(names, ["blocker", "taken"]);
}

#[test]
fn random_corruptions_never_panic() {
    // A deterministic xorshift stream of byte edits (half of them in the headers) and
    // truncations on real files, each read with detection and with every format forced:
    // each read must return, Ok (an edit in an unverified place, such as a LIME comment
    // record) or Err, without panicking.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mutant");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let names = [
        "ATB_nersc.l8t4b3360",
        "milc_lat.sample.l4444.ildg",
        "milc_lat.sample.l4444",
        "ahmidas_conf.48",
        "milc_lat.sample.l4448.scidac",
    ];
    let originals: Vec<Vec<u8>> = names
        .iter()
        .map(|n| std::fs::read(shared(n)).unwrap())
        .collect();
    let mut refused = 0;
    for it in 0..400 {
        let mut b = originals[it % names.len()].clone();
        for _ in 0..1 + rnd() % 4 {
            let region = if rnd() % 2 == 0 {
                1500.min(b.len())
            } else {
                b.len()
            };
            let k = (rnd() as usize) % region;
            match rnd() % 3 {
                0 => b[k] = rnd() as u8,
                1 => b[k] ^= 1 << (rnd() % 8),
                _ => b[k] = b"0123456789 =<>/\n"[(rnd() % 16) as usize],
            }
        }
        if rnd() % 5 == 0 {
            let l = (rnd() as usize) % b.len();
            b.truncate(l);
        }
        std::fs::write(&p, &b).unwrap();
        for f in [
            None,
            Some(GaugeFormat::Nersc),
            Some(GaugeFormat::Lime),
            Some(GaugeFormat::Milc),
        ] {
            if read_gauge(&p, f, None, DEFAULT_BOUNDARY).is_err() {
                refused += 1;
            }
        }
    }
    // Forced wrong formats alone give 3 refusals per file; most edits are caught too.
    assert!(refused > 1200, "only {refused} of 1600 reads refused");
}
