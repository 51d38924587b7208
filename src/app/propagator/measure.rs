//! The correlators of a propagator run (`[measure]`, its defaults when absent): the
//! mesons of the asked pairs and the proton at every sink momentum, for the point sink and
//! the smeared one, from the 12 columns of a propagator source or the spin-diluted
//! columns of a noise source on one timeslice (the one-end trick: a spin-diluted colour
//! noise fills slot 3 s', its colour sum is the contraction's); their CSV and HDF5 files.

use crate::app::rhs::RightHandSides;
use crate::config::{LoadedConfig, MeasureConfig, Pairs, Sink};
use crate::error::Result;
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::Lattice;
use crate::io::hdf5::{Attr, Data, Dataset};
use crate::measure::{self, Correlator, GAMMA_NAMES};
use std::path::Path;

/// The correlators of one sink.
pub struct SinkCorrelators {
    pub sink: Sink,
    pub mesons: Vec<Correlator>,
    pub nucleons: Vec<Correlator>,
}

/// Every sink's correlators.
pub struct Measured {
    pub sinks: Vec<SinkCorrelators>,
}

impl Measured {
    /// Re C_{G5,G5}(t) at zero momentum with the point sink (empty when not measured).
    pub fn pion(&self) -> Vec<f64> {
        let g5 = measure::gamma_by_name("G5");
        self.sinks
            .iter()
            .filter(|s| s.sink == Sink::Point)
            .flat_map(|s| &s.mesons)
            .find(|c| {
                Some(c.source_gamma) == g5 && Some(c.sink_gamma) == g5 && c.momentum == [0; 3]
            })
            .map_or_else(Vec::new, |c| c.values.iter().map(|z| z.re).collect())
    }

    /// The correlators of every sink.
    pub fn len(&self) -> usize {
        self.sinks
            .iter()
            .map(|s| s.mesons.len() + s.nucleons.len())
            .sum()
    }
}

/// The (source, sink) pairs `pairs` names.
fn pairs_of(p: Pairs) -> Vec<(usize, usize)> {
    match p {
        Pairs::All => measure::all_pairs(),
        Pairs::Diagonal => {
            let mut v: Vec<(usize, usize)> = (0..GAMMA_NAMES.len()).map(|k| (k, k)).collect();
            if let (Some(g5), Some(a4)) =
                (measure::gamma_by_name("G5"), measure::gamma_by_name("G4G5"))
            {
                v.push((g5, a4));
            }
            v
        }
    }
}

/// The correlators of the solutions, or `None` when the source gives none (a single
/// right-hand side, volume noise, a dilution without spin).
pub fn contract(
    cfg: &LoadedConfig,
    lattice: &Lattice,
    rhs: &RightHandSides,
    solutions: &[SpinorField],
) -> Option<Measured> {
    if !rhs.contractable {
        return None;
    }
    let m: MeasureConfig = cfg.config.measure.clone().unwrap_or_default();
    // The solutions themselves when they are the 12 slots in order (a propagator source);
    // a spin-diluted noise's placed in its slots, the others zero.
    let placed: Vec<SpinorField>;
    let columns: &[SpinorField] = if rhs.slots.iter().copied().eq(0..12) {
        solutions
    } else {
        let mut v: Vec<SpinorField> = (0..12)
            .map(|_| SpinorField::zeros(lattice.volume()))
            .collect();
        for (k, s) in solutions.iter().enumerate() {
            v[rhs.slots[k]] = s.clone();
        }
        placed = v;
        &placed
    };
    let pairs = pairs_of(m.pairs);
    let sinks = m
        .sinks
        .iter()
        .map(|&sink| {
            let smeared;
            let prop = match (sink, &rhs.smearing) {
                (Sink::Smeared, Some((s, links))) => {
                    smeared = columns
                        .iter()
                        .map(|c| crate::sources::smear_quark(links, c, s))
                        .collect::<Vec<_>>();
                    &smeared[..]
                }
                _ => columns,
            };
            let mesons = if m.mesons {
                measure::mesons(lattice, prop, rhs.t0, &pairs, &m.momenta, rhs.origin)
            } else {
                Vec::new()
            };
            let nucleons = if m.baryons {
                measure::nucleon(lattice, prop, rhs.t0, &m.momenta, rhs.origin)
            } else {
                Vec::new()
            };
            SinkCorrelators {
                sink,
                mesons,
                nucleons,
            }
        })
        .collect();
    Some(Measured { sinks })
}

