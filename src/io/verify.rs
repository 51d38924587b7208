//! What every gauge reader shares after decoding: the links checked for NaN/infinity and
//! against SU(3) to the file's precision, the header's plaquette and link trace checked to
//! the digits it prints, checksums compared. Each check is a function of values that
//! combine over ranks (`LinkSurvey`, plaquette sums), so the whole-file reader (`finish`)
//! and the per-rank slab reader (`slab`) refuse a file with the same words.

use super::checks::Check;
use super::payload::Payload;
use super::{unitarity_tolerance, ChecksumInfo, GaugeFileInfo, ReadOptions};
use crate::error::{Error, Result};
use crate::field::gauge::{
    first_non_finite, links_beyond, worse_link, worst_link, NonFinite, Plaquette,
};
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use std::path::Path;

/// What a gauge file says about itself, read before its links: each format's `describe`
/// returns it, and the whole-file reader (`read_gauge_with`) and the slab reader
/// (`slab::read_gauge_slab`) both start from it.
pub(crate) struct GaugeHeader {
    pub format: String,
    pub datatype: String,
    pub dims: [usize; NDIM],
    pub precision_bits: u32,
    pub big_endian: bool,
    /// The checksums the file stores, (key, value), in the order `SiteSums::values`
    /// computes them.
    pub stored_sums: Vec<(String, u32)>,
    /// A plaquette the header states.
    pub header_plaquette: Option<HeaderValue>,
    pub header_link_trace: Option<HeaderValue>,
    pub metadata: Vec<(String, String)>,
    pub payload: Payload,
    /// What the file lacks (no checksum, no header plaquette), for the caller to log once.
    pub warnings: Vec<String>,
    /// Integrity checks the file does not allow (no checksum record, inconsistent LIME
    /// record flags): the file is refused unless `accept_unchecked` (`check_unchecked`).
    pub unchecked: Vec<String>,
    /// Checks made on the container before the links (LIME record flags, ...), as
    /// (check, result) for `GaugeFileInfo::checks`.
    pub container_checks: Vec<(String, String)>,
}

/// Refuse a file with integrity checks it does not allow (`GaugeHeader::unchecked`)
/// unless `accept_unchecked`; when accepted, warn (when `warn`) and return the notes.
pub(crate) fn check_unchecked(
    path: &Path,
    header: &GaugeHeader,
    accept_unchecked: bool,
    warn: bool,
) -> Result<()> {
    if header.unchecked.is_empty() {
        return Ok(());
    }
    let what = header.unchecked.join("; ");
    if !accept_unchecked {
        return Err(Error::format(
            path,
            format!(
                "{what}: the data cannot be verified (truncated or damaged file?); to read it \
                 anyway pass --accept-unchecked (or set accept_unchecked = true in [gauge])"
            ),
        ));
    }
    if warn {
        tracing::warn!(
            "{}: {what}; read unverified as asked (accept_unchecked)",
            path.display()
        );
    }
    Ok(())
}

impl GaugeHeader {
    pub fn volume(&self) -> usize {
        self.dims.iter().product()
    }
}

/// A number a header states: its key, the text as printed (whose digits set the tolerance
/// it is checked to) and its value.
pub(crate) struct HeaderValue {
    pub key: String,
    pub text: String,
    pub value: f64,
    /// Appended to a mismatch's message: what else a mismatch can mean for this format.
    pub note: Option<String>,
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
            note: None,
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
///
/// A whole number ("0", "1", "-1") states the value exactly, not to a unit of 1: it gets
/// `floor` alone (a unit field's plaquette is exactly 1; a tolerance of 2 would let any
/// plaquette pass).
pub fn header_tolerance(text: &str, floor: f64) -> f64 {
    let t = text.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return floor;
    }
    last_digit_unit(text).map_or(floor, |u| (2.0 * u).max(floor))
}

/// "(x,y,z,t) = (1,2,3,0)".
fn site_string(c: [usize; NDIM]) -> String {
    format!("(x,y,z,t) = ({},{},{},{})", c[0], c[1], c[2], c[3])
}

/// Coordinates of global site `site` on a lattice of extents `dims` (x fastest).
fn coords(dims: [usize; NDIM], mut site: usize) -> [usize; NDIM] {
    std::array::from_fn(|mu| {
        let c = site % dims[mu];
        site /= dims[mu];
        c
    })
}

/// What the checks of links as stored need to know, for a whole field, for one rank's
/// part of it (link indices global: site * 4 + mu in global lexicographic order), or
/// combined over ranks (`merge`): the answer does not depend on how the links were split.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LinkSurvey {
    /// The first link (lowest global index) holding a non-finite value, and how many do.
    pub non_finite: Option<(NonFinite, usize)>,
    /// The link farthest from SU(3) (`GaugeField::worst_link`'s order: NaN worst, ties to
    /// the lower index), by global index.
    pub worst: Option<(usize, f64)>,
    /// Links beyond the tolerance, counted only when the worst is beyond it (0 otherwise).
    pub beyond: usize,
}

