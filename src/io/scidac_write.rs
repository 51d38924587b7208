//! SciDAC LIME files of one lattice field, as QIO writes them (`QIO_write`, single file):
//! a first message of the private file XML (`scidac-private-file-xml`: dims) and the user
//! file XML (`scidac-file-xml`), and a second message of the private record XML
//! (`scidac-private-record-xml`: datatype, precision, colours, spins, bytes a site), the
//! user record XML (`scidac-record-xml`), any extra records, the binary data
//! (`ildg-binary-data`: sites in lexicographic order, x fastest, big-endian) and its
//! `scidac-checksum` (suma/sumb over the stored bytes, `payload::SiteSums`). Every record
//! is padded to 8 bytes; XML records end with a NUL, as QIO's do.
//!
//! `stage_propagator` writes a Dirac propagator this way (docs/formats.md, "Propagator
//! and correlator files"): the record `QDP_D3_DiracPropagator` of QDP/C, each site
//! `[c][s][c'][s']` (QLA's order), and a `lyncs-io-info` record that lets lyncs-io load it.

use super::lime::{pad_len, record_header};
use super::payload::{LinkEncoding, SiteSums, SumKind};
use super::staged::Staged;
use crate::error::{Error, Result};
use crate::field::C64;
use crate::geometry::lattice::NDIM;
use std::path::Path;

/// QIO's XML declaration, which opens every XML record.
const XML_HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";

/// One field record and the file around it.
pub struct ScidacField<'a> {
    /// X, Y, Z, T.
    pub dims: [usize; NDIM],
    /// The private record's `datatype` (e.g. `QDP_D3_DiracPropagator`).
    pub datatype: String,
    /// `F` or `D`.
    pub precision: char,
    pub colors: usize,
    pub spins: usize,
    /// Bytes of one datum; a site holds `datacount` of them.
    pub typesize: usize,
    pub datacount: usize,
    /// The private record's `date`.
    pub date: String,
    /// The user file XML and user record XML, without the XML declaration.
    pub file_xml: String,
    pub record_xml: String,
    /// Records (type, data) between the user record XML and the binary data.
    pub extra: Vec<(String, Vec<u8>)>,
    /// `site(index, out)`: the stored bytes of site `index` (lexicographic, x fastest)
    /// into `out` (`typesize * datacount` bytes).
    pub site: &'a (dyn Fn(usize, &mut [u8]) + Sync),
}

impl ScidacField<'_> {
    fn site_bytes(&self) -> usize {
        self.typesize * self.datacount
    }

    fn volume(&self) -> usize {
        self.dims.iter().product()
    }
}

/// Writes `field` to `path`, atomically.
pub fn write_scidac(path: &Path, field: &ScidacField) -> Result<()> {
    super::staged::commit_one(stage_scidac(path, field)?)
}

/// `write_scidac` up to the rename: the file staged for `Staged::commit`.
pub fn stage_scidac(path: &Path, field: &ScidacField) -> Result<Staged> {
    check(field)?;
    let head = head_records(field);
    let data_len = (field.volume() * field.site_bytes()) as u64;
    super::staged::stage(path, |file| {
        use std::os::unix::fs::FileExt;
        file.write_all_at(&head, 0)?;
        let sums = write_sites(file, head.len() as u64, field)?;
        let mut tail = vec![0u8; pad_len(data_len) as usize];
        tail.extend(record(
            "scidac-checksum",
            &xml(&checksum_xml(sums)),
            false,
            true,
        ));
        file.write_all_at(&tail, head.len() as u64 + data_len)
    })
}

/// Positive dims, a site of at least one byte, precision F or D.
fn check(field: &ScidacField) -> Result<()> {
    if field.dims.contains(&0) {
        return Err(Error::invalid(
            "scidac dims",
            format!("{:?}: every extent must be positive", field.dims),
        ));
    }
    if field.site_bytes() == 0 || !matches!(field.precision, 'F' | 'D') {
        return Err(Error::invalid(
            "scidac record",
            format!(
                "typesize {} x datacount {}, precision {}: expected a positive site size and \
                 F or D",
                field.typesize, field.datacount, field.precision
            ),
        ));
    }
    Ok(())
}

