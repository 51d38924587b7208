//! Gauge and spinor file formats, one file per format, plus what they share: format
//! detection, the common gauge reader `read_gauge` (which verifies everything a file
//! carries and refuses a file that disagrees, naming what differed), the `GaugeFileInfo`
//! that `qcd-solve info` prints, and `write_atomic` used for every output file.

pub mod lime;
pub mod milc;
pub mod nersc;
pub mod npy;
pub mod outputs;

pub use nersc::{write_nersc, NerscWrite};
pub use npy::{read_spinor_npy, write_spinor_npy};

use crate::error::{Error, Result};
use crate::field::gauge::Plaquette;
use crate::field::{GaugeField, Su3};
use crate::lattice::{Boundary, Lattice, NDIM};
use serde::Serialize;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The gauge file containers the program reads. ILDG and SciDAC files are both LIME.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GaugeFormat {
    Nersc,
    Lime,
    Milc,
}

const LIME_MAGIC: [u8; 4] = [0x45, 0x67, 0x89, 0xab];
const MILC_MAGIC: i32 = 20103;

impl GaugeFormat {
    /// Decide the format from the file's first bytes (never from its name).
    pub fn detect(path: &Path) -> Result<GaugeFormat> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut head = Vec::with_capacity(64);
        Read::by_ref(&mut file)
            .take(64)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(path, e))?;
        let text_start = head
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(head.len());
        if head[text_start..].starts_with(b"BEGIN_HEADER") {
            return Ok(GaugeFormat::Nersc);
        }
        if head.len() >= 4 {
            let first = [head[0], head[1], head[2], head[3]];
            if first == LIME_MAGIC {
                return Ok(GaugeFormat::Lime);
            }
            if i32::from_be_bytes(first) == MILC_MAGIC || i32::from_le_bytes(first) == MILC_MAGIC {
                return Ok(GaugeFormat::Milc);
            }
        }
        if head.is_empty() {
            return Err(Error::format(
                path,
                "unrecognised gauge file format: the file is empty",
            ));
        }
        let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        Err(Error::format(
            path,
            format!(
                "unrecognised gauge file format: the first bytes [{}] match neither NERSC \
                 (BEGIN_HEADER), LIME/ILDG/SciDAC (magic 456789ab) nor MILC (magic 20103)",
                shown.join(" ")
            ),
        ))
    }

    pub fn name(self) -> &'static str {
        match self {
            GaugeFormat::Nersc => "nersc",
            GaugeFormat::Lime => "lime",
            GaugeFormat::Milc => "milc",
        }
    }
}

impl fmt::Display for GaugeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a `--format` value: "auto" gives `None` (detect from the file), anything else
/// what `GaugeFormat::from_str` accepts.
pub fn parse_format(s: &str) -> Result<Option<GaugeFormat>> {
    if s.trim().eq_ignore_ascii_case("auto") {
        Ok(None)
    } else {
        s.parse().map(Some)
    }
}

impl FromStr for GaugeFormat {
    type Err = Error;

    /// "nersc", "ildg" / "scidac" / "lime", "milc" (case-insensitive). "auto" is refused here
    /// because it is not a format; `parse_format` maps it to `None`.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nersc" => Ok(GaugeFormat::Nersc),
            "ildg" | "scidac" | "lime" => Ok(GaugeFormat::Lime),
            "milc" => Ok(GaugeFormat::Milc),
            "auto" => Err(Error::invalid(
                "format",
                "\"auto\" is not a format: it means detect from the file (use io::parse_format)",
            )),
            other => Err(Error::invalid(
                "format",
                format!("unknown gauge format \"{other}\"; expected nersc, ildg, scidac, lime, milc or auto"),
            )),
        }
    }
}

/// One checksum a file stores, with the value computed from the data read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChecksumInfo {
    /// The key as the format names it: CHECKSUM, suma, sumb, sum29, sum31.
    pub name: String,
    pub stored: u32,
    pub computed: u32,
}

