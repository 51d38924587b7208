//! The CPU backend on one rank of a decomposed lattice: the same domain
//! decomposition the GPUs run over NCCL, written plainly so the tests can check it against
//! the undecomposed `CpuBackend` with ranks as threads (`comms::threads`).
//!
//! Provides `DecomposedCpu<C: Comms>` (Space, WilsonKernels, FusedCr as a host loop, and a
//! no-op Prepare) and the typed scatter/gather of fields between the global lattice and a
//! rank's sub-lattice (`scatter_gauge`, `scatter_spinor`, `gather_spinor`; they live here
//! because geometry sits below field in the module graph).
//!
//! The hopping term is applied the QUDA way. For every split direction mu each rank packs
//! the spin-projected half spinors of its two faces (2 spins x 3 colours: 12 reals per
//! face site): (1 - g_mu) psi of its lower face, which its backward neighbour's forward
//! hops read, and (1 + g_mu) psi of its upper face, which its forward neighbour's backward
//! hops read. One `Comms::exchange` moves them (tag 2 mu for faces sent backward, 2 mu + 1
//! for faces sent forward: with two ranks in a direction both neighbours are one rank).
//! Then the interior (every hop that stays on the rank, including the unsplit directions,
//! whose local wrap is the global one) and the exterior (the hops that read a ghost: a
//! forward one multiplies by the own link U_mu(x) and rebuilds the lower spin half, a
//! backward one uses the ghost link U_mu(x - mu)^dagger, exchanged once at construction).
//! Boundary phases are taken where a hop crosses the GLOBAL edge (global coordinates).
//!
//! Reductions are a deterministic local sum, then `comms::global_sum` (rank order), so
//! every rank sees the same bits.

use super::{layout_mismatch as mismatch, Layout, Operator, Prepare, Space, Subset, WilsonKernels};
use crate::comms::{global_sum, Comms, Incoming, Outgoing};
use crate::dirac::fast::{accumulate, load, project, CHIRAL_BLOCKS};
use crate::field::gamma::GAMMA5_SIGN;
use crate::field::su3::{Colour, ZERO};
use crate::field::{GaugeField, SpinorField, Su3, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::geometry::partition::Partition;
use crate::reduce::{det_sum, det_sum2};
use crate::{Error, Result};
use rayon::prelude::*;
use std::time::Instant;

/// Reals per face site of a projected half spinor: 2 spins x 3 colours x (re, im).
pub const HALF_SPINOR_REALS: usize = 12;
/// Reals per link: 3 x 3 complex.
const LINK_REALS: usize = 18;
/// The tag of the ghost links of direction mu (halo tags are 0..8).
const LINK_TAG: u32 = 16;

pub use crate::field::scatter::{gather_spinor, scatter_gauge, scatter_spinor};

/// What a rank's halo exchanges cost, accumulated since construction (the app prints it
/// per rank).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HaloStats {
    /// Hopping terms applied (D and g5 D: one; the Schur forms: two; hop_xpay: one).
    pub hops: u64,
    /// Face exchanges made (one per hop when a direction is split).
    pub exchanges: u64,
    pub pack_seconds: f64,
    pub exchange_seconds: f64,
    pub interior_seconds: f64,
    pub exterior_seconds: f64,
    /// Bytes of projected faces sent (8 bytes x 12 reals per face site sent).
    pub face_bytes_sent: u64,
    /// Bytes of ghost links sent, once, at construction.
    pub link_bytes_sent: u64,
}

impl HaloStats {
    /// One line for the per-rank report.
    pub fn summary(&self) -> String {
        format!(
            "{} hops, {} exchanges, pack {:.3} s, exchange {:.3} s, interior {:.3} s, exterior {:.3} s, faces sent {:.3} MB",
            self.hops,
            self.exchanges,
            self.pack_seconds,
            self.exchange_seconds,
            self.interior_seconds,
            self.exterior_seconds,
            self.face_bytes_sent as f64 / 1e6
        )
    }
}

/// The two faces of one split direction mu. A face site is named by its face index f: the
/// lexicographic index (x fastest) of its coordinates other than mu, the same on both
/// faces of a rank and on the facing face of its neighbour.
struct Face {
    mu: usize,
    /// Local sites with c[mu] = 0, by face index.
    lower: Vec<usize>,
    /// Local sites with c[mu] = L_mu - 1, by face index.
    upper: Vec<usize>,
    /// Every face index.
    all: Vec<usize>,
    /// Face indices whose lower-face site has global parity 0 and 1. The local extent is
    /// even, so the upper-face site of f has the other parity, the forward ghost of f (the
    /// neighbour's lower-face site) the lower site's parity and the backward ghost the
    /// upper site's: both ranks of a pair pick the same f for a message.
    by_lower_parity: [Vec<usize>; 2],
    /// U_mu(x - mu) for the lower-face sites x, by face index (from the backward
    /// neighbour).
    ghost_links: Vec<Su3>,
    /// (1 - g_mu) psi(x + mu) for the upper-face sites x (from the forward neighbour).
    ghost_fwd: Vec<[Colour; 2]>,
    /// (1 + g_mu) psi(x - mu) for the lower-face sites x (from the backward neighbour).
    ghost_bwd: Vec<[Colour; 2]>,
}

