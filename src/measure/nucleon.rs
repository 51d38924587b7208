//! The nucleon (proton) two-point function from one point-source propagator, u = d:
//! N = eps_abc (u_a^T C g5 d_b) u_c with C = g2 g4 (DeGrand-Rossi; Chroma's `Gamma(10)`,
//! so C g5 = g1 g3 = `G1G3`), Nbar = N^+ g4, and
//!
//! C(t, p) = sum_x e^{-i p.(x - origin)} tr[ P <N(x) Nbar(x0)> ],  P = (1 + g4) / 2,
//!
//! with, for S = S(x, x0) and Cb = g4 (C g5)^+ g4^T = -C g5 (the source's matrix),
//!
//! <N(x) Nbar(x0)> = eps_abc eps_a'b'c' ( S^{cc'} tr[C g5 S^{bb'} Cb (S^{aa'})^T]
//!                                       - S^{ca'} (C g5 S^{bb'} Cb)^T S^{ac'} ),
//!
//! which is what Chroma's `nucl2pt` computes. On a lattice antiperiodic in time the
//! timeslices past the lattice's edge (t0 + t >= LT) are multiplied by -1 (three quarks
//! cross it), as Chroma's `barhqlq` does: then C(t) is the correlator of a source at
//! time 0, the positive-parity nucleon forward and its negative-parity partner backward,
//! both with positive weight (docs/conventions.md).

use super::gammas::{
    charge_conjugation, dagger, gamma_by_name, parity_projector, structure, transpose,
};
use super::slices::{site_matrix, spatial, timeslice_sums, Phases, SiteMatrix};
use super::{check_inputs, Correlator};
use crate::field::gamma::{gamma, matmul, SpinMatrix};
use crate::field::su3::{C64, ZERO};
use crate::field::SpinorField;
use crate::geometry::lattice::Lattice;
use crate::Result;

/// The permutations of three colours and their signs (eps_abc).
const PERMS: [([usize; 3], f64); 6] = [
    ([0, 1, 2], 1.0),
    ([1, 2, 0], 1.0),
    ([2, 0, 1], 1.0),
    ([1, 0, 2], -1.0),
    ([0, 2, 1], -1.0),
    ([2, 1, 0], -1.0),
];

/// The nucleon with the positive-parity projector (1 + g4) / 2 at the sink `momenta`:
/// one correlator a momentum, its `source_gamma` and `sink_gamma` the diquark's C g5
/// (`G1G3`). Panics on inputs `try_nucleon_projected` refuses.
pub fn nucleon(
    lattice: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    momenta: &[[i64; 3]],
    origin: [usize; 3],
) -> Vec<Correlator> {
    nucleon_projected(lattice, prop, t0, momenta, origin, &parity_projector(1.0))
}

/// `nucleon` with any spin projector in place of (1 + g4) / 2 (e.g. the negative parity
/// `parity_projector(-1.0)`, or a polarised one).
pub fn nucleon_projected(
    lattice: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    momenta: &[[i64; 3]],
    origin: [usize; 3],
    projector: &SpinMatrix,
) -> Vec<Correlator> {
    try_nucleon_projected(lattice, prop, t0, momenta, origin, projector)
        .unwrap_or_else(|e| panic!("nucleon: {e}"))
}

/// `nucleon_projected`, with an error naming the argument for a propagator that is not
/// 12 fields of the lattice or a `t0` or `origin` off the lattice.
pub fn try_nucleon_projected(
    lattice: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    momenta: &[[i64; 3]],
    origin: [usize; 3],
    projector: &SpinMatrix,
) -> Result<Vec<Correlator>> {
    check_inputs(lattice, prop, t0, origin)?;
    let phases = Phases::new(lattice, momenta, origin);
    let diquark = Diquark::new();
    let nm = phases.len();
    let sums = timeslice_sums(lattice, nm, |x, acc| {
        let v = site_value(&site_matrix(prop, x), projector, &diquark);
        let mut ph = vec![ZERO; nm];
        phases.at(spatial(lattice, x), &mut ph);
        for (a, e) in acc.iter_mut().zip(&ph) {
            *a += *e * v;
        }
    });
    Ok(correlators(lattice, &sums, momenta, t0))
}