/// What a gauge file said about itself and what was computed from its links.
#[derive(Clone, Debug, Serialize)]
pub struct GaugeFileInfo {
    pub path: String,
    /// "NERSC", "ILDG", "SciDAC" or "MILC".
    pub format: String,
    /// The format's own name for the payload (DATATYPE, the SciDAC datatype, ...).
    pub datatype: String,
    /// X, Y, Z, T.
    pub dims: [usize; NDIM],
    pub precision_bits: u32,
    /// "big-endian" or "little-endian".
    pub byte_order: String,
    /// Every stored checksum; a file whose checksums disagree is refused, so all match.
    pub checksums: Vec<ChecksumInfo>,
    /// The plaquette the file's header states, and the key it came from.
    pub header_plaquette: Option<f64>,
    pub header_plaquette_key: Option<String>,
    pub header_link_trace: Option<f64>,
    /// Computed from the links as returned (after reunitarisation for 32-bit files).
    pub plaquette: Plaquette,
    pub link_trace: f64,
    /// Worst `Su3::unitarity_deviation` of the links as stored.
    pub unitarity_as_stored: f64,
    /// The same after reunitarisation; `None` when the links are returned as stored
    /// (64-bit files, so that a double round trip is bit-exact).
    pub unitarity_reunitarised: Option<f64>,
    /// Other header entries worth showing (creator, ensemble, time stamp, LIME records).
    pub metadata: Vec<(String, String)>,
}

impl fmt::Display for GaugeFileInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.dims;
        writeln!(f, "file:          {}", self.path)?;
        writeln!(f, "format:        {} ({})", self.format, self.datatype)?;
        writeln!(
            f,
            "dimensions:    {}x{}x{}x{} (X x Y x Z x T), volume {}",
            d[0],
            d[1],
            d[2],
            d[3],
            d.iter().product::<usize>()
        )?;
        writeln!(
            f,
            "precision:     {}-bit, {}",
            self.precision_bits, self.byte_order
        )?;
        if self.checksums.is_empty() {
            writeln!(f, "checksums:     none stored")?;
        }
        for c in &self.checksums {
            writeln!(
                f,
                "checksum:      {:<8} stored {:08x}, computed {:08x} ({})",
                c.name,
                c.stored,
                c.computed,
                if c.stored == c.computed {
                    "ok"
                } else {
                    "MISMATCH"
                }
            )?;
        }
        writeln!(
            f,
            "plaquette:     {:.12} (spatial {:.12}, temporal {:.12})",
            self.plaquette.total, self.plaquette.spatial, self.plaquette.temporal
        )?;
        if let (Some(h), Some(k)) = (self.header_plaquette, &self.header_plaquette_key) {
            writeln!(
                f,
                "               header {k} = {h}, difference {:.2e}",
                self.plaquette.total - h
            )?;
        }
        writeln!(f, "link trace:    {:.12}", self.link_trace)?;
        if let Some(h) = self.header_link_trace {
            writeln!(
                f,
                "               header LINK_TRACE = {h}, difference {:.2e}",
                self.link_trace - h
            )?;
        }
        match self.unitarity_reunitarised {
            Some(after) => writeln!(
                f,
                "unitarity:     worst deviation {:.2e} as stored, {:.2e} after reunitarisation",
                self.unitarity_as_stored, after
            )?,
            None => writeln!(
                f,
                "unitarity:     worst deviation {:.2e} (links used as stored)",
                self.unitarity_as_stored
            )?,
        }
        for (k, v) in &self.metadata {
            writeln!(f, "  {k} = {v}")?;
        }
        Ok(())
    }
}