/// A whole record: header, data, zero padding to 8 bytes.
fn record(type_name: &str, data: &[u8], begin: bool, end: bool) -> Vec<u8> {
    let mut r = record_header(type_name, data.len() as u64, begin, end).to_vec();
    r.extend_from_slice(data);
    r.resize(r.len() + pad_len(data.len() as u64) as usize, 0);
    r
}

/// An XML record's bytes: the declaration, the body and a NUL.
fn xml(body: &str) -> Vec<u8> {
    let mut b = format!("{XML_HEAD}{body}").into_bytes();
    b.push(0);
    b
}

/// Every record before the binary data, then the binary data's header.
fn head_records(field: &ScidacField) -> Vec<u8> {
    let d = field.dims;
    let private_file = format!(
        "<scidacFile><version>1.1</version><spacetime>{NDIM}</spacetime>\
         <dims>{} {} {} {} </dims><volfmt>0</volfmt></scidacFile>",
        d[0], d[1], d[2], d[3]
    );
    let private_record = format!(
        "<scidacRecord><version>1.1</version><date>{}</date><recordtype>0</recordtype>\
         <datatype>{}</datatype><precision>{}</precision><colors>{}</colors>\
         <spins>{}</spins><typesize>{}</typesize><datacount>{}</datacount></scidacRecord>",
        xml_escape(&field.date),
        xml_escape(&field.datatype),
        field.precision,
        field.colors,
        field.spins,
        field.typesize,
        field.datacount
    );
    let mut h = record("scidac-private-file-xml", &xml(&private_file), true, false);
    h.extend(record(
        "scidac-file-xml",
        &xml(&field.file_xml),
        false,
        true,
    ));
    h.extend(record(
        "scidac-private-record-xml",
        &xml(&private_record),
        true,
        false,
    ));
    h.extend(record(
        "scidac-record-xml",
        &xml(&field.record_xml),
        false,
        false,
    ));
    for (t, data) in &field.extra {
        h.extend(record(t, data, false, false));
    }
    let data_len = (field.volume() * field.site_bytes()) as u64;
    h.extend_from_slice(&record_header("ildg-binary-data", data_len, false, false));
    h
}

/// The checksum record's XML: suma and sumb in lower-case hex, as QIO prints them.
fn checksum_xml(sums: [u32; 2]) -> String {
    format!(
        "<scidacChecksum><version>1.0</version><suma>{:x}</suma><sumb>{:x}</sumb>\
         </scidacChecksum>",
        sums[0], sums[1]
    )
}

/// Encodes and writes the sites at `offset` in blocks of about `io::BLOCK_BYTES`, in
/// parallel, and returns suma and sumb of the bytes written.
fn write_sites(
    file: &std::fs::File,
    offset: u64,
    field: &ScidacField,
) -> std::io::Result<[u32; 2]> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    let site_bytes = field.site_bytes();
    let per_block = (super::BLOCK_BYTES / site_bytes).max(1);
    let volume = field.volume();
    // The encoding is unused by the SciDAC sums (a CRC of each site's bytes).
    let unused = LinkEncoding {
        reals: 18,
        double: true,
        big: true,
    };
    (0..volume.div_ceil(per_block))
        .into_par_iter()
        .map(|b| {
            let first = b * per_block;
            let n = per_block.min(volume - first);
            let mut buf = vec![0u8; n * site_bytes];
            let mut sums = SiteSums::new(SumKind::Scidac, unused);
            for (k, out) in buf.chunks_exact_mut(site_bytes).enumerate() {
                (field.site)(first + k, out);
                sums.add_site(first + k, out);
            }
            file.write_all_at(&buf, offset + (first * site_bytes) as u64)?;
            Ok(sums.values)
        })
        .try_reduce(|| [0, 0], |a, b| Ok(SumKind::Scidac.combine(a, b)))
}

/// `s` with `&`, `<` and `>` escaped for XML text.
pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What a propagator file says besides its values.
pub struct PropagatorMeta<'a> {
    /// X, Y, Z, T.
    pub dims: [usize; NDIM],
    /// The private record's date.
    pub date: &'a str,
    /// Free text for the user file and record XML's `<info>` (escaped here).
    pub info: &'a str,
}

