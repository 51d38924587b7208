//! What every gauge reader shares after decoding: the links checked for NaN/infinity and
//! against SU(3) to the file's precision, the header's plaquette and link trace checked to
//! the digits it prints, checksums compared; `finish` builds the field and its info.

use super::{unitarity_tolerance, ChecksumInfo, GaugeFileInfo, ReadOptions};
use crate::error::{Error, Result};
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use std::path::Path;

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

pub(crate) fn finish(
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
