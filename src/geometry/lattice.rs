//! Lattice geometry: dimensions, the lexicographic site index (x fastest), coordinates,
//! nearest neighbours, parity and the fermion boundary phases.
//!
//! A `Lattice` is the *local* sub-lattice a process owns. Today one process owns the whole
//! lattice (`offset = [0; 4]`, `global = dims`); a multi-GPU version splits `global` into
//! blocks and adds halos, and only `neighbour` needs to learn about them.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Directions mu = 0, 1, 2, 3 are x, y, z, t.
pub const NDIM: usize = 4;
pub const DIR_NAMES: [&str; NDIM] = ["x", "y", "z", "t"];

/// Fermion boundary condition in one direction (gauge links are always periodic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Boundary {
    #[default]
    Periodic,
    Antiperiodic,
}

impl Boundary {
    /// The factor a fermion picks up when a hop crosses the lattice edge.
    pub fn phase(self) -> f64 {
        match self {
            Boundary::Periodic => 1.0,
            Boundary::Antiperiodic => -1.0,
        }
    }
}

/// The most sites of a lattice the program holds on the host (4 294 967 295: beyond
/// 192^3x384, the largest production lattices; a gauge field of that many sites is 2.5 TB).
pub const HOST_MAX_SITES: usize = u32::MAX as usize;

/// The most sites of the (sub-)lattice one GPU holds: the kernels index a field's 24 reals
/// a site with 32-bit integers (89 478 485 sites: 64^3x128 and 80^3x160 fit, 96^3x192
/// must be split over GPUs).
pub const DEVICE_MAX_SITES: usize = (i32::MAX as usize) / 24;

/// "16x16x16x32".
fn fmt_dims(d: &[usize; NDIM]) -> String {
    format!("{}x{}x{}x{}", d[0], d[1], d[2], d[3])
}

/// Refuse a (sub-)lattice of extents `dims` for one GPU when its volume exceeds
/// `DEVICE_MAX_SITES`, naming `key` (the config key to change); `whole` says whether it
/// is the whole lattice (then the advice is to split it) or one GPU's part of a split.
pub fn check_device_volume(dims: [usize; NDIM], key: &str, whole: bool) -> Result<()> {
    let volume: usize = dims.iter().product();
    if volume <= DEVICE_MAX_SITES {
        return Ok(());
    }
    let advice = if whole {
        "split it over several GPUs ([parallel] grid) or run on the CPU (device = \"cpu\")"
    } else {
        "split it over more GPUs ([parallel] grid)"
    };
    Err(Error::InvalidValue {
        key: key.into(),
        message: format!(
            "{} {} has {volume} sites, more than one GPU's kernels can index (at most {DEVICE_MAX_SITES}): {advice}",
            if whole { "lattice" } else { "each GPU's sub-lattice" },
            fmt_dims(&dims)
        ),
    })
}

/// The default: periodic in space, antiperiodic in time.
pub const DEFAULT_BOUNDARY: [Boundary; NDIM] = [
    Boundary::Periodic,
    Boundary::Periodic,
    Boundary::Periodic,
    Boundary::Antiperiodic,
];

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lattice {
    /// Local extent in x, y, z, t.
    pub dims: [usize; NDIM],
    /// Extent of the whole lattice (equal to `dims` on one process).
    pub global: [usize; NDIM],
    /// Global coordinate of the local site (0,0,0,0).
    pub offset: [usize; NDIM],
    pub boundary: [Boundary; NDIM],
}

impl Lattice {
    /// A lattice on the host. Every extent must be at least 1 and the volume at most
    /// `HOST_MAX_SITES`. What one GPU may hold is less (`check_device_volume`): a lattice
    /// split over GPUs may exceed it where each sub-lattice does not.
    pub fn new(dims: [usize; NDIM], boundary: [Boundary; NDIM]) -> Result<Self> {
        for (mu, &l) in dims.iter().enumerate() {
            if l == 0 {
                return Err(Error::InvalidValue {
                    key: format!("L{}", DIR_NAMES[mu].to_uppercase()),
                    message: "every lattice extent must be at least 1".into(),
                });
            }
        }
        let volume = dims.iter().try_fold(1usize, |v, &l| v.checked_mul(l));
        if volume.is_none_or(|v| v > HOST_MAX_SITES) {
            return Err(Error::InvalidValue {
                key: "lattice".into(),
                message: format!(
                    "volume {} is too large (at most {HOST_MAX_SITES} sites)",
                    fmt_dims(&dims)
                ),
            });
        }
        Ok(Lattice {
            dims,
            global: dims,
            offset: [0; NDIM],
            boundary,
        })
    }

