//! The openQCD reader (`format = "openqcd"`) against the format's definition in openQCD's
//! `modules/archive/archive.c` (`export_cnfg`): no openQCD file written by another program
//! could be obtained (docs/formats.md, "openQCD"), so the files here are built by the tests
//! from that definition:
//!
//! - header: N0, N1, N2, N3 (T, X, Y, Z) as little-endian int32, then the plaquette as a
//!   little-endian double, `sum over plaquettes of Re tr U_p / (6 V)` (3 for a unit field);
//! - then, for each odd point in the order of `ix = x3 + N3 (x2 + N2 (x1 + N1 x0))`, the
//!   links U(x,0), U(x-0,0), U(x,1), U(x-1,1), .., U(x-3,3), openQCD's direction 0 being
//!   time and 1, 2, 3 being x, y, z; each 18 little-endian doubles, row-major, (re, im).
//!
//! Every expected header plaquette is computed here by `header_plaquette`, a direct loop
//! over sites and planes (not the library's plaquette), in openQCD's normalisation.

mod safety_common;
use qcd_solve::comms::threads::run_ranks;
use qcd_solve::comms::Comms;
use qcd_solve::field::{GaugeField, Su3, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::geometry::partition::Partition;
use qcd_solve::io::{parse_format, read_gauge, read_gauge_slab, GaugeFormat, ReadOptions};
use qcd_solve::Error;
use safety_common::{bin, code_and_err, run};
use std::path::{Path, PathBuf};

/// Unequal even extents (X, Y, Z, T), so that a swapped axis cannot go unnoticed.
const DIMS: [usize; 4] = [4, 6, 2, 8];
const HEADER: usize = 24;
const LINK: usize = 144;

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

fn site(dims: [usize; 4], c: [usize; 4]) -> usize {
    c[0] + dims[0] * (c[1] + dims[1] * (c[2] + dims[2] * c[3]))
}

fn step(dims: [usize; 4], c: [usize; 4], mu: usize, by: isize) -> [usize; 4] {
    let mut d = c;
    d[mu] = (c[mu] as isize + by).rem_euclid(dims[mu] as isize) as usize;
    d
}

/// openQCD's header plaquette of `field`: sum of Re tr U_p over every site and the 6
/// planes, divided by 6 V (no division by 3).
fn header_plaquette(field: &GaugeField) -> f64 {
    let dims = field.lattice.dims;
    let v: usize = dims.iter().product();
    let mut sum = 0.0;
    for s in 0..v {
        let c = field.lattice.coords(s);
        for mu in 0..4 {
            for nu in mu + 1..4 {
                let u = |at: [usize; 4], d: usize| field.links[site(dims, at) * 4 + d];
                let p = u(c, mu)
                    .mul(&u(step(dims, c, mu, 1), nu))
                    .mul(&u(step(dims, c, nu, 1), mu).dagger())
                    .mul(&u(c, nu).dagger());
                sum += p.trace().re;
            }
        }
    }
    sum / (6.0 * v as f64)
}

fn push_link(out: &mut Vec<u8>, u: &Su3) {
    for row in &u.0 {
        for z in row {
            out.extend_from_slice(&z.re.to_le_bytes());
            out.extend_from_slice(&z.im.to_le_bytes());
        }
    }
}

fn push_header(out: &mut Vec<u8>, dims: [usize; 4], plaquette: f64) {
    for n in [dims[3], dims[0], dims[1], dims[2]] {
        out.extend_from_slice(&(n as i32).to_le_bytes());
    }
    out.extend_from_slice(&plaquette.to_le_bytes());
}

/// `field` as openQCD's `export_cnfg` writes it, with the header plaquette `plaquette`.
fn openqcd_bytes(field: &GaugeField, plaquette: f64) -> Vec<u8> {
    let dims = field.lattice.dims;
    let [nx, ny, nz, nt] = dims;
    let mut out = Vec::new();
    push_header(&mut out, dims, plaquette);
    // openQCD's direction k (0 = t, 1 = x, 2 = y, 3 = z) is this program's [3, 0, 1, 2][k].
    let ours = [3, 0, 1, 2];
    for x0 in 0..nt {
        for x1 in 0..nx {
            for x2 in 0..ny {
                for x3 in 0..nz {
                    if (x0 + x1 + x2 + x3) % 2 == 0 {
                        continue;
                    }
                    let c = [x1, x2, x3, x0];
                    for mu in ours {
                        push_link(&mut out, &field.links[site(dims, c) * 4 + mu]);
                        let back = step(dims, c, mu, -1);
                        push_link(&mut out, &field.links[site(dims, back) * 4 + mu]);
                    }
                }
            }
        }
    }
    out
}

/// A field near the unit field (plaquette about 0.8), so that a header read without its
/// division by 3 or links put on the wrong sites cannot pass the plaquette check: each
/// link is SU(3)'s projection of 1 + 0.35 R, R a random SU(3) matrix.
fn weak_field(dims: [usize; 4], seed: u64) -> GaugeField {
    let mut g = GaugeField::random(&lattice(dims), seed);
    for u in g.links.iter_mut() {
        let mut m = *u;
        for (i, row) in m.0.iter_mut().enumerate() {
            for (j, z) in row.iter_mut().enumerate() {
                *z = *z * 0.35
                    + if i == j {
                        C64::new(1.0, 0.0)
                    } else {
                        C64::new(0.0, 0.0)
                    };
            }
        }
        *u = m.reunitarise();
    }
    g
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn same_bits(a: &Su3, b: &Su3) -> bool {
    let bits = |u: &Su3| {
        let mut r = Vec::new();
        u.push_reals(&mut r);
        r.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    };
    bits(a) == bits(b)
}

/// The format error of reading `p` (as openQCD), its message with the file named.
fn refused(p: &Path, expected: Option<[usize; 4]>) -> String {
    let e = read_gauge(p, Some(GaugeFormat::OpenQcd), expected, DEFAULT_BOUNDARY).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e:?}");
    assert_eq!(e.exit_code(), 4);
    let s = e.to_string();
    assert!(s.contains(&p.display().to_string()), "{s}");
    s
}

#[test]
fn a_weak_field_reads_back_bit_exact_with_its_header_plaquette() {
    let d = tempfile::tempdir().unwrap();
    let field = weak_field(DIMS, 7);
    let header = header_plaquette(&field);
    // Far from a third of itself: a reader that forgot the factor 3 would be refused.
    assert!(header > 2.0 && header < 3.0, "{header}");
    let p = write(d.path(), "weak.oqcd", &openqcd_bytes(&field, header));
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        24 + 576 * 384,
        "24-byte header and 8 links of 144 bytes at each of the V/2 = 192 odd points"
    );
    for format in [None, Some(GaugeFormat::OpenQcd)] {
        let (g, info) = read_gauge(&p, format, Some(DIMS), DEFAULT_BOUNDARY).unwrap();
        assert_eq!(info.format, "openQCD");
        assert_eq!(info.dims, DIMS);
        assert_eq!(info.precision_bits, 64);
        assert!(info.checksums.is_empty());
        assert!(!info.reunitarised);
        for (k, (a, b)) in g.links.iter().zip(&field.links).enumerate() {
            assert!(same_bits(a, b), "link {k} (site {}, mu {})", k / 4, k % 4);
        }
        // The header's value in this program's normalisation, and the plaquette computed
        // from the links read, both equal the direct sum above / 3 (to 1e-12: sums in
        // another order).
        let stated = info.header_plaquette.unwrap();
        assert_eq!(stated, header / 3.0);
        assert!((info.plaquette.total - header / 3.0).abs() < 1e-12);
    }
}

