//! Tests of the HDF5 writer (`io::hdf5`): the superblock and object headers read back by
//! the format specification's field offsets, their lookup3 checksums, and the data at the
//! address the layout message gives. h5py reads the files in
//! tests/python/test_propagator_files.py.
use super::*;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The messages (type, body) of the version-2 object header at `at`, after checking its
/// signature, version and checksum.
fn messages(b: &[u8], at: usize) -> Vec<(u8, Vec<u8>)> {
    assert_eq!(&b[at..at + 4], b"OHDR");
    assert_eq!(b[at + 4], 2, "version");
    assert_eq!(b[at + 5] & 3, 2, "a 4-byte chunk size");
    let chunk = u32_at(b, at + 6) as usize;
    let end = at + 10 + chunk;
    assert_eq!(u32_at(b, end), lookup3::checksum(&b[at..end]), "checksum");
    let mut out = Vec::new();
    let mut p = at + 10;
    while p < end {
        let size = u16::from_le_bytes([b[p + 1], b[p + 2]]) as usize;
        out.push((b[p], b[p + 4..p + 4 + size].to_vec()));
        p += 4 + size;
    }
    assert_eq!(p, end);
    out
}

#[test]
fn a_file_reads_back_by_the_specifications_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.h5");
    let c = |i: usize| C64::new(i as f64 + 0.5, -(i as f64));
    let f = |i: usize| 2.0 * i as f64;
    let file = H5File {
        attrs: vec![
            Attr::new("program", "qcd-solve"),
            Attr::new("dims", &[4usize, 4, 4, 8][..]),
        ],
        datasets: vec![
            Dataset {
                name: "z".into(),
                shape: vec![3, 5],
                data: Data::C16(&c),
                attrs: vec![Attr::new("kappa", 0.125)],
            },
            Dataset {
                name: "pion".into(),
                shape: vec![7],
                data: Data::F64(&f),
                attrs: Vec::new(),
            },
        ],
    };
    write_h5(&path, &file).unwrap();
    let b = std::fs::read(&path).unwrap();

    // Superblock v2 (48 bytes): signature, version 2, 8-byte offsets and lengths, base
    // 0, no extension, end of file, root object header, checksum.
    assert_eq!(&b[..8], b"\x89HDF\r\n\x1a\n");
    assert_eq!(&b[8..12], &[2, 8, 8, 0]);
    assert_eq!(u64_at(&b, 20), u64::MAX);
    assert_eq!(u64_at(&b, 28), b.len() as u64, "end-of-file address");
    assert_eq!(u32_at(&b, 44), lookup3::checksum(&b[..44]));
    let root = messages(&b, u64_at(&b, 36) as usize);

    // The root: link info, group info, a hard link per dataset, the attributes.
    let kinds: Vec<u8> = root.iter().map(|m| m.0).collect();
    assert_eq!(kinds, [0x02, 0x0a, 0x06, 0x06, 0x0c, 0x0c]);
    let link = &root[2].1;
    assert_eq!(&link[..4], &[1, 0, 1, b'z']);
    let z_header = u64_at(link, 4) as usize;
    // The attribute "dims": version 3, name "dims\0", an i64 datatype (class 0), a 1-D
    // dataspace of 4, then the values.
    let dims = &root[5].1;
    assert_eq!(dims[0], 3);
    assert_eq!(&dims[9..14], b"dims\0");
    assert_eq!(dims[14] & 0x0f, 0, "fixed-point class");
    let values: Vec<u64> = (0..4)
        .map(|k| u64_at(dims, dims.len() - 32 + 8 * k))
        .collect();
    assert_eq!(values, [4, 4, 4, 8]);

    // The dataset: dataspace [3, 5], the compound {r, i} of 16 bytes, fill value,
    // contiguous layout at an address aligned to 16 holding 15 * 16 bytes.
    let z = messages(&b, z_header);
    let kinds: Vec<u8> = z.iter().map(|m| m.0).collect();
    assert_eq!(kinds, [0x01, 0x03, 0x05, 0x08, 0x0c]);
    assert_eq!(&z[0].1[..4], &[2, 2, 0, 1]);
    assert_eq!((u64_at(&z[0].1, 4), u64_at(&z[0].1, 12)), (3, 5));
    assert_eq!(z[1].1[0], 0x16, "compound, version 1");
    assert_eq!(u32_at(&z[1].1, 4), 16);
    assert_eq!(&z[1].1[8..10], b"r\0");
    let layout = &z[3].1;
    assert_eq!(&layout[..2], &[3, 1]);
    let (address, len) = (u64_at(layout, 2) as usize, u64_at(layout, 10) as usize);
    assert_eq!(address % 16, 0);
    assert_eq!(len, 15 * 16);
    for i in [0usize, 7, 14] {
        let at = address + 16 * i;
        let re = f64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let im = f64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
        assert_eq!((re, im), (c(i).re, c(i).im));
    }
}

#[test]
fn bad_names_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let f = |_: usize| 0.0;
    let ds = |name: &str| Dataset {
        name: name.into(),
        shape: vec![2],
        data: Data::F64(&f),
        attrs: Vec::new(),
    };
    for (names, want) in [
        (vec!["a/b"], "a/b"),
        (vec![""], "\"\""),
        (vec!["a", "a"], "used twice"),
    ] {
        let file = H5File {
            attrs: Vec::new(),
            datasets: names.iter().map(|n| ds(n)).collect(),
        };
        let e = stage_h5(&dir.path().join("x.h5"), &file).unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    }
    let file = H5File {
        attrs: vec![Attr::new("k", 1.0), Attr::new("k", 2.0)],
        datasets: Vec::new(),
    };
    let e = stage_h5(&dir.path().join("x.h5"), &file).unwrap_err();
    assert!(e.to_string().contains("\"k\" of the file"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
