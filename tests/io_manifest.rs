//! File-format conformance: every real configuration in shared/lattices reproduces its
//! MANIFEST values, formats are detected and named, and the info block reports it all.

mod common;
use common::io::{checksum, max_link_diff, read};
use common::shared;
use qcd_solve::geometry::lattice::DEFAULT_BOUNDARY;
use qcd_solve::io::{parse_format, read_gauge, unitarity_tolerance, GaugeFormat};
use qcd_solve::Error;

/// One MANIFEST row. `plaq_rel` is the relative tolerance the brief sets (1e-9 for double
/// files, 1e-6 for 32-bit ones); `trace_tol` is half a unit in the last digit the MANIFEST
/// prints for the link trace (plus 1e-12 slack for the rounding of our own sum).
struct Row {
    file: &'static str,
    format: &'static str,
    dims: [usize; 4],
    bits: u32,
    plaquette: f64,
    plaq_rel: f64,
    link_trace: Option<(f64, f64)>,
    checksums: &'static [(&'static str, u32)],
}

const ROWS: &[Row] = &[
    Row {
        file: "ATB_nersc.l8t4b3360",
        format: "NERSC",
        dims: [8, 8, 8, 4],
        bits: 64,
        plaquette: 0.5038664469,
        plaq_rel: 1e-9,
        link_trace: Some((0.005406083858, 0.5e-12 + 1e-12)),
        checksums: &[("CHECKSUM", 0xb379560a)],
    },
    Row {
        file: "ATB_ildg.l8t4b3360",
        format: "ILDG",
        dims: [8, 8, 8, 4],
        bits: 64,
        plaquette: 0.5038664469,
        plaq_rel: 1e-9,
        link_trace: Some((0.005406083858, 0.5e-12 + 1e-12)),
        checksums: &[("suma", 0x10d0ea1a), ("sumb", 0xa6a1b3b8)],
    },
    Row {
        file: "milc_lat.sample.l4448",
        format: "MILC",
        dims: [4, 4, 4, 8],
        bits: 32,
        plaquette: 0.5690557244,
        plaq_rel: 1e-6,
        link_trace: Some((0.069217, 0.5e-6 + 1e-12)),
        checksums: &[("sum29", 0x13f3b413), ("sum31", 0x161f7dde)],
    },
    Row {
        file: "milc_lat.sample.l4448.scidac",
        format: "SciDAC",
        dims: [4, 4, 4, 8],
        bits: 32,
        plaquette: 0.5690557244,
        plaq_rel: 1e-6,
        link_trace: Some((0.069217, 0.5e-6 + 1e-12)),
        checksums: &[("suma", 0x1c5a6cb5), ("sumb", 0x5dea327a)],
    },
    Row {
        file: "milc_lat.sample.l4444",
        format: "MILC",
        dims: [4, 4, 4, 4],
        bits: 32,
        plaquette: 0.5948501589,
        plaq_rel: 1e-6,
        link_trace: Some((0.646759, 0.5e-6 + 1e-12)),
        checksums: &[("sum29", 0x02352c05), ("sum31", 0xd137321d)],
    },
    Row {
        file: "milc_lat.sample.l4444.ildg",
        format: "ILDG",
        dims: [4, 4, 4, 4],
        bits: 32,
        plaquette: 0.5948501589,
        plaq_rel: 1e-6,
        link_trace: Some((0.646759, 0.5e-6 + 1e-12)),
        checksums: &[("suma", 0x37affb9c), ("sumb", 0x2fc07bbf)],
    },
    Row {
        file: "ahmidas_conf.48",
        format: "ILDG",
        dims: [4, 4, 4, 8],
        bits: 64,
        plaquette: 0.6350055722,
        plaq_rel: 1e-9,
        link_trace: Some((0.004385, 0.5e-6 + 1e-12)),
        checksums: &[("suma", 0x1c231a18), ("sumb", 0x003c553b)],
    },
    Row {
        file: "pyquda_weak_field.lime",
        format: "ILDG",
        dims: [4, 4, 4, 8],
        bits: 64,
        plaquette: 0.9948041323,
        plaq_rel: 1e-9,
        link_trace: None,
        checksums: &[("suma", 0xa2c41090), ("sumb", 0x11193c39)],
    },
];

