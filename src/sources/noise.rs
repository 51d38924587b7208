//! Stochastic sources: Z2 or Z4 noise on a timeslice or the whole volume, diluted in spin,
//! colour or both.
//!
//! Each site draws its 12 components from its own counter-based stream, keyed by the seed
//! and the site's global index (with a tag that keeps noise apart from other draws of the
//! same seed), so the noise is the same for any thread count and any split of the
//! lattice, and a timeslice's noise is the volume's noise on that timeslice.

use super::shapes::global_coords;
use crate::field::spinor::SITE_LEN;
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::rng::Stream;
use rayon::prelude::*;
use std::f64::consts::FRAC_1_SQRT_2;

/// The values of a noise component; each has |eta| = 1, so E[eta_a eta_b^*] = delta_ab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noise {
    /// eta = +1 or -1, each with probability 1/2 (real).
    Z2,
    /// eta = (+-1 +- i) / sqrt 2, the four values with probability 1/4 each.
    Z4,
}

/// Where the noise is non-zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// One global timeslice.
    Timeslice(usize),
    /// Every site.
    Volume,
}

/// How the noise is split into pieces whose sum is the undiluted noise (also the
/// config's `[source] dilution`, kebab-case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dilution {
    /// One piece: the noise.
    #[default]
    None,
    /// Four pieces: piece s holds the spin-s components.
    Spin,
    /// Three pieces: piece c holds the colour-c components.
    Colour,
    /// Twelve pieces: piece 3 s + c holds the (spin s, colour c) components.
    SpinColour,
}

impl Dilution {
    /// How many pieces.
    pub fn pieces(self) -> usize {
        match self {
            Dilution::None => 1,
            Dilution::Spin => 4,
            Dilution::Colour => 3,
            Dilution::SpinColour => 12,
        }
    }

    /// The piece that holds component `k = 3 spin + colour` of a site.
    pub fn piece_of(self, k: usize) -> usize {
        match self {
            Dilution::None => 0,
            Dilution::Spin => k / 3,
            Dilution::Colour => k % 3,
            Dilution::SpinColour => k,
        }
    }
}

/// The stream number's high 32 bits for noise ("NOIS"); the low 32 hold the global site
/// index (below 2^32, `HOST_MAX_SITES`).
const NOISE_TAG: u64 = 0x4e4f_4953;

/// The 12 noise components of the site at global coordinates `c`.
pub fn site_noise(
    global: &[usize; NDIM],
    c: &[usize; NDIM],
    noise: Noise,
    seed: u64,
) -> [C64; SITE_LEN] {
    let site = c[0] + global[0] * (c[1] + global[1] * (c[2] + global[2] * c[3]));
    let mut s = Stream::new(seed, (NOISE_TAG << 32) | site as u64);
    let mut sign = || if s.uniform() < 0.5 { -1.0 } else { 1.0 };
    std::array::from_fn(|_| match noise {
        Noise::Z2 => C64::new(sign(), 0.0),
        Noise::Z4 => {
            let re = sign();
            C64::new(re * FRAC_1_SQRT_2, sign() * FRAC_1_SQRT_2)
        }
    })
}

/// The pieces of the noise (1, 4, 3 or 12, by `dilution`), whose sum is the undiluted
/// noise; each piece is zero outside `support` and outside its own components.
pub fn noise(
    lattice: &Lattice,
    noise: Noise,
    support: Support,
    dilution: Dilution,
    seed: u64,
) -> Vec<SpinorField> {
    let full = undiluted(lattice, noise, support, seed);
    (0..dilution.pieces())
        .map(|piece| keep_piece(&full, dilution, piece))
        .collect()
}

/// The noise on `support`, zero elsewhere.
fn undiluted(lattice: &Lattice, noise: Noise, support: Support, seed: u64) -> SpinorField {
    let mut f = SpinorField::zeros(lattice.volume());
    f.data
        .par_chunks_mut(SITE_LEN)
        .enumerate()
        .for_each(|(x, s)| {
            let c = global_coords(lattice, x);
            let inside = match support {
                Support::Volume => true,
                Support::Timeslice(t) => c[3] == t,
            };
            if inside {
                s.copy_from_slice(&site_noise(&lattice.global, &c, noise, seed));
            }
        });
    f
}

/// The components of `full` that belong to `piece`, the rest zero.
fn keep_piece(full: &SpinorField, dilution: Dilution, piece: usize) -> SpinorField {
    let mut f = SpinorField::zeros(full.volume());
    f.data
        .par_chunks_mut(SITE_LEN)
        .zip(full.data.par_chunks(SITE_LEN))
        .for_each(|(out, inp)| {
            for k in (0..SITE_LEN).filter(|&k| dilution.piece_of(k) == piece) {
                out[k] = inp[k];
            }
        });
    f
}
