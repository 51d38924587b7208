//! LIME containers (ILDG and SciDAC gauge files): the record parser and the record header
//! a writer emits (`record_header`, `pad_len`), and `describe`: where
//! the gauge record lies (a site-major array of 32- or 64-bit big-endian links in NERSC 3x3
//! order), its dims and precision, and the scidac-checksum (suma/sumb) and xlf-info
//! plaquette to verify.

use super::payload::{LinkEncoding, LinkOrder, Payload, SumKind};
use super::{byte_len, c_string, check_dims, open, read_exact_at, GaugeHeader, HeaderValue};
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use std::path::Path;

/// Bytes of a LIME record header.
pub(crate) const HEADER_LEN: u64 = 144;
const MAGIC: u32 = 0x4567_89ab;
/// The LIME format version written in every record header.
const VERSION: u16 = 1;
/// The longest record type: the header's type field, NUL-padded.
const TYPE_LEN: usize = 128;
/// XML and other metadata records are read whole only up to this size.
const MAX_TEXT_RECORD: u64 = 1 << 20;

/// One LIME record: its header fields and where its data lies in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimeRecord {
    pub version: u16,
    /// Message-begin (0x8000) and message-end (0x4000) bits.
    pub message_begin: bool,
    pub message_end: bool,
    pub type_name: String,
    /// Offset of the record's data (right after its 144-byte header).
    pub data_offset: u64,
    pub data_len: u64,
}

/// The 144-byte header of a record of `data_len` bytes: magic, version 1, the
/// message-begin (0x8000) and message-end (0x4000) flags, the length, and the type
/// NUL-padded to 128 bytes, all big-endian. `type_name` is at most 127 bytes (checked by
/// the caller: the writers' types are constants).
pub(crate) fn record_header(
    type_name: &str,
    data_len: u64,
    message_begin: bool,
    message_end: bool,
) -> [u8; HEADER_LEN as usize] {
    debug_assert!(type_name.len() < TYPE_LEN);
    let mut h = [0u8; HEADER_LEN as usize];
    h[..4].copy_from_slice(&MAGIC.to_be_bytes());
    h[4..6].copy_from_slice(&VERSION.to_be_bytes());
    let flags = (u16::from(message_begin) << 15) | (u16::from(message_end) << 14);
    h[6..8].copy_from_slice(&flags.to_be_bytes());
    h[8..16].copy_from_slice(&data_len.to_be_bytes());
    h[16..16 + type_name.len()].copy_from_slice(type_name.as_bytes());
    h
}

/// The zero bytes after `data_len` data bytes that bring a record to a multiple of 8.
pub(crate) fn pad_len(data_len: u64) -> u64 {
    data_len.div_ceil(8) * 8 - data_len
}

/// Lists the records of a LIME file, checking every header's magic and that every record's
/// data lies inside the file.
pub fn records(path: &Path) -> Result<Vec<LimeRecord>> {
    let (mut file, file_len) = open(path)?;
    let mut out = Vec::new();
    let mut offset = 0u64;
    while offset < file_len {
        if file_len - offset < HEADER_LEN {
            return Err(Error::format(
                path,
                format!(
                    "truncated: LIME record header at offset {offset} needs {HEADER_LEN} bytes, \
                     only {} remain",
                    file_len - offset
                ),
            ));
        }
        let h = read_exact_at(
            path,
            &mut file,
            offset,
            HEADER_LEN as usize,
            "LIME record header",
        )?;
        let magic = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        if magic != MAGIC {
            return Err(Error::format(
                path,
                format!(
                    "bad LIME magic at offset {offset}: {magic:08x}, expected {MAGIC:08x} \
                     (record {} of the file)",
                    out.len() + 1
                ),
            ));
        }
        let version = u16::from_be_bytes([h[4], h[5]]);
        let flags = u16::from_be_bytes([h[6], h[7]]);
        let data_len = u64::from_be_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]);
        let type_name = c_string(&h[16..144]);
        let data_offset = offset + HEADER_LEN;
        if data_len > file_len - data_offset {
            return Err(Error::format(
                path,
                format!(
                    "truncated: LIME record \"{type_name}\" at offset {offset} declares {data_len} \
                     data bytes, only {} remain",
                    file_len - data_offset
                ),
            ));
        }
        out.push(LimeRecord {
            version,
            message_begin: flags & 0x8000 != 0,
            message_end: flags & 0x4000 != 0,
            type_name,
            data_offset,
            data_len,
        });
        // Data is padded with zeros to a multiple of 8; a missing pad after the last record
        // is tolerated (the data itself is complete).
        let padded = data_len.div_ceil(8) * 8;
        offset = data_offset.saturating_add(padded).min(file_len);
    }
    if out.is_empty() {
        return Err(Error::format(path, "empty file: no LIME records"));
    }
    Ok(out)
}

