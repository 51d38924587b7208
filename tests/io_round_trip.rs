//! Writers: NERSC (double, single, two-row) and npy files round-trip, npy loads in numpy
//! with the documented index order, and write_atomic replaces or creates.

mod common;
use common::io::{checksum, lattice, max_link_diff, read};
use qcd_solve::field::spinor::idx;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::DEFAULT_BOUNDARY;
use qcd_solve::io::{
    read_gauge, read_spinor_npy, write_atomic, write_nersc, write_spinor_npy, GaugeFormat,
    NerscWrite,
};
use qcd_solve::Error;

#[test]
fn nersc_double_round_trip_is_bit_exact() {
    let dir = tempfile::tempdir().unwrap();
    let g = GaugeField::random(&lattice([4, 2, 6, 4]), 17);
    for two_row in [false, true] {
        for big_endian in [true, false] {
            let opts = NerscWrite {
                two_row,
                double: true,
                big_endian,
            };
            let p = dir.path().join(format!("g-{two_row}-{big_endian}.nersc"));
            write_nersc(&p, &g, opts).unwrap();
            let (h, info) = read_gauge(&p, None, Some([4, 2, 6, 4]), DEFAULT_BOUNDARY).unwrap();
            // Round trip, bit-exact: f64 is stored as is; for two-row the third row is
            // rebuilt by the same `Su3::third_row` that `GaugeField::random` used.
            assert!(g.links == h.links, "opts {opts:?}: links differ");
            assert_eq!(info.precision_bits, 64);
            assert_eq!(
                info.byte_order,
                if big_endian {
                    "big-endian"
                } else {
                    "little-endian"
                }
            );
            assert_eq!(info.plaquette, g.plaquette());
            let (stored, computed) = checksum(&info, "CHECKSUM");
            assert_eq!(stored, computed);
        }
    }
    // The default is 3x3 IEEE64BIG with the full header.
    let p = dir.path().join("default.nersc");
    write_nersc(&p, &g, NerscWrite::default()).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let text = String::from_utf8_lossy(&bytes[..1024.min(bytes.len())]);
    for key in [
        "HDR_VERSION = 1.0",
        "DATATYPE = 4D_SU3_GAUGE_3x3",
        "STORAGE_FORMAT",
        "DIMENSION_1 = 4",
        "DIMENSION_4 = 4",
        "LINK_TRACE = ",
        "PLAQUETTE = ",
        "CHECKSUM = ",
        "BOUNDARY_1 = PERIODIC",
        "BOUNDARY_4 = PERIODIC",
        "FLOATING_POINT = IEEE64BIG",
        "ENSEMBLE_ID = qcd-solve",
        "CREATOR = qcd-solve",
        "END_HEADER\n",
    ] {
        assert!(text.contains(key), "header lacks {key:?}:\n{text}");
    }
    // The payload is exactly V * 4 links * 18 reals * 8 bytes after END_HEADER.
    let end = text.find("END_HEADER\n").unwrap() + "END_HEADER\n".len();
    assert_eq!(bytes.len() - end, 4 * 2 * 6 * 4 * 4 * 18 * 8);
}

#[test]
fn nersc_single_round_trip_agrees_to_single_precision() {
    let dir = tempfile::tempdir().unwrap();
    let g = GaugeField::random(&lattice([4, 4, 2, 2]), 3);
    for two_row in [false, true] {
        for big_endian in [true, false] {
            let opts = NerscWrite {
                two_row,
                double: false,
                big_endian,
            };
            let p = dir.path().join(format!("s-{two_row}-{big_endian}.nersc"));
            write_nersc(&p, &g, opts).unwrap();
            let (h, info) = read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap();
            assert_eq!(info.precision_bits, 32);
            // float32 rounding is 6e-8 relative per element and reunitarisation moves a
            // link by the same order; 1e-6 is single precision with margin.
            let d = max_link_diff(&g, &h);
            assert!(d < 1e-6, "opts {opts:?}: max diff {d:e}");
            assert!(info.unitarity_reunitarised.unwrap() < 1e-14);
        }
    }
}

