//! Gauge and spinor file formats, one file per format, plus what they share: format
//! detection, the common gauge reader `read_gauge` (which verifies everything a file
//! carries and refuses a file that disagrees, naming what differed), the `GaugeFileInfo`
//! that `qcd-solve info` prints, and `write_atomic` used for every output file.

pub mod lime;
pub mod milc;
pub mod nersc;
pub mod npy;

pub use nersc::{write_nersc, NerscWrite};
pub use npy::{read_spinor_npy, write_spinor_npy};

use crate::error::{Error, Result};
use crate::field::gauge::Plaquette;
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
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
pub fn read_gauge_with(
    path: &Path,
    format: Option<GaugeFormat>,
    expected_dims: Option<[usize; NDIM]>,
    boundary: [Boundary; NDIM],
    opts: ReadOptions,
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
    finish(path, raw, boundary, opts)
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
    /// A plaquette the header states.
    pub header_plaquette: Option<HeaderValue>,
    pub header_link_trace: Option<HeaderValue>,
    pub metadata: Vec<(String, String)>,
}

/// A number a header states: its key, the text as printed (whose digits set the tolerance
/// it is checked to) and its value.
pub(crate) struct HeaderValue {
    pub key: String,
    pub text: String,
    pub value: f64,
}

impl HeaderValue {
    /// Parses `text`; a value that is not a number is refused, naming `key`.
    pub(crate) fn parse(path: &Path, key: &str, text: &str) -> Result<HeaderValue> {
        let text = text.trim();
        let value: f64 = text
            .parse()
            .map_err(|_| Error::format(path, format!("{key} = {text} is not a number")))?;
        if !value.is_finite() {
            return Err(Error::format(
                path,
                format!("{key} = {text} is not a finite number"),
            ));
        }
        Ok(HeaderValue {
            key: key.to_string(),
            text: text.to_string(),
            value,
        })
    }
}

/// One unit in the last digit of a number as printed: "0.5038664469" -> 1e-10,
/// "6.350056e-01" -> 1e-7, "0.004385" -> 1e-6, "1" -> 1, "1.5E+2" -> 10. `None` when the
/// text is not a plain decimal number.
pub fn last_digit_unit(text: &str) -> Option<f64> {
    let t = text.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let decimals = i32::try_from(frac.len()).ok()?;
    let unit = 10f64.powi(exp.checked_sub(decimals)?);
    (unit.is_finite() && unit > 0.0).then_some(unit)
}

/// The tolerance a header value is checked to: two units in its last printed digit (four
/// times the rounding of the print, for writers that sum in another order), but no tighter
/// than `floor`, what the stored precision allows (see `finish`). Text that is not a plain
/// decimal gets `floor` alone.
pub fn header_tolerance(text: &str, floor: f64) -> f64 {
    last_digit_unit(text).map_or(floor, |u| (2.0 * u).max(floor))
}

/// "(x,y,z,t) = (1,2,3,0)".
fn site_string(c: [usize; NDIM]) -> String {
    format!("(x,y,z,t) = ({},{},{},{})", c[0], c[1], c[2], c[3])
}

