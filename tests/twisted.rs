//! The twisted mass (D + 2 i kappa mu g5, docs/conventions.md) on the CPU, alone and with
//! the clover term. Where each expected value comes from:
//!
//! - free field: the analytic momentum-space operator M(p) = a + i sum b_mu g_mu + i t g5
//!   (a = 1 - 2 kappa sum cos p, b = 2 kappa sin p, t = 2 kappa mu, p antiperiodic in t)
//!   and its closed-form inverse M^+ / (a^2 + |b|^2 + t^2), with the gamma matrices
//!   written out in tests/clover_common (not src/field/gamma.rs); the clover term of the
//!   free field is exactly 1 (Fhat = 0);
//! - D(mu)^+ = g5 D(-mu) g5, and for the propagator S = D^-1 its consequence
//!   S(mu) = g5 S(-mu)^+ g5, entry by entry on solved point-source columns;
//! - even-odd with a twist: the unpreconditioned solve.
//!
//! The clover term's own checks are in tests/clover.rs.

mod clover_common;
use clover_common::*;
use qcd_solve::config::Preconditioning;
use qcd_solve::dirac::clover::{self, SiteTerms};
use qcd_solve::dirac::Action;
use qcd_solve::field::spinor::{idx, plane_wave_momentum};
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::linalg::Operator;
use qcd_solve::solver::{Method, StopReason};

/// Mode numbers of the plane waves (p_t = (2 n + 1) pi / 8, antiperiodic).
const MODES: [[i64; 4]; 5] = [
    [0, 0, 0, 0],
    [1, 0, 2, 1],
    [3, 1, 0, 2],
    [2, 2, 2, 3],
    [0, 3, 1, 7],
];

fn random_site(seed: u64) -> [C64; 12] {
    let mut rng = qcd_solve::rng::Stream::new(seed, 0);
    std::array::from_fn(|_| C64::new(rng.gaussian(), rng.gaussian()))
}

#[test]
fn free_field_clover_term_is_exactly_one() {
    // U = 1: every leaf is 1, Q = 4, Fhat = (4 - 4)/8 = 0 exactly, so the clover part of
    // A is exactly the identity: the packed blocks hold 1 on the diagonal and 0 elsewhere,
    // bit for bit.
    let l = lattice(DIMS);
    let g = GaugeField::unit(&l);
    let terms = SiteTerms::new(
        &g,
        &Action {
            kappa: 0.12,
            csw: 1.17,
            mu: 0.0,
        },
    )
    .unwrap();
    let mut want = [0.0; 72];
    for b in 0..2 {
        want[36 * b..36 * b + 6].fill(1.0);
    }
    for x in 0..l.volume() {
        assert_eq!(terms.clover[x], want, "site {x}");
        for (mu, nu) in clover::PLANES {
            let f = clover::field_strength(&g, x, mu, nu);
            assert!(f.0.iter().flatten().all(|z| *z == C64::new(0.0, 0.0)));
        }
    }
}

#[test]
fn free_field_twisted_operator_on_plane_waves() {
    // D e^{ipx} u = e^{ipx} M(p) u through CpuBackend::with_action (with the clover term,
    // which is 1 here); 1e-13 relative. And M(p) times the closed-form inverse is 1 to
    // 1e-14 (the closed form is what the solve test compares with).
    let l = lattice(DIMS);
    let g = GaugeField::unit(&l);
    let kappa = 0.12;
    for tm in [0.03, -0.05, 0.0] {
        let action = Action {
            kappa,
            csw: 1.17,
            mu: tm,
        };
        for (k, n) in MODES.iter().enumerate() {
            let u = random_site(k as u64);
            let p = plane_wave_momentum(&l, *n);
            let got = apply(
                &g,
                &action,
                Operator::D,
                &SpinorField::plane_wave(&l, *n, &u),
            );
            let want = SpinorField::plane_wave(&l, *n, &spin_mul(&free_m(p, kappa, tm), &u));
            let rel = got.rel_diff(&want);
            assert!(rel < 1e-13, "mu {tm} n {n:?}: {rel:e}");
            let one = mul4(&free_m(p, kappa, tm), &free_m_inverse(p, kappa, tm));
            for (i, row) in one.iter().enumerate() {
                for (j, z) in row.iter().enumerate() {
                    let w = if i == j { 1.0 } else { 0.0 };
                    assert!((z - C64::new(w, 0.0)).norm() < 1e-14, "M M^-1 ({i},{j})");
                }
            }
        }
    }
}

