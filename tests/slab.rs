//! Each rank reading its own slab of a gauge file (`io::read_gauge_slab`, issue 11 item
//! 5), ranks as threads (`comms::threads::run_ranks`). Every expected value comes from
//! the WHOLE-FILE reader (`io::read_gauge`, itself checked against the MANIFEST of
//! shared/lattices in tests/io.rs): a rank's part must be `scatter_gauge(read_gauge(file))`
//! bit for bit, the info must carry the whole file's checksums and (to rounding of the
//! sum over ranks) its plaquette, and a bad file must be refused on every rank with the
//! whole-file reader's error, word for word where the message holds no summed value.

mod common;
use common::{replace, shared};
use qcd_solve::comms::threads::run_ranks;
use qcd_solve::comms::Comms;
use qcd_solve::field::scatter::scatter_gauge;
use qcd_solve::field::{GaugeField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::geometry::partition::Partition;
use qcd_solve::io::{
    read_gauge, read_gauge_slab, read_gauge_with, write_nersc, GaugeFileInfo, NerscWrite,
    ReadOptions,
};
use qcd_solve::{Error, Result};
use std::path::{Path, PathBuf};

const PLAIN: ReadOptions = ReadOptions { reunitarise: false };
const FORCE: ReadOptions = ReadOptions { reunitarise: true };

/// Every rank's slab read of `path` split as `grid` over a lattice of `dims`, in rank
/// order (each rank's own outcome, errors included).
fn slabs(
    path: &Path,
    dims: [usize; 4],
    grid: [usize; 4],
    opts: ReadOptions,
) -> Vec<Result<(GaugeField, GaugeFileInfo)>> {
    let ranks = grid.iter().product();
    run_ranks(ranks, |mut comms| {
        let p = Partition::new(dims, grid, comms.rank())?;
        Ok(read_gauge_slab(
            path,
            None,
            &p,
            DEFAULT_BOUNDARY,
            opts,
            &mut comms,
        ))
    })
    .unwrap()
}

fn bits(z: &C64) -> (u64, u64) {
    (z.re.to_bits(), z.im.to_bits())
}

/// Every rank's part equals the whole field's scatter bit for bit, on the same lattice
/// (extents, global extents, offset, boundary), and its info describes the whole file.
fn assert_slabs_match(
    what: &str,
    whole: &(GaugeField, GaugeFileInfo),
    grid: [usize; 4],
    got: Vec<Result<(GaugeField, GaugeFileInfo)>>,
) {
    let (field, info) = whole;
    let dims = field.lattice.dims;
    for (rank, r) in got.into_iter().enumerate() {
        let (g, i) = r.unwrap_or_else(|e| panic!("{what} {grid:?} rank {rank}: {e}"));
        let p = Partition::new(dims, grid, rank).unwrap();
        let expected = scatter_gauge(field, &p).unwrap();
        assert_eq!(g.lattice, expected.lattice, "{what} {grid:?} rank {rank}");
        assert_eq!(g.links.len(), expected.links.len());
        for (k, (a, b)) in g.links.iter().zip(&expected.links).enumerate() {
            let same =
                a.0.iter()
                    .flatten()
                    .map(bits)
                    .eq(b.0.iter().flatten().map(bits));
            assert!(same, "{what} {grid:?} rank {rank}: link {k} differs");
        }
        // Checksums: the partials combined exactly (u32 arithmetic).
        assert_eq!(i.checksums, info.checksums, "{what} {grid:?} rank {rank}");
        // Plaquette and link trace: sums over ranks in another order than the whole
        // field's; a few ulps of values of order 1 (the header checks use >= 1e-10).
        assert!(
            (i.plaquette.total - info.plaquette.total).abs() < 1e-14,
            "{what} {grid:?} rank {rank}: plaquette {} vs {}",
            i.plaquette.total,
            info.plaquette.total
        );
        assert!((i.plaquette.spatial - info.plaquette.spatial).abs() < 1e-14);
        assert!((i.plaquette.temporal - info.plaquette.temporal).abs() < 1e-14);
        assert!((i.link_trace - info.link_trace).abs() < 1e-14);
        // Worst links: maxima, exact.
        assert_eq!(i.unitarity_as_stored, info.unitarity_as_stored);
        assert_eq!(i.unitarity_worst_site, info.unitarity_worst_site);
        assert_eq!(i.unitarity_reunitarised, info.unitarity_reunitarised);
        assert_eq!(i.reunitarised, info.reunitarised);
        assert_eq!(i.links_forced_onto_su3, info.links_forced_onto_su3);
        assert_eq!(i.header_plaquette, info.header_plaquette);
        assert_eq!(
            (&i.format, &i.datatype, i.dims, i.precision_bits),
            (&info.format, &info.datatype, info.dims, info.precision_bits)
        );
    }
}

type Dims = [usize; 4];

#[test]
fn every_rank_reads_the_bits_of_the_whole_file_scattered() {
    // The files of shared/lattices/MANIFEST.md with their dims, and grids that divide
    // them with even local extents (one rank, t only, x and t, all four directions).
    let files: &[(&str, Dims, &[Dims])] = &[
        (
            "ATB_nersc.l8t4b3360",
            [8, 8, 8, 4],
            &[
                [1, 1, 1, 1],
                [1, 1, 1, 2],
                [2, 1, 1, 2],
                [2, 2, 2, 2],
                [4, 1, 2, 1],
            ],
        ),
        (
            "ATB_ildg.l8t4b3360",
            [8, 8, 8, 4],
            &[[1, 1, 1, 2], [2, 1, 1, 2], [2, 2, 2, 2]],
        ),
        (
            "milc_lat.sample.l4448",
            [4, 4, 4, 8],
            &[[1, 1, 1, 2], [2, 2, 2, 2], [1, 1, 1, 4]],
        ),
        ("milc_lat.sample.l4444", [4, 4, 4, 4], &[[2, 2, 2, 2]]),
        (
            "milc_lat.sample.l4448.scidac",
            [4, 4, 4, 8],
            &[[2, 1, 1, 2], [2, 2, 2, 2]],
        ),
        ("milc_lat.sample.l4444.ildg", [4, 4, 4, 4], &[[2, 2, 2, 2]]),
        (
            "ahmidas_conf.48",
            [4, 4, 4, 8],
            &[[2, 1, 1, 2], [2, 2, 2, 2]],
        ),
        (
            "pyquda_weak_field.lime",
            [4, 4, 4, 8],
            &[[1, 2, 1, 2], [2, 2, 2, 2]],
        ),
    ];
    for (name, dims, grids) in files {
        let path = shared(name);
        let whole = read_gauge(&path, None, None, DEFAULT_BOUNDARY).unwrap();
        assert_eq!(whole.0.lattice.dims, *dims, "{name}");
        for &grid in *grids {
            assert_slabs_match(name, &whole, grid, slabs(&path, *dims, grid, PLAIN));
        }
    }
    // And the MANIFEST's own numbers for the NERSC file, from the slabs of 16 ranks:
    // plaquette 0.5038664469, CHECKSUM b379560a.
    let got = slabs(
        &shared("ATB_nersc.l8t4b3360"),
        [8, 8, 8, 4],
        [2, 2, 2, 2],
        PLAIN,
    );
    for r in got {
        let (_, info) = r.unwrap();
        assert!((info.plaquette.total - 0.5038664469).abs() < 1e-10);
        assert_eq!(info.checksums[0].computed, 0xb379560a);
    }
}

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

#[test]
fn every_nersc_encoding_reads_per_rank() {
    // Two-row (12 reals) and 3x3 storage, 32 and 64 bits, both byte orders: a random
    // field written by write_nersc (whose round trip tests/io.rs checks), read whole and
    // per rank.
    let dir = tempfile::tempdir().unwrap();
    let dims = [4, 4, 4, 8];
    let field = GaugeField::random(&lattice(dims), 21);
    for two_row in [false, true] {
        for double in [true, false] {
            for big_endian in [true, false] {
                let opts = NerscWrite {
                    two_row,
                    double,
                    big_endian,
                };
                let p = dir
                    .path()
                    .join(format!("r{two_row}-{double}-{big_endian}.nersc"));
                write_nersc(&p, &field, opts).unwrap();
                let whole = read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap();
                let what = format!("{opts:?}");
                for grid in [[1, 2, 1, 2], [2, 2, 2, 2]] {
                    assert_slabs_match(&what, &whole, grid, slabs(&p, dims, grid, PLAIN));
                }
            }
        }
    }
}

fn copy_modified(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(shared(name)).unwrap();
    edit(&mut bytes);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Every rank refuses the file with exactly the whole-file reader's error (same message,
/// same exit code); returns it.
fn every_rank_fails_as_the_whole_reader(
    path: &Path,
    dims: [usize; 4],
    grid: [usize; 4],
    opts: ReadOptions,
) -> String {
    let whole = read_gauge_with(path, None, None, DEFAULT_BOUNDARY, opts)
        .err()
        .unwrap_or_else(|| panic!("{} was accepted whole", path.display()));
    for (rank, r) in slabs(path, dims, grid, opts).into_iter().enumerate() {
        let e = r
            .err()
            .unwrap_or_else(|| panic!("{} accepted by rank {rank}", path.display()));
        assert_eq!(e.to_string(), whole.to_string(), "rank {rank}");
        assert_eq!(e.exit_code(), whole.exit_code(), "rank {rank}");
    }
    let s = whole.to_string();
    assert!(s.contains(&path.display().to_string()), "{s}");
    s
}

/// A byte in the middle of the gauge payload: for LIME files from the record list, for
/// NERSC and MILC counted back from the end (the payload is last).
fn payload_byte(name: &str, len: usize) -> usize {
    match qcd_solve::io::lime::records(&shared(name)) {
        Ok(recs) => {
            let r = recs
                .iter()
                .find(|r| r.type_name.ends_with("binary-data"))
                .unwrap();
            (r.data_offset + r.data_len / 2) as usize
        }
        Err(_) => len / 2,
    }
}

#[test]
fn a_flipped_data_byte_fails_the_combined_checksum_on_every_rank() {
    // The checksum each format stores (MANIFEST: NERSC b379560a, ILDG suma 10d0ea1a,
    // MILC sum29 13f3b413) against the partials of the ranks combined: the error names
    // the file, the key and both values, as the whole-file reader's does.
    let dir = tempfile::tempdir().unwrap();
    for (name, dims, stored) in [
        (
            "ATB_nersc.l8t4b3360",
            [8, 8, 8, 4],
            "CHECKSUM mismatch: file says b379560a",
        ),
        (
            "ATB_ildg.l8t4b3360",
            [8, 8, 8, 4],
            "suma mismatch: file says 10d0ea1a",
        ),
        (
            "milc_lat.sample.l4448",
            [4, 4, 4, 8],
            "sum29 mismatch: file says 13f3b413",
        ),
    ] {
        let p = copy_modified(dir.path(), name, |b| {
            let k = payload_byte(name, b.len());
            b[k] ^= 0x01;
        });
        let e = every_rank_fails_as_the_whole_reader(&p, dims, [2, 1, 1, 2], PLAIN);
        assert!(
            e.contains(stored) && e.contains(", computed "),
            "{name}: {e}"
        );
    }
}

#[test]
fn truncated_and_missing_files_are_refused_on_every_rank_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for (name, dims) in [
        ("ATB_nersc.l8t4b3360", [8, 8, 8, 4]),
        ("ATB_ildg.l8t4b3360", [8, 8, 8, 4]),
        ("milc_lat.sample.l4448", [4, 4, 4, 8]),
    ] {
        let p = copy_modified(dir.path(), name, |b| b.truncate(b.len() - 1000));
        let e = every_rank_fails_as_the_whole_reader(&p, dims, [1, 1, 1, 2], PLAIN);
        assert!(e.contains("truncated"), "{name}: {e}");
    }
    // A missing file: an I/O error (exit 3) naming it, on every rank.
    let p = dir.path().join("no-such-file.nersc");
    let e = every_rank_fails_as_the_whole_reader(&p, [8, 8, 8, 4], [2, 1, 1, 2], PLAIN);
    assert!(e.contains("no-such-file.nersc"), "{e}");
    for r in slabs(&p, [8, 8, 8, 4], [2, 1, 1, 1], PLAIN) {
        assert!(matches!(r, Err(Error::Io { .. })));
    }
}

#[test]
fn a_rank_that_cannot_read_makes_the_others_fail_at_once_naming_it() {
    // Rank 1 is given a missing file, the others the good one: rank 1 reports its I/O
    // error, and the others do not wait for it (they would time out after 120 s) but
    // fail with an error of the same kind (exit 3) naming rank 1.
    let good = shared("ATB_nersc.l8t4b3360");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let t = std::time::Instant::now();
    let got = run_ranks(4, |mut comms| {
        let rank = comms.rank();
        let p = Partition::new([8, 8, 8, 4], [2, 1, 1, 2], rank)?;
        let path = if rank == 1 { &missing } else { &good };
        Ok(read_gauge_slab(
            path,
            None,
            &p,
            DEFAULT_BOUNDARY,
            PLAIN,
            &mut comms,
        ))
    })
    .unwrap();
    assert!(t.elapsed().as_secs() < 30, "the ranks waited");
    for (rank, r) in got.into_iter().enumerate() {
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 3, "rank {rank}: {e}");
        if rank == 1 {
            assert!(e.to_string().contains("missing"), "{e}");
        } else {
            assert!(e.to_string().contains("rank 1 could not read"), "{e}");
        }
    }
}

