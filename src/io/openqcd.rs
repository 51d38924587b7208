//! openQCD gauge files, the format of `export_cnfg` in openQCD's `modules/archive/archive.c`
//! (and of the CLS ensembles): a 24-byte header (the extents N0..N3 as little-endian
//! int32, time first, then the average plaquette as a little-endian double, normalised as
//! `sum Re tr U_p / (6 V)`, so 3 for a unit field), then the eight links
//! `U(x,0), U(x-0,0), U(x,1), U(x-1,1), .., U(x-3,3)` of every odd point x, points in the
//! order `x3 + N3 (x2 + N2 (x1 + N1 x0))` (x3 fastest, x0 = time slowest), each link 18
//! little-endian doubles, row-major, (re, im). openQCD's direction 0 is time and 1..3 are
//! x, y, z, so its mu is this program's (mu + 3) mod 4.
//!
//! Every link lies between an odd and an even point, so the eight links of the odd points
//! hold each link of the lattice exactly once when every extent is even (openQCD's local
//! lattices are). `describe` reads the header; `read_all` (the whole field) and
//! `read_sites` (the sites of one rank's box, for `slab`) put the links in this program's
//! order. The file stores no checksum: the header plaquette and the links' unitarity are
//! what verifies it. Only periodic files are read: with open boundary conditions openQCD
//! stores the time links on the last time slice as zero (refused here by name), and with
//! Schroedinger-functional ones the header plaquette includes boundary plaquettes that the
//! stored links do not determine (refused by the plaquette check).

use super::payload::{LinkEncoding, LinkOrder, Payload, SumKind};
use super::{byte_len, check_dims, check_payload, open, read_exact_at, stream_units};
use super::{GaugeHeader, HeaderValue};
use crate::error::{Error, Result};
use crate::field::Su3;
use crate::geometry::lattice::NDIM;
use std::fs::File;
use std::path::Path;

/// Four int32 extents and the plaquette double.
pub(crate) const HEADER_LEN: usize = 4 * 4 + 8;
/// One link: 18 little-endian doubles.
const LINK: LinkEncoding = LinkEncoding {
    reals: 18,
    double: true,
    big: false,
};
const LINK_BYTES: usize = 18 * 8;
/// The eight links stored at one odd point.
const POINT_BYTES: usize = 8 * LINK_BYTES;

/// This program's direction of openQCD's direction `mu_o` (0 = t, 1..3 = x, y, z).
const fn our_mu(mu_o: usize) -> usize {
    (mu_o + 3) % NDIM
}

/// openQCD's direction of this program's `mu` (0..3 = x, y, z, t).
const fn openqcd_mu(mu: usize) -> usize {
    (mu + 1) % NDIM
}

/// The header's extents as (X, Y, Z, T) when they are what an openQCD file can hold:
/// positive and even. `None` otherwise (`GaugeFormat::detect` uses it to recognise a
/// file; `describe` says what is wrong).
pub(crate) fn header_dims(head: &[u8]) -> Option<[usize; NDIM]> {
    if head.len() < HEADER_LEN {
        return None;
    }
    let n: [i32; NDIM] =
        std::array::from_fn(|k| i32::from_le_bytes(head[4 * k..4 * k + 4].try_into().unwrap()));
    if n.iter().any(|&v| v < 2 || v % 2 != 0) {
        return None;
    }
    Some([n[1] as usize, n[2] as usize, n[3] as usize, n[0] as usize])
}

/// The header plaquette as stored (openQCD's normalisation, 3 for a unit field).
pub(crate) fn header_plaquette(head: &[u8]) -> f64 {
    f64::from_le_bytes(head[16..24].try_into().unwrap())
}