#[test]
fn every_shared_lattice_reproduces_its_manifest_row() {
    // Every file in the directory must have a row, so a new file cannot go untested.
    let mut on_disk: Vec<String> = std::fs::read_dir(shared(""))
        .expect("shared/lattices is readable")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "MANIFEST.md")
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = ROWS.iter().map(|r| r.file.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "files in shared/lattices vs rows in this test"
    );

    for row in ROWS {
        let (field, info) = read(row.file);
        assert_eq!(info.format, row.format, "{}", row.file);
        assert_eq!(info.dims, row.dims, "{}: dims (MANIFEST)", row.file);
        assert_eq!(field.lattice.dims, row.dims, "{}", row.file);
        assert_eq!(
            info.precision_bits, row.bits,
            "{}: precision (MANIFEST)",
            row.file
        );
        let p = info.plaquette.total;
        assert!(
            ((p - row.plaquette) / row.plaquette).abs() < row.plaq_rel,
            "{}: plaquette {p:.12} vs MANIFEST {} (relative tolerance {:e})",
            row.file,
            row.plaquette,
            row.plaq_rel
        );
        // The returned field gives the same plaquette as the info block.
        assert_eq!(field.plaquette().total, p);
        // total is the mean of the spatial and temporal averages (3 planes each).
        assert!((0.5 * (info.plaquette.spatial + info.plaquette.temporal) - p).abs() < 1e-15);
        if let Some((lt, tol)) = row.link_trace {
            assert!(
                (info.link_trace - lt).abs() <= tol,
                "{}: link trace {:.12} vs MANIFEST {lt} (tolerance {tol:e}: the printed digits)",
                row.file,
                info.link_trace
            );
        }
        assert_eq!(info.checksums.len(), row.checksums.len(), "{}", row.file);
        for &(name, want) in row.checksums {
            let (stored, computed) = checksum(&info, name);
            assert_eq!(stored, want, "{}: stored {name} vs MANIFEST", row.file);
            assert_eq!(computed, want, "{}: computed {name} vs MANIFEST", row.file);
        }
        // Unitarity: the MANIFEST says 32-bit files are unitary to ~5e-7 and are
        // reunitarised on read; double files are used as stored and are SU(3) to rounding.
        if row.bits == 32 {
            assert!(info.unitarity_as_stored < 1e-6, "{}", row.file);
            let after = info.unitarity_reunitarised.expect("32-bit is reunitarised");
            assert!(
                after < 1e-14,
                "{}: {after:e} after reunitarisation",
                row.file
            );
            assert!(field.max_unitarity_deviation() < 1e-14);
        } else {
            assert!(info.unitarity_as_stored < 1e-14, "{}", row.file);
            assert!(info.unitarity_reunitarised.is_none());
        }
        // The expected dims are accepted when right.
        read_gauge(&shared(row.file), None, Some(row.dims), DEFAULT_BOUNDARY).unwrap();
    }
}

#[test]
fn nersc_header_values_are_verified_and_reported() {
    let (_, info) = read("ATB_nersc.l8t4b3360");
    // MANIFEST: "header values reproduce exactly" to the printed digits.
    assert_eq!(info.header_plaquette, Some(0.5038664469));
    assert_eq!(info.header_plaquette_key.as_deref(), Some("PLAQUETTE"));
    assert_eq!(info.header_link_trace, Some(0.005406083858));
    assert!((info.plaquette.total - 0.5038664469).abs() < 0.5e-10 + 1e-12);
    assert_eq!(info.byte_order, "big-endian");
    // tmLQCD's xlf-info plaquette (printed %e, 7 digits) is verified too.
    let (_, info) = read("ahmidas_conf.48");
    assert_eq!(info.header_plaquette, Some(0.6350056));
    assert!((info.plaquette.total - 0.6350056).abs() < 0.5e-7);
}

#[test]
fn atb_nersc_and_atb_ildg_hold_the_same_links() {
    let (a, _) = read("ATB_nersc.l8t4b3360");
    let (b, _) = read("ATB_ildg.l8t4b3360");
    let d = max_link_diff(&a, &b);
    // MANIFEST: same links, max diff 6e-16; the brief asks 1e-14.
    assert!(d < 1e-14, "max |U_nersc - U_ildg| = {d:e}");
}

#[test]
fn milc_files_and_their_lime_twins_hold_the_same_links() {
    // MANIFEST: the LIME files are MILC's conversions of the same configurations, so the
    // float32 values are the same and, reunitarised by the same code, identical bit for bit.
    for (milc, lime) in [
        ("milc_lat.sample.l4448", "milc_lat.sample.l4448.scidac"),
        ("milc_lat.sample.l4444", "milc_lat.sample.l4444.ildg"),
    ] {
        let (a, ia) = read(milc);
        let (b, ib) = read(lime);
        assert_eq!(max_link_diff(&a, &b), 0.0, "{milc} vs {lime}");
        assert_eq!(ia.unitarity_as_stored, ib.unitarity_as_stored);
    }
    let (_, info) = read("milc_lat.sample.l4444");
    assert_eq!(info.byte_order, "little-endian");
    let (_, info) = read("milc_lat.sample.l4448");
    assert_eq!(info.byte_order, "big-endian");
}