impl Face {
    /// The face indices of a message whose spinors have parity `parity` (None: all),
    /// packed from a lower face (`lower`, read into the receiver's forward ghost) or an
    /// upper one (into its backward ghost).
    fn list(&self, parity: Option<usize>, lower: bool) -> &[usize] {
        match parity {
            None => &self.all,
            Some(q) => &self.by_lower_parity[if lower { q } else { 1 - q }],
        }
    }
}

/// The face index of local coordinates c on a face perpendicular to mu.
fn face_index(dims: &[usize; NDIM], mu: usize, c: &[usize; NDIM]) -> usize {
    let mut f = 0;
    let mut stride = 1;
    for nu in (0..NDIM).filter(|&nu| nu != mu) {
        f += stride * c[nu];
        stride *= dims[nu];
    }
    f
}

/// A field of one rank: 12 complex numbers per local site in the canonical order; half
/// fields hold the local sites of one (global) parity in checkerboard order (cb = local
/// lexicographic index / 2). Single fields store every value rounded to f32, half fields
/// every site rounded to the 16-bit format (`linalg::half`).
pub struct DecomposedField {
    layout: Layout,
    data: Vec<C64>,
}

impl DecomposedField {
    pub fn layout(&self) -> Layout {
        self.layout
    }
}

/// The CPU backend on one rank: its sub-lattice's links, the ghost links of the split
/// directions, and the communicator to its neighbours.
pub struct DecomposedCpu<C: Comms> {
    partition: Partition,
    gauge: GaugeField,
    kappa: f64,
    comms: C,
    /// One per split direction, in increasing mu.
    faces: Vec<Face>,
    stats: HaloStats,
}

impl<C: Comms> DecomposedCpu<C> {
    /// Rank `comms.rank()` of the decomposition `partition`, with its scattered links
    /// (`scatter_gauge`). Exchanges the ghost links of the split directions once: every
    /// rank of the grid must construct its backend at the same point.
    pub fn new(partition: Partition, gauge: GaugeField, kappa: f64, comms: C) -> Result<Self> {
        let l = &gauge.lattice;
        if l.dims != partition.local_dims()
            || l.offset != partition.offset()
            || l.global != partition.global
        {
            return Err(Error::internal(format!(
                "decomposed backend: links on {} at offset {:?} of {:?}, but rank {} of grid {:?} holds {:?} at {:?}",
                l.dims_string(),
                l.offset,
                l.global,
                partition.rank(),
                partition.grid,
                partition.local_dims(),
                partition.offset()
            )));
        }
        if comms.size() != partition.ranks() || comms.rank() != partition.rank() {
            return Err(Error::internal(format!(
                "decomposed backend: communicator rank {} of {} for partition rank {} of {}",
                comms.rank(),
                comms.size(),
                partition.rank(),
                partition.ranks()
            )));
        }
        let dims = l.dims;
        let mut faces = Vec::new();
        for mu in (0..NDIM).filter(|&mu| partition.is_split(mu)) {
            let n = partition.face_sites(mu);
            let (mut lower, mut upper) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let mut by_lower_parity = [Vec::new(), Vec::new()];
            for x in 0..l.volume() {
                let c = l.coords(x);
                if c[mu] == 0 {
                    debug_assert_eq!(face_index(&dims, mu, &c), lower.len());
                    by_lower_parity[l.parity(x)].push(lower.len());
                    lower.push(x);
                }
                if c[mu] == dims[mu] - 1 {
                    upper.push(x);
                }
            }
            faces.push(Face {
                mu,
                lower,
                upper,
                all: (0..n).collect(),
                by_lower_parity,
                ghost_links: Vec::new(),
                ghost_fwd: vec![[[ZERO; 3]; 2]; n],
                ghost_bwd: vec![[[ZERO; 3]; 2]; n],
            });
        }
        let mut be = DecomposedCpu {
            partition,
            gauge,
            kappa,
            comms,
            faces,
            stats: HaloStats::default(),
        };
        be.exchange_ghost_links()?;
        Ok(be)
    }

