//! The right-hand sides a config's `[source]` asks for, made one at a time (a 12-column
//! source at 32^3x64 is 4.8 GB of fields: each is built when its solve starts). Point,
//! wall and Gaussian sources give one column per (spin, colour) selected; Z2/Z4 noise one
//! per dilution piece (and time class). Where each column sits in the propagator
//! (`slot`: 3 spin' + colour' of the source) is what the contractions read; the
//! source's smearing and its smeared links are kept for a smeared sink.

use crate::config::{
    Dilution, LinkSmearingConfig, LoadedConfig, NoiseConfig, QuarkSmearingConfig, SourceConfig,
};
use crate::error::Result;
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::smear::LinkSmearing;
use crate::sources::{self, Noise, QuarkSmearing, Support};

/// The columns of a source and what the contractions need to know of it.
pub struct RightHandSides {
    kind: Kind,
    /// Column k's slot in the 12 of a propagator (3 spin' + colour').
    pub slots: Vec<usize>,
    /// The source's timeslice (the correlators' t = 0); 0 for volume sources.
    pub t0: usize,
    /// The spatial origin of the momentum phases.
    pub origin: [usize; 3],
    /// Whether the columns give correlators: the 12 of a point, wall or Gaussian source, or
    /// spin-diluted noise on one timeslice.
    pub contractable: bool,
    /// The quark smearing of the source, and the links it uses (for a smeared sink).
    pub smearing: Option<(QuarkSmearing, GaugeField)>,
    pub description: String,
}

enum Kind {
    Point([usize; NDIM]),
    Wall(usize, [i64; 3]),
    Gaussian([usize; NDIM], f64),
    Noise {
        noise: Noise,
        params: NoiseConfig,
    },
    /// A single right-hand side made elsewhere (random, plane wave, file).
    Single(SpinorField),
}

/// The library's link smearing of a config's.
pub fn link_smearing(c: &LinkSmearingConfig) -> LinkSmearing {
    match *c {
        LinkSmearingConfig::None => LinkSmearing::None,
        LinkSmearingConfig::Ape { alpha, iterations } => LinkSmearing::Ape {
            alpha,
            iterations: iterations as usize,
        },
        LinkSmearingConfig::Stout { rho, iterations } => LinkSmearing::Stout {
            rho,
            iterations: iterations as usize,
        },
    }
}

/// The library's quark smearing of a config's.
pub fn quark_smearing(c: &QuarkSmearingConfig) -> QuarkSmearing {
    match *c {
        QuarkSmearingConfig::Wuppertal {
            alpha, iterations, ..
        } => QuarkSmearing::Wuppertal {
            alpha,
            iterations: iterations as usize,
        },
        QuarkSmearingConfig::Jacobi {
            kappa, iterations, ..
        } => QuarkSmearing::Jacobi {
            kappa,
            iterations: iterations as usize,
        },
    }
}

fn columns_of(spin: crate::config::Index, colour: crate::config::Index) -> Vec<usize> {
    let mut v = Vec::new();
    for s in spin.values(4) {
        for c in colour.values(3) {
            v.push(3 * s + c);
        }
    }
    v
}

