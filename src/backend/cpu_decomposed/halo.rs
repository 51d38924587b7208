//! The halo of a rank: the ghost links exchanged once at construction, the projected
//! faces exchanged per hop, and the hopping term over interior and exterior sites.

use super::rank::{face_index, DecomposedCpu, HALF_SPINOR_REALS, LINK_REALS, LINK_TAG};
use crate::comms::{Comms, Incoming, Outgoing};
use crate::dirac::fast::{accumulate, load, project, CHIRAL_BLOCKS};
use crate::field::su3::{Colour, ZERO};
use crate::field::{Su3, C64};
use crate::geometry::lattice::NDIM;
use crate::Result;
use rayon::prelude::*;
use std::time::Instant;

impl<C: Comms> DecomposedCpu<C> {
    /// U_mu(x) of the upper face goes forward; U_mu(x - mu) of the lower face arrives
    /// from behind.
    pub(super) fn exchange_ghost_links(&mut self) -> Result<()> {
        if self.faces.is_empty() {
            return Ok(());
        }
        let sent: Vec<Vec<f64>> = self
            .faces
            .iter()
            .map(|face| {
                let mut buf = Vec::with_capacity(face.upper.len() * LINK_REALS);
                for &x in &face.upper {
                    self.gauge.link(x, face.mu).push_reals(&mut buf);
                }
                buf
            })
            .collect();
        let mut received: Vec<Vec<f64>> = self
            .faces
            .iter()
            .map(|f| vec![0.0; f.lower.len() * LINK_REALS])
            .collect();
        let p = &self.partition;
        let sends: Vec<Outgoing<'_>> = self
            .faces
            .iter()
            .zip(&sent)
            .map(|(f, data)| Outgoing {
                to: p.neighbour(f.mu, true),
                tag: LINK_TAG + f.mu as u32,
                data,
            })
            .collect();
        let mut recvs: Vec<Incoming<'_>> = self
            .faces
            .iter()
            .zip(received.iter_mut())
            .map(|(f, data)| Incoming {
                from: p.neighbour(f.mu, false),
                tag: LINK_TAG + f.mu as u32,
                data,
            })
            .collect();
        self.comms.exchange(&sends, &mut recvs)?;
        drop(recvs);
        for (face, data) in self.faces.iter_mut().zip(&received) {
            face.ghost_links = data.chunks_exact(LINK_REALS).map(Su3::from_reals).collect();
        }
        self.stats.link_bytes_sent += sent.iter().map(|s| 8 * s.len() as u64).sum::<u64>();
        Ok(())
    }

    /// H psi on the local sites of parity `out_parity` (all when None; zero elsewhere),
    /// psi a full local field whose values off `in_parity` (when given) are zero: only
    /// the faces of that parity are packed and sent.
    pub(super) fn hop(
        &mut self,
        psi: &[C64],
        in_parity: Option<usize>,
        out_parity: Option<usize>,
    ) -> Result<Vec<C64>> {
        self.stats.hops += 1;
        if !self.faces.is_empty() {
            self.exchange_faces(psi, in_parity)?;
        }

        let start = Instant::now();
        let l = &self.gauge.lattice;
        let gauge = &self.gauge;
        let split: [bool; NDIM] = std::array::from_fn(|mu| self.partition.is_split(mu));
        let mut out = vec![ZERO; psi.len()];
        out.par_chunks_mut(12).enumerate().for_each(|(x, o)| {
            if out_parity.is_some_and(|p| l.parity(x) != p) {
                return;
            }
            let c = l.coords(x);
            let mut acc = [[ZERO; 3]; 4];
            for mu in 0..NDIM {
                let b = &CHIRAL_BLOCKS[mu];
                let (n, g) = (l.dims[mu], l.offset[mu] + c[mu]);
                let phase = l.boundary[mu].phase();
                if !(split[mu] && c[mu] == n - 1) {
                    // Forward hop inside the rank (an unsplit direction wraps locally,
                    // which is the global wrap).
                    let mut cy = c;
                    cy[mu] = (c[mu] + 1) % n;
                    let ph = if g + 1 == l.global[mu] { phase } else { 1.0 };
                    let h = project(b, &load(psi, l.index(cy)), -1.0, ph);
                    let u = gauge.link(x, mu);
                    accumulate(b, &mut acc, &[u.mul_vec(&h[0]), u.mul_vec(&h[1])], -1.0);
                }
                if !(split[mu] && c[mu] == 0) {
                    let mut cy = c;
                    cy[mu] = (c[mu] + n - 1) % n;
                    let y = l.index(cy);
                    let ph = if g == 0 { phase } else { 1.0 };
                    let h = project(b, &load(psi, y), 1.0, ph);
                    let u = gauge.link(y, mu);
                    let uh = [u.dagger_mul_vec(&h[0]), u.dagger_mul_vec(&h[1])];
                    accumulate(b, &mut acc, &uh, 1.0);
                }
            }
            for s in 0..4 {
                o[3 * s..3 * s + 3].copy_from_slice(&acc[s]);
            }
        });
        self.stats.interior_seconds += start.elapsed().as_secs_f64();

        let start = Instant::now();
        let faces = &self.faces;
        let p = &self.partition;
        out.par_chunks_mut(12).enumerate().for_each(|(x, o)| {
            if out_parity.is_some_and(|q| l.parity(x) != q) {
                return;
            }
            let c = l.coords(x);
            let on_face = faces
                .iter()
                .any(|f| c[f.mu] == 0 || c[f.mu] == l.dims[f.mu] - 1);
            if !on_face {
                return;
            }
            let mut acc = load(o, 0);
            for face in faces {
                let mu = face.mu;
                let b = &CHIRAL_BLOCKS[mu];
                let f = face_index(&l.dims, mu, &c);
                let phase = l.boundary[mu].phase();
                if c[mu] == l.dims[mu] - 1 {
                    // Forward into the neighbour: its projected spinor, the own link.
                    let ph = if p.coords[mu] == p.grid[mu] - 1 {
                        phase
                    } else {
                        1.0
                    };
                    let h = face.ghost_fwd[f].map(|v| v.map(|z| z * ph));
                    let u = gauge.link(x, mu);
                    accumulate(b, &mut acc, &[u.mul_vec(&h[0]), u.mul_vec(&h[1])], -1.0);
                }
                if c[mu] == 0 {
                    // Backward: the neighbour's projected spinor and its link, daggered.
                    let ph = if p.coords[mu] == 0 { phase } else { 1.0 };
                    let h = face.ghost_bwd[f].map(|v| v.map(|z| z * ph));
                    let u = &face.ghost_links[f];
                    let uh = [u.dagger_mul_vec(&h[0]), u.dagger_mul_vec(&h[1])];
                    accumulate(b, &mut acc, &uh, 1.0);
                }
            }
            for s in 0..4 {
                o[3 * s..3 * s + 3].copy_from_slice(&acc[s]);
            }
        });
        self.stats.exterior_seconds += start.elapsed().as_secs_f64();
        Ok(out)
    }