/// Where the NERSC payload starts: right after the END_HEADER line.
fn nersc_data_start(b: &[u8]) -> usize {
    let tag = b"END_HEADER\n";
    b.windows(tag.len()).position(|w| w == tag).unwrap() + tag.len()
}

/// Replaces the first occurrence of `from` in a file's bytes by `to`.

#[test]
fn a_non_finite_link_with_a_valid_checksum_is_named_by_its_global_site() {
    // ATB_nersc with a NaN stored at (x,y,z,t) = (3,1,2,1), mu = 2 (inside rank 0's slab
    // of [2,1,1,2]) and an infinity at (7,0,0,3), mu = 0 (rank 3's), the CHECKSUM
    // recomputed (conventions.md: words of the stored reals added modulo 2^32). The
    // first bad link in file order and the count over all ranks, as the whole reader.
    let dir = tempfile::tempdir().unwrap();
    let mut b = std::fs::read(shared("ATB_nersc.l8t4b3360")).unwrap();
    let start = nersc_data_start(&b);
    for (c, mu, elem, v) in [
        ([3, 1, 2, 1], 2, 7, f64::NAN),
        ([7, 0, 0, 3], 0, 16, f64::NEG_INFINITY),
    ] {
        let site = c[0] + 8 * (c[1] + 8 * (c[2] + 8 * c[3]));
        let off = start + (site * 4 + mu) * 144 + elem * 8;
        b[off..off + 8].copy_from_slice(&v.to_be_bytes());
    }
    let sum = b[start..].chunks_exact(8).fold(0u32, |s, w| {
        let bits = u64::from_be_bytes(w.try_into().unwrap());
        s.wrapping_add(bits as u32)
            .wrapping_add((bits >> 32) as u32)
    });
    replace(
        &mut b,
        "CHECKSUM = b379560a",
        &format!("CHECKSUM = {sum:08x}"),
    );
    let p = dir.path().join("nan.nersc");
    std::fs::write(&p, b).unwrap();
    let e = every_rank_fails_as_the_whole_reader(&p, [8, 8, 8, 4], [2, 1, 1, 2], PLAIN);
    for needle in [
        "non-finite link value NaN",
        "(x,y,z,t) = (3,1,2,1)",
        "mu = 2",
        "element [1][0] imaginary part",
        "2 of 8192 links",
    ] {
        assert!(e.contains(needle), "missing {needle:?}: {e}");
    }
}