impl RightHandSides {
    /// The config's source on `gauge` (the field solved on: fixed, when `[gauge] fix`
    /// says so). `single` makes the sources that have only one form (random, plane wave,
    /// file).
    pub fn of(
        cfg: &LoadedConfig,
        gauge: &GaugeField,
        single: impl FnOnce() -> Result<(SpinorField, String)>,
    ) -> Result<RightHandSides> {
        let smearing = cfg.config.source.smearing().map(|s| {
            let links = crate::smear::smear_spatial(gauge, &link_smearing(s.links()));
            (quark_smearing(s), links)
        });
        let to_site = |s: &[i64; NDIM]| s.map(|v| v as usize);
        let (kind, slots, t0, origin, description) = match &cfg.config.source {
            SourceConfig::Point {
                site, spin, colour, ..
            } => {
                let s = to_site(site);
                let d = format!("point at {s:?}, spin {spin}, colour {colour}");
                let d = match cfg.config.source.smearing() {
                    Some(sm) => format!("{d}, smeared ({sm:?})"),
                    None => d,
                };
                let o = [s[0], s[1], s[2]];
                (Kind::Point(s), columns_of(*spin, *colour), s[3], o, d)
            }
            SourceConfig::Wall {
                t,
                spin,
                colour,
                momentum,
            } => (
                Kind::Wall(*t as usize, *momentum),
                columns_of(*spin, *colour),
                *t as usize,
                [0; 3],
                format!("wall on t = {t}, momentum {momentum:?}, spin {spin}, colour {colour}"),
            ),
            SourceConfig::Gaussian {
                site,
                r0,
                spin,
                colour,
            } => {
                let s = to_site(site);
                (
                    Kind::Gaussian(s, *r0),
                    columns_of(*spin, *colour),
                    s[3],
                    [s[0], s[1], s[2]],
                    format!("Gaussian r0 = {r0} at {s:?}, spin {spin}, colour {colour}"),
                )
            }
            SourceConfig::Z2(n) | SourceConfig::Z4(n) => {
                let noise = match cfg.config.source {
                    SourceConfig::Z2(_) => Noise::Z2,
                    _ => Noise::Z4,
                };
                let slots = noise_slots(n);
                let d = format!(
                    "{noise:?} noise, seed {}, {}, dilution {:?}, time dilution {}, momentum {:?}",
                    n.seed,
                    n.timeslice
                        .map_or("volume".to_string(), |t| format!("timeslice {t}")),
                    n.dilution,
                    n.time_dilution,
                    n.momentum
                );
                let kind = Kind::Noise {
                    noise,
                    params: n.clone(),
                };
                (kind, slots, n.timeslice.unwrap_or(0) as usize, [0; 3], d)
            }
            _ => {
                let (field, d) = single()?;
                (Kind::Single(field), vec![0], 0, [0; 3], d)
            }
        };
        let contractable = match &cfg.config.source {
            SourceConfig::Point { .. }
            | SourceConfig::Wall { .. }
            | SourceConfig::Gaussian { .. } => slots.len() == 12,
            SourceConfig::Z2(n) | SourceConfig::Z4(n) => {
                n.timeslice.is_some()
                    && n.time_dilution == 1
                    && matches!(n.dilution, Dilution::Spin | Dilution::SpinColour)
            }
            _ => false,
        };
        Ok(RightHandSides {
            contractable,
            kind,
            slots,
            t0,
            origin,
            smearing,
            description,
        })
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether the columns fill all 12 slots of a propagator.
    pub fn is_propagator(&self) -> bool {
        let mut s = self.slots.clone();
        s.sort_unstable();
        s == (0..12).collect::<Vec<_>>()
    }

    /// Column `k`'s right-hand side.
    pub fn make(&self, lattice: &Lattice, k: usize) -> SpinorField {
        let slot = self.slots[k];
        let (spin, colour) = (slot / 3, slot % 3);
        let field = match &self.kind {
            Kind::Point(site) => SpinorField::point(lattice, *site, spin, colour),
            Kind::Wall(t, p) => {
                let mut f = sources::wall(lattice, *t, spin, colour);
                sources::momentum_phase(lattice, &mut f, *p, [0; 3]);
                f
            }
            Kind::Gaussian(site, r0) => {
                sources::gaussian_wavefunction(lattice, *site, *r0, spin, colour)
            }
            Kind::Noise { noise, params } => noise_column(lattice, *noise, params, k),
            Kind::Single(f) => f.clone(),
        };
        match &self.smearing {
            Some((s, links)) => sources::smear_quark(links, &field, s),
            None => field,
        }
    }
}

/// A noise source's slots: spin-colour pieces fill 3 s + c, spin pieces 3 s (the colour
/// noise rides in the colour-0 slot: its colour sum is the contraction's), the others in
/// order (no propagator).
fn noise_slots(n: &NoiseConfig) -> Vec<usize> {
    let pieces = n.dilution.pieces();
    let per_time = n.time_dilution.max(1) as usize;
    (0..pieces * per_time)
        .map(|k| match n.dilution {
            Dilution::Spin => 3 * (k % pieces),
            _ => k % pieces,
        })
        .collect()
}

/// Column `k` of a noise source: dilution piece k mod pieces of time class k / pieces.
fn noise_column(lattice: &Lattice, noise: Noise, n: &NoiseConfig, k: usize) -> SpinorField {
    use crate::field::spinor::SITE_LEN;
    let support = match n.timeslice {
        Some(t) => Support::Timeslice(t as usize),
        None => Support::Volume,
    };
    // The undiluted noise (one field), then only piece k mod pieces of time class
    // k / pieces kept: the other pieces are not made for this column.
    let pieces = n.dilution.pieces();
    let (piece, class) = (k % pieces, k / pieces);
    let classes = n.time_dilution.max(1) as usize;
    let mut f = sources::noise(lattice, noise, support, Dilution::None, n.seed).swap_remove(0);
    for (x, site) in f.data.chunks_mut(SITE_LEN).enumerate() {
        let in_class = sources::shapes::global_coords(lattice, x)[3] % classes == class;
        for (c, z) in site.iter_mut().enumerate() {
            if !in_class || n.dilution.piece_of(c) != piece {
                *z = crate::field::C64::new(0.0, 0.0);
            }
        }
    }
    sources::momentum_phase(lattice, &mut f, n.momentum, [0; 3]);
    f
}
