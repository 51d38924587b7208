//! Two-point contractions (`qcd_solve::measure`): mesons of the 16 x 16 Dirac structures
//! and the nucleon. Expected values, each independent of the library's contraction code:
//! - the free Wilson propagator as a momentum sum (S~(p) the numerical inverse of the
//!   4x4 D~(p) that conventions.md's operator gives a plane wave), against the CPU solve;
//! - free meson correlators as a pure momentum sum, and any propagator's mesons by dense
//!   12x12 traces; the nucleon by its Wick contraction written index by index
//!   (tests/contractions_common);
//! - exact symmetries: the free field's translation and time-reflection invariance, a
//!   real gauge file's time-reflected field (correlators reversed, sign tau_src tau_snk),
//!   gauge invariance, and the spectral decomposition's signs;
//! - app::propagator's pion (sum |S|^2 a timeslice).

mod contractions_common;

use contractions_common::*;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Boundary, Lattice};
use qcd_solve::measure::{self, all_pairs, gamma_by_name, mesons, nucleon, structure, Correlator};
use std::path::PathBuf;
use std::sync::OnceLock;

const KAPPA_FREE: f64 = 0.1;
const X0: [usize; 4] = [1, 2, 3, 5];
const MOMENTA: [[i64; 3]; 4] = [[0, 0, 0], [1, 0, 0], [0, 1, -1], [-1, 2, 0]];

fn free_lattice() -> Lattice {
    lattice([4, 4, 4, 8], Boundary::Antiperiodic)
}

fn spatial(x: [usize; 4]) -> [usize; 3] {
    [x[0], x[1], x[2]]
}

fn g(name: &str) -> usize {
    gamma_by_name(name).unwrap()
}

/// The free propagator from X0 in closed form (computed once).
fn free_prop() -> &'static Vec<SpinorField> {
    static P: OnceLock<Vec<SpinorField>> = OnceLock::new();
    P.get_or_init(|| closed_form_propagator(&free_lattice(), KAPPA_FREE, X0))
}

/// `|a - b| <= tol * scale[t]` for every t.
fn assert_close(a: &[C64], b: &[C64], scale: &[f64], tol: f64, what: &str) {
    for t in 0..a.len() {
        let d = (a[t] - b[t]).norm();
        assert!(
            d <= tol * scale[t],
            "{what}, t = {t}: {:e} against {:e} (diff {d:e}, scale {:e})",
            a[t],
            b[t],
            scale[t]
        );
    }
}

fn find(cs: &[Correlator], src: usize, snk: usize, p: [i64; 3]) -> &Correlator {
    cs.iter()
        .find(|c| c.source_gamma == src && c.sink_gamma == snk && c.momentum == p)
        .unwrap()
}

#[test]
fn the_free_propagator_in_closed_form_is_the_cpu_solve() {
    let l = free_lattice();
    let solved = solve_columns(&GaugeField::unit(&l), KAPPA_FREE, X0);
    for (j, (s, c)) in solved.iter().zip(free_prop()).enumerate() {
        // CR stops at ||r|| / ||b|| = 1e-12; D's condition number at kappa = 0.1 is at
        // most (1 + 8 kappa) / (1 - 8 kappa) = 9, so the columns agree to ~1e-11.
        let r = s.rel_diff(c);
        assert!(r <= 1e-10, "column {j}: relative difference {r:e}");
    }
}

#[test]
fn free_mesons_are_the_momentum_sum_for_all_256_pairs() {
    let l = free_lattice();
    let prop = free_prop();
    let cs = mesons(&l, prop, X0[3], &all_pairs(), &MOMENTA, spatial(X0));
    assert_eq!(cs.len(), 256 * MOMENTA.len());
    // The output order: pairs slower, momenta faster.
    assert_eq!(
        (cs[5].source_gamma, cs[5].sink_gamma, cs[5].momentum),
        (0, 1, MOMENTA[1])
    );
    // |C(t)| <= sum_x |S(x)|^2 = the pion (Cauchy-Schwarz, unitary structures): every
    // correlator is compared relative to it.
    let pion = magnitude(&l, prop, X0[3], 2);
    for &n in &MOMENTA {
        for (src, snk) in all_pairs() {
            let want = free_meson_momentum_sum(&l, KAPPA_FREE, &structure(src), &structure(snk), n);
            let got = &find(&cs, src, snk, n).values;
            assert_close(
                got,
                &want,
                &pion,
                1e-12,
                &format!("({src}, {snk}) at {n:?}"),
            );
        }
    }
}

