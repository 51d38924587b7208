//! NumPy `.npy` (format 1.0) files for spinor solutions: dtype `<c16`, shape
//! `(LT, LZ, LY, LX, 4, 3)`, C order, so `numpy.load` gives psi[t, z, y, x, spin, colour].

use super::{open, read_exact_at, stream_units};
use crate::error::{Error, Result};
use crate::field::spinor::SITE_LEN;
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::Lattice;
use std::path::Path;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Bytes of one site: 12 complex doubles.
const SITE_BYTES: usize = SITE_LEN * 16;

/// The array shape of a spinor on `lattice`: t slowest, then z, y, x, spin, colour.
fn shape_of(lattice: &Lattice) -> [usize; 6] {
    let d = lattice.dims;
    [d[3], d[2], d[1], d[0], 4, 3]
}

fn shape_string(s: &[usize]) -> String {
    let parts: Vec<String> = s.iter().map(|v| v.to_string()).collect();
    format!("({})", parts.join(", "))
}

/// Writes `psi` as a `.npy` file, atomically.
pub fn write_spinor_npy(path: &Path, lattice: &Lattice, psi: &SpinorField) -> Result<()> {
    super::staged::commit_one(stage_spinor_npy(path, lattice, psi)?)
}

/// `write_spinor_npy` up to the rename: the file staged for `Staged::commit`.
pub fn stage_spinor_npy(
    path: &Path,
    lattice: &Lattice,
    psi: &SpinorField,
) -> Result<super::staged::Staged> {
    if psi.data.len() != lattice.volume() * SITE_LEN {
        return Err(Error::invalid(
            "spinor",
            format!(
                "has {} complex numbers, expected {} for {}",
                psi.data.len(),
                lattice.volume() * SITE_LEN,
                lattice.dims_string()
            ),
        ));
    }
    stage_c16_npy(path, &shape_of(lattice), &|i| psi.data[i])
}

/// A C-order `<c16` array of `shape` whose element i (in C order) is `value(i)`, staged
/// for `Staged::commit` (a spinor; a propagator, encoded from its columns without the
/// whole array in memory).
pub fn stage_c16_npy(
    path: &Path,
    shape: &[usize],
    value: &(dyn Fn(usize) -> C64 + Sync),
) -> Result<super::staged::Staged> {
    let len: usize = shape.iter().product();
    let mut header = format!(
        "{{'descr': '<c16', 'fortran_order': False, 'shape': {}, }}",
        shape_string(shape)
    );
    // The spec: magic (6) + version (2) + length (2) + header ending in '\n', the total a
    // multiple of 64 so the data is aligned; pad with spaces.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let header_len = u16::try_from(header.len())
        .map_err(|_| Error::invalid("npy", "npy header longer than 65535 bytes"))?;

    let mut head = Vec::with_capacity(10 + header.len());
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&[1, 0]);
    head.extend_from_slice(&header_len.to_le_bytes());
    head.extend_from_slice(header.as_bytes());
    // Blocks of whole complex numbers (BLOCK_BYTES is a multiple of 16), encoded and
    // written in parallel.
    let body = (len * 16) as u64;
    super::stage_blocks(path, &head, body, |at, block| {
        let first = (at / 16) as usize;
        for (k, b) in block.chunks_exact_mut(16).enumerate() {
            let z = value(first + k);
            b[..8].copy_from_slice(&z.re.to_le_bytes());
            b[8..].copy_from_slice(&z.im.to_le_bytes());
        }
    })
}