/// Length of `LinkSurvey::to_reals`.
pub(crate) const SURVEY_REALS: usize = 10;

impl LinkSurvey {
    /// The survey of `links` (index k in the slice is global link `global_link(k)`, an
    /// increasing map) against `tolerance`.
    pub fn of(links: &[Su3], tolerance: f64, global_link: impl Fn(usize) -> usize) -> LinkSurvey {
        let non_finite = first_non_finite(links).map(|(mut bad, count)| {
            bad.link = global_link(bad.link);
            (bad, count)
        });
        let worst = worst_link(links).map(|(k, d)| (global_link(k), d));
        let beyond = match worst {
            Some((_, d)) if d > tolerance => links_beyond(links, tolerance),
            _ => 0,
        };
        LinkSurvey {
            non_finite,
            worst,
            beyond,
        }
    }

    /// The survey of the union of two disjoint sets of links.
    pub fn merge(self, other: LinkSurvey) -> LinkSurvey {
        let non_finite = match (self.non_finite, other.non_finite) {
            (Some((a, n)), Some((b, m))) => Some((if b.link < a.link { b } else { a }, n + m)),
            (a, b) => a.or(b),
        };
        let worst = match (self.worst, other.worst) {
            (Some(a), Some(b)) => Some(worse_link(a, b)),
            (a, b) => a.or(b),
        };
        LinkSurvey {
            non_finite,
            worst,
            beyond: self.beyond + other.beyond,
        }
    }

    /// As reals for `Comms::all_gather` (indices and counts below 2^53 are exact).
    pub fn to_reals(self) -> [f64; SURVEY_REALS] {
        let (nf, count) = self.non_finite.map_or(
            (
                NonFinite {
                    link: 0,
                    row: 0,
                    col: 0,
                    part: 0,
                    value: 0.0,
                },
                0,
            ),
            |x| x,
        );
        let (wk, wd) = self.worst.unwrap_or((0, 0.0));
        [
            count as f64,
            nf.link as f64,
            nf.row as f64,
            nf.col as f64,
            nf.part as f64,
            nf.value,
            self.worst.is_some() as u8 as f64,
            wk as f64,
            wd,
            self.beyond as f64,
        ]
    }

    pub fn from_reals(r: &[f64]) -> LinkSurvey {
        let count = r[0] as usize;
        LinkSurvey {
            non_finite: (count > 0).then_some((
                NonFinite {
                    link: r[1] as usize,
                    row: r[2] as usize,
                    col: r[3] as usize,
                    part: r[4] as usize,
                    value: r[5],
                },
                count,
            )),
            worst: (r[6] != 0.0).then_some((r[7] as usize, r[8])),
            beyond: r[9] as usize,
        }
    }
}

/// Refuses non-finite links, then links off SU(3) beyond the tolerance of the file's
/// precision unless `opts.reunitarise` asks to project them (then warns when `warn`).
/// Returns how many links are projected because it was asked (0 when none is beyond).
pub(crate) fn check_stored(
    path: &Path,
    header: &GaugeHeader,
    survey: &LinkSurvey,
    opts: ReadOptions,
    warn: bool,
) -> Result<usize> {
    let links = header.volume() * NDIM;
    // Non-finite values first: a NaN makes every later check (unitarity, plaquette) NaN,
    // and NaN compares false, so it would pass them.
    if let Some((bad, count)) = survey.non_finite {
        let site = bad.link / NDIM;
        return Err(Error::format(
            path,
            format!(
                "non-finite link value {} at site {}, mu = {}, element [{}][{}] {} \
                 ({count} of {links} links hold a NaN or infinity)",
                bad.value,
                site_string(coords(header.dims, site)),
                bad.link % NDIM,
                bad.row,
                bad.col,
                if bad.part == 0 {
                    "real part"
                } else {
                    "imaginary part"
                },
            ),
        ));
    }

    // Links must be SU(3) to the stored precision; a link beyond it is corrupted or not a
    // gauge link, and reunitarising it would silently make up a different field.
    let tolerance = unitarity_tolerance(header.precision_bits);
    let (worst_idx, unitarity_as_stored) = survey.worst.unwrap_or((0, 0.0));
    let worst_site = coords(header.dims, worst_idx / NDIM);
    let worst_mu = worst_idx % NDIM;
    if unitarity_as_stored > tolerance {
        let beyond = survey.beyond;
        if !opts.reunitarise {
            return Err(Error::format(
                path,
                format!(
                    "link at site {}, mu = {worst_mu} deviates from SU(3) by {unitarity_as_stored:.3e} \
                     (max |U U^+ - 1| and |det U - 1|), beyond the {tolerance:.0e} a {}-bit file \
                     allows; {beyond} of {links} links are beyond it. The data is corrupted or not \
                     SU(3); to project the links onto SU(3) anyway pass --reunitarise (or set \
                     reunitarise = true in [gauge])",
                    site_string(worst_site),
                    header.precision_bits,
                ),
            ));
        }
        if warn {
            tracing::warn!(
                "{}: {beyond} of {links} links deviate from SU(3) beyond {tolerance:.0e} (worst \
                 {unitarity_as_stored:.3e} at site {}, mu = {worst_mu}); projecting every link \
                 onto SU(3) as asked (reunitarise)",
                path.display(),
                site_string(worst_site)
            );
        }
        return Ok(beyond);
    }
    Ok(0)
}