#[test]
fn mesons_match_dense_twelve_by_twelve_traces() {
    // A propagator with every entry distinct (the free field's is colour-diagonal):
    // random fields stand in for the 12 columns; the contraction does not care.
    let l = lattice([4, 4, 4, 8], Boundary::Antiperiodic);
    let prop: Vec<SpinorField> = (0..12)
        .map(|j| SpinorField::random(l.volume(), 17, 1000 * j))
        .collect();
    let mut pairs: Vec<(usize, usize)> = (0..16).map(|k| (k, k)).collect();
    pairs.extend([
        (g("G5"), g("G4G5")),
        (g("G4G5"), g("G5")),
        (g("G1"), g("G2G3")),
        (g("1"), g("G3G4")),
        (g("G2G5"), g("G1G2")),
    ]);
    let (t0, origin) = (6, [0, 3, 1]);
    let momenta = [[0, 0, 0], [1, -1, 2]];
    let cs = mesons(&l, &prop, t0, &pairs, &momenta, origin);
    let scale = magnitude(&l, &prop, t0, 2);
    for &(src, snk) in &pairs {
        for &n in &momenta {
            let want = dense_meson(&l, &prop, t0, &structure(src), &structure(snk), n, origin);
            assert_close(
                &find(&cs, src, snk, n).values,
                &want,
                &scale,
                1e-12,
                &format!("({src}, {snk}) {n:?}"),
            );
        }
    }
}

#[test]
fn free_meson_signs_symmetries_and_translation() {
    let l = free_lattice();
    let prop = free_prop();
    let lt = l.dims[3];
    let cs = mesons(&l, prop, X0[3], &all_pairs(), &MOMENTA[..2], spatial(X0));
    let pion = magnitude(&l, prop, X0[3], 2);
    // The pion is sum |S|^2 > 0; physical_sign(k) C_kk(t) = <O_k(t) O_k(0)^+> at p = 0 is
    // a sum of |<m|O|n>|^2 e^{-E ...} >= 0 on the antiperiodic lattice for t >= 1
    // (transfer matrix; Wilson fermions at kappa < 1/6 have a positive one). t = 0 is a
    // contact term with no such sign.
    for k in 0..16 {
        let c = &find(&cs, k, k, [0, 0, 0]).values;
        for t in 1..lt {
            let v = c[t] * measure::physical_sign(k);
            assert!(
                v.re > 0.0 && v.im.abs() <= 1e-13 * pion[t],
                "{}: t = {t}: {v:e}",
                measure::GAMMA_NAMES[k]
            );
        }
    }
    // The usual signs: the pion and the rho (G1-G1) positive; <A4 P^+> of the physical
    // sign since G5's physical_sign is +1.
    assert!(find(&cs, g("G1"), g("G1"), [0, 0, 0]).values[2].re > 0.0);
    assert_eq!(measure::physical_sign(g("G5")), 1.0);
    // Time reflection (the free field is reflection-invariant; conventions: M = g4 g5):
    // C(t) = tau_src tau_snk C(LT - t), exactly.
    for c in &cs {
        let s = measure::reflection_sign(c.source_gamma) * measure::reflection_sign(c.sink_gamma);
        let rev: Vec<C64> = (0..lt).map(|t| c.values[(lt - t) % lt] * s).collect();
        assert_close(
            &c.values,
            &rev,
            &pion,
            1e-12,
            &format!("reflection of {:?}", (c.source_gamma, c.sink_gamma)),
        );
    }
    // Translation invariance: a source at the origin gives the same correlators.
    let x1 = [0, 0, 0, 0];
    let p1 = closed_form_propagator(&l, KAPPA_FREE, x1);
    let c1 = mesons(&l, &p1, 0, &all_pairs(), &MOMENTA[..2], [0, 0, 0]);
    for (a, b) in cs.iter().zip(&c1) {
        assert_close(&a.values, &b.values, &pion, 1e-12, "translated source");
    }
}