/// The diquark's matrices: C g5 at the sink and g4 (C g5)^+ g4^T at the source.
struct Diquark {
    sink: SpinMatrix,
    source: SpinMatrix,
}

impl Diquark {
    fn new() -> Diquark {
        let g5 = structure(gamma_by_name("G5").expect("G5 is a structure"));
        let sink = matmul(&charge_conjugation(), &g5);
        let g4 = gamma(3);
        let source = matmul(&matmul(&g4, &dagger(&sink)), &transpose(&g4));
        Diquark { sink, source }
    }
}

/// The spin matrix of colours (a, a'): `m[a][a'][s][s']` = S_{s a, s' a'}.
fn colour_blocks(m: &SiteMatrix) -> [[SpinMatrix; 3]; 3] {
    std::array::from_fn(|a| {
        std::array::from_fn(|ap| {
            std::array::from_fn(|s| std::array::from_fn(|sp| m[3 * s + a][3 * sp + ap]))
        })
    })
}

fn trace_of_product(a: &SpinMatrix, b: &SpinMatrix) -> C64 {
    let mut t = ZERO;
    for i in 0..4 {
        for j in 0..4 {
            t += a[i][j] * b[j][i];
        }
    }
    t
}

/// sum_{ij} a_ij b_ij = tr[a b^T].
fn dot(a: &SpinMatrix, b: &SpinMatrix) -> C64 {
    let mut t = ZERO;
    for i in 0..4 {
        for j in 0..4 {
            t += a[i][j] * b[i][j];
        }
    }
    t
}

/// tr[P <N(x) Nbar(x0)>] at one site (the module's formula).
fn site_value(m: &SiteMatrix, proj: &SpinMatrix, dq: &Diquark) -> C64 {
    let s = colour_blocks(m);
    // X^{bb'} = C g5 S^{bb'} Cb; tr[P S^{cc'}]; S^{ac'} P.
    let x: [[SpinMatrix; 3]; 3] = std::array::from_fn(|b| {
        std::array::from_fn(|bp| matmul(&matmul(&dq.sink, &s[b][bp]), &dq.source))
    });
    let tr_p: [[C64; 3]; 3] =
        std::array::from_fn(|c| std::array::from_fn(|cp| trace_of_product(proj, &s[c][cp])));
    let sp: [[SpinMatrix; 3]; 3] =
        std::array::from_fn(|a| std::array::from_fn(|cp| matmul(&s[a][cp], proj)));
    let mut direct = ZERO;
    let mut exchange = ZERO;
    for ([a, b, c], e1) in PERMS {
        for ([ap, bp, cp], e2) in PERMS {
            let e = e1 * e2;
            direct += tr_p[c][cp] * dot(&x[b][bp], &s[a][ap]) * e;
            // tr[S^{ca'} (X^{bb'})^T S^{ac'} P]
            let y = matmul(&transpose(&x[b][bp]), &sp[a][cp]);
            exchange += trace_of_product(&s[c][ap], &y) * e;
        }
    }
    direct - exchange
}

/// The correlators from the per-timeslice sums: t counted from `t0`, the timeslices past
/// the edge multiplied by the time boundary's phase (three quarks cross it).
fn correlators(
    lattice: &Lattice,
    sums: &[Vec<C64>],
    momenta: &[[i64; 3]],
    t0: usize,
) -> Vec<Correlator> {
    let lt = sums.len();
    let wrap = lattice.boundary[3].phase();
    let cg5 = gamma_by_name("G1G3").expect("G1G3 is a structure");
    momenta
        .iter()
        .enumerate()
        .map(|(m, &momentum)| Correlator {
            source_gamma: cg5,
            sink_gamma: cg5,
            momentum,
            values: (0..lt)
                .map(|t| {
                    let v = sums[(t0 + t) % lt][m];
                    if t0 + t >= lt {
                        v * wrap
                    } else {
                        v
                    }
                })
                .collect(),
        })
        .collect()
}