    pub fn volume(&self) -> usize {
        self.dims.iter().product()
    }

    /// Site index with x fastest: i = x + LX*(y + LY*(z + LZ*t)).
    #[inline]
    pub fn index(&self, c: [usize; NDIM]) -> usize {
        let d = &self.dims;
        c[0] + d[0] * (c[1] + d[1] * (c[2] + d[2] * c[3]))
    }

    #[inline]
    pub fn coords(&self, mut i: usize) -> [usize; NDIM] {
        let mut c = [0; NDIM];
        for (mu, cm) in c.iter_mut().enumerate() {
            *cm = i % self.dims[mu];
            i /= self.dims[mu];
        }
        c
    }

    /// Parity (x+y+z+t) % 2 of the global coordinate; even = 0.
    #[inline]
    pub fn parity(&self, i: usize) -> usize {
        let c = self.coords(i);
        (0..NDIM).map(|mu| c[mu] + self.offset[mu]).sum::<usize>() % 2
    }

    /// (parity, checkerboard index) of site i, with cb = i / 2: when LX is even the pair
    /// 2 cb, 2 cb + 1 shares y, z, t and holds one site of each parity (half-lattice
    /// fields of even-odd code are in this order).
    #[inline]
    pub fn checkerboard(&self, i: usize) -> (usize, usize) {
        (self.parity(i), i / 2)
    }

    /// The site of checkerboard index cb and parity p: the inverse of `checkerboard`.
    #[inline]
    pub fn checkerboard_site(&self, p: usize, cb: usize) -> usize {
        let s = 2 * cb;
        if self.parity(s) == p {
            s
        } else {
            s + 1
        }
    }

    /// The neighbour of site `i` one step forward (`forward = true`) or backward in
    /// direction `mu`, and the fermion phase of the hop (the boundary factor when the hop
    /// crosses the edge, else 1).
    #[inline]
    pub fn neighbour(&self, i: usize, mu: usize, forward: bool) -> (usize, f64) {
        let mut c = self.coords(i);
        let l = self.dims[mu];
        let crosses = if forward {
            c[mu] += 1;
            if c[mu] == l {
                c[mu] = 0;
                true
            } else {
                false
            }
        } else if c[mu] == 0 {
            c[mu] = l - 1;
            true
        } else {
            c[mu] -= 1;
            false
        };
        let phase = if crosses {
            self.boundary[mu].phase()
        } else {
            1.0
        };
        (self.index(c), phase)
    }

    /// All 8 neighbours of site `i` with their phases, `[mu][0 forward, 1 backward]`,
    /// from one coordinate decomposition (the hot loop's version of `neighbour`).
    #[inline]
    pub fn neighbours(&self, i: usize) -> [[(usize, f64); 2]; NDIM] {
        let c = self.coords(i);
        let mut out = [[(0, 1.0); 2]; NDIM];
        let mut stride = 1;
        for mu in 0..NDIM {
            let l = self.dims[mu];
            let phase = self.boundary[mu].phase();
            out[mu][0] = if c[mu] + 1 == l {
                (i + stride - l * stride, phase)
            } else {
                (i + stride, 1.0)
            };
            out[mu][1] = if c[mu] == 0 {
                (i + (l - 1) * stride, phase)
            } else {
                (i - stride, 1.0)
            };
            stride *= l;
        }
        out
    }

    /// Even-odd code needs every extent even.
    pub fn require_even(&self, what: &str) -> Result<()> {
        for mu in 0..NDIM {
            if !self.dims[mu].is_multiple_of(2) {
                return Err(Error::InvalidValue {
                    key: format!("L{}", DIR_NAMES[mu].to_uppercase()),
                    message: format!(
                        "{what} needs every lattice extent even, but L{} = {}",
                        DIR_NAMES[mu].to_uppercase(),
                        self.dims[mu]
                    ),
                });
            }
        }
        Ok(())
    }