/// The header of an openQCD file: its extents (checked against `expected_dims`), the
/// plaquette it states (divided by 3 into this program's normalisation), and the file's
/// length, which must be the header and the links exactly.
pub(crate) fn describe(path: &Path, expected_dims: Option<[usize; NDIM]>) -> Result<GaugeHeader> {
    let (mut file, file_len) = open(path)?;
    if file_len < HEADER_LEN as u64 {
        return Err(Error::format(
            path,
            format!(
                "truncated: an openQCD header needs {HEADER_LEN} bytes (4 int32 extents and \
                 the plaquette), the file has {file_len}"
            ),
        ));
    }
    let head = read_exact_at(path, &mut file, 0, HEADER_LEN, "openQCD header")?;
    let dims = match header_dims(&head) {
        Some(d) => d,
        None => {
            let n: Vec<String> = (0..NDIM)
                .map(|k| i32::from_le_bytes(head[4 * k..4 * k + 4].try_into().unwrap()).to_string())
                .collect();
            return Err(Error::format(
                path,
                format!(
                    "dimensions N0,N1,N2,N3 (T,X,Y,Z) = {} in the openQCD header: each must \
                     be even and at least 2 (openQCD's lattices are; the odd points then hold \
                     every link once)",
                    n.join(",")
                ),
            ));
        }
    };
    let volume = check_dims(
        path,
        "the openQCD header (N1,N2,N3,N0)",
        dims,
        expected_dims,
    )?;
    let stored = header_plaquette(&head);
    if !stored.is_finite() {
        return Err(Error::format(
            path,
            format!("the openQCD header plaquette {stored} is not a finite number"),
        ));
    }
    let payload = byte_len(path, volume, NDIM * LINK_BYTES)?;
    let available = file_len - HEADER_LEN as u64;
    let need = format!(
        "{}x{}x{}x{} (X x Y x Z x T) needs {payload} bytes of links after the header \
         (8 double 3x3 links at each of the {} odd points)",
        dims[0],
        dims[1],
        dims[2],
        dims[3],
        volume / 2
    );
    check_payload(path, available, payload, &need)?;

    // The stored value is an exact double, not a printed decimal: 17 decimals make the
    // check's tolerance the 64-bit floor rather than a unit of the last printed digit.
    let ours = stored / 3.0;
    let header_plaquette = HeaderValue {
        key: "plaquette (openQCD header / 3)".into(),
        text: format!("{ours:.17}"),
        value: ours,
        note: Some(
            "besides damage, an openQCD file with Schroedinger-functional boundary conditions \
             (openQCD types 1 and 2) states a plaquette that includes boundary plaquettes \
             the stored links do not determine: only periodic files can be read"
                .into(),
        ),
    };
    Ok(GaugeHeader {
        format: "openQCD".into(),
        datatype: "export_cnfg: 8 double 3x3 links at each odd point, time slowest".into(),
        dims,
        precision_bits: 64,
        big_endian: false,
        stored_sums: Vec::new(),
        header_plaquette: Some(header_plaquette),
        header_link_trace: None,
        metadata: vec![
            (
                "openQCD header plaquette".into(),
                format!("{stored:.17} (sum Re tr U_p / 6V; 3 for a unit field)"),
            ),
            (
                "boundary conditions".into(),
                "periodic in time (openQCD type 3) assumed: open and SF files are refused".into(),
            ),
        ],
        payload: Payload {
            offset: HEADER_LEN as u64,
            encoding: LINK,
            sums: SumKind::None,
            what: "openQCD link data".into(),
            order: LinkOrder::OpenQcd,
        },
        warnings: Vec::new(),
        unchecked: Vec::new(),
        container_checks: vec![(
            "file length".into(),
            format!("ok: {HEADER_LEN}-byte header and {payload} bytes of links, nothing more"),
        )],
    })
}

/// Lexicographic index (x fastest) of coordinates `c` = (x, y, z, t).
fn site_of(dims: [usize; NDIM], c: [usize; NDIM]) -> usize {
    c[0] + dims[0] * (c[1] + dims[1] * (c[2] + dims[2] * c[3]))
}

fn coords_of(dims: [usize; NDIM], mut s: usize) -> [usize; NDIM] {
    std::array::from_fn(|mu| {
        let c = s % dims[mu];
        s /= dims[mu];
        c
    })
}

/// The coordinates (x, y, z, t) of the `p`-th odd point in the file.
fn odd_point(dims: [usize; NDIM], p: usize) -> [usize; NDIM] {
    let [nx, ny, nz, _] = dims;
    let half = nz / 2;
    let row = p / half;
    let k = p % half;
    let y = row % ny;
    let x = (row / ny) % nx;
    let t = row / (ny * nx);
    // The odd points of a (t, x, y) row are the z of parity t + x + y + 1.
    let z = 2 * k + (t + x + y + 1) % 2;
    [x, y, z, t]
}

/// Where link `U_mu(x)` (this program's mu) is stored: (odd point, slot 0..8). An odd x
/// stores it as its forward link in openQCD's direction, an even x's neighbour x + mu
/// (odd) as its backward link.
fn locate(dims: [usize; NDIM], c: [usize; NDIM], mu: usize) -> (usize, usize) {
    let odd = c.iter().sum::<usize>() % 2 == 1;
    let mut p = c;
    if !odd {
        p[mu] = (p[mu] + 1) % dims[mu];
    }
    let [nx, ny, nz, _] = dims;
    let point = ((p[3] * nx + p[0]) * ny + p[1]) * (nz / 2) + p[2] / 2;
    (point, 2 * openqcd_mu(mu) + usize::from(!odd))
}

/// Refuses a zero time link on the last time slice: how openQCD stores a field with open
/// (or open-SF) boundary conditions, whose header plaquette leaves those links out.
fn check_open_boundary(path: &Path, dims: [usize; NDIM], site: usize, u: &Su3) -> Result<()> {
    let c = coords_of(dims, site);
    if c[3] == dims[3] - 1 && *u == Su3::zero() {
        return Err(Error::format(
            path,
            format!(
                "the time link at (x,y,z,t) = ({},{},{},{}) is zero: openQCD stores the time \
                 links of the last time slice as zero with open boundary conditions; only \
                 periodic openQCD files (boundary type 3) can be read",
                c[0], c[1], c[2], c[3]
            ),
        ));
    }
    Ok(())
}

