//! APE and stout smearing of the spatial links (`qcd_solve::smear`): fixed points of the
//! unit and constant abelian fields, SU(3) to rounding, stout against an independent
//! computation (staples written out here, exp(iQ) by its power series), APE against the
//! defining property of the polar projection, gauge covariance, and the temporal links
//! left alone.

use num_complex::Complex64 as C64;
use qcd_solve::field::{GaugeField, Su3};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY, NDIM};
use qcd_solve::io::read_gauge;
use qcd_solve::rng::Stream;
use qcd_solve::smear::{project::project_su3, smear_spatial, LinkSmearing};
use std::path::Path;

fn nersc() -> GaugeField {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/lattices"))
        .join("ATB_nersc.l8t4b3360");
    read_gauge(&path, None, Some([8, 8, 8, 4]), DEFAULT_BOUNDARY)
        .unwrap()
        .0
}

fn add(a: &Su3, b: &Su3) -> Su3 {
    Su3(std::array::from_fn(|i| {
        std::array::from_fn(|j| a.0[i][j] + b.0[i][j])
    }))
}

fn scale(a: &Su3, z: C64) -> Su3 {
    Su3(std::array::from_fn(|i| {
        std::array::from_fn(|j| z * a.0[i][j])
    }))
}

/// The site at coordinates c + step (periodic), by coordinates.
fn shifted(l: &Lattice, x: usize, mu: usize, step: isize) -> usize {
    let mut c = l.coords(x);
    let n = l.dims[mu] as isize;
    c[mu] = ((c[mu] as isize + step).rem_euclid(n)) as usize;
    l.index(c)
}

/// Sum over spatial nu != mu of U_nu(x) U_mu(x+nu) U_nu(x+mu)^+ and
/// U_nu(x-nu)^+ U_mu(x-nu) U_nu(x-nu+mu), written out from coordinates.
fn staples(g: &GaugeField, x: usize, mu: usize) -> Su3 {
    let l = &g.lattice;
    let u = |y: usize, d: usize| g.links[y * NDIM + d];
    let mut s = Su3::zero();
    for nu in 0..3 {
        if nu == mu {
            continue;
        }
        let up = u(x, nu) * u(shifted(l, x, nu, 1), mu) * u(shifted(l, x, mu, 1), nu).dagger();
        let y = shifted(l, x, nu, -1);
        let down = u(y, nu).dagger() * u(y, mu) * u(shifted(l, y, mu, 1), nu);
        s = add(&add(&s, &up), &down);
    }
    s
}

/// exp(iQ) by its power series (60 terms: |Q|^60 / 60! < 1e-40 for |Q| < 8).
fn exp_i_series(q: &Su3) -> Su3 {
    let iq = scale(q, C64::new(0.0, 1.0));
    let (mut term, mut sum) = (Su3::identity(), Su3::identity());
    for n in 1..60 {
        term = scale(&(term * iq), C64::new(1.0 / n as f64, 0.0));
        sum = add(&sum, &term);
    }
    sum
}

/// The largest |difference| over all links.
fn max_link_diff(a: &GaugeField, b: &GaugeField) -> f64 {
    a.links
        .iter()
        .zip(&b.links)
        .map(|(x, y)| x.max_abs_diff(y))
        .fold(0.0, f64::max)
}

/// G(x) random SU(3) per site, U_mu(x) -> G(x) U_mu(x) G(x+mu)^+.
fn random_gauge(l: &Lattice, seed: u64) -> Vec<Su3> {
    (0..l.volume())
        .map(|x| Su3::random(&mut Stream::new(seed, x as u64)))
        .collect()
}

fn transform(g: &GaugeField, gt: &[Su3]) -> GaugeField {
    let l = &g.lattice;
    let links = (0..g.links.len())
        .map(|k| {
            let (x, mu) = (k / NDIM, k % NDIM);
            gt[x] * g.links[k] * gt[shifted(l, x, mu, 1)].dagger()
        })
        .collect();
    GaugeField {
        lattice: l.clone(),
        links,
    }
}

const SMEARINGS: [LinkSmearing; 2] = [
    LinkSmearing::Ape {
        alpha: 0.6,
        iterations: 4,
    },
    LinkSmearing::Stout {
        rho: 0.12,
        iterations: 4,
    },
];

