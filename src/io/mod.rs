//! Gauge and spinor file formats, one file per format, plus what they share: format
//! detection, the common gauge reader `read_gauge` (which verifies everything a file
//! carries and refuses a file that disagrees, naming what differed), the `GaugeFileInfo`
//! that `qcd-solve info` prints, and `write_atomic` used for every output file. Written:
//! npy, NERSC gauge files, HDF5 (`hdf5`) and SciDAC LIME propagators (`scidac_write`).

mod bytes;
pub mod checks;
pub mod hdf5;
pub mod lime;
pub mod milc;
pub mod nersc;
pub mod npy;
pub mod openqcd;
mod payload;
pub mod scidac_write;
pub mod slab;
pub mod staged;
mod verify;

pub(crate) use bytes::*;
pub use bytes::{bounded_message, config_checks, open_regular, read_config_text, MAX_CONFIG_BYTES};
pub(crate) use verify::*;
pub use verify::{header_tolerance, last_digit_unit};

pub use nersc::{write_nersc, NerscWrite};
pub use npy::{read_spinor_npy, write_spinor_npy};
pub use slab::{read_gauge_slab, SlabPlan};

use crate::error::{Error, Result};
use crate::field::gauge::Plaquette;
use crate::field::GaugeField;
use crate::geometry::lattice::{Boundary, NDIM};
use serde::Serialize;
use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::str::FromStr;

/// The gauge file containers the program reads. ILDG and SciDAC files are both LIME.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GaugeFormat {
    Nersc,
    Lime,
    Milc,
    /// openQCD's `export_cnfg` format (the CLS ensembles).
    OpenQcd,
}

const LIME_MAGIC: [u8; 4] = [0x45, 0x67, 0x89, 0xab];
const MILC_MAGIC: i32 = 20103;

impl GaugeFormat {
    /// Decide the format from the file's first bytes (never from its name). openQCD files
    /// have no magic: one is recognised by its 24-byte header, four even extents from 2 to
    /// 2^16 and a finite plaquette within [-1.5, 3] (the range of Re tr of an SU(3)
    /// matrix), and a length of exactly the header and 576 bytes a site. Bytes of any
    /// other kind meet all of that by chance with a probability far below 2^-64.
    pub fn detect(path: &Path) -> Result<GaugeFormat> {
        let (mut file, file_len) = open_regular(path, "gauge file")?;
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
        if looks_like_openqcd(&head, file_len) {
            return Ok(GaugeFormat::OpenQcd);
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
                 (BEGIN_HEADER), LIME/ILDG/SciDAC (magic 456789ab), MILC (magic 20103) nor an \
                 openQCD header whose extents and plaquette fit the file's {file_len} bytes \
                 (a damaged openQCD file is named as such with format = \"openqcd\")",
                shown.join(" ")
            ),
        ))
    }

    pub fn name(self) -> &'static str {
        match self {
            GaugeFormat::Nersc => "nersc",
            GaugeFormat::Lime => "lime",
            GaugeFormat::Milc => "milc",
            GaugeFormat::OpenQcd => "openqcd",
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

    /// "nersc", "ildg" / "scidac" / "lime", "milc", "openqcd" (case-insensitive). "auto" is
    /// refused here
    /// because it is not a format; `parse_format` maps it to `None`.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nersc" => Ok(GaugeFormat::Nersc),
            "ildg" | "scidac" | "lime" => Ok(GaugeFormat::Lime),
            "milc" => Ok(GaugeFormat::Milc),
            "openqcd" => Ok(GaugeFormat::OpenQcd),
            "auto" => Err(Error::invalid(
                "format",
                "\"auto\" is not a format: it means detect from the file (use io::parse_format)",
            )),
            other => Err(Error::invalid(
                "format",
                format!("unknown gauge format \"{other}\"; expected nersc, ildg, scidac, lime, milc, openqcd or auto"),
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
    /// "NERSC", "ILDG", "SciDAC", "MILC" or "openQCD".
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
    /// The largest deviation from SU(3) a link of this precision may have as stored
    /// (`unitarity_tolerance`); a file beyond it is refused unless reunitarisation is asked.
    pub unitarity_tolerance: f64,
    /// Where the worst link is: site (x, y, z, t) and direction mu.
    pub unitarity_worst_site: Option<([usize; NDIM], usize)>,
    /// True when the links returned are not the links stored: every 32-bit file (projected
    /// onto SU(3) in double), and a file whose links were beyond the tolerance when
    /// `reunitarise` was asked for.
    pub reunitarised: bool,
    /// Links beyond the tolerance that were projected because `reunitarise` was asked for
    /// (0 otherwise: such a file is refused).
    pub links_forced_onto_su3: usize,
    /// Other header entries worth showing (creator, ensemble, time stamp, LIME records).
    pub metadata: Vec<(String, String)>,
    /// Every check made on the file and its result (docs/reliability.md).
    pub checks: Vec<checks::Check>,
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
        let at = match self.unitarity_worst_site {
            Some((c, mu)) => format!(
                " at (x,y,z,t) = ({},{},{},{}), mu = {mu}",
                c[0], c[1], c[2], c[3]
            ),
            None => String::new(),
        };
        match self.unitarity_reunitarised {
            Some(after) => writeln!(
                f,
                "unitarity:     worst deviation {:.2e} as stored{at} (tolerance {:.0e} for \
                 {}-bit), {:.2e} after reunitarisation",
                self.unitarity_as_stored, self.unitarity_tolerance, self.precision_bits, after
            )?,
            None => writeln!(
                f,
                "unitarity:     worst deviation {:.2e}{at} (tolerance {:.0e} for {}-bit; \
                 links used as stored)",
                self.unitarity_as_stored, self.unitarity_tolerance, self.precision_bits
            )?,
        }
        if self.links_forced_onto_su3 > 0 {
            writeln!(
                f,
                "               {} links beyond the tolerance were projected onto SU(3) \
                 because reunitarisation was asked for (--reunitarise)",
                self.links_forced_onto_su3
            )?;
        }
        for (k, v) in &self.metadata {
            writeln!(f, "  {k} = {v}")?;
        }
        writeln!(f, "checks:")?;
        for c in &self.checks {
            writeln!(f, "  {:<22} {}", c.check, c.result)?;
        }
        Ok(())
    }
}

/// How `read_gauge_with` treats links that are not SU(3) to the file's precision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Project links beyond `unitarity_tolerance` onto SU(3) (with a warning) instead of
    /// refusing the file (`--reunitarise`, `[gauge] reunitarise = true`).
    pub reunitarise: bool,
}