/// Where the message flags of a LIME file's records disagree with the LIME framing, or
/// `None` when they agree: the first record begins a message (MB), the last ends one
/// (ME), and a record after a message's end begins the next. (A record that begins a
/// message before the previous one ended is accepted: tmLQCD writes its checksum so.) A
/// file cut after a record that does not end its message, the binary record of most
/// writers, fails here.
pub fn flag_problem(recs: &[LimeRecord]) -> Option<String> {
    let first = recs.first()?;
    if !first.message_begin {
        return Some(format!(
            "LIME record 1 (\"{}\") does not begin a message (MB flag clear)",
            first.type_name
        ));
    }
    for (i, w) in recs.windows(2).enumerate() {
        if w[0].message_end && !w[1].message_begin {
            return Some(format!(
                "LIME record {} (\"{}\") follows the end of a message without beginning one \
                 (MB flag clear)",
                i + 2,
                w[1].type_name
            ));
        }
    }
    let last = recs.last()?;
    if !last.message_end {
        return Some(format!(
            "the last LIME record (\"{}\", record {}) does not end its message (ME flag \
             clear): records are missing after it",
            last.type_name,
            recs.len()
        ));
    }
    None
}

/// Whether the records' only flag problem is a clear ME flag on the last record, and that
/// record is the scidac-checksum that follows the binary data (record `bin_idx`).
fn ends_with_open_checksum(recs: &[LimeRecord], bin_idx: usize) -> bool {
    let Some((last, rest)) = recs.split_last() else {
        return false;
    };
    if last.message_end || last.type_name != "scidac-checksum" || recs.len() <= bin_idx + 1 {
        return false;
    }
    let mut closed = rest.to_vec();
    closed.push(LimeRecord {
        message_end: true,
        ..last.clone()
    });
    flag_problem(&closed).is_none()
}

/// The text between `<tag>` and `</tag>` (attributes on the opening tag allowed), trimmed.
fn xml_tag<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}");
    let mut from = 0;
    while let Some(i) = xml[from..].find(&open) {
        let after = from + i + open.len();
        let rest = &xml[after..];
        // `<lx` must not match `<lxyz>`: the name has to end here.
        match rest.chars().next() {
            Some('>') | Some(' ') | Some('\t') | Some('\n') | Some('\r') => {
                let gt = rest.find('>')?;
                let body = &rest[gt + 1..];
                let close = format!("</{tag}>");
                let end = body.find(&close)?;
                return Some(body[..end].trim());
            }
            _ => from = after,
        }
    }
    None
}

fn text_record(path: &Path, file: &mut std::fs::File, r: &LimeRecord) -> Result<String> {
    if r.data_len > MAX_TEXT_RECORD {
        return Err(Error::format(
            path,
            format!(
                "LIME record \"{}\" is {} bytes, too large for a metadata record",
                r.type_name, r.data_len
            ),
        ));
    }
    let b = read_exact_at(path, file, r.data_offset, r.data_len as usize, &r.type_name)?;
    Ok(c_string(&b))
}