#[test]
fn formats_are_detected_from_magic_bytes() {
    let cases = [
        ("ATB_nersc.l8t4b3360", GaugeFormat::Nersc),
        ("ATB_ildg.l8t4b3360", GaugeFormat::Lime),
        ("milc_lat.sample.l4448", GaugeFormat::Milc),
        ("milc_lat.sample.l4448.scidac", GaugeFormat::Lime),
        ("milc_lat.sample.l4444", GaugeFormat::Milc),
        ("milc_lat.sample.l4444.ildg", GaugeFormat::Lime),
        ("ahmidas_conf.48", GaugeFormat::Lime),
        ("pyquda_weak_field.lime", GaugeFormat::Lime),
    ];
    for (name, want) in cases {
        assert_eq!(GaugeFormat::detect(&shared(name)).unwrap(), want, "{name}");
        // An explicit format reads the same as detection.
        read_gauge(&shared(name), Some(want), None, DEFAULT_BOUNDARY).unwrap();
    }
}

#[test]
fn format_names_parse() {
    assert_eq!("nersc".parse::<GaugeFormat>().unwrap(), GaugeFormat::Nersc);
    for s in ["ildg", "SciDAC", "lime"] {
        assert_eq!(s.parse::<GaugeFormat>().unwrap(), GaugeFormat::Lime);
    }
    assert_eq!("MILC".parse::<GaugeFormat>().unwrap(), GaugeFormat::Milc);
    assert_eq!(parse_format("auto").unwrap(), None);
    assert_eq!(parse_format("milc").unwrap(), Some(GaugeFormat::Milc));
    let e = parse_format("hdf5").unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }));
    assert!(e.to_string().contains("hdf5"), "{e}");
}

#[test]
fn wrong_explicit_format_is_refused_by_name() {
    let e = read_gauge(
        &shared("ATB_nersc.l8t4b3360"),
        Some(GaugeFormat::Milc),
        None,
        DEFAULT_BOUNDARY,
    )
    .unwrap_err();
    assert!(matches!(e, Error::Format { .. }));
    assert!(e.to_string().contains("MILC magic"), "{e}");
    let e = read_gauge(
        &shared("milc_lat.sample.l4444"),
        Some(GaugeFormat::Lime),
        None,
        DEFAULT_BOUNDARY,
    )
    .unwrap_err();
    assert!(e.to_string().contains("LIME magic"), "{e}");
    let e = read_gauge(
        &shared("ATB_ildg.l8t4b3360"),
        Some(GaugeFormat::Nersc),
        None,
        DEFAULT_BOUNDARY,
    )
    .unwrap_err();
    assert!(e.to_string().contains("BEGIN_HEADER"), "{e}");
}

#[test]
fn info_block_names_everything_it_checked() {
    let (_, info) = read("ATB_nersc.l8t4b3360");
    let text = info.to_string();
    for needle in [
        "NERSC",
        "8x8x8x4",
        "64-bit, big-endian",
        "CHECKSUM",
        "b379560a",
        "plaquette:     0.503866446950",
        "header PLAQUETTE = 0.5038664469",
        "LINK_TRACE",
        "unitarity",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let (_, info) = read("milc_lat.sample.l4444.ildg");
    let text = info.to_string();
    for needle in ["ILDG", "suma", "37affb9c", "after reunitarisation"] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // It also serialises (for --json output).
    let json = serde_json::to_string(&info).unwrap();
    assert!(json.contains("\"suma\""));
}
#[test]
fn every_shared_lattice_is_within_the_unitarity_tolerance_with_margin() {
    // The tolerances must pass every real file with room: at least 10x above the worst
    // link measured (32-bit: 5.0e-7, 64-bit: 3.6e-15, see validate/RESULTS.md).
    for row in ROWS {
        let (_, info) = read(row.file);
        let tol = unitarity_tolerance(row.bits);
        assert_eq!(info.unitarity_tolerance, tol);
        assert!(
            info.unitarity_as_stored * 10.0 < tol,
            "{}: worst deviation {:e} vs tolerance {tol:e}",
            row.file,
            info.unitarity_as_stored
        );
        // Only 32-bit links are changed on read.
        assert_eq!(info.reunitarised, row.bits == 32, "{}", row.file);
        assert_eq!(info.links_forced_onto_su3, 0);
    }
}
