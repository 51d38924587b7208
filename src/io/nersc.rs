//! NERSC gauge files: the header of 4D_SU3_GAUGE_3x3 and 4D_SU3_GAUGE (two-row) files in
//! 32/64-bit and either byte order (`describe`: the payload's encoding and place, the
//! CHECKSUM, PLAQUETTE and LINK_TRACE to verify); and `write_nersc`, which writes a
//! complete header and the links atomically.

use super::payload::{LinkEncoding, LinkOrder, Payload, SumKind};
use super::{byte_len, check_dims, check_payload, open, read_exact_at, GaugeHeader, HeaderValue};
use crate::error::{Error, Result};
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::NDIM;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// How far into the file END_HEADER may be; real headers are well under 1 KiB.
const MAX_HEADER: usize = 64 * 1024;

/// The header of a NERSC file: its dims (checked against `expected_dims`), the payload's
/// encoding and offset (the file must hold exactly the payload after END_HEADER), and
/// the CHECKSUM, PLAQUETTE and LINK_TRACE it states.
pub(crate) fn describe(path: &Path, expected_dims: Option<[usize; NDIM]>) -> Result<GaugeHeader> {
    let (mut file, file_len) = open(path)?;
    let head_len = (file_len as usize).min(MAX_HEADER);
    let head = read_exact_at(path, &mut file, 0, head_len, "header")?;
    let (header, data_start) = parse_header(path, &head)?;

    let get = |key: &str| -> Result<&str> {
        header.get(key).map(|s| s.as_str()).ok_or_else(|| {
            Error::format(path, format!("header has no {key} (a required NERSC key)"))
        })
    };

    let datatype = get("DATATYPE")?.to_string();
    let reals = match datatype.as_str() {
        "4D_SU3_GAUGE_3x3" => 18,
        "4D_SU3_GAUGE" => 12,
        other => {
            return Err(Error::format(
                path,
                format!(
                "DATATYPE = {other} is not supported (expected 4D_SU3_GAUGE_3x3 or 4D_SU3_GAUGE)"
            ),
            ))
        }
    };
    let fp = get("FLOATING_POINT")?.to_ascii_uppercase();
    let (double, big) = match fp.as_str() {
        "IEEE64BIG" => (true, true),
        "IEEE32BIG" => (false, true),
        "IEEE64LITTLE" | "IEEE64" => (true, false),
        "IEEE32LITTLE" | "IEEE32" => (false, false),
        other => {
            return Err(Error::format(
                path,
                format!(
                    "FLOATING_POINT = {other} is not supported (expected IEEE64BIG, IEEE32BIG, \
                     IEEE64LITTLE, IEEE32LITTLE, IEEE64 or IEEE32)"
                ),
            ))
        }
    };
    let layout = LinkEncoding { reals, double, big };

    let mut dims = [0usize; NDIM];
    for (mu, d) in dims.iter_mut().enumerate() {
        let key = format!("DIMENSION_{}", mu + 1);
        let v = get(&key)?;
        *d = v
            .parse()
            .map_err(|_| Error::format(path, format!("{key} = {v} is not a positive integer")))?;
    }
    let volume = check_dims(path, "DIMENSION_1..4", dims, expected_dims)?;

    let stored_sum = {
        let v = get("CHECKSUM")?;
        super::parse_hex_u32(v).ok_or_else(|| {
            Error::format(path, format!("CHECKSUM = {v} is not a 32-bit hex number"))
        })?
    };
    let parse_f64 = |key: &str| -> Result<Option<HeaderValue>> {
        header
            .get(key)
            .map(|v| HeaderValue::parse(path, key, v))
            .transpose()
    };
    let header_plaquette = parse_f64("PLAQUETTE")?;
    let header_link_trace = parse_f64("LINK_TRACE")?;
    let mut warnings = Vec::new();
    if header_plaquette.is_none() || header_link_trace.is_none() {
        warnings.push(format!(
            "{}: NERSC header lacks PLAQUETTE or LINK_TRACE; only what is present is verified",
            path.display()
        ));
    }

    let site_bytes = layout.site_bytes();
    let payload = byte_len(path, volume, site_bytes)?;
    let available = file_len - data_start as u64;
    let need = format!(
        "{datatype} {fp} on {}x{}x{}x{} needs {payload} bytes after END_HEADER",
        dims[0], dims[1], dims[2], dims[3]
    );
    check_payload(path, available, payload, &need)?;

    let mut metadata: Vec<(String, String)> = header
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "DATATYPE"
                    | "FLOATING_POINT"
                    | "CHECKSUM"
                    | "PLAQUETTE"
                    | "LINK_TRACE"
                    | "DIMENSION_1"
                    | "DIMENSION_2"
                    | "DIMENSION_3"
                    | "DIMENSION_4"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.sort();

    Ok(GaugeHeader {
        format: "NERSC".into(),
        datatype: format!("{datatype}, {fp}"),
        dims,
        precision_bits: if double { 64 } else { 32 },
        big_endian: big,
        stored_sums: vec![("CHECKSUM".into(), stored_sum)],
        header_plaquette,
        header_link_trace,
        metadata,
        payload: Payload {
            offset: data_start as u64,
            encoding: layout,
            sums: SumKind::Nersc,
            what: "payload".into(),
            order: LinkOrder::SiteMajor,
        },
        warnings,
        unchecked: Vec::new(),
        container_checks: Vec::new(),
    })
}

