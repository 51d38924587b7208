//! MILC binary gauge files (version 20103): the 96-byte header, 32-bit links in either
//! byte order, and the sum29/sum31 checksum verification.

use super::{
    byte_len, c_string, check_checksum, check_dims, check_payload, decode_link_3x3, open,
    read_exact_at, stream_units, u32_at, ChecksumInfo, RawGauge, MILC_MAGIC,
};
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use std::path::Path;

const HEADER_LEN: usize = 96;
/// float32 complex 3x3 per direction, 4 directions per site.
const SITE_BYTES: usize = NDIM * 18 * 4;

pub(crate) fn read(path: &Path, expected_dims: Option<[usize; NDIM]>) -> Result<RawGauge> {
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

    let mut links = Vec::with_capacity(volume * NDIM);
    let (mut sum29, mut sum31) = (0u32, 0u32);
    const WORDS_PER_SITE: usize = SITE_BYTES / 4;
    stream_units(
        path,
        &mut file,
        HEADER_LEN as u64,
        SITE_BYTES,
        volume,
        "payload",
        |first, bytes| {
            for (k, site) in bytes.chunks_exact(SITE_BYTES).enumerate() {
                // Word index over the whole payload; WORDS_PER_SITE * volume fits in usize
                // because byte_len checked the byte count.
                let base = (first + k) * WORDS_PER_SITE;
                for (j, w) in site.chunks_exact(4).enumerate() {
                    let word = u32_at(w, big);
                    let idx = base + j;
                    sum29 ^= word.rotate_left((idx % 29) as u32);
                    sum31 ^= word.rotate_left((idx % 31) as u32);
                }
                for link in site.chunks_exact(SITE_BYTES / NDIM) {
                    links.push(decode_link_3x3(link, false, big));
                }
            }
            Ok(())
        },
    )?;
    let checksums = vec![
        ChecksumInfo {
            name: "sum29".into(),
            stored: stored29,
            computed: sum29,
        },
        ChecksumInfo {
            name: "sum31".into(),
            stored: stored31,
            computed: sum31,
        },
    ];
    for c in &checksums {
        check_checksum(path, c)?;
    }
    Ok(RawGauge {
        format: "MILC".into(),
        datatype: "version 20103, float32 3x3, order 0 (lexicographic)".into(),
        dims,
        precision_bits: 32,
        big_endian: big,
        links,
        checksums,
        header_plaquette: None,
        header_link_trace: None,
        metadata: vec![("time stamp".into(), stamp)],
    })
}
