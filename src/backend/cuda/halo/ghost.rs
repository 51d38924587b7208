//! The host's side of a rank's edges: which edges are global antiperiodic ones, and the
//! ghost links (this rank's upper-face links in halo.cu's layout, exchanged once).

use crate::backend::cuda::core::fast_layout::stored_link;
use crate::comms::{Comms, Incoming, Outgoing};
use crate::error::Result;
use crate::field::GaugeField;
use crate::geometry::lattice::{Boundary, NDIM};
use crate::geometry::partition::Partition;

/// The bits of the boundary mask that hold at this rank's lower and upper edges: a
/// direction's edge is a global one when the rank is first (lower) or last (upper) in it.
pub(super) fn edge_masks(partition: &Partition, boundary: &[Boundary; NDIM]) -> (i32, i32) {
    let mut lo = 0;
    let mut hi = 0;
    for mu in 0..NDIM {
        if boundary[mu] == Boundary::Antiperiodic {
            if partition.coords[mu] == 0 {
                lo |= 1 << mu;
            }
            if partition.coords[mu] + 1 == partition.grid[mu] {
                hi |= 1 << mu;
            }
        }
    }
    (lo, hi)
}

/// Face-checkerboard index and parity of local site `c` on a face perpendicular to mu
/// (kernels/v3_core.cuh: the lexicographic index over the other three directions, / 2).
fn face_index(dims: &[usize; NDIM], mu: usize, c: &[usize; NDIM]) -> (usize, usize) {
    let mut f = 0;
    let mut stride = 1;
    for nu in 0..NDIM {
        if nu != mu {
            f += c[nu] * stride;
            stride *= dims[nu];
        }
    }
    (f / 2, c.iter().sum::<usize>() % 2)
}

/// This rank's upper-face links U_mu in the ghost layout of halo.cu (complex element e <
/// `elems` of the site of parity q and face index fcb at q*elems*Fh + e*Fh + fcb; elems =
/// 6 with two-row compression: rows 0 and 1 only), as f64 pairs: what its forward
/// neighbour needs for its backward hops.
fn upper_face_links(gauge: &GaugeField, mu: usize, elems: usize) -> Vec<f64> {
    let l = &gauge.lattice;
    let fh = l.volume() / l.dims[mu] / 2;
    let mut out = vec![0.0; 2 * 2 * elems * fh];
    // The upper face's sites only (c[mu] = L - 1), the other three coordinates x fastest,
    // not all 42.5 M sites of a rank of 96^3x192 on four GPUs for each split direction
    // (the ghost links' step, this walk and the exchange, took 2.8-4.1 s a rank there,
    // validate/RESULTS.md; not measured with this walk).
    let others: Vec<usize> = (0..NDIM).filter(|&nu| nu != mu).collect();
    for f in 0..2 * fh {
        let mut c = [0; NDIM];
        c[mu] = l.dims[mu] - 1;
        let mut rest = f;
        for &nu in &others {
            c[nu] = rest % l.dims[nu];
            rest /= l.dims[nu];
        }
        let site = l.index(c);
        let (fcb, q) = face_index(&l.dims, mu, &c);
        let u = stored_link(gauge.link(site, mu), elems);
        for (e, z) in u[..elems].iter().enumerate() {
            let k = q * elems * fh + e * fh + fcb;
            out[2 * k] = z.re;
            out[2 * k + 1] = z.im;
        }
    }
    out
}