#[test]
fn a_link_off_su3_is_refused_on_every_rank_and_projected_when_asked() {
    // A random field with the link at (1,2,3,0), mu = 3 scaled by 3 (deviation 26:
    // det 27 - 1), written with a consistent header: refused as the whole reader refuses
    // it; with reunitarisation asked, every rank's part is the whole reader's projected
    // field scattered, and the header was checked against the links as stored.
    let dir = tempfile::tempdir().unwrap();
    let dims = [4, 4, 4, 4];
    let l = lattice(dims);
    let mut g = GaugeField::random(&l, 12);
    let k = l.index([1, 2, 3, 0]) * 4 + 3;
    for row in g.links[k].0.iter_mut() {
        for z in row.iter_mut() {
            *z *= 3.0;
        }
    }
    let p = dir.path().join("scaled.nersc");
    write_nersc(&p, &g, NerscWrite::default()).unwrap();
    let e = every_rank_fails_as_the_whole_reader(&p, dims, [2, 2, 1, 2], PLAIN);
    assert!(
        e.contains("(x,y,z,t) = (1,2,3,0), mu = 3 deviates from SU(3) by 2.600e1"),
        "{e}"
    );
    assert!(e.contains("1 of 1024 links"), "{e}");
    let whole = read_gauge_with(&p, None, None, DEFAULT_BOUNDARY, FORCE).unwrap();
    assert_eq!(whole.1.links_forced_onto_su3, 1);
    assert_slabs_match(
        "forced",
        &whole,
        [2, 2, 1, 2],
        slabs(&p, dims, [2, 2, 1, 2], FORCE),
    );
}