    /// U_mu(x) of the upper face goes forward; U_mu(x - mu) of the lower face arrives
    /// from behind.
    fn exchange_ghost_links(&mut self) -> Result<()> {
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

    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// The local sub-lattice (global extents and offset set).
    pub fn lattice(&self) -> &Lattice {
        &self.gauge.lattice
    }

    /// The local links.
    pub fn gauge(&self) -> &GaugeField {
        &self.gauge
    }

    pub fn comms(&self) -> &C {
        &self.comms
    }

    /// The halo exchanges' times and bytes so far.
    pub fn halo_stats(&self) -> HaloStats {
        self.stats
    }

    /// H psi on the local sites of parity `out_parity` (all when None; zero elsewhere),
    /// psi a full local field whose values off `in_parity` (when given) are zero: only
    /// the faces of that parity are packed and sent.
    fn hop(
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
    fn exchange_faces(&mut self, psi: &[C64], parity: Option<usize>) -> Result<()> {
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

    fn volume(&self) -> usize {
        self.gauge.lattice.volume()
    }

    /// The field as a full local canonical field (zeros on the sites a half field lacks).
    fn canonical(&self, f: &DecomposedField) -> Vec<C64> {
        match f.layout.subset.parity() {
            None => f.data.clone(),
            Some(p) => {
                let l = self.lattice();
                let mut out = vec![ZERO; 12 * l.volume()];
                for (cb, s) in f.data.chunks_exact(12).enumerate() {
                    let x = l.checkerboard_site(p, cb);
                    out[12 * x..12 * x + 12].copy_from_slice(s);
                }
                out
            }
        }
    }

    /// Write the sites of `f`'s subset from a full local canonical field, rounding to its
    /// precision.
    fn assign(&self, f: &mut DecomposedField, full: &[C64]) {
        let prec = f.layout.precision;
        match f.layout.subset.parity() {
            None => {
                for (d, s) in f.data.iter_mut().zip(full) {
                    *d = prec.store(*s);
                }
            }
            Some(p) => {
                let l = &self.gauge.lattice;
                for (cb, d) in f.data.chunks_exact_mut(12).enumerate() {
                    let x = l.checkerboard_site(p, cb);
                    for (dk, sk) in d.iter_mut().zip(&full[12 * x..12 * x + 12]) {
                        *dk = prec.store(*sk);
                    }
                }
            }
        }
        prec.round_sites(&mut f.data);
    }

    fn gamma5_in_place(v: &mut [C64]) {
        for s in v.chunks_exact_mut(12) {
            for (k, z) in s.iter_mut().enumerate() {
                *z *= GAMMA5_SIGN[k / 3];
            }
        }
    }
}

impl<C: Comms> Space for DecomposedCpu<C> {
    type Field = DecomposedField;

    fn describe(&self) -> String {
        format!(
            "cpu decomposed (rank {} of grid {:?}, local {}, {}, {})",
            self.partition.rank(),
            self.partition.grid,
            self.lattice().dims_string(),
            self.comms.describe(),
            crate::threads::count(rayon::current_num_threads())
        )
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<DecomposedField> {
        if layout.subset != Subset::Full {
            self.lattice().require_even("even-odd preconditioning")?;
        }
        Ok(DecomposedField {
            layout,
            data: vec![ZERO; 12 * layout.subset.sites(self.volume())],
        })
    }

    fn layout(&self, field: &DecomposedField) -> Layout {
        field.layout
    }

    /// `host` is this rank's part (`scatter_spinor`).
    fn upload(&mut self, host: &SpinorField) -> Result<DecomposedField> {
        if host.data.len() != 12 * self.volume() {
            return Err(Error::internal(format!(
                "upload: a field of {} sites on a rank of {} sites",
                host.volume(),
                self.volume()
            )));
        }
        Ok(DecomposedField {
            layout: Layout::FULL,
            data: host.data.clone(),
        })
    }

    /// This rank's part (`gather_spinor` puts the parts together).
    fn download(&mut self, field: &DecomposedField) -> Result<SpinorField> {
        Ok(SpinorField {
            data: self.canonical(field),
        })
    }

    fn set_zero(&mut self, x: &mut DecomposedField) -> Result<()> {
        x.data.fill(ZERO);
        Ok(())
    }

    fn copy(&mut self, dst: &mut DecomposedField, src: &DecomposedField) -> Result<()> {
        if dst.layout != src.layout {
            return Err(mismatch("copy", dst.layout, src.layout));
        }
        dst.data.copy_from_slice(&src.data);
        Ok(())
    }

    fn convert(&mut self, dst: &mut DecomposedField, src: &DecomposedField) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        if !(ds == ss || ds == Subset::Full || ss == Subset::Full) {
            return Err(mismatch("convert", dst.layout, src.layout));
        }
        let full = self.canonical(src);
        if ds == Subset::Full && ss != Subset::Full {
            // Scatter: only the sites of src's parity change.
            let mut d = self.canonical(dst);
            let p = ss.parity().unwrap_or(0);
            let l = self.lattice();
            for x in (0..l.volume()).filter(|&x| l.parity(x) == p) {
                d[12 * x..12 * x + 12].copy_from_slice(&full[12 * x..12 * x + 12]);
            }
            self.assign(dst, &d);
        } else {
            self.assign(dst, &full);
        }
        Ok(())
    }

    fn axpy(&mut self, a: C64, x: &DecomposedField, y: &mut DecomposedField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("axpy", x.layout, y.layout));
        }
        let prec = y.layout.precision;
        y.data
            .par_iter_mut()
            .zip(x.data.par_iter())
            .for_each(|(y, x)| *y = prec.store(*y + a * *x));
        prec.round_sites(&mut y.data);
        Ok(())
    }

    fn xpay(&mut self, x: &DecomposedField, a: C64, y: &mut DecomposedField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("xpay", x.layout, y.layout));
        }
        let prec = y.layout.precision;
        y.data
            .par_iter_mut()
            .zip(x.data.par_iter())
            .for_each(|(y, x)| *y = prec.store(*x + a * *y));
        prec.round_sites(&mut y.data);
        Ok(())
    }

    fn dot(&mut self, x: &DecomposedField, y: &DecomposedField) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        let re = det_sum2(&x.data, &y.data, 0.0, |a, b| a.re * b.re + a.im * b.im);
        let im = det_sum2(&x.data, &y.data, 0.0, |a, b| a.re * b.im - a.im * b.re);
        let s = global_sum(&mut self.comms, &[re, im])?;
        Ok(C64::new(s[0], s[1]))
    }

    fn norm2(&mut self, x: &DecomposedField) -> Result<f64> {
        let local = det_sum(&x.data, |a| a.norm_sqr());
        Ok(global_sum(&mut self.comms, &[local])?[0])
    }
}

