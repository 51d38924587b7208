//! The gauge payload every reader ends in: a site-major array of links (sites x fastest,
//! then mu = x,y,z,t), each link a fixed number of reals of one width and byte order, with
//! a checksum the format keeps over it. `LinkEncoding` decodes one link, `SiteSums`
//! accumulates a format's checksum site by site from global site indices (so a rank can
//! sum the sites it owns and the ranks can combine their partials), and `read_all`
//! streams the whole payload (the whole-file readers; `slab` reads a rank's part).

use super::{stream_units, u32_at, u64_at, ChecksumInfo};
use crate::error::Result;
use crate::field::{Su3, C64};
use crate::geometry::lattice::NDIM;
use std::path::Path;

/// How one link is stored: `reals` reals (18 for a 3x3 matrix, 12 for its rows 0 and 1,
/// row 2 rebuilt as conj(row0 x row1)), row-major, (re, im), 64- or 32-bit IEEE in either
/// byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinkEncoding {
    pub reals: usize,
    pub double: bool,
    pub big: bool,
}

impl LinkEncoding {
    pub fn bytes_per_real(&self) -> usize {
        if self.double {
            8
        } else {
            4
        }
    }

    pub fn link_bytes(&self) -> usize {
        self.reals * self.bytes_per_real()
    }

    /// Bytes of one site: its NDIM links.
    pub fn site_bytes(&self) -> usize {
        NDIM * self.link_bytes()
    }

    /// The link stored in `b` (at least `link_bytes()` long).
    #[inline]
    pub fn decode(&self, b: &[u8]) -> Su3 {
        let w = self.bytes_per_real();
        let real = |k: usize| {
            let chunk = &b[k * w..];
            if self.double {
                f64::from_bits(u64_at(chunk, self.big))
            } else {
                f32::from_bits(u32_at(chunk, self.big)) as f64
            }
        };
        let mut m = Su3::zero();
        let rows = self.reals / 6;
        for r in 0..rows {
            for c in 0..3 {
                m.0[r][c] = C64::new(real(6 * r + 2 * c), real(6 * r + 2 * c + 1));
            }
        }
        if rows == 2 {
            m.0[2] = Su3::third_row(&m.0[0], &m.0[1]);
        }
        m
    }

    /// The NERSC CHECKSUM contribution of the stored reals in `b`: their 32-bit words in
    /// host order, added modulo 2^32 (a double contributes both halves).
    #[inline]
    pub fn nersc_words(&self, b: &[u8]) -> u32 {
        let w = self.bytes_per_real();
        let mut sum = 0u32;
        for chunk in b.chunks_exact(w) {
            if self.double {
                let bits = u64_at(chunk, self.big);
                sum = sum
                    .wrapping_add(bits as u32)
                    .wrapping_add((bits >> 32) as u32);
            } else {
                sum = sum.wrapping_add(u32_at(chunk, self.big));
            }
        }
        sum
    }
}

/// The checksum a format keeps over its payload (conventions.md, "File formats").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SumKind {
    /// NERSC CHECKSUM: the 32-bit words of the stored reals added modulo 2^32.
    Nersc,
    /// SciDAC suma/sumb: the CRC-32 of each site's bytes rotated left by s mod 29 (suma)
    /// and s mod 31 (sumb), s the global site index, XORed over sites.
    Scidac,
    /// MILC sum29/sum31: each 32-bit word w_k of the payload (file byte order), k its
    /// index in the whole payload, rotated left by k mod 29 / k mod 31 and XORed.
    Milc,
    /// No checksum stored (openQCD): nothing is summed.
    None,
}

impl SumKind {
    /// Two partial sums over disjoint sets of sites, combined: added (NERSC) or XORed.
    pub fn combine(self, a: [u32; 2], b: [u32; 2]) -> [u32; 2] {
        match self {
            SumKind::Nersc => [a[0].wrapping_add(b[0]), a[1].wrapping_add(b[1])],
            SumKind::Scidac | SumKind::Milc => [a[0] ^ b[0], a[1] ^ b[1]],
            SumKind::None => [0, 0],
        }
    }
}