/// Reads a gauge configuration, detecting the format when `format` is `None`. Checks the
/// dimensions against `expected_dims` when given, verifies every checksum and header value
/// the file carries, and reunitarises 32-bit input in double precision. `boundary` is the
/// fermion boundary condition of the returned field's lattice (links are always periodic).
pub fn read_gauge(
    path: &Path,
    format: Option<GaugeFormat>,
    expected_dims: Option<[usize; NDIM]>,
    boundary: [Boundary; NDIM],
) -> Result<(GaugeField, GaugeFileInfo)> {
    let format = match format {
        Some(f) => f,
        None => GaugeFormat::detect(path)?,
    };
    let raw = match format {
        GaugeFormat::Nersc => nersc::read(path, expected_dims)?,
        GaugeFormat::Lime => lime::read(path, expected_dims)?,
        GaugeFormat::Milc => milc::read(path, expected_dims)?,
    };
    finish(path, raw, boundary)
}

/// What a format reader hands back: the links as decoded, and what the file stated.
pub(crate) struct RawGauge {
    pub format: String,
    pub datatype: String,
    pub dims: [usize; NDIM],
    pub precision_bits: u32,
    pub big_endian: bool,
    pub links: Vec<Su3>,
    pub checksums: Vec<ChecksumInfo>,
    /// (key, value) of a plaquette the header states.
    pub header_plaquette: Option<(String, f64)>,
    pub header_link_trace: Option<f64>,
    pub metadata: Vec<(String, String)>,
}

fn finish(
    path: &Path,
    raw: RawGauge,
    boundary: [Boundary; NDIM],
) -> Result<(GaugeField, GaugeFileInfo)> {
    let lattice = Lattice::new(raw.dims, boundary)
        .map_err(|e| Error::format(path, format!("dimensions: {e}")))?;
    if raw.links.len() != lattice.volume() * NDIM {
        // The readers size the payload from the dims, so this is an internal inconsistency.
        return Err(Error::format(
            path,
            format!(
                "decoded {} links, expected {} for {}",
                raw.links.len(),
                lattice.volume() * NDIM,
                lattice.dims_string()
            ),
        ));
    }
    let mut field = GaugeField {
        lattice,
        links: raw.links,
    };
    let single = raw.precision_bits == 32;
    let unitarity_as_stored = field.max_unitarity_deviation();
    let unitarity_reunitarised = if single {
        // 32-bit links are unitary only to ~1e-7; the solver wants SU(3) to double precision.
        field.reunitarise();
        Some(field.max_unitarity_deviation())
    } else {
        None
    };
    let final_deviation = unitarity_reunitarised.unwrap_or(unitarity_as_stored);
    if final_deviation > 1e-8 {
        tracing::warn!(
            "{}: links deviate from SU(3) by up to {final_deviation:.2e}",
            path.display()
        );
    }
    let plaquette = field.plaquette();
    let link_trace = field.link_trace();

    // Tolerances. 64-bit: the plaquette to 1e-5 relative (the conventions' rule; a wrong
    // convention such as a transposed link moves it by far more, and corruption is the
    // checksum's job), with a 1e-10 floor so a near-zero average of a random field printed
    // to 12 decimals still verifies. The link trace is often tiny and printed to a fixed
    // number of decimals, so it is checked absolutely, to 1e-6 (six printed decimals pass).
    // 32-bit: 1e-5 absolute for both, after reunitarisation. Rounding each element to
    // float32 moves it by ~6e-8 relative and reunitarisation moves the link by the same
    // order, so a product of four links moves by a few 1e-7; headers are usually computed
    // by the writer in double before rounding. 1e-5 leaves a margin of >10 over that while
    // still rejecting a convention error.
    if let Some((key, stated)) = &raw.header_plaquette {
        let tol = if single {
            1e-5
        } else {
            (1e-5 * plaquette.total.abs()).max(1e-10)
        };
        check_close(path, key, *stated, plaquette.total, tol)?;
    }
    if let Some(stated) = raw.header_link_trace {
        let tol = if single { 1e-5 } else { 1e-6 };
        check_close(path, "LINK_TRACE", stated, link_trace, tol)?;
    }

    let info = GaugeFileInfo {
        path: path.display().to_string(),
        format: raw.format,
        datatype: raw.datatype,
        dims: raw.dims,
        precision_bits: raw.precision_bits,
        byte_order: if raw.big_endian {
            "big-endian".into()
        } else {
            "little-endian".into()
        },
        checksums: raw.checksums,
        header_plaquette: raw.header_plaquette.as_ref().map(|p| p.1),
        header_plaquette_key: raw.header_plaquette.map(|p| p.0),
        header_link_trace: raw.header_link_trace,
        plaquette,
        link_trace,
        unitarity_as_stored,
        unitarity_reunitarised,
        metadata: raw.metadata,
    };
    Ok((field, info))
}