impl<C: Comms> WilsonKernels for DecomposedCpu<C> {
    fn kappa(&self) -> f64 {
        self.kappa
    }

    fn apply(
        &mut self,
        op: Operator,
        out: &mut DecomposedField,
        inp: &DecomposedField,
    ) -> Result<()> {
        if out.layout != inp.layout {
            return Err(mismatch("apply", out.layout, inp.layout));
        }
        let psi = self.canonical(inp);
        let mut result = if op.is_schur() {
            if inp.layout.subset != Subset::Even {
                return Err(Error::internal(
                    "the Schur operator acts on even-site fields",
                ));
            }
            // M_ee = 1 - kappa^2 H_eo H_oe: two hops, two exchanges.
            let odd = self.hop(&psi, Some(0), Some(1))?;
            let mut even = self.hop(&odd, Some(1), Some(0))?;
            let k2 = self.kappa * self.kappa;
            for (o, i) in even.iter_mut().zip(&psi) {
                *o = *i - k2 * *o;
            }
            even
        } else {
            if inp.layout.subset != Subset::Full {
                return Err(Error::internal(format!(
                    "operator {op} acts on full-lattice fields"
                )));
            }
            let mut h = self.hop(&psi, None, None)?;
            for (o, i) in h.iter_mut().zip(&psi) {
                *o = *i - *o * self.kappa;
            }
            h
        };
        if op.gamma5() {
            Self::gamma5_in_place(&mut result);
        }
        self.assign(out, &result);
        Ok(())
    }

    fn hop_xpay(
        &mut self,
        out: &mut DecomposedField,
        inp: &DecomposedField,
        y: &DecomposedField,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        let p = crate::linalg::hop_xpay_parity(out.layout, inp.layout, y.layout)?;
        let psi = self.canonical(inp);
        let mut h = self.hop(&psi, Some(1 - p), Some(p))?;
        let yf = self.canonical(y);
        for (o, yv) in h.iter_mut().zip(&yf) {
            *o = *yv + c * *o;
        }
        if gamma5 {
            Self::gamma5_in_place(&mut h);
        }
        self.assign(out, &h);
        Ok(())
    }
}

impl<C: Comms> super::host_cr::HostFusedCr for DecomposedCpu<C> {}

impl<C: Comms> Prepare for DecomposedCpu<C> {
    fn prepare(&mut self, _layout: Layout, _fused: bool) -> Result<()> {
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        global_sum(&mut self.comms, &[0.0]).map(|_| ())
    }
}