#[test]
fn the_nucleon_is_its_wick_contraction_and_free_translation_invariant() {
    let l = free_lattice();
    let lt = l.dims[3];
    let prop = free_prop();
    let scale = magnitude(&l, prop, X0[3], 3);
    let momenta = [[0, 0, 0], [1, 0, 0]];
    // Source on timeslice 5 of 8: the sinks at t >= 3 lie past the antiperiodic edge and
    // carry the sign -1 (three quarks cross it).
    let got = nucleon(&l, prop, X0[3], &momenta, spatial(X0));
    let p_plus = measure::parity_projector(1.0);
    for (c, &n) in got.iter().zip(&momenta) {
        assert_eq!(
            (c.source_gamma, c.sink_gamma, c.momentum),
            (g("G1G3"), g("G1G3"), n)
        );
        let want = wick_nucleon(&l, prop, X0[3], n, spatial(X0), &p_plus, -1.0);
        assert_close(&c.values, &want, &scale, 1e-12, &format!("nucleon {n:?}"));
    }
    // Any projector (here the negative parity one) on random columns, periodic time.
    let lp = lattice([4, 4, 4, 8], Boundary::Periodic);
    let rnd: Vec<SpinorField> = (0..12)
        .map(|j| SpinorField::random(lp.volume(), 5, 100 * j))
        .collect();
    let p_minus = measure::parity_projector(-1.0);
    let c = measure::nucleon_projected(&lp, &rnd, 6, &[[0, 1, 1]], [1, 0, 0], &p_minus);
    let want = wick_nucleon(&lp, &rnd, 6, [0, 1, 1], [1, 0, 0], &p_minus, 1.0);
    assert_close(
        &c[0].values,
        &want,
        &magnitude(&lp, &rnd, 6, 3),
        1e-12,
        "P- on random columns",
    );
    // Translation: the source at the origin (no edge crossed) gives the same C(t): the
    // sign past the edge is the one that makes the correlator the source-at-0 one.
    let p0 = closed_form_propagator(&l, KAPPA_FREE, [0, 0, 0, 0]);
    let c0 = nucleon(&l, &p0, 0, &momenta, [0, 0, 0]);
    for (a, b) in got.iter().zip(&c0) {
        assert_close(&a.values, &b.values, &scale, 1e-12, "translated nucleon");
    }
    // Spectral decomposition with an antiperiodic time (an ordinary trace over states):
    // the forward nucleon and the backward negative-parity partner both enter (1 + g4)/2
    // with positive weight, so the free C(t) at p = 0 is real and positive.
    for t in 0..lt {
        let v = got[0].values[t];
        assert!(
            v.re > 0.0 && v.im.abs() <= 1e-12 * scale[t],
            "t = {t}: {v:e}"
        );
    }
    // With a periodic time the trace over states carries (-1)^F: the backward partner
    // (an odd number of quarks) enters with a minus sign, the forward nucleon unchanged.
    let lp = lattice([4, 4, 4, 8], Boundary::Periodic);
    let pp = closed_form_propagator(&lp, KAPPA_FREE, [0, 0, 0, 0]);
    let cp = &nucleon(&lp, &pp, 0, &[[0, 0, 0]], [0, 0, 0])[0].values;
    assert!(cp[1].re > 0.0 && cp[lt - 1].re < 0.0, "periodic: {cp:?}");
}

/// The real gauge file (MILC 4^3x8), periodic in time, and its 12 columns from X0 at
/// kappa = 0.12, solved once.
fn real() -> &'static (GaugeField, Vec<SpinorField>) {
    static R: OnceLock<(GaugeField, Vec<SpinorField>)> = OnceLock::new();
    R.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/lattices/milc_lat.sample.l4448");
        let l = lattice([4, 4, 4, 8], Boundary::Periodic);
        let (u, _) = qcd_solve::io::read_gauge(&path, None, Some(l.dims), l.boundary).unwrap();
        let prop = solve_columns(&u, KAPPA_REAL, X0);
        (u, prop)
    })
}