#[test]
fn a_unit_field_states_3_and_reads_as_plaquette_1() {
    let d = tempfile::tempdir().unwrap();
    let unit = GaugeField::unit(&lattice([2, 2, 2, 2]));
    // openQCD's normalisation: Re tr 1 = 3 for each of the 6 V plaquettes.
    assert_eq!(header_plaquette(&unit), 3.0);
    let p = write(d.path(), "unit.oqcd", &openqcd_bytes(&unit, 3.0));
    let (g, info) = read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap();
    assert_eq!(info.header_plaquette, Some(1.0));
    assert_eq!(info.plaquette.total, 1.0);
    assert!(g.links.iter().all(|u| *u == Su3::identity()));
}

/// diag(e^(i a), e^(i b), e^(-i (a + b))): SU(3), told apart by (a, b).
fn phase(k: usize) -> Su3 {
    let (a, b) = (0.1 * (k + 1) as f64, 0.05 * (k + 2) as f64);
    let mut u = Su3::zero();
    u.0[0][0] = C64::from_polar(1.0, a);
    u.0[1][1] = C64::from_polar(1.0, b);
    u.0[2][2] = C64::from_polar(1.0, -(a + b));
    u
}

/// Links written at byte offsets worked out by hand from the definition land on the site
/// and direction the definition gives them. On DIMS = (X, Y, Z, T) = (4, 6, 2, 8) each
/// (x0, x1, x2) row of openQCD's order holds Z = 2 points, one of them odd, so the odd
/// point of row r = (x0 X + x1) Y + x2 is the r-th, and its slot k (0..8) starts at
/// byte 24 + (8 r + k) 144.
#[test]
fn links_at_hand_computed_offsets_land_on_their_site_and_direction() {
    // (odd point, slot, expected (x, y, z, t), expected mu of this program)
    let cases: [(usize, usize, [usize; 4], usize); 7] = [
        // Row 0 (t = x = y = 0): its odd point is z = 1. Slot 0: U(x, 0), the time link
        // there; slot 1: U(x - 0, 0), the time link at t = 8 - 1 = 7.
        (0, 0, [0, 0, 1, 0], 3),
        (0, 1, [0, 0, 1, 7], 3),
        // Row 24 (t = 1, x = y = 0): odd point z = 0. Slot 4: U(x, 2), openQCD's
        // direction 2 = y; slot 5: the y link at y = 6 - 1 = 5.
        (24, 4, [0, 0, 0, 1], 1),
        (24, 5, [0, 5, 0, 1], 1),
        // Row 70 (t = 2, x = 3, y = 4): 2 + 3 + 4 is odd, so z = 0. Slot 2: U(x, 1), the
        // x link; slot 3: the x link at x = 2; slot 7: the z link at z = 1 (-1 mod 2).
        (70, 2, [3, 4, 0, 2], 0),
        (70, 3, [2, 4, 0, 2], 0),
        (70, 7, [3, 4, 1, 2], 2),
    ];
    let d = tempfile::tempdir().unwrap();
    let mut expected = GaugeField::unit(&lattice(DIMS));
    let mut bytes = openqcd_bytes(&expected, 3.0);
    for (k, &(point, slot, c, mu)) in cases.iter().enumerate() {
        let at = HEADER + (8 * point + slot) * LINK;
        let mut link = Vec::new();
        push_link(&mut link, &phase(k));
        bytes[at..at + LINK].copy_from_slice(&link);
        expected.links[site(DIMS, c) * 4 + mu] = phase(k);
    }
    // The last link of the file: row 8*4*6 - 1 = 191 (t = 7, x = 3, y = 5, odd point
    // z = 0), slot 7: the z link at z = 1.
    let end = bytes.len() - LINK;
    assert_eq!(end, HEADER + (8 * 191 + 7) * LINK);
    let mut link = Vec::new();
    push_link(&mut link, &phase(9));
    bytes[end..].copy_from_slice(&link);
    expected.links[site(DIMS, [3, 5, 1, 7]) * 4 + 2] = phase(9);
    bytes[16..24].copy_from_slice(&header_plaquette(&expected).to_le_bytes());
    let p = write(d.path(), "phases.oqcd", &bytes);
    let (g, _) = read_gauge(&p, None, Some(DIMS), DEFAULT_BOUNDARY).unwrap();
    for (k, (a, b)) in g.links.iter().zip(&expected.links).enumerate() {
        let c = g.lattice.coords(k / 4);
        assert!(same_bits(a, b), "(x,y,z,t) = {c:?}, mu = {}", k % 4);
    }
}