/// Ghost links of the split directions `split`: send this rank's upper face to the forward
/// neighbour (tag mu), receive the backward neighbour's, through the host communicator.
pub(super) fn exchange_ghost_links(
    gauge: &GaugeField,
    partition: &Partition,
    split: &[usize],
    comms: &mut dyn Comms,
    elems: usize,
) -> Result<Vec<Vec<f64>>> {
    let mine: Vec<Vec<f64>> = split
        .iter()
        .map(|&mu| upper_face_links(gauge, mu, elems))
        .collect();
    let mut ghosts: Vec<Vec<f64>> = mine.iter().map(|m| vec![0.0; m.len()]).collect();
    {
        let sends: Vec<Outgoing<'_>> = split
            .iter()
            .zip(&mine)
            .map(|(&mu, data)| Outgoing {
                to: partition.neighbour(mu, true),
                tag: mu as u32,
                data,
            })
            .collect();
        let mut recvs: Vec<Incoming<'_>> = split
            .iter()
            .zip(ghosts.iter_mut())
            .map(|(&mu, data)| Incoming {
                from: partition.neighbour(mu, false),
                tag: mu as u32,
                data,
            })
            .collect();
        comms.exchange(&sends, &mut recvs)?;
    }
    Ok(ghosts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::halo::faces::face_bytes;
    use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};

    #[test]
    fn edge_masks_keep_the_global_edges_only() {
        // t antiperiodic, split in 2: rank 0 holds the lower global edge, rank 1 the upper.
        let lo = Partition::new([4, 4, 4, 8], [1, 1, 1, 2], 0).unwrap();
        let hi = Partition::new([4, 4, 4, 8], [1, 1, 1, 2], 1).unwrap();
        assert_eq!(edge_masks(&lo, &DEFAULT_BOUNDARY), (8, 0));
        assert_eq!(edge_masks(&hi, &DEFAULT_BOUNDARY), (0, 8));
        // Not split: both edges are global.
        let one = Partition::single([4, 4, 4, 8]);
        assert_eq!(edge_masks(&one, &DEFAULT_BOUNDARY), (8, 8));
    }

    #[test]
    fn face_indices_cover_each_parity_once() {
        let dims = [4, 6, 2, 4];
        for mu in 0..NDIM {
            let f: usize = (0..NDIM).filter(|&n| n != mu).map(|n| dims[n]).product();
            let mut seen = vec![0u32; f];
            let l = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
            for s in 0..l.volume() {
                let c = l.coords(s);
                if c[mu] == 0 {
                    let (fcb, q) = face_index(&dims, mu, &c);
                    seen[q * f / 2 + fcb] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "mu {mu}: {seen:?}");
        }
    }

    /// The site the kernels' v3_face_site (kernels/v3_core.cuh) gives for face index fcb
    /// and parity p on the face c[mu] = cmu, written again here from that code.
    fn kernel_face_site(
        dims: &[usize; 4],
        mu: usize,
        cmu: usize,
        p: usize,
        fcb: usize,
    ) -> [usize; 4] {
        let mut c = [0; 4];
        let mut f = 2 * fcb;
        let mut first = None;
        for nu in 0..4 {
            if nu == mu {
                c[nu] = cmu;
                continue;
            }
            first.get_or_insert(nu);
            c[nu] = f % dims[nu];
            f /= dims[nu];
        }
        c[first.unwrap()] += (c.iter().sum::<usize>() + p) % 2;
        c
    }

    #[test]
    fn ghost_links_sit_where_the_exterior_kernel_reads_them() {
        // halo_exterior reads element e of the ghost link of its output site (parity p,
        // face index fcb, c[mu] = 0) at (1 - p)*E*Fh + e*Fh + fcb (E = 9, or 6 with
        // two-row compression): the backward neighbour's link U_mu at the site
        // v3_face_site(mu, L-1, 1 - p, fcb).
        let dims = [4, 6, 2, 4];
        let l = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::random(&l, 9);
        for (mu, elems) in (0..NDIM).flat_map(|mu| [(mu, 9), (mu, 6)]) {
            let buf = upper_face_links(&g, mu, elems);
            let fh = l.volume() / dims[mu] / 2;
            assert_eq!(buf.len(), 2 * 2 * elems * fh);
            // The books count the ghost links in double and single beside 4 face buffers
            // of 12 doubles per face site.
            let face_sites = 2 * fh;
            assert_eq!(
                face_bytes(face_sites, elems),
                (4 * 12 * face_sites * 8 + buf.len() * 8 + buf.len() * 4) as u64
            );
            for q in 0..2 {
                for fcb in 0..fh {
                    let c = kernel_face_site(&dims, mu, dims[mu] - 1, q, fcb);
                    assert_eq!(c.iter().sum::<usize>() % 2, q);
                    let site = c[0] + dims[0] * (c[1] + dims[1] * (c[2] + dims[2] * c[3]));
                    let u = g.link(site, mu).0.as_flattened();
                    for (e, z) in u[..elems].iter().enumerate() {
                        let k = q * elems * fh + e * fh + fcb;
                        assert_eq!(
                            (buf[2 * k], buf[2 * k + 1]),
                            (z.re, z.im),
                            "mu {mu} q {q} fcb {fcb} e {e}"
                        );
                    }
                }
            }
        }
    }
}