    /// Pack the projected faces of psi (of parity `parity` only, when given), exchange
    /// them with the neighbours and unpack them into the ghosts.
    pub(super) fn exchange_faces(&mut self, psi: &[C64], parity: Option<usize>) -> Result<()> {
        let start = Instant::now();
        let pack = |sites: &[usize], list: &[usize], mu: usize, sign: f64| -> Vec<f64> {
            let b = &CHIRAL_BLOCKS[mu];
            let mut buf = Vec::with_capacity(list.len() * HALF_SPINOR_REALS);
            for &f in list {
                for v in project(b, &load(psi, sites[f]), sign, 1.0) {
                    for z in v {
                        buf.push(z.re);
                        buf.push(z.im);
                    }
                }
            }
            buf
        };
        // Per face: [lower face sent backward (1 - g) psi, upper face sent forward (1 + g) psi].
        let sent: Vec<[Vec<f64>; 2]> = self
            .faces
            .iter()
            .map(|face| {
                [
                    pack(&face.lower, face.list(parity, true), face.mu, -1.0),
                    pack(&face.upper, face.list(parity, false), face.mu, 1.0),
                ]
            })
            .collect();
        let mut received: Vec<[Vec<f64>; 2]> = sent
            .iter()
            .map(|[a, b]| [vec![0.0; a.len()], vec![0.0; b.len()]])
            .collect();
        self.stats.pack_seconds += start.elapsed().as_secs_f64();

        let p = &self.partition;
        let mut sends = Vec::with_capacity(2 * self.faces.len());
        let mut recvs = Vec::with_capacity(2 * self.faces.len());
        for ((face, [lo, up]), [fwd, bwd]) in self.faces.iter().zip(&sent).zip(&mut received) {
            let (mu, tag) = (face.mu, 2 * face.mu as u32);
            sends.push(Outgoing {
                to: p.neighbour(mu, false),
                tag,
                data: lo,
            });
            sends.push(Outgoing {
                to: p.neighbour(mu, true),
                tag: tag + 1,
                data: up,
            });
            // The forward neighbour's lower face, the backward neighbour's upper face.
            recvs.push(Incoming {
                from: p.neighbour(mu, true),
                tag,
                data: fwd,
            });
            recvs.push(Incoming {
                from: p.neighbour(mu, false),
                tag: tag + 1,
                data: bwd,
            });
        }
        // Only the time inside the exchange: the app reports the communicator's other
        // seconds (its reductions) as stats.seconds - exchange_seconds.
        let start = Instant::now();
        self.comms.exchange(&sends, &mut recvs)?;
        self.stats.exchange_seconds += start.elapsed().as_secs_f64();
        drop(recvs);
        self.stats.exchanges += 1;
        self.stats.face_bytes_sent += sends.iter().map(|s| 8 * s.data.len() as u64).sum::<u64>();

        let start = Instant::now();
        let unpack = |ghost: &mut [[Colour; 2]], list: &[usize], data: &[f64]| {
            ghost.fill([[ZERO; 3]; 2]);
            for (&f, h) in list.iter().zip(data.chunks_exact(HALF_SPINOR_REALS)) {
                ghost[f] = std::array::from_fn(|r| {
                    std::array::from_fn(|c| C64::new(h[6 * r + 2 * c], h[6 * r + 2 * c + 1]))
                });
            }
        };
        for (face, [fwd, bwd]) in self.faces.iter_mut().zip(&received) {
            let lo_list = face.list(parity, true).to_vec();
            let up_list = face.list(parity, false).to_vec();
            unpack(&mut face.ghost_fwd, &lo_list, fwd);
            unpack(&mut face.ghost_bwd, &up_list, bwd);
        }
        self.stats.pack_seconds += start.elapsed().as_secs_f64();
        Ok(())
    }
}