/// Splits the ASCII header into KEY -> VALUE and returns where the binary data starts
/// (right after the newline that ends the END_HEADER line).
fn parse_header(path: &Path, head: &[u8]) -> Result<(HashMap<String, String>, usize)> {
    let start = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(head.len());
    if !head[start..].starts_with(b"BEGIN_HEADER") {
        return Err(Error::format(
            path,
            "not a NERSC file: it does not begin with BEGIN_HEADER",
        ));
    }
    let mut header = HashMap::new();
    let mut pos = start;
    let mut line_no = 0;
    loop {
        let Some(nl) = head[pos..].iter().position(|&b| b == b'\n') else {
            return Err(Error::format(
                path,
                format!(
                    "no END_HEADER line within the first {} bytes (truncated or not a NERSC header)",
                    head.len()
                ),
            ));
        };
        let raw_line = &head[pos..pos + nl];
        pos += nl + 1;
        line_no += 1;
        let line = std::str::from_utf8(raw_line)
            .map_err(|_| Error::format(path, format!("header line {line_no} is not ASCII text")))?
            .trim();
        if line == "END_HEADER" {
            return Ok((header, pos));
        }
        if line.is_empty() || line == "BEGIN_HEADER" || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(Error::format(
                path,
                format!("header line {line_no} \"{line}\" is not KEY = VALUE"),
            ));
        };
        let key = k.trim().to_string();
        if header.insert(key.clone(), v.trim().to_string()).is_some() {
            return Err(Error::format(
                path,
                format!("header key {key} appears twice"),
            ));
        }
    }
}

/// Output options of `write_nersc`. The default is the program's gauge output format,
/// 4D_SU3_GAUGE_3x3 IEEE64BIG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NerscWrite {
    /// 4D_SU3_GAUGE (rows 0 and 1 only) instead of 4D_SU3_GAUGE_3x3.
    pub two_row: bool,
    /// IEEE64 instead of IEEE32.
    pub double: bool,
    pub big_endian: bool,
}

impl Default for NerscWrite {
    fn default() -> Self {
        NerscWrite {
            two_row: false,
            double: true,
            big_endian: true,
        }
    }
}

/// Writes `field` as a NERSC file with a full header (plaquette and link trace computed
/// from `field`, CHECKSUM of the stored reals), atomically.
pub fn write_nersc(path: &Path, field: &GaugeField, opts: NerscWrite) -> Result<()> {
    super::staged::commit_one(stage_nersc(path, field, opts)?)
}