/// Reads a `.npy` spinor written for `lattice`, checking magic, version, dtype, order and
/// shape and naming whatever differs.
pub fn read_spinor_npy(path: &Path, lattice: &Lattice) -> Result<SpinorField> {
    let (mut file, file_len) = open(path)?;
    if file_len < 10 {
        return Err(Error::format(
            path,
            format!("truncated: {file_len} bytes is shorter than an npy preamble"),
        ));
    }
    let pre = read_exact_at(
        path,
        &mut file,
        0,
        12.min(file_len as usize),
        "npy preamble",
    )?;
    if &pre[..6] != MAGIC {
        return Err(Error::format(
            path,
            "not an npy file: magic is not \\x93NUMPY",
        ));
    }
    let (major, minor) = (pre[6], pre[7]);
    // 1.x has a 2-byte header length; 2.x and 3.x (utf-8 header) a 4-byte one.
    let (header_len, header_start) = match major {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as u64, 10u64),
        2 | 3 if pre.len() >= 12 => (
            u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as u64,
            12u64,
        ),
        _ => {
            return Err(Error::format(
                path,
                format!("npy version {major}.{minor} is not supported (expected 1.0)"),
            ))
        }
    };
    // numpy itself reads at most 10000 header bytes unless told otherwise.
    if header_len > MAX_HEADER {
        return Err(Error::format(
            path,
            format!("npy header declares {header_len} bytes, more than the {MAX_HEADER} read"),
        ));
    }
    if header_start + header_len > file_len {
        return Err(Error::format(
            path,
            format!(
                "truncated: npy header declares {header_len} bytes, the file has {}",
                file_len - header_start
            ),
        ));
    }
    let raw = read_exact_at(
        path,
        &mut file,
        header_start,
        header_len as usize,
        "npy header",
    )?;
    let header =
        String::from_utf8(raw).map_err(|_| Error::format(path, "npy header is not text"))?;

    // A key twice is ambiguous (numpy takes the last, a first-match reader the first).
    for key in ["descr", "fortran_order", "shape"] {
        let n = header.matches(&format!("'{key}'")).count()
            + header.matches(&format!("\"{key}\"")).count();
        if n > 1 {
            return Err(Error::format(
                path,
                format!("npy header names '{key}' {n} times"),
            ));
        }
    }
    let descr = dict_value(&header, "descr")
        .ok_or_else(|| Error::format(path, format!("npy header has no 'descr': {header}")))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if descr != "<c16" {
        return Err(Error::format(
            path,
            format!("dtype: file has '{descr}', expected '<c16' (little-endian complex128)"),
        ));
    }
    let fortran = dict_value(&header, "fortran_order").ok_or_else(|| {
        Error::format(path, format!("npy header has no 'fortran_order': {header}"))
    })?;
    if fortran != "False" {
        return Err(Error::format(
            path,
            format!("fortran_order: file has {fortran}, expected False (C order)"),
        ));
    }
    let shape_text = dict_value(&header, "shape")
        .ok_or_else(|| Error::format(path, format!("npy header has no 'shape': {header}")))?;
    let inner = shape_text.trim_start_matches('(').trim_end_matches(')');
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| {
            Error::format(
                path,
                format!("shape {shape_text} is not a tuple of integers"),
            )
        })?;
    let want = shape_of(lattice);
    if shape != want {
        return Err(Error::format(
            path,
            format!(
                "shape: file has {}, expected {} = (LT, LZ, LY, LX, spin, colour) for lattice {}",
                shape_string(&shape),
                shape_string(&want),
                lattice.dims_string()
            ),
        ));
    }
    let volume = lattice.volume();
    let data_start = header_start + header_len;
    let need = (volume as u64) * SITE_BYTES as u64;
    let have = file_len - data_start;
    if have != need {
        return Err(Error::format(
            path,
            format!(
                "{}: shape {} needs {need} data bytes, the file has {have}",
                if have < need {
                    "truncated"
                } else {
                    "trailing data"
                },
                shape_string(&shape)
            ),
        ));
    }
    let mut data = Vec::with_capacity(volume * SITE_LEN);
    stream_units(
        path,
        &mut file,
        data_start,
        SITE_BYTES,
        volume,
        "npy data",
        |_, bytes| {
            for z in bytes.chunks_exact(16) {
                let re = f64::from_le_bytes([z[0], z[1], z[2], z[3], z[4], z[5], z[6], z[7]]);
                let im = f64::from_le_bytes([z[8], z[9], z[10], z[11], z[12], z[13], z[14], z[15]]);
                data.push(C64::new(re, im));
            }
            Ok(())
        },
    )?;
    // A NaN or infinity in the source would make the solver stop on NaN and blame itself.
    let bad = |z: &C64| !(z.re.is_finite() && z.im.is_finite());
    if let Some(k) = data.iter().position(bad) {
        let count = data.iter().filter(|z| bad(z)).count();
        let z = data[k];
        let (part, value) = if z.re.is_finite() {
            ("imaginary part", z.im)
        } else {
            ("real part", z.re)
        };
        let c = lattice.coords(k / SITE_LEN);
        return Err(Error::format(
            path,
            format!(
                "non-finite value {value} at site (x,y,z,t) = ({},{},{},{}), spin {}, colour {} \
                 ({part}; {count} of {} complex values are NaN or infinite)",
                c[0],
                c[1],
                c[2],
                c[3],
                (k % SITE_LEN) / 3,
                k % 3,
                data.len()
            ),
        ));
    }
    super::checks::record(
        "source file",
        path,
        vec![
            super::checks::Check::new("regular file", "ok"),
            super::checks::Check::new(
                "npy header",
                "ok: '<c16', C order, shape of the lattice, each key once",
            ),
            super::checks::Check::new("length", "ok: the data fills the file exactly"),
            super::checks::Check::new("finite values", "ok: no NaN or infinity"),
        ],
    );
    Ok(SpinorField { data })
}

/// The largest npy header read (numpy's own default limit is 10000 bytes).
pub const MAX_HEADER: u64 = 65536;

/// The raw text of `key`'s value in the Python dict literal of an npy header: a quoted
/// string, a parenthesised tuple, or a bare word (True/False).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pos = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[pos + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let end = match rest.chars().next()? {
        '(' => rest.find(')')? + 1,
        q @ ('\'' | '"') => rest[1..].find(q)? + 2,
        _ => rest.find([',', '}']).unwrap_or(rest.len()),
    };
    Some(rest[..end].trim())
}

#[cfg(test)]
mod tests {
    use super::dict_value;

    #[test]
    fn dict_values_of_a_numpy_header() {
        let h = "{'descr': '<c16', 'fortran_order': False, 'shape': (2, 3), }";
        assert_eq!(dict_value(h, "descr"), Some("'<c16'"));
        assert_eq!(dict_value(h, "fortran_order"), Some("False"));
        assert_eq!(dict_value(h, "shape"), Some("(2, 3)"));
        assert_eq!(dict_value(h, "missing"), None);
    }
}