/// The gauge record of a LIME file and what the file states about it.
pub(crate) fn describe(path: &Path, expected_dims: Option<[usize; NDIM]>) -> Result<GaugeHeader> {
    let recs = records(path)?;
    let (mut file, _) = open(path)?;
    let find = |name: &str| recs.iter().position(|r| r.type_name == name);

    // The gauge payload: ILDG's record if present, else SciDAC's.
    let (bin_idx, ildg) = match (find("ildg-binary-data"), find("scidac-binary-data")) {
        (Some(i), _) => (i, true),
        (None, Some(i)) => (i, false),
        (None, None) => {
            let names: Vec<&str> = recs.iter().map(|r| r.type_name.as_str()).collect();
            return Err(Error::format(
                path,
                format!(
                    "no ildg-binary-data or scidac-binary-data record (records: {})",
                    names.join(", ")
                ),
            ));
        }
    };
    let bin = recs[bin_idx].clone();

    // Precision and dims: ildg-format first, SciDAC private XML as the fallback; when both
    // are present they must agree.
    let mut from_ildg: Option<(u32, [usize; NDIM])> = None;
    if let Some(i) = find("ildg-format") {
        let xml = text_record(path, &mut file, &recs[i])?;
        if let Some(field) = xml_tag(&xml, "field") {
            if field != "su3gauge" {
                return Err(Error::format(
                    path,
                    format!("ildg-format field = {field}, expected su3gauge"),
                ));
            }
        }
        let prec = parse_tag(path, &xml, "ildg-format", "precision")?;
        let mut dims = [0usize; NDIM];
        for (mu, tag) in ["lx", "ly", "lz", "lt"].iter().enumerate() {
            dims[mu] = parse_tag(path, &xml, "ildg-format", tag)?;
        }
        from_ildg = Some((prec as u32, dims));
    }
    let mut from_scidac: (Option<u32>, Option<[usize; NDIM]>) = (None, None);
    let mut scidac_datatype = None;
    if let Some(i) = find("scidac-private-file-xml") {
        let xml = text_record(path, &mut file, &recs[i])?;
        if let Some(d) = xml_tag(&xml, "dims") {
            let parts: Vec<&str> = d.split_whitespace().collect();
            let parsed: Vec<usize> = parts.iter().filter_map(|p| p.parse().ok()).collect();
            if parts.len() != NDIM || parsed.len() != NDIM {
                return Err(Error::format(
                    path,
                    format!(
                        "scidac-private-file-xml <dims> = \"{d}\" is not four positive integers"
                    ),
                ));
            }
            from_scidac.1 = Some([parsed[0], parsed[1], parsed[2], parsed[3]]);
        }
    }
    if let Some(i) = find("scidac-private-record-xml") {
        let xml = text_record(path, &mut file, &recs[i])?;
        if let Some(p) = xml_tag(&xml, "precision") {
            from_scidac.0 = Some(match p {
                "F" => 32,
                "D" => 64,
                other => {
                    return Err(Error::format(
                        path,
                        format!("scidac-private-record-xml <precision> = {other}, expected F or D"),
                    ))
                }
            });
        }
        scidac_datatype = xml_tag(&xml, "datatype").map(str::to_string);
        if let Some(c) = xml_tag(&xml, "colors") {
            if c != "3" {
                return Err(Error::format(
                    path,
                    format!("scidac-private-record-xml <colors> = {c}, expected 3"),
                ));
            }
        }
        if let Some(c) = xml_tag(&xml, "datacount") {
            if c != "4" {
                return Err(Error::format(
                    path,
                    format!("scidac-private-record-xml <datacount> = {c}, expected 4 (one matrix per direction)"),
                ));
            }
        }
    }
    let (precision, dims, source) = match (from_ildg, from_scidac) {
        (Some((p, d)), (sp, sd)) => {
            if let Some(sp) = sp {
                if sp != p {
                    return Err(Error::format(
                        path,
                        format!(
                            "precision: ildg-format says {p}, scidac-private-record-xml says {sp}"
                        ),
                    ));
                }
            }
            if let Some(sd) = sd {
                if sd != d {
                    return Err(Error::format(
                        path,
                        format!("dimensions: ildg-format says {d:?}, scidac-private-file-xml says {sd:?}"),
                    ));
                }
            }
            (p, d, "ildg-format")
        }
        (None, (Some(p), Some(d))) => (p, d, "scidac-private-file-xml"),
        (None, _) => return Err(Error::format(
            path,
            "neither an ildg-format record nor SciDAC private XML with <dims> and <precision>: \
                 precision and dimensions unknown",
        )),
    };
    if precision != 32 && precision != 64 {
        return Err(Error::format(
            path,
            format!("precision = {precision} in {source}, expected 32 or 64"),
        ));
    }
    let volume = check_dims(path, source, dims, expected_dims)?;
    let encoding = LinkEncoding {
        reals: 18,
        double: precision == 64,
        big: true,
    };
    let payload = byte_len(path, volume, encoding.site_bytes())?;
    if bin.data_len != payload {
        return Err(Error::format(
            path,
            format!(
                "{} record holds {} bytes, but {}x{}x{}x{} links in {precision}-bit need {payload}",
                bin.type_name, bin.data_len, dims[0], dims[1], dims[2], dims[3]
            ),
        ));
    }

    // The checksum record belonging to the payload is the first one after it.
    let mut stored_sums = Vec::new();
    let mut warnings = Vec::new();
    let mut unchecked = Vec::new();
    let mut container_checks = Vec::new();
    match flag_problem(&recs) {
        // tmLQCD (5.1) leaves the ME flag of its closing checksum record clear. When that
        // record is the checksum of the binary data and the file ends with it, nothing the
        // reader needs is missing: the checksums below verify the links.
        Some(p) if ends_with_open_checksum(&recs, bin_idx) => warnings.push(format!(
            "{p}; accepted, since the file ends with the scidac-checksum record of its \
             binary data, which is verified"
        )),
        Some(p) => unchecked.push(p),
        None => container_checks.push((
            "LIME record flags".to_string(),
            format!("ok: {} records in consistent messages", recs.len()),
        )),
    }
    let ck_idx = recs
        .iter()
        .enumerate()
        .skip(bin_idx + 1)
        .find(|(_, r)| r.type_name == "scidac-checksum")
        .map(|(i, _)| i);
    match ck_idx {
        Some(i) => {
            let xml = text_record(path, &mut file, &recs[i])?;
            for tag in ["suma", "sumb"] {
                let v = xml_tag(&xml, tag).ok_or_else(|| {
                    Error::format(path, format!("scidac-checksum record has no <{tag}>"))
                })?;
                let stored = super::parse_hex_u32(v).ok_or_else(|| {
                    Error::format(
                        path,
                        format!("scidac-checksum <{tag}> = {v} is not a 32-bit hex number"),
                    )
                })?;
                stored_sums.push((tag.to_string(), stored));
            }
        }
        None => unchecked.push(format!(
            "no scidac-checksum record after the {} record",
            bin.type_name
        )),
    }

    // tmLQCD's xlf-info states the plaquette in the same normalisation.
    let mut header_plaquette = None;
    let mut metadata = Vec::new();
    if let Some(i) = find("xlf-info") {
        let text = text_record(path, &mut file, &recs[i])?;
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == "plaquette" {
                    header_plaquette = Some(HeaderValue::parse(path, "xlf-info plaquette", v)?);
                }
            }
        }
    }
    if let Some(i) = find("ildg-data-lfn") {
        metadata.push((
            "ildg-data-lfn".to_string(),
            text_record(path, &mut file, &recs[i])?.trim().to_string(),
        ));
    }
    let list: Vec<String> = recs
        .iter()
        .map(|r| format!("{} ({} bytes)", r.type_name, r.data_len))
        .collect();
    metadata.push(("LIME records".to_string(), list.join(", ")));

    let format = if ildg && from_ildg.is_some() {
        "ILDG"
    } else {
        "SciDAC"
    };
    let datatype = match scidac_datatype {
        Some(dt) => format!("{}, {dt}", bin.type_name),
        None => format!("{}, su3gauge", bin.type_name),
    };
    Ok(GaugeHeader {
        format: format.into(),
        datatype,
        dims,
        precision_bits: precision,
        big_endian: true,
        stored_sums,
        header_plaquette,
        header_link_trace: None,
        metadata,
        payload: Payload {
            offset: bin.data_offset,
            encoding,
            sums: SumKind::Scidac,
            what: bin.type_name.clone(),
            order: LinkOrder::SiteMajor,
        },
        warnings,
        unchecked,
        container_checks,
    })
}

fn parse_tag(path: &Path, xml: &str, record: &str, tag: &str) -> Result<usize> {
    let v =
        xml_tag(xml, tag).ok_or_else(|| Error::format(path, format!("{record} has no <{tag}>")))?;
    v.parse().map_err(|_| {
        Error::format(
            path,
            format!("{record} <{tag}> = {v} is not a positive integer"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::xml_tag;

    #[test]
    fn xml_tag_trims_and_matches_whole_names() {
        let x = "<a><lx> 4 </lx><lxy>9</lxy><precision>64</precision></a>";
        assert_eq!(xml_tag(x, "lx"), Some("4"));
        assert_eq!(xml_tag(x, "lxy"), Some("9"));
        assert_eq!(xml_tag(x, "precision"), Some("64"));
        assert_eq!(xml_tag(x, "lt"), None);
    }
}
