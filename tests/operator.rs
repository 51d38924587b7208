//! Physics tests of the Wilson-Dirac operator on the CPU. Expected values come from the
//! analytic free-field spectrum, gamma5-hermiticity and gauge covariance (conventions.md),
//! or from the seed-style reference operator as an independent formulation.

use qcd_solve::backend::Operator;
use qcd_solve::dirac::{self, Sites};
use qcd_solve::field::gamma::{gamma, GAMMA5_SIGN};
use qcd_solve::field::spinor::{plane_wave_momentum, SITE_LEN};
use qcd_solve::field::{GaugeField, SpinorField, Su3, C64};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};
use qcd_solve::rng::Stream;

fn lat(d: [usize; 4]) -> Lattice {
    Lattice::new(d, DEFAULT_BOUNDARY).unwrap()
}

fn dot(a: &SpinorField, b: &SpinorField) -> C64 {
    a.data.iter().zip(&b.data).map(|(x, y)| x.conj() * y).sum()
}

#[test]
fn free_field_plane_wave_matches_analytic_spectrum() {
    // Analytic (conventions.md): for U = 1 and psi = e^{ip.x} u,
    // D psi = e^{ip.x} [(1 - 2k sum cos p) + 2ik sum g_mu sin p_mu] u, antiperiodic in t.
    let l = lat([4, 6, 4, 8]);
    let g = GaugeField::unit(&l);
    let kappa = 0.13;
    let mut s = Stream::new(1, 2);
    let u: [C64; SITE_LEN] = std::array::from_fn(|_| C64::new(s.gaussian(), s.gaussian()));
    for n in [[0, 0, 0, 0], [1, 2, 0, 3], [3, 5, 1, 6], [2, 1, 3, 0]] {
        let psi = SpinorField::plane_wave(&l, n, &u);
        let p = plane_wave_momentum(&l, n);
        // M = (1 - 2k sum cos) 1 + 2ik sum g sin, acting on u (spin-major, colour-minor).
        let diag = 1.0 - 2.0 * kappa * p.iter().map(|x| x.cos()).sum::<f64>();
        let mut mu_vec = [C64::new(0.0, 0.0); SITE_LEN];
        for sp in 0..4 {
            for c in 0..3 {
                let mut v = u[3 * sp + c] * diag;
                for (mu, pm) in p.iter().enumerate() {
                    let gm = gamma(mu);
                    for t in 0..4 {
                        v += C64::new(0.0, 2.0 * kappa * pm.sin()) * gm[sp][t] * u[3 * t + c];
                    }
                }
                mu_vec[3 * sp + c] = v;
            }
        }
        let want = SpinorField::plane_wave(&l, n, &mu_vec);
        for op_ref in [false, true] {
            let got = if op_ref {
                dirac::apply_reference(Operator::D, &g, kappa, &psi)
            } else {
                let mut o = SpinorField::zeros(l.volume());
                dirac::apply(Operator::D, &g, kappa, &psi, &mut o);
                o
            };
            let d = got.rel_diff(&want);
            assert!(d < 1e-13, "n = {n:?}, reference = {op_ref}: rel diff {d}");
        }
    }
}

#[test]
fn periodic_time_changes_the_spectrum() {
    // With periodic time the n = 0 mode is the constant, and D u = (1 - 8k) u exactly.
    let l = Lattice::new([4, 4, 4, 4], [Boundary::Periodic; 4]).unwrap();
    let g = GaugeField::unit(&l);
    let mut u = [C64::new(0.0, 0.0); SITE_LEN];
    u[4] = C64::new(1.0, -0.5);
    let psi = SpinorField::plane_wave(&l, [0; 4], &u);
    let mut o = SpinorField::zeros(l.volume());
    dirac::apply(Operator::D, &g, 0.1, &psi, &mut o);
    let want = SpinorField {
        data: psi.data.iter().map(|z| z * (1.0 - 0.8)).collect(),
    };
    assert!(o.rel_diff(&want) < 1e-15);
}

#[test]
fn reference_equals_fast_on_random_fields() {
    // Two independent formulations (seed's 4x4 spin products vs spin projection).
    for dims in [[4, 4, 4, 4], [3, 5, 2, 6], [6, 4, 4, 8]] {
        let l = lat(dims);
        let g = GaugeField::random(&l, 17);
        let psi = SpinorField::random(l.volume(), 3, 0);
        for op in [Operator::D, Operator::G5D] {
            let r = dirac::apply_reference(op, &g, 0.124, &psi);
            let mut f = SpinorField::zeros(l.volume());
            dirac::apply(op, &g, 0.124, &psi, &mut f);
            let d = f.rel_diff(&r);
            assert!(d < 1e-14, "{dims:?} {op}: rel diff {d}");
        }
    }
}