    pub fn dims_string(&self) -> String {
        format!(
            "{}x{}x{}x{}",
            self.dims[0], self.dims[1], self.dims[2], self.dims[3]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkerboard_index_is_a_bijection_onto_the_two_halves() {
        // Definition (conventions.md parity, cb = i / 2): each parity gets V/2 distinct
        // indices, and checkerboard_site inverts checkerboard.
        let l = Lattice::new([4, 2, 6, 2], DEFAULT_BOUNDARY).unwrap();
        let vh = l.volume() / 2;
        let mut seen = vec![[false; 2]; vh];
        for i in 0..l.volume() {
            let (p, cb) = l.checkerboard(i);
            assert!(cb < vh && !seen[cb][p], "site {i}");
            seen[cb][p] = true;
            assert_eq!(l.checkerboard_site(p, cb), i);
        }
    }

    #[test]
    fn a_lattice_past_one_gpu_is_held_where_its_sub_lattices_fit() {
        // The bounds are analytic: 24 reals a site under i32::MAX (2147483647 / 24 =
        // 89478485 sites), and u32::MAX sites on the host.
        assert_eq!(DEVICE_MAX_SITES, 89_478_485);
        let big = [96, 96, 96, 192]; // 169869312 sites: the production lattice
        let l = Lattice::new(big, DEFAULT_BOUNDARY).unwrap();
        assert_eq!(l.volume(), 169_869_312);
        let e = check_device_volume(big, "lattice", true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("169869312 sites") && e.contains("89478485"),
            "{e}"
        );
        assert!(e.contains("[parallel] grid") && e.contains("cpu"), "{e}");
        // Split 1,1,2,2: 96x96x48x96 a GPU, 42467328 sites.
        check_device_volume([96, 96, 48, 96], "parallel.grid", false).unwrap();
        // The largest whole lattice one GPU holds, and one site more (89478486 = 2 x 3 x
        // 14913081).
        check_device_volume([89_478_485, 1, 1, 1], "lattice", true).unwrap();
        let e = check_device_volume([2, 3, 1, 14_913_081], "parallel.grid", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("each GPU's sub-lattice 2x3x1x14913081"), "{e}");
        // The host's bound: 65536 x 65536 = 2^32 sites is one past u32::MAX.
        Lattice::new([65_536, 65_535, 1, 1], DEFAULT_BOUNDARY).unwrap();
        let e = Lattice::new([65_536, 65_536, 1, 1], DEFAULT_BOUNDARY)
            .unwrap_err()
            .to_string();
        assert!(e.contains("too large") && e.contains("4294967295"), "{e}");
        // An overflowing product is refused the same way, not wrapped.
        assert!(Lattice::new([usize::MAX, 2, 1, 1], DEFAULT_BOUNDARY).is_err());
    }

    #[test]
    fn index_and_coords_round_trip_x_fastest() {
        let l = Lattice::new([3, 4, 5, 6], DEFAULT_BOUNDARY).unwrap();
        for i in 0..l.volume() {
            assert_eq!(l.index(l.coords(i)), i);
        }
        // x fastest: site 1 is (1,0,0,0); site LX is (0,1,0,0).
        assert_eq!(l.coords(1), [1, 0, 0, 0]);
        assert_eq!(l.coords(3), [0, 1, 0, 0]);
        assert_eq!(l.coords(3 * 4 * 5), [0, 0, 0, 1]);
    }

    #[test]
    fn neighbours_wrap_with_antiperiodic_time() {
        let l = Lattice::new([2, 2, 2, 4], DEFAULT_BOUNDARY).unwrap();
        let last_t = l.index([0, 0, 0, 3]);
        assert_eq!(l.neighbour(last_t, 3, true), (0, -1.0));
        assert_eq!(l.neighbour(0, 3, false), (last_t, -1.0));
        assert_eq!(l.neighbour(0, 0, false), (1, 1.0));
        assert_eq!(l.neighbour(0, 0, true), (1, 1.0));
    }

    #[test]
    fn neighbours_agree_with_neighbour() {
        let l = Lattice::new([3, 1, 4, 2], DEFAULT_BOUNDARY).unwrap();
        for i in 0..l.volume() {
            let n = l.neighbours(i);
            for mu in 0..NDIM {
                assert_eq!(n[mu][0], l.neighbour(i, mu, true));
                assert_eq!(n[mu][1], l.neighbour(i, mu, false));
            }
        }
    }

    #[test]
    fn zero_extent_is_refused() {
        assert!(Lattice::new([4, 0, 4, 4], DEFAULT_BOUNDARY).is_err());
    }
}
