//! MILC binary gauge files (version 20103): the 96-byte header (`describe`), 32-bit links
//! in either byte order, and the sum29/sum31 checksums to verify.

use super::payload::{LinkEncoding, LinkOrder, Payload, SumKind};
use super::{
    byte_len, c_string, check_dims, check_payload, open, read_exact_at, u32_at, GaugeHeader,
    MILC_MAGIC,
};
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use std::path::Path;

const HEADER_LEN: usize = 96;
/// float32 complex 3x3 per direction, 4 directions per site.
const SITE_BYTES: usize = NDIM * 18 * 4;

/// The header of a MILC file: dims, byte order, sum29/sum31; the payload follows it.
pub(crate) fn describe(path: &Path, expected_dims: Option<[usize; NDIM]>) -> Result<GaugeHeader> {
    let (mut file, file_len) = open(path)?;
    if file_len < HEADER_LEN as u64 {
        return Err(Error::format(
            path,
            format!("truncated: a MILC header needs {HEADER_LEN} bytes, the file has {file_len}"),
        ));
    }
    let h = read_exact_at(path, &mut file, 0, HEADER_LEN, "MILC header")?;
    let big = if i32::from_be_bytes([h[0], h[1], h[2], h[3]]) == MILC_MAGIC {
        true
    } else if i32::from_le_bytes([h[0], h[1], h[2], h[3]]) == MILC_MAGIC {
        false
    } else {
        return Err(Error::format(
            path,
            format!(
                "bad MILC magic {:02x}{:02x}{:02x}{:02x}: expected 20103 (00004e87) in either byte order",
                h[0], h[1], h[2], h[3]
            ),
        ));
    };
    let int = |off: usize| u32_at(&h[off..], big) as i32;
    let mut dims = [0usize; NDIM];
    for (mu, d) in dims.iter_mut().enumerate() {
        let v = int(4 + 4 * mu);
        if v <= 0 {
            return Err(Error::format(
                path,
                format!("MILC header dims[{mu}] = {v}, expected a positive extent"),
            ));
        }
        *d = v as usize;
    }
    let volume = check_dims(path, "MILC header", dims, expected_dims)?;
    let stamp = c_string(&h[20..84]).trim().to_string();
    let order = int(84);
    if order != 0 {
        return Err(Error::format(
            path,
            format!(
                "MILC order = {order}: only 0 (lexicographic sites) is supported; this file \
                 stores its sites in another order (a site list) that this reader does not follow"
            ),
        ));
    }
    let stored29 = u32_at(&h[88..], big);
    let stored31 = u32_at(&h[92..], big);

    let payload = byte_len(path, volume, SITE_BYTES)?;
    let available = file_len - HEADER_LEN as u64;
    let need = format!(
        "{}x{}x{}x{} float32 links need {payload} bytes after the header",
        dims[0], dims[1], dims[2], dims[3]
    );
    check_payload(path, available, payload, &need)?;

    Ok(GaugeHeader {
        format: "MILC".into(),
        datatype: "version 20103, float32 3x3, order 0 (lexicographic)".into(),
        dims,
        precision_bits: 32,
        big_endian: big,
        stored_sums: vec![("sum29".into(), stored29), ("sum31".into(), stored31)],
        header_plaquette: None,
        header_link_trace: None,
        metadata: vec![("time stamp".into(), stamp)],
        payload: Payload {
            offset: HEADER_LEN as u64,
            encoding: LinkEncoding {
                reals: 18,
                double: false,
                big,
            },
            sums: SumKind::Milc,
            what: "payload".into(),
            order: LinkOrder::SiteMajor,
        },
        warnings: Vec::new(),
        unchecked: Vec::new(),
        container_checks: Vec::new(),
    })
}