/// How many of `links` (after reunitarisation, whose worst is `worst`) have no
/// projection onto SU(3); counted only when the worst has none (0 otherwise).
pub(crate) fn projection_failures(links: &[Su3], worst: Option<(usize, f64)>) -> usize {
    match worst {
        Some((_, after)) if after.is_nan() || after > 1e-12 => links_beyond(links, 1e-12),
        _ => 0,
    }
}

/// After reunitarisation: refuses a link that has no projection onto SU(3) (`worst` the
/// worst link after it, by global index; `failures` from `projection_failures`). Returns
/// the worst deviation.
pub(crate) fn check_projected(
    path: &Path,
    dims: [usize; NDIM],
    worst: Option<(usize, f64)>,
    failures: usize,
) -> Result<f64> {
    // A link with a zero or repeated row has no projection (Gram-Schmidt divides by 0:
    // NaN), nor has one whose norm overflows (1e300 in an element: its row becomes 0).
    let (k, after) = worst.unwrap_or((0, 0.0));
    if after.is_nan() || after > 1e-12 {
        return Err(Error::format(
            path,
            format!(
                "the link at site {}, mu = {} cannot be projected onto SU(3) (a zero, \
                 degenerate or overflowing row: {after:.3e} from SU(3) after \
                 reunitarisation; {failures} such links)",
                site_string(coords(dims, k / NDIM)),
                k % NDIM,
            ),
        ));
    }
    Ok(after)
}

/// Header values: two units in the last digit the header prints (header_tolerance), no
/// tighter than the stored precision allows. 64-bit: 1e-10, what another writer's sum in
/// another order over a large lattice can differ by, and far below what a flipped bit
/// moves (1.6e-6 for one link of an 8^3x4 field off by 0.1). 32-bit: 1e-5, as the
/// conventions ask: rounding each element to float32 moves it by ~6e-8 relative and
/// reunitarisation by the same order, so a product of four links moves by a few 1e-7,
/// and some writers average in single precision.
pub(crate) fn check_header(
    path: &Path,
    header: &GaugeHeader,
    plaquette: f64,
    link_trace: f64,
) -> Result<()> {
    let floor = if header.precision_bits == 32 {
        1e-5
    } else {
        1e-10
    };
    for (h, computed) in [
        (&header.header_plaquette, plaquette),
        (&header.header_link_trace, link_trace),
    ] {
        if let Some(h) = h {
            let tol = header_tolerance(&h.text, floor);
            check_close(path, &h.key, &h.text, h.value, computed, tol).map_err(|e| {
                match (&h.note, e) {
                    (Some(note), Error::Format { path, message }) => Error::Format {
                        path,
                        message: format!("{message}; {note}"),
                    },
                    (_, e) => e,
                }
            })?;
        }
    }
    Ok(())
}

/// What the verification of a file's links found, for its `GaugeFileInfo`.
pub(crate) struct Verified {
    pub checksums: Vec<ChecksumInfo>,
    pub plaquette: Plaquette,
    pub link_trace: f64,
    pub survey: LinkSurvey,
    /// The worst deviation after reunitarisation, when the links were reunitarised.
    pub after: Option<f64>,
    pub forced: usize,
}