/// A format's checksum accumulated over any set of sites, each given with its global
/// site index: the same two values (CHECKSUM and 0, suma and sumb, sum29 and sum31)
/// whatever the order and grouping of the sites.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SiteSums {
    kind: SumKind,
    encoding: LinkEncoding,
    pub values: [u32; 2],
}

impl SiteSums {
    pub fn new(kind: SumKind, encoding: LinkEncoding) -> SiteSums {
        SiteSums {
            kind,
            encoding,
            values: [0, 0],
        }
    }

    /// Adds the site of global index `site` whose stored bytes are `bytes`.
    #[inline]
    pub fn add_site(&mut self, site: usize, bytes: &[u8]) {
        let v = &mut self.values;
        match self.kind {
            SumKind::Nersc => v[0] = v[0].wrapping_add(self.encoding.nersc_words(bytes)),
            SumKind::Scidac => {
                let crc = crc32fast::hash(bytes);
                v[0] ^= crc.rotate_left((site % 29) as u32);
                v[1] ^= crc.rotate_left((site % 31) as u32);
            }
            SumKind::Milc => {
                // Word index over the whole payload; it fits in usize because the
                // reader checked the payload's byte count.
                let base = site * (bytes.len() / 4);
                for (j, w) in bytes.chunks_exact(4).enumerate() {
                    let word = u32_at(w, self.encoding.big);
                    let k = base + j;
                    v[0] ^= word.rotate_left((k % 29) as u32);
                    v[1] ^= word.rotate_left((k % 31) as u32);
                }
            }
            SumKind::None => {}
        }
    }
}

/// The order of the links in a payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkOrder {
    /// This program's: sites x fastest, each site's links mu = x, y, z, t (NERSC, LIME,
    /// MILC), read by `read_all` and by offset in `slab`.
    SiteMajor,
    /// openQCD's: the eight links (+mu, -mu) of each odd point (`openqcd`).
    OpenQcd,
}

/// Where the links lie in the file and how they are stored.
#[derive(Clone, Debug)]
pub(crate) struct Payload {
    /// File offset of the first link.
    pub offset: u64,
    pub encoding: LinkEncoding,
    pub sums: SumKind,
    /// What truncation errors call the payload ("payload", a LIME record's type).
    pub what: String,
    pub order: LinkOrder,
}

/// The stored checksums (name, value) paired in order with the computed `values`
/// (`SiteSums::values`) and compared: the first that differs is refused, naming the key
/// and both values (`check_checksum`).
pub(crate) fn compare_sums(
    path: &Path,
    stored: &[(String, u32)],
    values: [u32; 2],
) -> Result<Vec<ChecksumInfo>> {
    let mut out = Vec::with_capacity(stored.len());
    for ((name, s), computed) in stored.iter().zip(values) {
        let c = ChecksumInfo {
            name: name.clone(),
            stored: *s,
            computed,
        };
        super::check_checksum(path, &c)?;
        out.push(c);
    }
    Ok(out)
}

/// Every link of the payload, in file order, and the computed checksum values. The file
/// is streamed a few MiB at a time.
pub(crate) fn read_all(
    path: &Path,
    file: &mut std::fs::File,
    payload: &Payload,
    volume: usize,
) -> Result<(Vec<Su3>, [u32; 2])> {
    let enc = payload.encoding;
    let mut links = Vec::with_capacity(volume * NDIM);
    let mut sums = SiteSums::new(payload.sums, enc);
    stream_units(
        path,
        file,
        payload.offset,
        enc.site_bytes(),
        volume,
        &payload.what,
        |first, bytes| {
            for (k, site) in bytes.chunks_exact(enc.site_bytes()).enumerate() {
                sums.add_site(first + k, site);
                for link in site.chunks_exact(enc.link_bytes()) {
                    links.push(enc.decode(link));
                }
            }
            Ok(())
        },
    )?;
    Ok((links, sums.values))
}