#[test]
fn a_wrong_header_plaquette_or_wrong_dims_are_refused_on_every_rank() {
    // PLAQUETTE edited in the header: the sum of the ranks' plaquettes (0.50386644...)
    // against it, at the whole reader's tolerance (2 units in the printed last digit).
    let dir = tempfile::tempdir().unwrap();
    let p = copy_modified(dir.path(), "ATB_nersc.l8t4b3360", |b| {
        replace(b, "PLAQUETTE = 0.5038664469", "PLAQUETTE = 0.5038664489")
    });
    let whole = read_gauge(&p, None, None, DEFAULT_BOUNDARY).unwrap_err();
    for r in slabs(&p, [8, 8, 8, 4], [2, 2, 2, 2], PLAIN) {
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 4);
        let s = e.to_string();
        assert!(
            s.contains("PLAQUETTE mismatch: header says 0.5038664489, computed 0.50386644"),
            "{s}"
        );
        assert!(s.contains(&p.display().to_string()));
        // The same text as the whole reader's up to the computed value's last digits.
        assert_eq!(
            s[..s.find("computed").unwrap()],
            whole.to_string()[..s.find("computed").unwrap()]
        );
    }
    // A partition of another lattice than the file's.
    for r in slabs(
        &shared("ATB_nersc.l8t4b3360"),
        [8, 8, 8, 8],
        [1, 1, 1, 2],
        PLAIN,
    ) {
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(
            e.to_string()
                .contains("dimensions: file has 8x8x8x4 (X x Y x Z x T, from DIMENSION_1..4), expected 8x8x8x8"),
            "{e}"
        );
    }
}