fn check_close(path: &Path, key: &str, stated: f64, computed: f64, tol: f64) -> Result<()> {
    let diff = (stated - computed).abs();
    // A NaN in the file is refused too.
    if diff.is_nan() || diff > tol {
        return Err(Error::format(
            path,
            format!(
                "{key} mismatch: header says {stated}, computed {computed:.12} \
                 (difference {diff:.3e}, tolerance {tol:.1e})"
            ),
        ));
    }
    Ok(())
}

/// Refuses a stored checksum that differs from the computed one, naming the key.
pub(crate) fn check_checksum(path: &Path, c: &ChecksumInfo) -> Result<()> {
    if c.stored != c.computed {
        return Err(Error::format(
            path,
            format!(
                "{} mismatch: file says {:08x}, computed {:08x} (data corrupted or written \
                 with another convention)",
                c.name, c.stored, c.computed
            ),
        ));
    }
    Ok(())
}

/// Validates dimensions read from a file (each >= 1, volume within the program's limit)
/// and compares them with what the caller expects. Returns the volume.
pub(crate) fn check_dims(
    path: &Path,
    source: &str,
    dims: [usize; NDIM],
    expected: Option<[usize; NDIM]>,
) -> Result<usize> {
    let fmt_dims = |d: [usize; NDIM]| format!("{}x{}x{}x{}", d[0], d[1], d[2], d[3]);
    let lattice = Lattice::new(dims, crate::lattice::DEFAULT_BOUNDARY).map_err(|e| {
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

/// Opens a file for reading and returns it with its length.
pub(crate) fn open(path: &Path) -> Result<(File, u64)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    Ok((file, len))
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

/// Decodes the 3x3 complex link stored as 18 reals (row, col, re/im) of `bytes_per_real`
/// bytes each. The caller guarantees `b.len() >= 18 * bytes_per_real`.
#[inline]
pub(crate) fn decode_link_3x3(b: &[u8], double: bool, big: bool) -> Su3 {
    let mut m = Su3::zero();
    let w = if double { 8 } else { 4 };
    for r in 0..3 {
        for c in 0..3 {
            let k = 2 * (3 * r + c);
            m.0[r][c] = crate::field::C64::new(
                real_at(&b[k * w..], double, big),
                real_at(&b[(k + 1) * w..], double, big),
            );
        }
    }
    m
}

#[inline]
pub(crate) fn real_at(b: &[u8], double: bool, big: bool) -> f64 {
    if double {
        f64::from_bits(u64_at(b, big))
    } else {
        f32::from_bits(u32_at(b, big)) as f64
    }
}

/// Writes `path` atomically: the bytes go to `path.tmp-<pid>`, are fsynced, and the temp is
/// renamed over `path`, so a reader never sees a half-written file. Parent directories are
/// created. On any error the temp is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// `write_atomic` for output produced piece by piece, so a large file need not be built
/// in memory first.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let file_name = path.file_name().ok_or_else(|| {
        Error::invalid(
            "output path",
            format!("{} does not name a file", path.display()),
        )
    })?;
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
    }
    let mut tmp_name = file_name.to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp: PathBuf = path.with_file_name(tmp_name);
    let result = (|| -> std::io::Result<()> {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    // Make the rename itself durable; best effort, some filesystems refuse directory fsync.
    if let Some(parent) = path.parent() {
        let dir = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// The text of a NUL-padded byte string (LIME types, MILC time stamps, XML records).
pub(crate) fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