/// `write_nersc` up to the rename: the file staged for `Staged::commit`.
pub fn stage_nersc(
    path: &Path,
    field: &GaugeField,
    opts: NerscWrite,
) -> Result<super::staged::Staged> {
    let lattice = &field.lattice;
    if field.links.len() != lattice.volume() * NDIM {
        return Err(Error::invalid(
            "gauge field",
            format!(
                "has {} links, expected {} for {}",
                field.links.len(),
                lattice.volume() * NDIM,
                lattice.dims_string()
            ),
        ));
    }
    let layout = LinkEncoding {
        reals: if opts.two_row { 12 } else { 18 },
        double: opts.double,
        big: opts.big_endian,
    };
    // First pass: the checksum over exactly the bytes that will be written.
    let mut sum = 0u32;
    let mut buf = Vec::with_capacity(layout.link_bytes());
    for u in &field.links {
        buf.clear();
        encode_link(u, &layout, &mut buf);
        sum = sum.wrapping_add(layout.nersc_words(&buf));
    }
    // The header describes the field a reader will rebuild: with two rows stored, row 2
    // comes from rows 0 and 1, which differs from the field's own row 2 unless it is
    // exactly SU(3).
    let (plaq, trace) = if opts.two_row {
        let mut rebuilt = field.clone();
        for u in rebuilt.links.iter_mut() {
            u.0[2] = Su3::third_row(&u.0[0], &u.0[1]);
        }
        (rebuilt.plaquette(), rebuilt.link_trace())
    } else {
        (field.plaquette(), field.link_trace())
    };
    let fp = match (opts.double, opts.big_endian) {
        (true, true) => "IEEE64BIG",
        (false, true) => "IEEE32BIG",
        (true, false) => "IEEE64LITTLE",
        (false, false) => "IEEE32LITTLE",
    };
    let d = lattice.dims;
    let mut header = String::new();
    header.push_str("BEGIN_HEADER\n");
    header.push_str("HDR_VERSION = 1.0\n");
    header.push_str(&format!(
        "DATATYPE = {}\n",
        if opts.two_row {
            "4D_SU3_GAUGE"
        } else {
            "4D_SU3_GAUGE_3x3"
        }
    ));
    header.push_str("STORAGE_FORMAT = 1.0\n");
    for (mu, l) in d.iter().enumerate() {
        header.push_str(&format!("DIMENSION_{} = {l}\n", mu + 1));
    }
    // 15 decimals: a re-read must verify to 1e-5 relative even for near-zero averages.
    header.push_str(&format!("LINK_TRACE = {trace:.15}\n"));
    header.push_str(&format!("PLAQUETTE = {:.15}\n", plaq.total));
    header.push_str(&format!("CHECKSUM = {sum:08x}\n"));
    for mu in 0..NDIM {
        header.push_str(&format!("BOUNDARY_{} = PERIODIC\n", mu + 1));
    }
    header.push_str(&format!("FLOATING_POINT = {fp}\n"));
    header.push_str("ENSEMBLE_ID = qcd-solve\n");
    header.push_str("CREATOR = qcd-solve\n");
    header.push_str("END_HEADER\n");

    super::staged::stage_with(path, |w: &mut dyn Write| {
        w.write_all(header.as_bytes())?;
        let mut buf = Vec::with_capacity(1 << 20);
        for chunk in field.links.chunks(4096) {
            buf.clear();
            for u in chunk {
                encode_link(u, &layout, &mut buf);
            }
            w.write_all(&buf)?;
        }
        Ok(())
    })
}

fn encode_link(u: &Su3, layout: &LinkEncoding, out: &mut Vec<u8>) {
    let rows = layout.reals / 6;
    for row in u.0.iter().take(rows) {
        for z in row {
            for x in [z.re, z.im] {
                match (layout.double, layout.big) {
                    (true, true) => out.extend_from_slice(&x.to_be_bytes()),
                    (true, false) => out.extend_from_slice(&x.to_le_bytes()),
                    (false, true) => out.extend_from_slice(&(x as f32).to_be_bytes()),
                    (false, false) => out.extend_from_slice(&(x as f32).to_le_bytes()),
                }
            }
        }
    }
}
