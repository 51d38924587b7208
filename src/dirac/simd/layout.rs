//! The blocked fields, `LaneSpinor` and `LaneGauge`, and their bit-exact conversions to
//! and from the canonical `SpinorField` / `GaugeField`.

use super::lanes::{link_pos, link_slot, supported, Lane, LINK_LANES, SPINOR_LANES, W};
use crate::field::{GaugeField, SpinorField, Su3, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use rayon::prelude::*;

/// A spinor field in the blocked layout (the CPU backend's field).
#[derive(Clone, Debug, PartialEq)]
pub struct LaneSpinor {
    pub(super) volume: usize,
    pub data: Vec<Lane>,
}

impl LaneSpinor {
    pub fn zeros(volume: usize) -> Self {
        LaneSpinor {
            volume,
            data: vec![Lane::default(); volume.div_ceil(W) * SPINOR_LANES],
        }
    }

    pub fn volume(&self) -> usize {
        self.volume
    }

    /// Bit-exact reordering of a canonical field (padding lanes zero).
    pub fn from_canonical(psi: &SpinorField) -> Self {
        let mut out = LaneSpinor::zeros(psi.volume());
        out.assign_canonical(psi);
        out
    }

    /// Overwrite with a canonical field of the same volume.
    pub fn assign_canonical(&mut self, psi: &SpinorField) {
        assert_eq!(psi.volume(), self.volume, "volume mismatch");
        let v = self.volume;
        self.data
            .par_chunks_mut(SPINOR_LANES)
            .enumerate()
            .for_each(|(b, blk)| {
                for lane in 0..W {
                    let site = b * W + lane;
                    for k in 0..12 {
                        let z = if site < v {
                            psi.data[site * 12 + k]
                        } else {
                            C64::new(0.0, 0.0)
                        };
                        blk[2 * k].0[lane] = z.re;
                        blk[2 * k + 1].0[lane] = z.im;
                    }
                }
            });
    }

    /// Bit-exact reordering back to the canonical layout.
    pub fn to_canonical(&self) -> SpinorField {
        let mut out = SpinorField::zeros(self.volume);
        self.write_canonical(&mut out);
        out
    }

    pub fn write_canonical(&self, out: &mut SpinorField) {
        assert_eq!(out.volume(), self.volume, "volume mismatch");
        out.data
            .par_chunks_mut(12)
            .enumerate()
            .for_each(|(site, o)| {
                let blk = &self.data[(site / W) * SPINOR_LANES..][..SPINOR_LANES];
                let lane = site % W;
                for (k, z) in o.iter_mut().enumerate() {
                    *z = C64::new(blk[2 * k].0[lane], blk[2 * k + 1].0[lane]);
                }
            });
    }
}

/// The gauge field in the blocked layout; exists only for `supported` lattices.
#[derive(Clone, Debug)]
pub struct LaneGauge {
    pub(super) lattice: Lattice,
    pub(super) data: Vec<Lane>,
}

impl LaneGauge {
    /// Reorder the links (bit-exact); None when LX % W != 0.
    pub fn new(g: &GaugeField) -> Option<Self> {
        if !supported(&g.lattice) {
            return None;
        }
        let mut data = vec![Lane::default(); g.lattice.volume() / W * NDIM * LINK_LANES];
        data.par_chunks_mut(NDIM * LINK_LANES)
            .enumerate()
            .for_each(|(b, blk)| {
                for lane in 0..W {
                    for mu in 0..NDIM {
                        let u = g.link(b * W + lane, mu);
                        for r in 0..3 {
                            for c in 0..3 {
                                let k = link_pos(mu) * LINK_LANES + link_slot(r, c);
                                blk[k].0[lane] = u.0[r][c].re;
                                blk[k + 1].0[lane] = u.0[r][c].im;
                            }
                        }
                    }
                }
            });
        Some(LaneGauge {
            lattice: g.lattice.clone(),
            data,
        })
    }

    pub fn lattice(&self) -> &Lattice {
        &self.lattice
    }

    /// U_mu(site) read back from the blocked layout.
    pub fn link(&self, site: usize, mu: usize) -> Su3 {
        let blk = &self.data[((site / W) * NDIM + link_pos(mu)) * LINK_LANES..][..LINK_LANES];
        let lane = site % W;
        let mut u = Su3::zero();
        for r in 0..3 {
            for c in 0..3 {
                let k = link_slot(r, c);
                u.0[r][c] = C64::new(blk[k].0[lane], blk[k + 1].0[lane]);
            }
        }
        u
    }
}