#[test]
fn bad_files_are_refused_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let field = weak_field(DIMS, 11);
    let header = header_plaquette(&field);
    let good = openqcd_bytes(&field, header);
    let edited = |name: &str, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        edit(&mut b);
        write(d.path(), name, &b)
    };

    // Length: cut short, one byte too many, a header cut short.
    let p = edited("cut.oqcd", &|b| b.truncate(b.len() - 100));
    assert!(refused(&p, None).contains("truncated"));
    let p = edited("long.oqcd", &|b| b.push(0));
    assert!(refused(&p, None).contains("trailing data"));
    let p = edited("head.oqcd", &|b| b.truncate(20));
    assert!(refused(&p, None).contains("openQCD header needs 24 bytes"));

    // Extents unlike the config's [lattice], and extents openQCD cannot have.
    let p = edited("same.oqcd", &|_| {});
    let e = refused(&p, Some([4, 4, 4, 4]));
    assert!(
        e.contains("expected 4x4x4x4") && e.contains("4x6x2x8"),
        "{e}"
    );
    let p = edited("odd.oqcd", &|b| {
        b[4..8].copy_from_slice(&5i32.to_le_bytes())
    });
    assert!(refused(&p, None).contains("must be even"));

    // The header plaquette: off by 1e-9 in this program's normalisation (3e-9 as stored)
    // is beyond the 1e-10 a 64-bit file is checked to; off by 1e-11 is within it.
    let p = edited("plaq.oqcd", &|b| {
        b[16..24].copy_from_slice(&(header + 3e-9).to_le_bytes())
    });
    let e = refused(&p, None);
    assert!(e.contains("plaquette (openQCD header / 3) mismatch"), "{e}");
    assert!(e.contains("Schroedinger-functional"), "{e}");
    let p = edited("close.oqcd", &|b| {
        b[16..24].copy_from_slice(&(header + 3e-11).to_le_bytes())
    });
    read_gauge(&p, Some(GaugeFormat::OpenQcd), None, DEFAULT_BOUNDARY).unwrap();
    let p = edited("nan-plaq.oqcd", &|b| {
        b[16..24].copy_from_slice(&f64::NAN.to_le_bytes())
    });
    assert!(refused(&p, None).contains("not a finite number"));

    // A NaN in a link: the first odd point's forward x link (slot 2), at (0,0,1,0).
    let p = edited("nan-link.oqcd", &|b| {
        let at = HEADER + 2 * LINK + 8;
        b[at..at + 8].copy_from_slice(&f64::NAN.to_le_bytes());
    });
    let e = refused(&p, None);
    assert!(e.contains("non-finite link value NaN at site (x,y,z,t) = (0,0,1,0), mu = 0"));
    // A link scaled off SU(3).
    let p = edited("scaled.oqcd", &|b| {
        let at = HEADER + 2 * LINK;
        let x = f64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        b[at..at + 8].copy_from_slice(&(x * 1.01).to_le_bytes());
    });
    assert!(refused(&p, None).contains("deviates from SU(3)"));
}