#[test]
fn free_field_twisted_solve_matches_the_analytic_inverse() {
    // A source of five plane waves with random spin-colour vectors; x = sum of
    // e^{ipx} M(p)^-1 u. BiCGStab (plain and even-odd), GCR and CGNE (its adjoint is
    // g5 D(-mu): plain and even-odd) through app::run::solve_on
    // to 1e-12: |x - x_analytic| / |x| <= cond(D) 1e-12 with cond(D) = max|M| / min|M|
    // < 2 / 0.058 (a at the smallest momentum, kappa 0.12): 3.5e-11, asserted 1e-9.
    let l = lattice(DIMS);
    let kappa = 0.12;
    for tm in [0.03, -0.05] {
        let action = Action {
            kappa,
            csw: 1.17,
            mu: tm,
        };
        let mut source = SpinorField::zeros(l.volume());
        let mut want = SpinorField::zeros(l.volume());
        for (k, n) in MODES.iter().enumerate() {
            let u = random_site(10 + k as u64);
            let p = plane_wave_momentum(&l, *n);
            let w = spin_mul(&free_m_inverse(p, kappa, tm), &u);
            for (s, z) in source
                .data
                .iter_mut()
                .zip(SpinorField::plane_wave(&l, *n, &u).data)
            {
                *s += z;
            }
            for (s, z) in want
                .data
                .iter_mut()
                .zip(SpinorField::plane_wave(&l, *n, &w).data)
            {
                *s += z;
            }
        }
        let mut p = problem(&GaugeField::unit(&l), &action, source);
        for (method, pre) in [
            (Method::Bicgstab, Preconditioning::None),
            (Method::Bicgstab, Preconditioning::EvenOdd),
            (Method::Gcr, Preconditioning::None),
            (Method::Cgne, Preconditioning::None),
            (Method::Cgne, Preconditioning::EvenOdd),
        ] {
            let r = solve(&mut p, method, pre, false, 1e-12);
            let err = r.solution.rel_diff(&want);
            eprintln!(
                "free field mu {tm} {method} {pre:?}: {} iterations, error {err:.1e}",
                r.iterations
            );
            assert_eq!(r.reason, StopReason::Converged, "{method} {pre:?}");
            assert!(err < 1e-9, "mu {tm} {method} {pre:?}: {err:e}");
        }
    }
}

#[test]
fn twisted_dagger_is_g5_times_minus_mu_times_g5() {
    // (phi | D(mu) psi) = (g5 D(-mu) g5 phi | psi) with the clover term, on a random field
    // and on PyQUDA's weak field: 1e-12 of |(phi | D psi)|. The check is sensitive: with
    // +mu on both sides (the wrong relation) the two differ by more than 1e-4.
    let l = lattice(DIMS);
    for (name, g) in [
        ("random", GaugeField::random(&l, 17)),
        ("weak_field", weak_field()),
    ] {
        let phi = SpinorField::random(l.volume(), 1, 0);
        let psi = SpinorField::random(l.volume(), 2, 0);
        let at = |tm: f64| Action {
            kappa: 0.115,
            csw: 1.17,
            mu: tm,
        };
        let lhs = dot(&phi, &apply(&g, &at(0.05), Operator::D, &psi));
        let rhs = dot(
            &apply(&g, &at(-0.05), Operator::D, &phi.gamma5()).gamma5(),
            &psi,
        );
        let wrong = dot(
            &apply(&g, &at(0.05), Operator::D, &phi.gamma5()).gamma5(),
            &psi,
        );
        let rel = (lhs - rhs).norm() / lhs.norm();
        let off = (lhs - wrong).norm() / lhs.norm();
        eprintln!("{name}: rel diff {rel:.1e}; with +mu on both sides {off:.1e}");
        assert!(rel < 1e-12, "{name}: {rel:e}");
        assert!(off > 1e-4, "{name}: {off:e}");
    }
}