fn finish(
    path: &Path,
    raw: RawGauge,
    boundary: [Boundary; NDIM],
    opts: ReadOptions,
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

    // Non-finite values first: a NaN makes every later check (unitarity, plaquette) NaN,
    // and NaN compares false, so it would pass them.
    if let Some((bad, count)) = field.first_non_finite() {
        let site = bad.link / NDIM;
        return Err(Error::format(
            path,
            format!(
                "non-finite link value {} at site {}, mu = {}, element [{}][{}] {} \
                 ({count} of {} links hold a NaN or infinity)",
                bad.value,
                site_string(field.lattice.coords(site)),
                bad.link % NDIM,
                bad.row,
                bad.col,
                if bad.part == 0 {
                    "real part"
                } else {
                    "imaginary part"
                },
                field.links.len()
            ),
        ));
    }

    // Links must be SU(3) to the stored precision; a link beyond it is corrupted or not a
    // gauge link, and reunitarising it would silently make up a different field.
    let tolerance = unitarity_tolerance(raw.precision_bits);
    let (worst_idx, unitarity_as_stored) = field.worst_link().unwrap_or((0, 0.0));
    let worst_site = field.lattice.coords(worst_idx / NDIM);
    let worst_mu = worst_idx % NDIM;
    let mut forced = 0;
    if unitarity_as_stored > tolerance {
        let beyond = field.links_beyond(tolerance);
        if !opts.reunitarise {
            return Err(Error::format(
                path,
                format!(
                    "link at site {}, mu = {worst_mu} deviates from SU(3) by {unitarity_as_stored:.3e} \
                     (max |U U^+ - 1| and |det U - 1|), beyond the {tolerance:.0e} a {}-bit file \
                     allows; {beyond} of {} links are beyond it. The data is corrupted or not \
                     SU(3); to project the links onto SU(3) anyway pass --reunitarise (or set \
                     reunitarise = true in [gauge])",
                    site_string(worst_site),
                    raw.precision_bits,
                    field.links.len()
                ),
            ));
        }
        tracing::warn!(
            "{}: {beyond} of {} links deviate from SU(3) beyond {tolerance:.0e} (worst \
             {unitarity_as_stored:.3e} at site {}, mu = {worst_mu}); projecting every link \
             onto SU(3) as asked (reunitarise)",
            path.display(),
            field.links.len(),
            site_string(worst_site)
        );
        forced = beyond;
    }
    // Header values: two units in the last digit the header prints (header_tolerance), no
    // tighter than the stored precision allows. 64-bit: 1e-10, what another writer's sum
    // in another order over a large lattice can differ by, and far below what a flipped
    // bit moves (1.6e-6 for one link of an 8^3x4 field off by 0.1). 32-bit: 1e-5, as the
    // conventions ask: rounding each element to float32 moves it by ~6e-8 relative and
    // reunitarisation by the same order, so a product of four links moves by a few 1e-7,
    // and some writers average in single precision.
    let floor = if single { 1e-5 } else { 1e-10 };
    let check_header = |plaquette: f64, link_trace: f64| -> Result<()> {
        for (h, computed) in [
            (&raw.header_plaquette, plaquette),
            (&raw.header_link_trace, link_trace),
        ] {
            if let Some(h) = h {
                let tol = header_tolerance(&h.text, floor);
                check_close(path, &h.key, &h.text, h.value, computed, tol)?;
            }
        }
        Ok(())
    };
    // Links projected on request: the header describes the field as written, so it is
    // checked against the links as stored (a file corrupted after writing still fails).
    if forced > 0 {
        check_header(field.plaquette().total, field.link_trace())?;
    }

    let reunitarised = single || forced > 0;
    let unitarity_reunitarised = if reunitarised {
        // 32-bit links are unitary only to ~1e-7; the solver wants SU(3) to double precision.
        field.reunitarise();
        // A link with a zero or repeated row has no projection (Gram-Schmidt divides by 0:
        // NaN), nor has one whose norm overflows (1e300 in an element: its row becomes 0).
        let (k, after) = field.worst_link().unwrap_or((0, 0.0));
        if after.is_nan() || after > 1e-12 {
            return Err(Error::format(
                path,
                format!(
                    "the link at site {}, mu = {} cannot be projected onto SU(3) (a zero, \
                     degenerate or overflowing row: {after:.3e} from SU(3) after \
                     reunitarisation; {} such links)",
                    site_string(field.lattice.coords(k / NDIM)),
                    k % NDIM,
                    field.links_beyond(1e-12)
                ),
            ));
        }
        Some(after)
    } else {
        None
    };
    let plaquette = field.plaquette();
    let link_trace = field.link_trace();
    // 32-bit within tolerance: checked after reunitarisation, which brings the links back
    // towards the double field a writer usually computed its header from.
    if forced == 0 {
        check_header(plaquette.total, link_trace)?;
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
        header_plaquette: raw.header_plaquette.as_ref().map(|p| p.value),
        header_plaquette_key: raw.header_plaquette.map(|p| p.key),
        header_link_trace: raw.header_link_trace.map(|h| h.value),
        plaquette,
        link_trace,
        unitarity_as_stored,
        unitarity_reunitarised,
        unitarity_tolerance: tolerance,
        unitarity_worst_site: (!field.links.is_empty()).then_some((worst_site, worst_mu)),
        reunitarised,
        links_forced_onto_su3: forced,
        metadata: raw.metadata,
    };
    Ok((field, info))
}

fn check_close(
    path: &Path,
    key: &str,
    text: &str,
    stated: f64,
    computed: f64,
    tol: f64,
) -> Result<()> {
    let diff = (stated - computed).abs();
    // A NaN in the file is refused too.
    if diff.is_nan() || diff > tol {
        // 12 decimals for a sane value; a corrupt field's 1e295 in exponent form.
        let computed = if computed.abs() < 1e6 {
            format!("{computed:.12}")
        } else {
            format!("{computed:.6e}")
        };
        return Err(Error::format(
            path,
            format!(
                "{key} mismatch: header says {text}, computed {computed} \
                 (difference {diff:.3e}, tolerance {tol:.1e} from the printed digits and \
                 the stored precision)"
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