/// Every link of the file in this program's order (site-major, x fastest, mu = x,y,z,t),
/// the file streamed a few MiB at a time.
pub(crate) fn read_all(path: &Path, file: &mut File, header: &GaugeHeader) -> Result<Vec<Su3>> {
    let dims = header.dims;
    let volume = header.volume();
    let mut links = vec![Su3::zero(); volume * NDIM];
    stream_units(
        path,
        file,
        header.payload.offset,
        POINT_BYTES,
        volume / 2,
        &header.payload.what,
        |first, bytes| {
            for (k, point) in bytes.chunks_exact(POINT_BYTES).enumerate() {
                let c = odd_point(dims, first + k);
                for mu_o in 0..NDIM {
                    let mu = our_mu(mu_o);
                    let mut back = c;
                    back[mu] = (c[mu] + dims[mu] - 1) % dims[mu];
                    for (slot, at) in [(2 * mu_o, c), (2 * mu_o + 1, back)] {
                        let u = LINK.decode(&point[slot * LINK_BYTES..]);
                        let site = site_of(dims, at);
                        if mu == 3 {
                            check_open_boundary(path, dims, site, &u)?;
                        }
                        links[site * NDIM + mu] = u;
                    }
                }
            }
            Ok(())
        },
    )?;
    Ok(links)
}

/// The links of the global `sites` (lexicographic indices, in the order given), four per
/// site in this program's order: what a rank's slab read needs. Points that follow each
/// other in the file are read together, up to 4 MiB a read.
pub(crate) fn read_sites(path: &Path, header: &GaugeHeader, sites: &[usize]) -> Result<Vec<Su3>> {
    let dims = header.dims;
    let mut wanted: Vec<(usize, usize, usize)> = Vec::with_capacity(sites.len() * NDIM);
    for (i, &s) in sites.iter().enumerate() {
        let c = coords_of(dims, s);
        for mu in 0..NDIM {
            let (point, slot) = locate(dims, c, mu);
            wanted.push((point, slot, i * NDIM + mu));
        }
    }
    wanted.sort_unstable();
    let (mut file, _) = open(path)?;
    let mut links = vec![Su3::zero(); sites.len() * NDIM];
    let max_points = (4 << 20) / POINT_BYTES;
    let mut buf = Vec::new();
    let mut i = 0;
    while i < wanted.len() {
        // A run of points each at most one after the last.
        let first = wanted[i].0;
        let mut end = i;
        while end + 1 < wanted.len()
            && wanted[end + 1].0 <= wanted[end].0 + 1
            && wanted[end + 1].0 < first + max_points
        {
            end += 1;
        }
        let last = wanted[end].0;
        buf.resize((last - first + 1) * POINT_BYTES, 0);
        let at = header.payload.offset + (first * POINT_BYTES) as u64;
        super::bytes::fill_exact_at(&mut file, path, at, &mut buf, || {
            format!(
                "{} ends before odd point {} of {}",
                header.payload.what,
                last + 1,
                header.volume() / 2
            )
        })?;
        for &(point, slot, dest) in &wanted[i..=end] {
            let off = (point - first) * POINT_BYTES + slot * LINK_BYTES;
            let u = LINK.decode(&buf[off..]);
            if dest % NDIM == 3 {
                check_open_boundary(path, dims, sites[dest / NDIM], &u)?;
            }
            links[dest] = u;
        }
        i = end + 1;
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `locate` and the order `read_all` walks agree: for every link of a lattice with
    /// unequal extents, the point `locate` names holds it in the slot `read_all` uses,
    /// and each (point, slot) holds exactly one link.
    #[test]
    fn every_link_is_stored_once_where_locate_says() {
        let dims = [4, 2, 6, 8];
        let volume: usize = dims.iter().product();
        let mut seen = vec![usize::MAX; volume / 2 * 8];
        for p in 0..volume / 2 {
            let c = odd_point(dims, p);
            assert_eq!(c.iter().sum::<usize>() % 2, 1, "point {p} at {c:?} is odd");
            for mu_o in 0..NDIM {
                let mu = our_mu(mu_o);
                let mut back = c;
                back[mu] = (c[mu] + dims[mu] - 1) % dims[mu];
                assert_eq!(locate(dims, c, mu), (p, 2 * mu_o));
                assert_eq!(locate(dims, back, mu), (p, 2 * mu_o + 1));
                seen[p * 8 + 2 * mu_o] = site_of(dims, c) * NDIM + mu;
                seen[p * 8 + 2 * mu_o + 1] = site_of(dims, back) * NDIM + mu;
            }
        }
        let mut all = seen.clone();
        all.sort_unstable();
        assert_eq!(all, (0..volume * NDIM).collect::<Vec<_>>());
        // Odd points in file order have increasing openQCD index x3 + N3 (x2 + N2 (x1 + N1 x0)).
        let index = |c: [usize; NDIM]| c[2] + dims[2] * (c[1] + dims[1] * (c[0] + dims[0] * c[3]));
        for p in 1..volume / 2 {
            assert!(index(odd_point(dims, p)) > index(odd_point(dims, p - 1)));
        }
    }
}