/// Bytes of one propagator site: 144 complex doubles.
const PROPAGATOR_SITE: usize = 144 * 16;

/// Writes a Dirac propagator to `path` as a SciDAC record of datatype
/// `QDP_D3_DiracPropagator` (precision D, 3 colours, 4 spins, 2304 bytes a site, one
/// datum a site). `element(i)` is element i in C order of the array
/// `[t, z, y, x, s, c, s', c']` (the `.npy` propagator's layout), S(x)_{s c, s' c'};
/// each stored site is `[c][s][c'][s']`, (re, im), big-endian. The user file XML is
/// `usqcdPropFile` of type `LHPC_DiracPropagator` (one record holding the whole
/// propagator), the user record XML `usqcdPropInfo`, and `lyncs-io-info` gives lyncs-io
/// the array's shape `(LT, LZ, LY, LX, 3, 4, 3, 4)` and dtype `>c16`.
pub fn stage_propagator(
    path: &Path,
    meta: &PropagatorMeta,
    element: &(dyn Fn(usize) -> C64 + Sync),
) -> Result<Staged> {
    let d = meta.dims;
    let info = xml_escape(meta.info);
    let site = |x: usize, out: &mut [u8]| {
        let mut k = 0;
        for c in 0..3 {
            for s in 0..4 {
                for c2 in 0..3 {
                    for s2 in 0..4 {
                        let z = element(x * 144 + (s * 3 + c) * 12 + s2 * 3 + c2);
                        out[k..k + 8].copy_from_slice(&z.re.to_be_bytes());
                        out[k + 8..k + 16].copy_from_slice(&z.im.to_be_bytes());
                        k += 16;
                    }
                }
            }
        }
    };
    let field = ScidacField {
        dims: d,
        datatype: "QDP_D3_DiracPropagator".into(),
        precision: 'D',
        colors: 3,
        spins: 4,
        typesize: PROPAGATOR_SITE,
        datacount: 1,
        date: meta.date.into(),
        file_xml: format!(
            "<usqcdPropFile><version>1.0</version><type>LHPC_DiracPropagator</type>\
             <info>{info}</info></usqcdPropFile>"
        ),
        record_xml: format!(
            "<usqcdPropInfo><version>1.0</version><info>{info}</info></usqcdPropInfo>"
        ),
        extra: vec![(
            "lyncs-io-info".into(),
            lyncs_info(&[d[3], d[2], d[1], d[0], 3, 4, 3, 4], ">c16"),
        )],
        site: &site,
    };
    stage_scidac(path, &field)
}

/// lyncs-io's metadata record: a Python pickle (protocol 2) of the dict
/// `{"shape": shape, "dtype": dtype}`, which lyncs-io's LIME reader merges into the
/// array's header. Opcodes: PROTO 2, EMPTY_DICT, MARK, each key and value (BINUNICODE
/// strings, a tuple of BININT), SETITEMS, STOP.
pub fn lyncs_info(shape: &[usize], dtype: &str) -> Vec<u8> {
    let unicode = |p: &mut Vec<u8>, s: &str| {
        p.push(b'X');
        p.extend_from_slice(&(s.len() as u32).to_le_bytes());
        p.extend_from_slice(s.as_bytes());
    };
    let mut p = vec![0x80, 2, b'}', b'('];
    unicode(&mut p, "shape");
    p.push(b'(');
    for &n in shape {
        p.push(b'J');
        p.extend_from_slice(&(n as i32).to_le_bytes());
    }
    p.push(b't');
    unicode(&mut p, "dtype");
    unicode(&mut p, dtype);
    p.extend_from_slice(b"u.");
    p
}

/// A UTC date `YYYY-MM-DDTHH:MM:SSZ` from seconds since the Unix epoch (the civil
/// calendar from a day count, proleptic Gregorian).
pub fn utc_date(unix: u64) -> String {
    let (days, secs) = ((unix / 86400) as i64, unix % 86400);
    // Days since 0000-03-01 in 400-year eras of 146097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests;