#[test]
fn atb_rewritten_as_nersc_reads_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let (g, _) = read("ATB_ildg.l8t4b3360");
    let p = dir.path().join("sub/dir/atb.nersc");
    write_nersc(&p, &g, NerscWrite::default()).unwrap();
    let (h, info) = read_gauge(&p, Some(GaugeFormat::Nersc), None, DEFAULT_BOUNDARY).unwrap();
    assert!(g.links == h.links, "round trip is bit-exact");
    // MANIFEST plaquette again, from our own header.
    assert!((info.header_plaquette.unwrap() - 0.5038664469).abs() < 1e-10);
}

#[test]
fn write_atomic_replaces_and_creates_parents() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a/b/c.txt");
    write_atomic(&p, b"first").unwrap();
    write_atomic(&p, b"second").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"second");
    let names: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temp left beside the file");
}

// ---- npy ---------------------------------------------------------------------------------

#[test]
fn npy_round_trip_is_bit_exact_and_header_is_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let l = lattice([4, 2, 6, 8]);
    let psi = SpinorField::random(l.volume(), 9, 0);
    let p = dir.path().join("out/psi.npy");
    write_spinor_npy(&p, &l, &psi).unwrap();
    let back = read_spinor_npy(&p, &l).unwrap();
    assert!(back == psi, "round trip, bit-exact");
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    // NPY spec: the data starts at a multiple of 64 and the header ends in '\n'.
    assert_eq!((10 + hlen) % 64, 0);
    assert_eq!(bytes[10 + hlen - 1], b'\n');
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
    assert!(header.contains("'shape': (8, 6, 2, 4, 4, 3)"), "{header}");
    assert_eq!(bytes.len(), 10 + hlen + l.volume() * 12 * 16);
}

#[test]
fn npy_with_another_shape_or_dtype_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let l = lattice([4, 4, 4, 8]);
    let psi = SpinorField::random(l.volume(), 2, 0);
    let p = dir.path().join("psi.npy");
    write_spinor_npy(&p, &l, &psi).unwrap();
    let e = read_spinor_npy(&p, &lattice([4, 4, 8, 4])).unwrap_err();
    assert!(matches!(e, Error::Format { .. }));
    let s = e.to_string();
    assert!(
        s.contains("shape") && s.contains("(8, 4, 4, 4, 4, 3)"),
        "{s}"
    );
    assert!(s.contains("(4, 8, 4, 4, 4, 3)"), "{s}");

    let mut bytes = std::fs::read(&p).unwrap();
    let at = bytes.windows(4).position(|w| w == b"<c16").unwrap();
    bytes[at] = b'>';
    std::fs::write(&p, &bytes).unwrap();
    let s = read_spinor_npy(&p, &l).unwrap_err().to_string();
    assert!(s.contains("dtype") && s.contains(">c16"), "{s}");

    bytes[at] = b'<';
    let f = bytes.windows(5).position(|w| w == b"False").unwrap();
    bytes[f..f + 5].copy_from_slice(b"True ");
    std::fs::write(&p, &bytes).unwrap();
    let s = read_spinor_npy(&p, &l).unwrap_err().to_string();
    assert!(s.contains("fortran_order"), "{s}");

    bytes[f..f + 5].copy_from_slice(b"False");
    bytes.truncate(bytes.len() - 16);
    std::fs::write(&p, &bytes).unwrap();
    let s = read_spinor_npy(&p, &l).unwrap_err().to_string();
    assert!(s.contains("truncated"), "{s}");

    std::fs::write(&p, b"PK\x03\x04 not npy").unwrap();
    let s = read_spinor_npy(&p, &l).unwrap_err().to_string();
    assert!(s.contains("magic"), "{s}");

    // Writing a spinor that does not fit the lattice is refused before any file appears.
    let q = dir.path().join("wrong.npy");
    let e = write_spinor_npy(&q, &lattice([2, 2, 2, 2]), &psi).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }));
    assert!(!q.exists());
}