#[test]
fn unit_and_constant_abelian_fields_are_fixed_points() {
    // Analytic: for constant commuting links every staple equals the link, so APE's
    // (1 - alpha) U + alpha U = U projects to U, and stout's Omega = 4 rho U U^+ = 4 rho 1
    // gives Q = 0, exp(iQ) = 1.
    let l = Lattice::new([4, 3, 5, 2], DEFAULT_BOUNDARY).unwrap();
    let unit = GaugeField::unit(&l);
    let phases = [[0.3, -1.1], [2.0, 0.4], [-0.7, 0.9], [1.3, 1.7]];
    let diag = |[a, b]: [f64; 2]| {
        let mut m = Su3::zero();
        m.0[0][0] = C64::from_polar(1.0, a);
        m.0[1][1] = C64::from_polar(1.0, b);
        m.0[2][2] = C64::from_polar(1.0, -a - b);
        m
    };
    let abelian = GaugeField {
        lattice: l.clone(),
        links: (0..unit.links.len())
            .map(|k| diag(phases[k % NDIM]))
            .collect(),
    };
    for s in SMEARINGS {
        for g in [&unit, &abelian] {
            let d = max_link_diff(&smear_spatial(g, &s), g);
            assert!(d < 1e-14, "{s:?}: moved by {d:e}");
        }
    }
    assert_eq!(
        smear_spatial(&abelian, &LinkSmearing::None).links,
        abelian.links
    );
}

#[test]
fn smeared_links_are_su3_and_temporal_links_are_copied() {
    // A hot field (Haar-random links, the roughest case) and the NERSC file.
    let l = Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
    for g in [GaugeField::random(&l, 71), nersc()] {
        let ape = smear_spatial(&g, &SMEARINGS[0]);
        let stout = smear_spatial(&g, &SMEARINGS[1]);
        // Polar projection and det root: SU(3) to rounding (stated tolerances 1e-12 and
        // 1e-13; the exact exponential of a traceless Hermitian Q is SU(3)).
        assert!(
            ape.max_unitarity_deviation() < 1e-12,
            "APE {:e}",
            ape.max_unitarity_deviation()
        );
        assert!(
            stout.max_unitarity_deviation() < 1e-13,
            "stout {:e}",
            stout.max_unitarity_deviation()
        );
        for s in [&ape, &stout] {
            for k in (3..g.links.len()).step_by(NDIM) {
                assert_eq!(s.links[k], g.links[k], "temporal link {k} copied");
            }
            // And the spatial ones did move (a rough field is no fixed point).
            assert!(s.links[0].max_abs_diff(&g.links[0]) > 1e-3);
        }
    }
}

#[test]
fn stout_matches_the_exponential_by_power_series() {
    // Independent: staples from coordinates, Omega = rho C U^+, Q its traceless
    // Hermitian part, exp(iQ) by the power series; one iteration, every spatial link.
    let l = Lattice::new([4, 3, 4, 2], DEFAULT_BOUNDARY).unwrap();
    let rho = 0.15;
    for g in [GaugeField::random(&l, 72), weak(&l, 73, 0.2)] {
        let s = smear_spatial(&g, &LinkSmearing::Stout { rho, iterations: 1 });
        let mut worst: f64 = 0.0;
        for x in 0..l.volume() {
            for mu in 0..3 {
                let u = g.links[x * NDIM + mu];
                let omega = scale(&staples(&g, x, mu), C64::new(rho, 0.0)) * u.dagger();
                let d = add(&omega.dagger(), &scale(&omega, C64::new(-1.0, 0.0)));
                let mut q = scale(&d, C64::new(0.0, 0.5));
                let t = C64::new(0.0, 1.0 / 6.0) * d.trace();
                for k in 0..3 {
                    q.0[k][k] -= t;
                }
                let want = exp_i_series(&q) * u;
                worst = worst.max(s.links[x * NDIM + mu].max_abs_diff(&want));
            }
        }
        assert!(worst < 1e-14, "stout against the series: {worst:e}");
    }
}