/// The largest deviation from SU(3) (`Su3::unitarity_deviation`) a stored link may have.
/// Measured on the shared lattices (validate/RESULTS.md, "Bad inputs tried"): the 32-bit
/// files reach 5.0e-7 (float32 rounding of each element, 6e-8 relative, summed over the
/// products in U U^+ and det U), the 64-bit ones 3.6e-15. The tolerances leave a factor 20
/// (32-bit) and 280 (64-bit, for writers that reunitarise less often) above that, and sit
/// far below what corruption of a significant bit gives (0.1 to 1e300).
pub fn unitarity_tolerance(precision_bits: u32) -> f64 {
    if precision_bits == 32 {
        1e-5
    } else {
        1e-12
    }
}

/// Reads a gauge configuration, detecting the format when `format` is `None`. Checks the
/// dimensions against `expected_dims` when given, verifies every checksum and header value
/// the file carries, refuses non-finite values and links off SU(3) (beyond
/// `unitarity_tolerance`), and reunitarises 32-bit input in double precision. `boundary` is
/// the fermion boundary condition of the returned field's lattice (links are always
/// periodic).
pub fn read_gauge(
    path: &Path,
    format: Option<GaugeFormat>,
    expected_dims: Option<[usize; NDIM]>,
    boundary: [Boundary; NDIM],
) -> Result<(GaugeField, GaugeFileInfo)> {
    read_gauge_with(
        path,
        format,
        expected_dims,
        boundary,
        ReadOptions::default(),
    )
}

/// `read_gauge` with options (`reunitarise`: accept links off SU(3) and project them).
/// This library entry reads a LIME file it cannot verify (no checksum record,
/// inconsistent flags) with a warning, so that tools and tests can reach the value
/// checks of such a file; the program (`info`, the main job) reads through
/// `read_gauge_checked`, which refuses it unless asked.
pub fn read_gauge_with(
    path: &Path,
    format: Option<GaugeFormat>,
    expected_dims: Option<[usize; NDIM]>,
    boundary: [Boundary; NDIM],
    opts: ReadOptions,
) -> Result<(GaugeField, GaugeFileInfo)> {
    read_gauge_checked(path, format, expected_dims, boundary, opts, true)
}