const KAPPA_REAL: f64 = 0.12;

#[test]
fn a_time_reflected_gauge_field_reverses_the_correlators() {
    // Per configuration C(t) = C(LT - t) does not hold; what holds exactly is that on the
    // field reflected about t0 (U'_4(x, t) = U_4(x, r(t) - 1)^+), D' = R D R^-1 with the
    // spin rotation M = g4 g5, so S'(x', x0) = M S(x, x0) M^+ and C'_{src,snk}(t) =
    // tau_src tau_snk C_{src,snk}(LT - t), and the nucleon's (1 + g4)/2 becomes
    // (1 - g4)/2 (M^+ g4 M = -g4; C g5 is kept).
    let (u, prop) = real();
    let l = &u.lattice;
    let lt = l.dims[3];
    let refl = solve_columns(&time_reflected(u, X0[3]), KAPPA_REAL, X0);
    let momenta = [[0, 0, 0], [0, 1, 0]];
    let a = mesons(l, prop, X0[3], &all_pairs(), &momenta, spatial(X0));
    let b = mesons(l, &refl, X0[3], &all_pairs(), &momenta, spatial(X0));
    let pion = magnitude(l, prop, X0[3], 2);
    let rev = |v: &[C64], s: f64| -> Vec<C64> { (0..lt).map(|t| v[(lt - t) % lt] * s).collect() };
    let pion_rev: Vec<f64> = (0..lt).map(|t| pion[(lt - t) % lt]).collect();
    for (ca, cb) in a.iter().zip(&b) {
        let s = measure::reflection_sign(ca.source_gamma) * measure::reflection_sign(ca.sink_gamma);
        // Solver tolerance 1e-12 per column, on both fields.
        assert_close(
            &cb.values,
            &rev(&ca.values, s),
            &pion_rev,
            1e-8,
            &format!("{:?}", (ca.source_gamma, ca.sink_gamma, ca.momentum)),
        );
    }
    // The pion is not reflection-symmetric on one configuration (the ensemble's symmetry,
    // not a configuration's): the reversed original differs from itself.
    let pi = &find(&a, g("G5"), g("G5"), [0, 0, 0]).values;
    let asym = (1..lt)
        .map(|t| (pi[t] - pi[lt - t]).norm() / pi[t].norm())
        .fold(0.0, f64::max);
    assert!(
        asym > 1e-6,
        "the pion of one configuration is symmetric to {asym:e}"
    );
    let np = measure::nucleon_projected(
        l,
        prop,
        X0[3],
        &momenta,
        spatial(X0),
        &measure::parity_projector(-1.0),
    );
    let nr = nucleon(l, &refl, X0[3], &momenta, spatial(X0));
    let s3 = magnitude(l, prop, X0[3], 3);
    let s3_rev: Vec<f64> = (0..lt).map(|t| s3[(lt - t) % lt]).collect();
    for (p, r) in np.iter().zip(&nr) {
        assert_close(
            &r.values,
            &rev(&p.values, 1.0),
            &s3_rev,
            1e-8,
            "nucleon reflected",
        );
    }
}

#[test]
fn point_correlators_are_gauge_invariant() {
    let (u, prop) = real();
    let l = &u.lattice;
    let gt = random_transformation(l, 99);
    let moved = solve_columns(&u.gauge_transform(&gt), KAPPA_REAL, X0);
    // The columns themselves: S'(x, x0) = G(x) S(x, x0) G(x0)^+, i.e. column (s', c') of
    // S' is G(x) applied to sum_c'' S(., x0)_{., s' c''} conj(G(x0))_{c' c''}.
    let g0 = gt[l.index(X0)];
    for sp in 0..4 {
        for cp in 0..3 {
            let mut mixed = SpinorField::zeros(l.volume());
            for c in 0..3 {
                let w = g0.0[cp][c].conj();
                for (m, s) in mixed.data.iter_mut().zip(&prop[3 * sp + c].data) {
                    *m += *s * w;
                }
            }
            let want = mixed.gauge_transform(&gt);
            let r = moved[3 * sp + cp].rel_diff(&want);
            assert!(r <= 1e-10, "column ({sp}, {cp}): {r:e}");
        }
    }
    let momenta = [[0, 0, 0], [1, 1, 0]];
    let a = mesons(l, prop, X0[3], &all_pairs(), &momenta, spatial(X0));
    let b = mesons(l, &moved, X0[3], &all_pairs(), &momenta, spatial(X0));
    let pion = magnitude(l, prop, X0[3], 2);
    for (ca, cb) in a.iter().zip(&b) {
        assert_close(
            &cb.values,
            &ca.values,
            &pion,
            1e-10,
            &format!("{:?}", (ca.source_gamma, ca.sink_gamma)),
        );
    }
    let na = nucleon(l, prop, X0[3], &momenta, spatial(X0));
    let nb = nucleon(l, &moved, X0[3], &momenta, spatial(X0));
    let s3 = magnitude(l, prop, X0[3], 3);
    for (x, y) in na.iter().zip(&nb) {
        assert_close(&y.values, &x.values, &s3, 1e-10, "nucleon");
    }
}