/// A weak field: each link exp(i eps H), H a random traceless Hermitian matrix (by the
/// series above), so the field is near 1 and Q is small.
fn weak(l: &Lattice, seed: u64, eps: f64) -> GaugeField {
    let links = (0..l.volume() * NDIM)
        .map(|k| {
            let mut s = Stream::new(seed, k as u64);
            let a = Su3(std::array::from_fn(|_| {
                std::array::from_fn(|_| C64::new(s.gaussian(), s.gaussian()))
            }));
            let mut h = scale(&add(&a, &a.dagger()), C64::new(0.5 * eps, 0.0));
            let t = h.trace() / 3.0;
            for k in 0..3 {
                h.0[k][k] -= t;
            }
            exp_i_series(&h)
        })
        .collect();
    GaugeField {
        lattice: l.clone(),
        links,
    }
}

#[test]
fn ape_is_the_polar_projection_of_the_smeared_sum() {
    // The defining property, checked independently of how it is computed: W = V c with
    // V the unitary polar factor of X = (1 - alpha) U + (alpha/4) staples and
    // c = det(V)^{-1/3} (principal root). Then W^+ X = c^* P with P Hermitian positive,
    // so with c' = Tr(W^+ X) / |Tr(W^+ X)| (= c^*, as Tr P > 0): W^+ X / c' is Hermitian,
    // |arg c'| <= pi/3, and det W = 1. This fixes W uniquely for an invertible X.
    let g = nersc();
    let alpha = 0.45;
    let s = smear_spatial(
        &g,
        &LinkSmearing::Ape {
            alpha,
            iterations: 1,
        },
    );
    let sm_fact = 4.0 * (1.0 - alpha) / alpha;
    for x in (0..g.lattice.volume()).step_by(7) {
        for mu in 0..3 {
            let u = g.links[x * NDIM + mu];
            let st = staples(&g, x, mu);
            let xm = add(
                &scale(&u, C64::new(1.0 - alpha, 0.0)),
                &scale(&st, C64::new(alpha / 4.0, 0.0)),
            );
            let w = s.links[x * NDIM + mu];
            let m = w.dagger() * xm;
            let c = m.trace() / m.trace().norm();
            let h = scale(&m, c.inv());
            assert!(h.max_abs_diff(&h.dagger()) < 1e-13, "W^+ X / c' Hermitian");
            assert!(c.arg().abs() <= std::f64::consts::FRAC_PI_3 + 1e-14);
            assert!((w.det() - 1.0).norm() < 1e-13);
            // Chroma's form sm_fact U + staples projects to the same link: the
            // projection ignores a positive factor (X is (alpha/4) times it).
            let chroma = add(&scale(&u, C64::new(sm_fact, 0.0)), &st);
            assert!(project_su3(&chroma).max_abs_diff(&w) < 1e-13);
        }
    }
}

#[test]
fn smearing_is_gauge_covariant() {
    // Analytic: staples transform like their link, and both the projection and the
    // exponential commute with U -> G U G'^+; smear(G U) = G smear(U) G^+ to rounding.
    let g = nersc();
    let gt = random_gauge(&g.lattice, 9001);
    for s in SMEARINGS {
        let a = smear_spatial(&transform(&g, &gt), &s);
        let b = transform(&smear_spatial(&g, &s), &gt);
        let d = max_link_diff(&a, &b);
        assert!(d < 1e-12, "{s:?}: {d:e}");
    }
}

#[test]
fn smearing_is_the_same_for_any_thread_count() {
    // Each iteration reads only the previous field: bit for bit on 1 or 3 threads.
    let l = Lattice::new([4, 4, 4, 2], DEFAULT_BOUNDARY).unwrap();
    let g = GaugeField::random(&l, 74);
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    for s in SMEARINGS {
        let one = pool(1).install(|| smear_spatial(&g, &s));
        let three = pool(3).install(|| smear_spatial(&g, &s));
        assert_eq!(one.links, three.links);
    }
}

#[test]
fn parameters_out_of_range_are_refused_by_key() {
    let bad = [
        (
            LinkSmearing::Ape {
                alpha: 1.5,
                iterations: 1,
            },
            "smear.alpha",
        ),
        (
            LinkSmearing::Ape {
                alpha: f64::NAN,
                iterations: 1,
            },
            "smear.alpha",
        ),
        (
            LinkSmearing::Stout {
                rho: -0.1,
                iterations: 1,
            },
            "smear.rho",
        ),
    ];
    for (s, key) in bad {
        let e = s.check("smear").unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
    for s in SMEARINGS {
        s.check("smear").unwrap();
    }
}
