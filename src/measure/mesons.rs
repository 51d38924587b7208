//! Meson two-point functions of all 16 x 16 Dirac structures at any sink momenta, from
//! one point-source propagator (u = d):
//!
//! C_{src,snk}(t, p) = sum_x e^{-i p.(x - origin)} tr[ G_snk S(x, x0) G_src g5 S(x, x0)^+ g5 ]
//!
//! (Chroma's `mesons`, generalised to G_src != G_snk; docs/conventions.md states how it
//! relates to `<O_snk(x) O_src(x0)^+>`). One pass over the sites: at each site the 256
//! colour traces tr_c[S_{b g} S_{a d}^+] of pairs of the 16 spin blocks (a Hermitian
//! 16x16 matrix, 136 inner products of 9 colour entries) are formed and summed with each
//! momentum's phase; the structures, each a permutation times powers of i, are applied
//! once per timeslice and momentum to the sums (the trace is linear in them).

use super::gammas::{Sparse, NGAMMA};
use super::slices::{spatial, timeslice_sums, Phases};
use super::{check_inputs, Correlator};
use crate::field::gamma::GAMMA5_SIGN;
use crate::field::su3::{C64, ZERO};
use crate::field::SpinorField;
use crate::geometry::lattice::Lattice;
use crate::{Error, Result};

/// Entries of the matrix of spin-block traces a site: (sink spin, source spin) pairs
/// squared.
const NP: usize = 256;

/// The 256 (source, sink) pairs of structure indices, source slower.
pub fn all_pairs() -> Vec<(usize, usize)> {
    (0..NGAMMA)
        .flat_map(|src| (0..NGAMMA).map(move |snk| (src, snk)))
        .collect()
}

/// The meson correlators of `pairs` ((source, sink) indices of `GAMMA_NAMES`) at the sink
/// `momenta` (mode numbers), with the phase origin `origin`; the source at timeslice
/// `t0`. One correlator per pair and momentum, pairs slower: element
/// `i_pair * momenta.len() + i_momentum`. Panics on inputs `try_mesons` refuses.
pub fn mesons(
    lattice: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    pairs: &[(usize, usize)],
    momenta: &[[i64; 3]],
    origin: [usize; 3],
) -> Vec<Correlator> {
    try_mesons(lattice, prop, t0, pairs, momenta, origin).unwrap_or_else(|e| panic!("mesons: {e}"))
}

/// `mesons`, with an error naming the argument for a propagator that is not 12 fields of
/// the lattice, a `t0` or `origin` off the lattice, or a structure index above 15.
pub fn try_mesons(
    lattice: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    pairs: &[(usize, usize)],
    momenta: &[[i64; 3]],
    origin: [usize; 3],
) -> Result<Vec<Correlator>> {
    check_inputs(lattice, prop, t0, origin)?;
    check_pairs(pairs)?;
    let phases = Phases::new(lattice, momenta, origin);
    let sums = momentum_sums(lattice, prop, &phases);
    Ok(contract(&sums, pairs, momenta, t0))
}

fn check_pairs(pairs: &[(usize, usize)]) -> Result<()> {
    match pairs.iter().find(|(a, b)| *a >= NGAMMA || *b >= NGAMMA) {
        Some(p) => Err(Error::invalid(
            "pairs",
            format!("the pair {p:?} names a Dirac structure beyond the 16 (indices 0..16)"),
        )),
        None => Ok(()),
    }
}

/// The 16 spin blocks of the site's propagator as colour vectors: `v[4 b + g][3 c + c']`
/// = S(x, x0)_{b c, g c'} (b the sink spin, g the source spin).
#[inline]
fn spin_blocks(prop: &[SpinorField], site: usize) -> [[C64; 9]; 16] {
    let mut v = [[ZERO; 9]; 16];
    for g in 0..4 {
        for cp in 0..3 {
            let col = &prop[3 * g + cp].data[site * 12..site * 12 + 12];
            for b in 0..4 {
                for c in 0..3 {
                    v[4 * b + g][3 * c + cp] = col[3 * b + c];
                }
            }
        }
    }
    v
}

/// `P[16 A + B]` = tr_c[S_A S_B^+] = sum over colours of v_A conj(v_B), A = (b, g) and
/// B = (a, d) pairs of (sink, source) spins: Hermitian, so 136 inner products.
#[inline]
fn block_traces(v: &[[C64; 9]; 16]) -> [C64; NP] {
    let mut p = [ZERO; NP];
    for a in 0..16 {
        for b in a..16 {
            let mut s = ZERO;
            for i in 0..9 {
                s += v[a][i] * v[b][i].conj();
            }
            p[16 * a + b] = s;
            p[16 * b + a] = s.conj();
        }
    }
    p
}

/// Per timeslice (absolute), per momentum m: `sums[t][256 m + i]` = sum over the
/// timeslice's sites of e^{-i p_m.(x - origin)} P_i(x).
fn momentum_sums(lattice: &Lattice, prop: &[SpinorField], phases: &Phases) -> Vec<Vec<C64>> {
    let nm = phases.len();
    timeslice_sums(lattice, NP * nm, |x, acc| {
        let p = block_traces(&spin_blocks(prop, x));
        let mut ph = vec![ZERO; nm];
        phases.at(spatial(lattice, x), &mut ph);
        for (m, e) in ph.iter().enumerate() {
            for (a, pi) in acc[NP * m..NP * (m + 1)].iter_mut().zip(&p) {
                *a += *e * *pi;
            }
        }
    })
}

/// tr[G_snk S G_src g5 S^+ g5] from the block traces P (any linear combination of sites'):
/// sum over a, g of phase_snk(a) phase_src(g) g5(pi_src(g)) g5(a)
/// P[(pi_snk(a), g), (a, pi_src(g))], the structures' rows being `row -> (col, phase)`.
#[inline]
fn trace(p: &[C64], src: &Sparse, snk: &Sparse) -> C64 {
    let mut c = ZERO;
    for a in 0..4 {
        let b = snk.col[a];
        for g in 0..4 {
            let d = src.col[g];
            let s = GAMMA5_SIGN[a] * GAMMA5_SIGN[d];
            c += snk.phase[a] * src.phase[g] * p[16 * (4 * b + g) + 4 * a + d] * s;
        }
    }
    c
}

/// The correlators from the momentum sums, t counted from `t0`.
fn contract(
    sums: &[Vec<C64>],
    pairs: &[(usize, usize)],
    momenta: &[[i64; 3]],
    t0: usize,
) -> Vec<Correlator> {
    let lt = sums.len();
    let sparse: Vec<Sparse> = (0..NGAMMA).map(Sparse::structure).collect();
    let mut out = Vec::with_capacity(pairs.len() * momenta.len());
    for &(src, snk) in pairs {
        for (m, &momentum) in momenta.iter().enumerate() {
            let values = (0..lt)
                .map(|t| {
                    let p = &sums[(t0 + t) % lt][NP * m..NP * (m + 1)];
                    trace(p, &sparse[src], &sparse[snk])
                })
                .collect();
            out.push(Correlator {
                source_gamma: src,
                sink_gamma: snk,
                momentum,
                values,
            });
        }
    }
    out
}