/// `read_gauge_with`, where `accept_unchecked` reads a LIME file that lacks its
/// checksum record or whose record flags are inconsistent (refused otherwise, exit 4).
/// The checks made are recorded for the report (`checks::record`).
pub fn read_gauge_checked(
    path: &Path,
    format: Option<GaugeFormat>,
    expected_dims: Option<[usize; NDIM]>,
    boundary: [Boundary; NDIM],
    opts: ReadOptions,
    accept_unchecked: bool,
) -> Result<(GaugeField, GaugeFileInfo)> {
    let header = describe(path, format, expected_dims)?;
    check_unchecked(path, &header, accept_unchecked, true)?;
    for w in &header.warnings {
        tracing::warn!("{w}");
    }
    let (mut file, _) = open(path)?;
    let (links, sums) = match header.payload.order {
        payload::LinkOrder::SiteMajor => {
            payload::read_all(path, &mut file, &header.payload, header.volume())?
        }
        payload::LinkOrder::OpenQcd => (openqcd::read_all(path, &mut file, &header)?, [0, 0]),
    };
    let checksums = payload::compare_sums(path, &header.stored_sums, sums)?;
    let read = finish(path, header, links, checksums, boundary, opts)?;
    checks::record("gauge file", path, read.1.checks.clone());
    Ok(read)
}

/// What a gauge file (of `format`, detected when `None`) says about itself and where its
/// links are, its dims checked against `expected_dims`.
pub(crate) fn describe(
    path: &Path,
    format: Option<GaugeFormat>,
    expected_dims: Option<[usize; NDIM]>,
) -> Result<GaugeHeader> {
    let format = match format {
        Some(f) => f,
        None => GaugeFormat::detect(path)?,
    };
    match format {
        GaugeFormat::Nersc => nersc::describe(path, expected_dims),
        GaugeFormat::Lime => lime::describe(path, expected_dims),
        GaugeFormat::Milc => milc::describe(path, expected_dims),
        GaugeFormat::OpenQcd => openqcd::describe(path, expected_dims),
    }
}

/// Writes `path` atomically (`staged`: an exclusive temporary beside it, fsynced, renamed
/// over `path`, the folder fsynced), so a reader never sees a half-written file. Parent
/// directories are created. On any error the temporary is removed and `path` is left as
/// it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// `write_atomic` for output produced piece by piece, so a large file need not be built
/// in memory first.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    staged::commit_one(staged::stage_with(path, fill)?)
}

/// Bytes per block of the parallel writer (`write_atomic_blocks`) and checksum
/// (`app::outputs::file_crc32`).
pub const BLOCK_BYTES: usize = 8 << 20;

/// `write_atomic` for a file of `header` and then `body_len` bytes made block by block:
/// block b (`BLOCK_BYTES`, the last shorter) is `fill(b * BLOCK_BYTES, block)` and is
/// written at its offset, the blocks in parallel, so that encoding and the copy into the
/// page cache use every core. The staging, fsync and rename are `write_atomic_with`'s.
pub fn write_atomic_blocks(
    path: &Path,
    header: &[u8],
    body_len: u64,
    fill: impl Fn(u64, &mut [u8]) + Sync,
) -> Result<()> {
    staged::commit_one(stage_blocks(path, header, body_len, fill)?)
}

/// `write_atomic_blocks` up to the rename: the file staged for `Staged::commit`.
pub fn stage_blocks(
    path: &Path,
    header: &[u8],
    body_len: u64,
    fill: impl Fn(u64, &mut [u8]) + Sync,
) -> Result<staged::Staged> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    staged::stage(path, |file| {
        file.set_len(header.len() as u64 + body_len)?;
        file.write_all_at(header, 0)?;
        let blocks = body_len.div_ceil(BLOCK_BYTES as u64);
        (0..blocks).into_par_iter().try_for_each(|b| {
            let at = b * BLOCK_BYTES as u64;
            let mut buf = vec![0u8; (body_len - at).min(BLOCK_BYTES as u64) as usize];
            fill(at, &mut buf);
            file.write_all_at(&buf, header.len() as u64 + at)
        })
    })
}

/// Whether `head` (a file's first bytes) and the file's length `file_len` are those of an
/// openQCD file (`GaugeFormat::detect`).
fn looks_like_openqcd(head: &[u8], file_len: u64) -> bool {
    let Some(dims) = openqcd::header_dims(head) else {
        return false;
    };
    if dims.iter().any(|&n| n > 1 << 16) {
        return false;
    }
    let plaquette = openqcd::header_plaquette(head);
    let sites = dims.iter().map(|&n| n as u64).product::<u64>();
    // A margin for rounding: a unit field's sum may land a few ulps above 3.
    (-1.5 - 1e-9..=3.0 + 1e-9).contains(&plaquette)
        && sites
            .checked_mul(576)
            .and_then(|b| b.checked_add(openqcd::HEADER_LEN as u64))
            == Some(file_len)
}

/// The text of a NUL-padded byte string (LIME types, MILC time stamps, XML records).
pub(crate) fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