/// openQCD with open boundary conditions stores the time links of the last time slice as
/// zero (and its header plaquette leaves their plaquettes out): refused by name.
#[test]
fn an_open_boundary_file_is_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let mut field = weak_field(DIMS, 5);
    for s in 0..field.lattice.volume() {
        if field.lattice.coords(s)[3] == DIMS[3] - 1 {
            field.links[s * 4 + 3] = Su3::zero();
        }
    }
    let p = write(
        d.path(),
        "open.oqcd",
        &openqcd_bytes(&field, header_plaquette(&field)),
    );
    let e = refused(&p, None);
    assert!(
        e.contains("is zero") && e.contains("open boundary conditions"),
        "{e}"
    );
    assert!(e.contains("t) = (") && e.contains(",7)"), "{e}");
    let (code, err) = run(bin().arg("info").arg(&p));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("open boundary conditions"), "{err}");
}

#[test]
fn detection_and_format_names() {
    assert_eq!(parse_format("openqcd").unwrap(), Some(GaugeFormat::OpenQcd));
    assert_eq!(parse_format("OpenQCD").unwrap(), Some(GaugeFormat::OpenQcd));
    assert_eq!(GaugeFormat::OpenQcd.name(), "openqcd");
    let d = tempfile::tempdir().unwrap();
    let good = openqcd_bytes(&weak_field([2, 2, 2, 4], 3), 0.0);
    // Detected from its header and exact length alone (the plaquette is wrong here, which
    // only the read finds).
    let p = write(d.path(), "a.oqcd", &good);
    assert_eq!(GaugeFormat::detect(&p).unwrap(), GaugeFormat::OpenQcd);
    // Cut short, it is not recognised automatically; forced, it is refused as truncated.
    let p = write(d.path(), "b.oqcd", &good[..good.len() - 8]);
    let e = read_gauge(&p, None, None, DEFAULT_BOUNDARY)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unrecognised") && e.contains("openqcd"), "{e}");
    assert!(refused(&p, None).contains("truncated"));
    // Odd extents or a plaquette outside [-1.5, 3] are not an openQCD header.
    let mut odd = good.clone();
    odd[0..4].copy_from_slice(&3i32.to_le_bytes());
    assert!(GaugeFormat::detect(&write(d.path(), "c", &odd)).is_err());
    let mut big = good.clone();
    big[16..24].copy_from_slice(&3.5f64.to_le_bytes());
    assert!(GaugeFormat::detect(&write(d.path(), "d", &big)).is_err());
    // Forced onto every prefix of an openQCD file, or onto a header claiming 2^20 in each
    // direction, the reader errors cleanly.
    for len in (0..1200).step_by(7) {
        let p = write(d.path(), "prefix", &good[..len]);
        refused(&p, None);
    }
    let mut huge = good[..24].to_vec();
    for k in 0..4 {
        huge[4 * k..4 * k + 4].copy_from_slice(&(1i32 << 20).to_le_bytes());
    }
    assert!(refused(&write(d.path(), "huge", &huge), None).contains("dimensions"));
}