#[test]
fn npy_loads_in_numpy_with_the_documented_index_order() {
    let have_numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let dir = tempfile::tempdir().unwrap();
    let l = lattice([3, 4, 5, 2]);
    let psi = SpinorField::random(l.volume(), 4, 0);
    let p = dir.path().join("psi.npy");
    write_spinor_npy(&p, &l, &psi).unwrap();
    // psi[t, z, y, x, spin, colour] per the conventions; pick a site with distinct coords.
    let (x, y, z, t, spin, colour) = (2, 3, 1, 1, 2, 1);
    // Without numpy, the file is still decoded here by the npy format's own definition
    // (numpy's NEP 1: magic, version, little-endian header length, the header dict, then
    // the data in C order), independently of read_spinor_npy, so the test always asserts
    // the documented index order. Only numpy's own reading then goes untested, which is
    // said loudly (SKIPPED on stderr). Not a failure under CI=true: .ci/run installs numpy
    // on a best-effort basis (`|| true`), and the byte-level check above stands in for it.
    // (It used to return early without asserting anything: issue 10.)
    let bytes = std::fs::read(&p).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => panic!("npy major version {v}"),
    };
    let header = std::str::from_utf8(&bytes[start..start + hlen]).unwrap();
    assert!(header.contains("'descr': '<c16'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert!(header.contains("'shape': (2, 5, 4, 3, 4, 3)"), "{header}");
    assert_eq!(bytes.len(), start + hlen + 16 * l.volume() * 12);
    let flat = ((((t * 5 + z) * 4 + y) * 3 + x) * 4 + spin) * 3 + colour;
    let at = start + hlen + 16 * flat;
    let re = f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let im = f64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
    let want = psi.data[idx(l.index([x, y, z, t]), spin, colour)];
    assert_eq!(
        (re.to_bits(), im.to_bits()),
        (want.re.to_bits(), want.im.to_bits())
    );
    if !have_numpy {
        eprintln!(
            "SKIPPED: npy_loads_in_numpy_with_the_documented_index_order: numpy's own reading and writing (`python3 -c \"import numpy\"` fails on this machine); the byte-level layout check ran"
        );
        return;
    }
    let script = format!(
        "import numpy as np; a = np.load(r'{}'); v = a[{t},{z},{y},{x},{spin},{colour}]; \
         print(a.dtype.str, a.shape, a.flags['C_CONTIGUOUS'], v.real.hex(), v.imag.hex())",
        p.display()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let expect = format!(
        "<c16 (2, 5, 4, 3, 4, 3) True {} {}",
        py_hex(want.re),
        py_hex(want.im)
    );
    // Round trip through numpy, bit-exact (float.hex is exact).
    assert_eq!(text.trim(), expect);

    // And the other way: a file numpy wrote (value k + 0.5k i at flat C index k, exact in
    // binary) reads back with the same index order.
    let q = dir.path().join("from_numpy.npy");
    let script = format!(
        "import numpy as np; k = np.arange({n}, dtype=np.float64); \
         np.save(r'{}', (k + 0.5j * k).reshape(2, 5, 4, 3, 4, 3))",
        q.display(),
        n = l.volume() * 12
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = read_spinor_npy(&q, &l).unwrap();
    for (k, z) in back.data.iter().enumerate() {
        assert_eq!((z.re, z.im), (k as f64, 0.5 * k as f64), "element {k}");
    }
}

/// Python's float.hex() of a finite nonzero double: [-]0x1.<13 hex digits>p<exp>.
fn py_hex(v: f64) -> String {
    assert!(v.is_finite() && v != 0.0 && v.is_normal());
    let bits = v.to_bits();
    let sign = if bits >> 63 == 1 { "-" } else { "" };
    let exp = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mant = bits & ((1u64 << 52) - 1);
    format!("{sign}0x1.{mant:013x}p{exp:+}")
}

#[test]
fn nersc_two_row_header_describes_the_rebuilt_field() {
    // A field whose row 2 is not conj(row0 x row1): two-row storage drops it, so the
    // header must state the plaquette of the rebuilt field or the file would not re-read.
    let dir = tempfile::tempdir().unwrap();
    let mut g = GaugeField::random(&lattice([2, 2, 2, 4]), 8);
    for u in g.links.iter_mut() {
        u.0[2][0] += qcd_solve::field::C64::new(0.3, -0.2);
    }
    let p = dir.path().join("two-row.nersc");
    let opts = NerscWrite {
        two_row: true,
        ..NerscWrite::default()
    };
    write_nersc(&p, &g, opts).unwrap();
    let (h, info) = read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap();
    // Analytic: the read field is the random SU(3) field again (row 2 rebuilt), to rounding.
    let orig = GaugeField::random(&lattice([2, 2, 2, 4]), 8);
    assert!(max_link_diff(&orig, &h) < 1e-15);
    assert!((info.header_plaquette.unwrap() - orig.plaquette().total).abs() < 1e-14);
}