#[test]
fn the_pion_is_the_propagator_commands_pion() {
    let (u, prop) = real();
    let l = &u.lattice;
    let want = qcd_solve::app::propagator::pion(l, prop, X0[3]);
    let c = mesons(
        l,
        prop,
        X0[3],
        &[(g("G5"), g("G5"))],
        &[[0, 0, 0]],
        spatial(X0),
    );
    for (t, (v, w)) in c[0].values.iter().zip(&want).enumerate() {
        // Two summation orders of the same positive terms.
        assert!(
            (v.re - w).abs() <= 1e-14 * w && v.im.abs() <= 1e-14 * w,
            "t = {t}: {v:e} against {w:e}"
        );
    }
}

#[test]
fn correlators_do_not_depend_on_the_thread_count() {
    // 8^3 x 4: 512 sites a timeslice, four blocks each.
    let l = lattice([8, 8, 8, 4], Boundary::Antiperiodic);
    let prop: Vec<SpinorField> = (0..12)
        .map(|j| SpinorField::random(l.volume(), 3, 1000 * j))
        .collect();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            (
                mesons(&l, &prop, 1, &all_pairs(), &MOMENTA, [0, 0, 0]),
                nucleon(&l, &prop, 1, &MOMENTA, [0, 0, 0]),
            )
        })
    };
    let bits = |cs: &[Correlator]| -> Vec<(u64, u64)> {
        cs.iter()
            .flat_map(|c| c.values.iter().map(|z| (z.re.to_bits(), z.im.to_bits())))
            .collect()
    };
    let (m1, n1) = run(1);
    for threads in [2, 3] {
        let (m, n) = run(threads);
        assert_eq!(bits(&m), bits(&m1), "{threads} threads");
        assert_eq!(bits(&n), bits(&n1), "{threads} threads");
    }
}

#[test]
fn bad_inputs_are_refused_by_name() {
    let l = free_lattice();
    let prop = free_prop();
    let key = |r: qcd_solve::Result<Vec<Correlator>>| match r {
        Err(qcd_solve::Error::InvalidValue { key, .. }) => key,
        other => panic!("expected an invalid value, got {other:?}"),
    };
    let p0 = [[0, 0, 0]];
    assert_eq!(
        key(measure::try_mesons(
            &l,
            &prop[..11],
            0,
            &[(5, 5)],
            &p0,
            [0; 3]
        )),
        "propagator"
    );
    assert_eq!(
        key(measure::try_mesons(&l, prop, 8, &[(5, 5)], &p0, [0; 3])),
        "t0"
    );
    assert_eq!(
        key(measure::try_mesons(&l, prop, 0, &[(16, 5)], &p0, [0; 3])),
        "pairs"
    );
    let pp = measure::parity_projector(1.0);
    assert_eq!(
        key(measure::try_nucleon_projected(
            &l,
            prop,
            0,
            &p0,
            [4, 0, 0],
            &pp
        )),
        "origin"
    );
    let small: Vec<SpinorField> = (0..12).map(|_| SpinorField::zeros(8)).collect();
    assert_eq!(
        key(measure::try_nucleon_projected(
            &l, &small, 0, &p0, [0; 3], &pp
        )),
        "propagator"
    );
}