/// Each rank reading its own part (`[parallel] read = "slab"`) gets the whole-file
/// reader's links bit for bit, and a bad header plaquette is refused on every rank.
#[test]
fn slab_reads_match_the_whole_file() {
    let d = tempfile::tempdir().unwrap();
    let field = weak_field(DIMS, 13);
    let header = header_plaquette(&field);
    let p = write(d.path(), "w.oqcd", &openqcd_bytes(&field, header));
    let (whole, _) = read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap();
    let slabs = |path: &Path, grid: [usize; 4]| {
        run_ranks(grid.iter().product(), |mut comms| {
            let part = Partition::new(DIMS, grid, comms.rank())?;
            let r = read_gauge_slab(
                path,
                None,
                &part,
                DEFAULT_BOUNDARY,
                ReadOptions::default(),
                &mut comms,
            );
            Ok((part, r))
        })
        .unwrap()
    };
    for grid in [[2, 1, 1, 2], [1, 3, 1, 1], [2, 3, 1, 4]] {
        for (part, r) in slabs(&p, grid) {
            let (g, info) = r.unwrap();
            // A plaquette summed over ranks: equal to rounding.
            assert!((info.plaquette.total - header / 3.0).abs() < 1e-12);
            let local: usize = part.local_dims().iter().product();
            for i in 0..local {
                for mu in 0..4 {
                    let want = &whole.links[part.global_site(i) * 4 + mu];
                    assert!(same_bits(&g.links[i * 4 + mu], want), "{grid:?} {i} {mu}");
                }
            }
        }
    }
    let mut bad = std::fs::read(&p).unwrap();
    bad[16..24].copy_from_slice(&(header + 1e-6).to_le_bytes());
    let bad = write(d.path(), "bad.oqcd", &bad);
    for (_, r) in slabs(&bad, [2, 1, 1, 2]) {
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(e
            .to_string()
            .contains("plaquette (openQCD header / 3) mismatch"));
    }
}

/// The program reads an openQCD file named in a config (`format = "openqcd"`) and solves
/// on it; `info` detects and describes one.
#[test]
fn the_program_solves_on_an_openqcd_file() {
    let d = tempfile::tempdir().unwrap();
    let field = weak_field([4, 4, 4, 4], 17);
    let header = header_plaquette(&field);
    let g = write(d.path(), "conf.oqcd", &openqcd_bytes(&field, header));
    let out = bin().arg("info").arg(&g).output().unwrap();
    let (code, err) = code_and_err(&out);
    assert_eq!(code, 0, "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("format:        openQCD"), "{text}");
    assert!(text.contains("header plaquette       ok"), "{text}");

    let report = d.path().join("r.json");
    let cfg = format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"file\"\npath = \"{}\"\n\
         format = \"openqcd\"\n\n[dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n\
         [output]\nreport = \"{}\"\n",
        g.display(),
        report.display()
    );
    let c = d.path().join("run.toml");
    std::fs::write(&c, cfg).unwrap();
    let (code, err) = run(bin().arg(&c));
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["converged"], true);
    let plaq = r["plaquette"].as_f64().unwrap();
    assert!(
        (plaq - header / 3.0).abs() < 1e-12,
        "{plaq} vs {}",
        header / 3.0
    );
}