/// The checks a verified file passed (or was let through), for `GaugeFileInfo::checks`.
fn checks_made(header: &GaugeHeader, v: &Verified) -> Vec<Check> {
    let mut out: Vec<Check> = header
        .container_checks
        .iter()
        .map(|(c, r)| Check::new(c, r))
        .collect();
    for u in &header.unchecked {
        out.push(Check::new(
            "unverifiable",
            format!("accepted unchecked: {u}"),
        ));
    }
    if v.checksums.is_empty() {
        out.push(Check::new("checksum", "none stored"));
    }
    for c in &v.checksums {
        out.push(Check::new(
            format!("checksum {}", c.name),
            format!("ok: stored {:08x} = computed", c.stored),
        ));
    }
    out.push(Check::new("finite values", "ok: no NaN or infinity"));
    let tol = unitarity_tolerance(header.precision_bits);
    let worst = v.survey.worst.map_or(0.0, |w| w.1);
    out.push(Check::new(
        "SU(3) as stored",
        if v.forced > 0 {
            format!(
                "{} links beyond {tol:.0e} projected as asked (reunitarise)",
                v.forced
            )
        } else {
            format!("ok: worst deviation {worst:.2e} within {tol:.0e}")
        },
    ));
    let floor = if header.precision_bits == 32 {
        1e-5
    } else {
        1e-10
    };
    for (name, h, computed) in [
        (
            "header plaquette",
            &header.header_plaquette,
            v.plaquette.total,
        ),
        ("header link trace", &header.header_link_trace, v.link_trace),
    ] {
        out.push(Check::new(
            name,
            match h {
                Some(h) => format!(
                    "ok: {} = {}, difference {:.2e} within {:.1e}",
                    h.key,
                    h.text,
                    (h.value - computed).abs(),
                    header_tolerance(&h.text, floor)
                ),
                None => "none stated".to_string(),
            },
        ));
    }
    out
}

pub(crate) fn file_info(path: &Path, header: GaugeHeader, v: Verified) -> GaugeFileInfo {
    let (worst_idx, unitarity_as_stored) = v.survey.worst.unwrap_or((0, 0.0));
    let checks = checks_made(&header, &v);
    GaugeFileInfo {
        checks,
        path: path.display().to_string(),
        format: header.format,
        datatype: header.datatype,
        dims: header.dims,
        precision_bits: header.precision_bits,
        byte_order: if header.big_endian {
            "big-endian".into()
        } else {
            "little-endian".into()
        },
        checksums: v.checksums,
        header_plaquette: header.header_plaquette.as_ref().map(|p| p.value),
        header_plaquette_key: header.header_plaquette.map(|p| p.key),
        header_link_trace: header.header_link_trace.map(|h| h.value),
        plaquette: v.plaquette,
        link_trace: v.link_trace,
        unitarity_as_stored,
        unitarity_reunitarised: v.after,
        unitarity_tolerance: unitarity_tolerance(header.precision_bits),
        unitarity_worst_site: v
            .survey
            .worst
            .map(|_| (coords(header.dims, worst_idx / NDIM), worst_idx % NDIM)),
        reunitarised: v.after.is_some(),
        links_forced_onto_su3: v.forced,
        metadata: header.metadata,
    }
}

/// The whole field's verification (`read_gauge_with`): the links as decoded from the
/// file, whose checksums (`checksums`) already matched. Refuses non-finite values and
/// links off SU(3) (beyond `unitarity_tolerance`, unless `opts.reunitarise`),
/// reunitarises 32-bit links in double, and checks the header's plaquette and link trace.
pub(crate) fn finish(
    path: &Path,
    header: GaugeHeader,
    links: Vec<Su3>,
    checksums: Vec<ChecksumInfo>,
    boundary: [Boundary; NDIM],
    opts: ReadOptions,
) -> Result<(GaugeField, GaugeFileInfo)> {
    let lattice = Lattice::new(header.dims, boundary)
        .map_err(|e| Error::format(path, format!("dimensions: {e}")))?;
    if links.len() != lattice.volume() * NDIM {
        // The readers size the payload from the dims, so this is an internal inconsistency.
        return Err(Error::format(
            path,
            format!(
                "decoded {} links, expected {} for {}",
                links.len(),
                lattice.volume() * NDIM,
                lattice.dims_string()
            ),
        ));
    }
    let mut field = GaugeField { lattice, links };
    let tolerance = unitarity_tolerance(header.precision_bits);
    let survey = LinkSurvey::of(&field.links, tolerance, |k| k);
    let forced = check_stored(path, &header, &survey, opts, true)?;
    // Links projected on request: the header describes the field as written, so it is
    // checked against the links as stored (a file corrupted after writing still fails).
    if forced > 0 {
        check_header(path, &header, field.plaquette().total, field.link_trace())?;
    }
    let after = if header.precision_bits == 32 || forced > 0 {
        // 32-bit links are unitary only to ~1e-7; the solver wants SU(3) to double precision.
        field.reunitarise();
        let worst = field.worst_link();
        let failures = projection_failures(&field.links, worst);
        Some(check_projected(path, header.dims, worst, failures)?)
    } else {
        None
    };
    let plaquette = field.plaquette();
    let link_trace = field.link_trace();
    // 32-bit within tolerance: checked after reunitarisation, which brings the links back
    // towards the double field a writer usually computed its header from.
    if forced == 0 {
        check_header(path, &header, plaquette.total, link_trace)?;
    }
    let info = file_info(
        path,
        header,
        Verified {
            checksums,
            plaquette,
            link_trace,
            survey,
            after,
            forced,
        },
    );
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
