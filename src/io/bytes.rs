//! Reading a file's bytes safely: dimensions validated before anything is allocated,
//! exact-length payloads, streaming in chunks, and 32/64-bit words in either byte order
//! (links are decoded by `payload::LinkEncoding`).

use crate::error::{Error, Result};
use crate::geometry::lattice::{Lattice, NDIM};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Validates dimensions read from a file (each >= 1, volume within the program's limit)
/// and compares them with what the caller expects. Returns the volume.
pub(crate) fn check_dims(
    path: &Path,
    source: &str,
    dims: [usize; NDIM],
    expected: Option<[usize; NDIM]>,
) -> Result<usize> {
    let fmt_dims = |d: [usize; NDIM]| format!("{}x{}x{}x{}", d[0], d[1], d[2], d[3]);
    let lattice = Lattice::new(dims, crate::geometry::lattice::DEFAULT_BOUNDARY).map_err(|e| {
        Error::format(
            path,
            format!("dimensions {} from {source}: {e}", fmt_dims(dims)),
        )
    })?;
    if let Some(exp) = expected {
        if exp != dims {
            return Err(Error::format(
                path,
                format!(
                    "dimensions: file has {} (X x Y x Z x T, from {source}), expected {}",
                    fmt_dims(dims),
                    fmt_dims(exp)
                ),
            ));
        }
    }
    Ok(lattice.volume())
}

/// Parses a hexadecimal checksum as files write it ("b379560a", "0x1c231a18").
pub(crate) fn parse_hex_u32(s: &str) -> Option<u32> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if t.is_empty() || t.len() > 8 {
        return None;
    }
    u32::from_str_radix(t, 16).ok()
}

/// Opens a file for reading and returns it with its length; anything but a regular file
/// is refused at once (`open_regular`).
pub(crate) fn open(path: &Path) -> Result<(File, u64)> {
    open_regular(path, "input")
}

/// Opens `path` for reading only if it is a regular file (a link to one is followed):
/// a FIFO, device, socket or directory is refused at once (exit 3), never read (a FIFO
/// would block forever, `/dev/zero` never ends). The open itself does not block
/// (`O_NONBLOCK`, which changes nothing for a regular file), and the type is taken from
/// the opened file, so nothing can be swapped in between. Returns the file and its length.
pub fn open_regular(path: &Path, what: &str) -> Result<(File, u64)> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    let t = meta.file_type();
    if !t.is_file() {
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the {what} is {kind}; only regular files are read"),
            ),
        ));
    }
    Ok((file, meta.len()))
}

/// The largest config file read: 1 MiB (the shipped configs are under 2 KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The longest error message quoted from an input (4 KiB): a 1 MiB bad value quoted
/// whole, with its line, would be a message of megabytes.
pub const MAX_MESSAGE: usize = 4096;

/// `message` cut to `MAX_MESSAGE` bytes (at a character boundary), saying how much was cut.
/// Fill `buf` from `at` in `file` (the chunked slab reads: `read_exact_at` with a buffer
/// kept across chunks). A short read is a format error saying what ended early (`ended`:
/// "... ends before ..."); the readers checked the length first, so only a file that
/// shrank since gets there.
pub(crate) fn fill_exact_at(
    file: &mut File,
    path: &Path,
    at: u64,
    buf: &mut [u8],
    ended: impl FnOnce() -> String,
) -> Result<()> {
    file.seek(SeekFrom::Start(at))
        .map_err(|e| Error::io(path, e))?;
    file.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::format(path, format!("truncated: {}", ended()))
        } else {
            Error::io(path, e)
        }
    })
}

pub fn bounded_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... ({} more bytes of the message cut)",
        &message[..end],
        message.len() - end
    )
}

/// The checks a config of `len` bytes passed, for `checks::record`.
pub fn config_checks(len: usize) -> Vec<super::checks::Check> {
    use super::checks::Check;
    vec![
        Check::new("regular file", "ok"),
        Check::new(
            "size",
            format!("ok: {len} bytes, at most {MAX_CONFIG_BYTES}"),
        ),
        Check::new("UTF-8", "ok"),
        Check::new("TOML keys and values", "ok: parsed and validated"),
    ]
}

/// The text of a config file: a regular file (`open_regular`) of at most
/// `MAX_CONFIG_BYTES` (else an I/O error, exit 3), in UTF-8 (else a config error naming
/// the first bad byte's offset, exit 2).
pub fn read_config_text(path: &Path) -> Result<String> {
    let (file, len) = open_regular(path, "config")?;
    let too_big = |n: u64| {
        Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!("the config is {n} bytes or more; at most {MAX_CONFIG_BYTES} are read"),
            ),
        )
    };
    if len > MAX_CONFIG_BYTES {
        return Err(too_big(len));
    }
    let mut bytes = Vec::new();
    Read::by_ref(&mut &file)
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: format!(
            "not UTF-8 text (TOML must be): invalid byte at offset {}",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Reads exactly `len` bytes at `offset`; running out is a truncated file, named by `what`.
pub(crate) fn read_exact_at(
    path: &Path,
    file: &mut File,
    offset: u64,
    len: usize,
    what: &str,
) -> Result<Vec<u8>> {
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    Read::by_ref(file)
        .take(len as u64)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    if buf.len() != len {
        return Err(Error::format(
            path,
            format!(
                "truncated: {what} needs {len} bytes at offset {offset}, only {} present",
                buf.len()
            ),
        ));
    }
    Ok(buf)
}

/// Streams `count` fixed-size units (sites) starting at `offset`, a few MiB at a time, so
/// that a large file is never held twice in memory. `f(first_unit, bytes)` gets whole
/// units only.
pub(crate) fn stream_units(
    path: &Path,
    file: &mut File,
    offset: u64,
    unit: usize,
    count: usize,
    what: &str,
    mut f: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(path, e))?;
    let per_chunk = ((4 << 20) / unit.max(1)).max(1);
    let mut buf = vec![0u8; per_chunk.min(count.max(1)) * unit];
    let mut done = 0usize;
    while done < count {
        let n = per_chunk.min(count - done);
        let bytes = &mut buf[..n * unit];
        if let Err(e) = file.read_exact(bytes) {
            return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::format(
                    path,
                    format!(
                        "truncated: {what} ends inside site {} of {count} ({unit} bytes per site)",
                        done
                    ),
                )
            } else {
                Error::io(path, e)
            });
        }
        f(done, bytes)?;
        done += n;
    }
    Ok(())
}

/// Byte size of `count` items of `size` bytes, refusing sizes that overflow.
pub(crate) fn byte_len(path: &Path, count: usize, size: usize) -> Result<u64> {
    count
        .checked_mul(size)
        .map(|n| n as u64)
        .ok_or_else(|| Error::format(path, "payload size overflows"))
}

/// A payload must fill the file exactly: fewer bytes is a truncated file, more is
/// trailing data. `need` says what the format needs ("... need N bytes after ..."),
/// in the reader's own words.
pub(crate) fn check_payload(path: &Path, available: u64, payload: u64, need: &str) -> Result<()> {
    if available == payload {
        return Ok(());
    }
    let what = if available < payload {
        "truncated"
    } else {
        "trailing data"
    };
    Err(Error::format(
        path,
        format!("{what}: {need}, the file has {available}"),
    ))
}

#[inline]
pub(crate) fn u32_at(b: &[u8], big: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

#[inline]
pub(crate) fn u64_at(b: &[u8], big: bool) -> u64 {
    let a = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
    if big {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}
