//! The decomposed CPU backend's state: the rank's links and partition, the face lists of
//! its split directions (with the ghosts they receive) and its halo statistics;
//! construction, accessors and the no-op `Prepare`.

use crate::backend::{Layout, Prepare};
use crate::comms::{global_sum, Comms};
use crate::dirac::clover::SiteTerms;
use crate::field::su3::{Colour, ZERO};
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::geometry::partition::Partition;
use crate::{Error, Result};

/// Reals per face site of a projected half spinor: 2 spins x 3 colours x (re, im).
pub const HALF_SPINOR_REALS: usize = 12;
/// Reals per link: 3 x 3 complex.
pub(super) const LINK_REALS: usize = 18;
/// The tag of the ghost links of direction mu (halo tags are 0..8).
pub(super) const LINK_TAG: u32 = 16;

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
pub(super) struct Face {
    pub(super) mu: usize,
    /// Local sites with c[mu] = 0, by face index.
    pub(super) lower: Vec<usize>,
    /// Local sites with c[mu] = L_mu - 1, by face index.
    pub(super) upper: Vec<usize>,
    /// Every face index.
    pub(super) all: Vec<usize>,
    /// Face indices whose lower-face site has global parity 0 and 1. The local extent is
    /// even, so the upper-face site of f has the other parity, the forward ghost of f (the
    /// neighbour's lower-face site) the lower site's parity and the backward ghost the
    /// upper site's: both ranks of a pair pick the same f for a message.
    pub(super) by_lower_parity: [Vec<usize>; 2],
    /// U_mu(x - mu) for the lower-face sites x, by face index (from the backward
    /// neighbour).
    pub(super) ghost_links: Vec<Su3>,
    /// (1 - g_mu) psi(x + mu) for the upper-face sites x (from the forward neighbour).
    pub(super) ghost_fwd: Vec<[Colour; 2]>,
    /// (1 + g_mu) psi(x - mu) for the lower-face sites x (from the backward neighbour).
    pub(super) ghost_bwd: Vec<[Colour; 2]>,
}

impl Face {
    /// The face indices of a message whose spinors have parity `parity` (None: all),
    /// packed from a lower face (`lower`, read into the receiver's forward ghost) or an
    /// upper one (into its backward ghost).
    pub(super) fn list(&self, parity: Option<usize>, lower: bool) -> &[usize] {
        match parity {
            None => &self.all,
            Some(q) => &self.by_lower_parity[if lower { q } else { 1 - q }],
        }
    }
}

/// The face index of local coordinates c on a face perpendicular to mu.
pub(super) fn face_index(dims: &[usize; NDIM], mu: usize, c: &[usize; NDIM]) -> usize {
    let mut f = 0;
    let mut stride = 1;
    for nu in (0..NDIM).filter(|&nu| nu != mu) {
        f += stride * c[nu];
        stride *= dims[nu];
    }
    f
}

/// The CPU backend on one rank: its sub-lattice's links, the ghost links of the split
/// directions, the communicator to its neighbours, and the site term of its sites when
/// the action has one (`with_site_terms`).
pub struct DecomposedCpu<C: Comms> {
    pub(super) partition: Partition,
    pub(super) gauge: GaugeField,
    pub(super) kappa: f64,
    pub(super) comms: C,
    /// One per split direction, in increasing mu.
    pub(super) faces: Vec<Face>,
    pub(super) stats: HaloStats,
    /// The clover term and twist on the local sites (None: plain Wilson, the operator
    /// without them, unchanged).
    pub(super) site: Option<SiteTerms>,
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
            site: None,
        };
        be.exchange_ghost_links()?;
        Ok(be)
    }

    /// With the site term A of D = A - kappa H (the clover term, a twist) on this rank's
    /// sites (built by the caller from the rank's links and its neighbours' ring of
    /// links, or restricted from the whole lattice's term). The kernels then apply A, A_oo^-1 and
    /// A^dag as the single-device `CpuBackend` does. Needs no communication.
    pub fn with_site_terms(mut self, terms: SiteTerms) -> Result<Self> {
        if terms.volume() != self.gauge.lattice.volume() || terms.kappa != self.kappa {
            return Err(Error::internal(format!(
                "decomposed backend: a site term of {} sites at kappa {} for rank {} of {} sites at kappa {}",
                terms.volume(),
                terms.kappa,
                self.partition.rank(),
                self.gauge.lattice.volume(),
                self.kappa
            )));
        }
        self.site = Some(terms);
        Ok(self)
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
}

impl<C: Comms> crate::backend::host_cr::HostFusedCr for DecomposedCpu<C> {}

// A rank's `to_host` is its sub-lattice: multigrid on a split lattice is refused by the
// plan (`app::plan::check`), so these transfers are never reached there.
crate::host_coarsen!(<C: Comms> crate::dirac::coarse::Coarsen for DecomposedCpu<C>);

impl<C: Comms> Prepare for DecomposedCpu<C> {
    fn prepare(&mut self, _layout: Layout, _fused: bool) -> Result<()> {
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        global_sum(&mut self.comms, &[0.0]).map(|_| ())
    }
}