#[test]
fn twisted_propagator_obeys_gamma5_hermiticity_across_mu() {
    // S(mu) = D(mu)^-1 and D(mu)^+ = g5 D(-mu) g5 give S(mu) = g5 S(-mu)^+ g5, entrywise
    // S(mu)[Q, P] = g5_Q g5_P conj(S(-mu)[P, Q]). Point-source columns for three points P
    // (both chiralities) at +mu and -mu, BiCGStab to 1e-12 on the weak field with the
    // clover term: each entry is off by at most ||D^-1|| 1e-12 (||D^-1|| ~ 10 here), so
    // 1e-10 absolute (the entries are up to ~1).
    let l = lattice(DIMS);
    let g = weak_field();
    let points = [
        ([0, 0, 0, 0], 0, 0),
        ([1, 2, 3, 5], 2, 1),
        ([3, 1, 0, 7], 1, 2),
    ];
    let g5 = |s: usize| if s < 2 { 1.0 } else { -1.0 };
    let columns = |tm: f64| -> Vec<SpinorField> {
        let action = Action {
            kappa: 0.115,
            csw: 1.17,
            mu: tm,
        };
        points
            .iter()
            .map(|&(c, s, col)| {
                let mut p = problem(&g, &action, SpinorField::point(&l, c, s, col));
                let r = solve(
                    &mut p,
                    Method::Bicgstab,
                    Preconditioning::None,
                    false,
                    1e-12,
                );
                assert_eq!(r.reason, StopReason::Converged);
                r.solution
            })
            .collect()
    };
    let (plus, minus) = (columns(0.05), columns(-0.05));
    let (mut worst, mut untwisted) = (0.0f64, 0.0f64);
    for (jp, &(cp, sp, colp)) in points.iter().enumerate() {
        for (jq, &(cq, sq, colq)) in points.iter().enumerate() {
            let s_plus = plus[jp].data[idx(l.index(cq), sq, colq)];
            let s_minus = minus[jq].data[idx(l.index(cp), sp, colp)];
            let want = s_minus.conj() * g5(sq) * g5(sp);
            eprintln!("S(mu)[{jq},{jp}] = {s_plus:.6e}, g5 S(-mu)^+ g5 = {want:.6e}");
            worst = worst.max((s_plus - want).norm());
            // The mu = 0 relation S = g5 S^+ g5 does not hold: the twist is seen.
            let same_mu = plus[jq].data[idx(l.index(cp), sp, colp)].conj() * g5(sq) * g5(sp);
            untwisted = untwisted.max((s_plus - same_mu).norm());
        }
    }
    eprintln!("max deviation {worst:.1e}; from g5 S(+mu)^+ g5 {untwisted:.1e}");
    assert!(worst < 1e-10, "{worst:e}");
    assert!(untwisted > 1e-3, "{untwisted:e}");
}

#[test]
fn even_odd_twisted_solves_agree_with_the_full_solve() {
    // mu = 0.05 (with and without c_sw 1.17) on the weak field: BiCGStab and GCR, plain
    // and even-odd, double and single-double, at 1e-10, against a plain double BiCGStab at
    // 1e-12. Bound as tests/clover.rs: cond(D) ~ 20 times ~3e-10, asserted 1e-8.
    let l = lattice(DIMS);
    for csw in [1.17, 0.0] {
        let action = Action {
            kappa: 0.115,
            csw,
            mu: 0.05,
        };
        let mut p = problem(
            &weak_field(),
            &action,
            SpinorField::random(l.volume(), 22, 0),
        );
        let reference = solve(
            &mut p,
            Method::Bicgstab,
            Preconditioning::None,
            false,
            1e-12,
        );
        assert_eq!(reference.reason, StopReason::Converged);
        for method in [Method::Bicgstab, Method::Gcr] {
            for pre in [Preconditioning::None, Preconditioning::EvenOdd] {
                for single in [false, true] {
                    let r = solve(&mut p, method, pre, single, 1e-10);
                    let err = r.solution.rel_diff(&reference.solution);
                    let tr = qcd_solve::app::run::cpu_residual_of_d(&p, &r.solution);
                    eprintln!(
                        "c_sw {csw} {method} {pre:?} single {single}: {} iterations, \
                         |x - x_ref|/|x| {err:.1e}, residual of D {tr:.1e}",
                        r.iterations
                    );
                    assert_eq!(r.reason, StopReason::Converged, "{method} {pre:?} {single}");
                    assert!(tr < 3e-10, "{method} {pre:?} {single}: residual {tr:e}");
                    assert!(err < 1e-8, "{method} {pre:?} {single}: {err:e}");
                }
            }
        }
    }
}