#[test]
fn gamma5_hermiticity() {
    // (phi | g5 D psi) = (g5 D phi | psi), i.e. Q = g5 D is Hermitian.
    let l = lat([4, 4, 6, 4]);
    let g = GaugeField::random(&l, 8);
    let phi = SpinorField::random(l.volume(), 1, 0);
    let psi = SpinorField::random(l.volume(), 2, 0);
    let mut qphi = SpinorField::zeros(l.volume());
    let mut qpsi = SpinorField::zeros(l.volume());
    dirac::apply(Operator::G5D, &g, 0.15, &phi, &mut qphi);
    dirac::apply(Operator::G5D, &g, 0.15, &psi, &mut qpsi);
    let a = dot(&phi, &qpsi);
    let b = dot(&qphi, &psi);
    assert!((a - b).norm() / a.norm() < 1e-13, "{a} vs {b}");
    // And D^+ through g5-hermiticity is the adjoint: (phi | D psi) = (D^+ phi | psi).
    let mut dpsi = SpinorField::zeros(l.volume());
    dirac::apply(Operator::D, &g, 0.15, &psi, &mut dpsi);
    let ddag_phi = dirac::apply_dagger(&g, 0.15, &phi);
    let a = dot(&phi, &dpsi);
    let b = dot(&ddag_phi, &psi);
    assert!((a - b).norm() / a.norm() < 1e-13, "{a} vs {b}");
    // g5 itself: diag(1,1,-1,-1).
    assert_eq!(GAMMA5_SIGN, [1.0, 1.0, -1.0, -1.0]);
}

#[test]
fn gauge_covariance_of_the_operator() {
    // D[U'] (G psi) = G D[U] psi with U'_mu(x) = G(x) U_mu(x) G(x+mu)^+.
    let l = lat([4, 4, 4, 6]);
    let u = GaugeField::random(&l, 4);
    let gt: Vec<Su3> = (0..l.volume())
        .map(|x| Su3::random(&mut Stream::new(77, x as u64)))
        .collect();
    let psi = SpinorField::random(l.volume(), 5, 0);
    let mut a = SpinorField::zeros(l.volume());
    dirac::apply(
        Operator::D,
        &u.gauge_transform(&gt),
        0.12,
        &psi.gauge_transform(&gt),
        &mut a,
    );
    let mut b = SpinorField::zeros(l.volume());
    dirac::apply(Operator::D, &u, 0.12, &psi, &mut b);
    let d = a.rel_diff(&b.gauge_transform(&gt));
    assert!(d < 1e-14, "rel diff {d}");
}

#[test]
fn even_odd_pieces_reassemble_the_hopping_term() {
    // H = H_eo + H_oe on full-length fields; H_eo reads odd sites only.
    let l = lat([4, 4, 4, 4]);
    let g = GaugeField::random(&l, 12);
    let psi = SpinorField::random(l.volume(), 6, 0);
    let mut full = SpinorField::zeros(l.volume());
    dirac::fast::hop(&g, &psi, &mut full, Sites::All);
    let mut e = SpinorField::zeros(l.volume());
    let mut o = SpinorField::zeros(l.volume());
    dirac::hop_eo(&g, &psi, &mut e, 0).unwrap();
    dirac::hop_eo(&g, &psi, &mut o, 1).unwrap();
    let sum = SpinorField {
        data: e.data.iter().zip(&o.data).map(|(a, b)| a + b).collect(),
    };
    assert!(sum.rel_diff(&full) < 1e-15);
    // Zeroing the even input sites leaves H_eo unchanged (it only reads odd sites).
    let mut odd_only = psi.clone();
    for x in 0..l.volume() {
        if l.parity(x) == 0 {
            odd_only.data[x * 12..x * 12 + 12].fill(C64::new(0.0, 0.0));
        }
    }
    let mut e2 = SpinorField::zeros(l.volume());
    dirac::hop_eo(&g, &odd_only, &mut e2, 0).unwrap();
    assert!(e2.rel_diff(&e) < 1e-15);
}

#[test]
fn even_odd_refuses_odd_extents_by_name() {
    let l = lat([4, 4, 5, 4]);
    let g = GaugeField::unit(&l);
    let psi = SpinorField::random(l.volume(), 1, 0);
    let mut out = SpinorField::zeros(l.volume());
    let e = dirac::hop_eo(&g, &psi, &mut out, 0).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("LZ = 5"), "{e}");
}
