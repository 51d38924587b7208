//! Tests of the SciDAC writer (`io::scidac_write`): the LIME framing against the LIME
//! specification, the checksum against the CRC-32 check value, the propagator's site
//! layout against its definition, and the date against known instants.
use super::*;
use crate::io::lime::{flag_problem, records, LimeRecord};
use std::os::unix::fs::FileExt;

/// The bytes of a record's data.
fn data(path: &Path, r: &LimeRecord) -> Vec<u8> {
    let f = std::fs::File::open(path).unwrap();
    let mut b = vec![0u8; r.data_len as usize];
    f.read_exact_at(&mut b, r.data_offset).unwrap();
    b
}

/// The text between `<tag>` and `</tag>`.
fn tag<'a>(xml: &'a str, tag: &str) -> &'a str {
    let open = format!("<{tag}>");
    let start = xml.find(&open).unwrap() + open.len();
    let end = xml[start..].find(&format!("</{tag}>")).unwrap();
    &xml[start..start + end]
}

#[test]
fn a_record_header_is_the_lime_specifications() {
    // LIME: magic 0x456789ab, version 1 (16 bits), flags with message begin at bit 15
    // and message end at bit 14, a 64-bit data length, a 128-byte NUL-padded type, all
    // big-endian: 144 bytes.
    let h = record_header("scidac-checksum", 0x0102_0304_0506, true, false);
    assert_eq!(h.len(), 144);
    assert_eq!(&h[..4], &[0x45, 0x67, 0x89, 0xab]);
    assert_eq!(&h[4..6], &[0, 1]);
    assert_eq!(&h[6..8], &[0x80, 0]);
    assert_eq!(&h[8..16], &[0, 0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(&h[16..31], b"scidac-checksum");
    assert!(h[31..].iter().all(|&b| b == 0));
    assert_eq!(&record_header("x", 0, false, true)[6..8], &[0x40, 0]);
    assert_eq!(pad_len(2304), 0);
    assert_eq!(pad_len(9), 7);
}

#[test]
fn the_checksum_of_a_known_payload_is_scidacs() {
    // Two sites of 9 bytes, both "123456789", whose CRC-32 is the check value 0xcbf43926
    // of CRC-32/ISO-HDLC. SciDAC: suma = XOR over sites of crc rotated left by (site mod
    // 29), sumb by (site mod 31): here crc ^ rotl(crc, 1) for both.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.lime");
    let site = |_: usize, out: &mut [u8]| out.copy_from_slice(b"123456789");
    let field = ScidacField {
        dims: [2, 1, 1, 1],
        datatype: "test".into(),
        precision: 'D',
        colors: 0,
        spins: 0,
        typesize: 9,
        datacount: 1,
        date: "now".into(),
        file_xml: "<f/>".into(),
        record_xml: "<r/>".into(),
        extra: vec![("extra-record".into(), b"abc".to_vec())],
        site: &site,
    };
    write_scidac(&path, &field).unwrap();
    let crc: u32 = 0xcbf4_3926;
    let want = crc ^ crc.rotate_left(1);

    let recs = records(&path).unwrap();
    let types: Vec<&str> = recs.iter().map(|r| r.type_name.as_str()).collect();
    assert_eq!(
        types,
        [
            "scidac-private-file-xml",
            "scidac-file-xml",
            "scidac-private-record-xml",
            "scidac-record-xml",
            "extra-record",
            "ildg-binary-data",
            "scidac-checksum"
        ]
    );
    // Two messages (file, record), as QIO frames them.
    let flags: Vec<(bool, bool)> = recs
        .iter()
        .map(|r| (r.message_begin, r.message_end))
        .collect();
    assert_eq!(flags[0], (true, false));
    assert_eq!(flags[1], (false, true));
    assert_eq!(flags[2], (true, false));
    assert_eq!(flags[6], (false, true));
    assert_eq!(flag_problem(&recs), None);
    assert_eq!(data(&path, &recs[5]), b"123456789123456789");
    assert_eq!(data(&path, &recs[4]), b"abc");

    let ck = data(&path, &recs[6]);
    assert_eq!(ck.last(), Some(&0), "XML records end with a NUL, as QIO's");
    let ck = std::str::from_utf8(&ck[..ck.len() - 1]).unwrap();
    assert!(ck.starts_with(XML_HEAD));
    assert_eq!(tag(ck, "suma"), format!("{want:x}"));
    assert_eq!(tag(ck, "sumb"), format!("{want:x}"));
    let private = data(&path, &recs[0]);
    let private = std::str::from_utf8(&private).unwrap();
    assert_eq!(tag(private, "dims"), "2 1 1 1 ");
    let rec = data(&path, &recs[2]);
    let rec = std::str::from_utf8(&rec).unwrap();
    assert_eq!(tag(rec, "typesize"), "9");
    assert_eq!(tag(rec, "datacount"), "1");
    assert_eq!(tag(rec, "precision"), "D");
}

#[test]
fn a_propagator_site_is_stored_colour_spin_colour_spin_big_endian() {
    // Element i of the [t, z, y, x, s, c, s', c'] array is (i, -i); the definition of
    // the record puts (x, c, s, c', s') at byte x * 2304 + (((c * 4 + s) * 3 + c') * 4
    // + s') * 16, re then im, big-endian.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.lime");
    let dims = [2, 1, 1, 3];
    let meta = PropagatorMeta {
        dims,
        date: "2000-02-29T00:00:00Z",
        info: "kappa = 0.1 & <x>",
    };
    let element = |i: usize| C64::new(i as f64, -(i as f64));
    super::super::staged::commit_one(stage_propagator(&path, &meta, &element).unwrap()).unwrap();
    let recs = records(&path).unwrap();
    let bin = recs
        .iter()
        .find(|r| r.type_name == "ildg-binary-data")
        .unwrap();
    let volume = 6;
    assert_eq!(bin.data_len, volume * 2304);
    let b = data(&path, bin);
    for x in [0usize, 5] {
        for (c, s, c2, s2) in [(0, 0, 0, 0), (2, 1, 0, 3), (1, 3, 2, 2)] {
            let at = x * 2304 + (((c * 4 + s) * 3 + c2) * 4 + s2) * 16;
            let re = f64::from_be_bytes(b[at..at + 8].try_into().unwrap());
            let im = f64::from_be_bytes(b[at + 8..at + 16].try_into().unwrap());
            let i = (x * 144 + (s * 3 + c) * 12 + s2 * 3 + c2) as f64;
            assert_eq!((re, im), (i, -i), "site {x}, c {c} s {s} c' {c2} s' {s2}");
        }
    }
    let rec = data(&path, &recs[2]);
    let rec = std::str::from_utf8(&rec).unwrap();
    assert_eq!(tag(rec, "datatype"), "QDP_D3_DiracPropagator");
    assert_eq!(tag(rec, "typesize"), "2304");
    assert_eq!(tag(rec, "spins"), "4");
    assert_eq!(tag(rec, "colors"), "3");
    let file = data(&path, &recs[1]);
    let file = std::str::from_utf8(&file).unwrap();
    assert_eq!(tag(file, "info"), "kappa = 0.1 &amp; &lt;x&gt;");
    assert_eq!(tag(file, "type"), "LHPC_DiracPropagator");
}

#[test]
fn dates_of_known_instants() {
    // 0 is the epoch; 951782400 = (10957 + 59) days is 2000-02-29 (a leap day of a
    // 400-year leap year); 1.7e9 s is 2023-11-14 22:13:20 UTC.
    assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc_date(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(utc_date(1_700_000_000), "2023-11-14T22:13:20Z");
}

#[test]
fn zero_extents_and_empty_sites_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let site = |_: usize, _: &mut [u8]| {};
    let mut field = ScidacField {
        dims: [2, 0, 1, 1],
        datatype: "t".into(),
        precision: 'D',
        colors: 3,
        spins: 4,
        typesize: 8,
        datacount: 1,
        date: String::new(),
        file_xml: String::new(),
        record_xml: String::new(),
        extra: Vec::new(),
        site: &site,
    };
    let e = stage_scidac(&dir.path().join("a"), &field).unwrap_err();
    assert!(e.to_string().contains("scidac dims"), "{e}");
    field.dims = [1; 4];
    field.typesize = 0;
    let e = stage_scidac(&dir.path().join("b"), &field).unwrap_err();
    assert!(e.to_string().contains("typesize 0"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
