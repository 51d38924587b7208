//! A rank's site term (the clover term, a twist) built from its own links and a ring of
//! its neighbours' links one site deep. The clover term is site-local, but its four
//! leaves at a site read links up to one step away in two directions at once (the
//! corners included), so a rank pads its sub-lattice by one site on each side of every
//! split direction, fills the pads from its neighbours, direction by direction (each
//! later direction's faces carry the pads already filled: the corners arrive on the
//! second hop), and builds the term on its own sites of the padded field. No rank holds
//! more than its share (plus the ring), ranks as threads and ranks started by a launcher
//! run the same code, and the result has the bits of the whole lattice's term restricted
//! to the rank (`SiteTerms::restrict`; the test below holds it to that).

use super::shares::{links_to_reals, reals_to_links};
use crate::comms::{Comms, Incoming, Outgoing};
use crate::dirac::clover::SiteTerms;
use crate::dirac::Action;
use crate::field::gauge::GaugeField;
use crate::field::su3::Su3;
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use crate::geometry::partition::Partition;
use crate::Result;

/// The exchanges' tags: two a direction (a rank's lower face going backward, its upper
/// face going forward), apart from the shares' tags.
const TAG_RING: u32 = 1 << 21;

/// The site term of the rank `partition` on its links `local` (its share of the gauge
/// field, local order), exchanging the ring of links with its neighbours over `io`;
/// every rank of the grid calls it at once.
pub fn rank_site_terms(
    local: &GaugeField,
    partition: &Partition,
    action: &Action,
    io: &mut dyn Comms,
) -> Result<SiteTerms> {
    let dims = partition.local_dims();
    let pad: [usize; NDIM] = std::array::from_fn(|mu| usize::from(partition.is_split(mu)));
    let padded_dims: [usize; NDIM] = std::array::from_fn(|mu| dims[mu] + 2 * pad[mu]);
    // The pads' boundary phases never enter: the term reads links, not spinors.
    let lattice = Lattice::new(padded_dims, [Boundary::Periodic; NDIM])?;
    let inner = |x: usize| {
        let c = local.lattice.coords(x);
        lattice.index(std::array::from_fn(|mu| c[mu] + pad[mu]))
    };
    let sites: Vec<usize> = (0..local.lattice.volume()).map(inner).collect();
    let mut links = vec![Su3::zero(); lattice.volume() * NDIM];
    for (x, &y) in sites.iter().enumerate() {
        links[y * NDIM..(y + 1) * NDIM].copy_from_slice(&local.links[x * NDIM..(x + 1) * NDIM]);
    }
    let mut padded = GaugeField { lattice, links };
    for mu in (0..NDIM).filter(|&mu| partition.is_split(mu)) {
        fill_pads(&mut padded, mu, partition, io)?;
    }
    let offset = partition.offset();
    SiteTerms::on_sites(&padded, action, &sites, |x| {
        let c = local.lattice.coords(x);
        std::array::from_fn(|mu| c[mu] + offset[mu])
    })
}

/// The sites of the padded field at coordinate `at` in direction mu (x fastest).
fn layer(lattice: &Lattice, mu: usize, at: usize) -> Vec<usize> {
    let d = lattice.dims;
    let mut c = [0; NDIM];
    let n = lattice.volume() / d[mu];
    let mut out = Vec::with_capacity(n);
    for mut i in 0..n {
        for nu in (0..NDIM).filter(|&nu| nu != mu) {
            c[nu] = i % d[nu];
            i /= d[nu];
        }
        c[mu] = at;
        out.push(lattice.index(c));
    }
    out
}

/// Fill the two pads of direction mu: this rank's first own layer goes to the backward
/// neighbour's upper pad, its last to the forward neighbour's lower pad (whole padded
/// layers, so the pads of earlier directions travel too).
fn fill_pads(
    padded: &mut GaugeField,
    mu: usize,
    partition: &Partition,
    io: &mut dyn Comms,
) -> Result<()> {
    let top = padded.lattice.dims[mu] - 1;
    let reals = |g: &GaugeField, at: usize| {
        let links: Vec<Su3> = layer(&g.lattice, mu, at)
            .into_iter()
            .flat_map(|y| g.links[y * NDIM..(y + 1) * NDIM].iter().copied())
            .collect();
        links_to_reals(&links)
    };
    let (low, high) = (reals(padded, 1), reals(padded, top - 1));
    let mut from_above = vec![0.0; low.len()];
    let mut from_below = vec![0.0; high.len()];
    let tag = TAG_RING + 2 * mu as u32;
    let (back, fwd) = (
        partition.neighbour(mu, false),
        partition.neighbour(mu, true),
    );
    io.exchange(
        &[
            Outgoing {
                to: back,
                tag,
                data: &low,
            },
            Outgoing {
                to: fwd,
                tag: tag + 1,
                data: &high,
            },
        ],
        &mut [
            Incoming {
                from: fwd,
                tag,
                data: &mut from_above,
            },
            Incoming {
                from: back,
                tag: tag + 1,
                data: &mut from_below,
            },
        ],
    )?;
    for (at, got) in [(top, &from_above), (0, &from_below)] {
        let sites = layer(&padded.lattice, mu, at);
        let links = reals_to_links(got);
        for (y, u) in sites.iter().zip(links.chunks_exact(NDIM)) {
            padded.links[y * NDIM..(y + 1) * NDIM].copy_from_slice(u);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu_decomposed::scatter_gauge;
    use crate::comms::threads::run_ranks;

    #[test]
    fn every_rank_builds_the_bits_of_the_whole_lattice_term_restricted_to_it() {
        // Expected: the term built on the whole lattice (SiteTerms::new, which the
        // analytic and second-construction tests in tests/clover.rs hold to the truth)
        // restricted to each rank; the ring must give the same bits, site by site, for
        // splits in one, two and four directions (grid 2 makes both neighbours one rank,
        // grid 3 two ranks; the z-t and x-y-z-t splits need the corners).
        let l = Lattice::new([4, 4, 12, 8], [Boundary::Periodic; NDIM]).unwrap();
        let gauge = GaugeField::random(&l, 11);
        let action = Action {
            kappa: 0.124,
            csw: 1.77,
            mu: 0.05,
        };
        let whole = SiteTerms::new(&gauge, &action).unwrap();
        for grid in [[1, 1, 1, 2], [1, 1, 2, 4], [2, 2, 2, 2], [1, 1, 3, 1]] {
            let ranks: usize = grid.iter().product();
            let got = run_ranks(ranks, |mut io| {
                let p = Partition::new(l.dims, grid, io.rank())?;
                let local = scatter_gauge(&gauge, &p)?;
                let mine = rank_site_terms(&local, &p, &action, &mut io)?;
                Ok((p, mine))
            })
            .unwrap();
            for (p, mine) in got {
                let want = whole.restrict(&l, &p).unwrap();
                assert_eq!(mine.volume(), want.volume());
                let e = [C64ONE; 12];
                for x in 0..want.volume() {
                    assert_eq!(mine.clover[x], want.clover[x], "grid {grid:?} site {x}");
                    for inverse in [false, true] {
                        let (mut a, mut b) = ([C64ZERO; 12], [C64ZERO; 12]);
                        mine.apply_site(x, &e, &mut a, inverse, false);
                        want.apply_site(x, &e, &mut b, inverse, false);
                        assert_eq!(a, b, "grid {grid:?} site {x} inverse {inverse}");
                    }
                }
            }
        }
    }

    const C64ONE: crate::field::C64 = crate::field::C64::new(1.0, 0.5);
    const C64ZERO: crate::field::C64 = crate::field::C64::new(0.0, 0.0);
}