/// The nucleon rows' structure name: the diquark C g5 with the positive-parity
/// projector (docs/conventions.md).
pub const NUCLEON: &str = "proton";

/// One sink's CSV: `source_gamma, sink_gamma, px, py, pz, t, re, im`.
pub fn csv(s: &SinkCorrelators) -> Result<String> {
    let named = |c: &Correlator, nucleon: bool| -> (String, String) {
        if nucleon {
            (NUCLEON.into(), NUCLEON.into())
        } else {
            (
                GAMMA_NAMES[c.source_gamma].into(),
                GAMMA_NAMES[c.sink_gamma].into(),
            )
        }
    };
    let rows = s
        .mesons
        .iter()
        .map(|c| (c, false))
        .chain(s.nucleons.iter().map(|c| (c, true)))
        .flat_map(|(c, nucleon)| {
            let (src, snk) = named(c, nucleon);
            c.values.iter().enumerate().map(move |(t, z)| {
                vec![
                    src.clone(),
                    snk.clone(),
                    c.momentum[0].to_string(),
                    c.momentum[1].to_string(),
                    c.momentum[2].to_string(),
                    t.to_string(),
                    format!("{:.17e}", z.re),
                    format!("{:.17e}", z.im),
                ]
            })
        });
    crate::report::csv::table(
        &[
            "source_gamma",
            "sink_gamma",
            "px",
            "py",
            "pz",
            "t",
            "re",
            "im",
        ],
        rows,
    )
}

/// The HDF5 correlators: per sink, `mesons_<sink>` `[pair, momentum, t]` and
/// `nucleon_<sink>` `[momentum, t]`, complex128, with the pairs' names and the momenta as
/// attributes, and `attrs` on the file.
pub fn stage_h5(
    path: &Path,
    m: &Measured,
    attrs: Vec<Attr>,
    momenta: &[[i64; 3]],
) -> Result<crate::io::staged::Staged> {
    use crate::io::hdf5::{AttrValue, H5File};
    let flat_momenta: Vec<i64> = momenta.iter().flatten().copied().collect();
    // Per sink and kind, the correlators in [pair][momentum] order as the contractions
    // return them (pair-major for the mesons).
    let tables: Vec<(String, &[Correlator], bool)> = m
        .sinks
        .iter()
        .flat_map(|s| {
            let name = format!("{:?}", s.sink).to_lowercase();
            [
                (format!("mesons_{name}"), &s.mesons[..], false),
                (format!("nucleon_{name}"), &s.nucleons[..], true),
            ]
        })
        .filter(|(_, c, _)| !c.is_empty())
        .collect();
    let values: Vec<Box<dyn Fn(usize) -> C64 + Sync>> = tables
        .iter()
        .map(|(_, c, _)| {
            let lt = c[0].values.len();
            Box::new(move |i: usize| c[i / lt].values[i % lt]) as Box<dyn Fn(usize) -> C64 + Sync>
        })
        .collect();
    let datasets = tables
        .iter()
        .zip(&values)
        .map(|((name, c, nucleon), f)| {
            let (lt, nm) = (c[0].values.len(), momenta.len().max(1));
            let join = |g: &dyn Fn(&Correlator) -> usize| -> String {
                c.iter()
                    .step_by(nm)
                    .map(|x| GAMMA_NAMES[g(x)])
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let mut a = vec![
                Attr::new("momenta", AttrValue::I64s(flat_momenta.clone())),
                Attr::new(
                    "layout",
                    if *nucleon {
                        "[momentum, t], t from the source's timeslice"
                    } else {
                        "[pair, momentum, t], t from the source's timeslice"
                    },
                ),
            ];
            let shape = if *nucleon {
                vec![c.len(), lt]
            } else {
                a.push(Attr::new("source_gamma", join(&|x| x.source_gamma)));
                a.push(Attr::new("sink_gamma", join(&|x| x.sink_gamma)));
                vec![c.len() / nm, nm, lt]
            };
            Dataset {
                name: name.clone(),
                shape,
                data: Data::C16(f.as_ref()),
                attrs: a,
            }
        })
        .collect();
    crate::io::hdf5::stage_h5(path, &H5File { attrs, datasets })
}
