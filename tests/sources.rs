//! Sources and quark smearing (`qcd_solve::sources`): the wall, noise (values, dilution,
//! support, seeds and threads, second moment), the Gaussian wavefunction by hand, the
//! momentum phase's orthogonality, free-field smearing against its closed form in
//! momentum space, gauge covariance, and Chroma's Gaussian form of Wuppertal smearing.

use num_complex::Complex64 as C64;
use qcd_solve::field::spinor::{idx, SITE_LEN};
use qcd_solve::field::{GaugeField, SpinorField, Su3};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY, NDIM};
use qcd_solve::io::read_gauge;
use qcd_solve::rng::Stream;
use qcd_solve::sources::{
    check_radius, check_site, check_spin_colour, check_timeslice, gaussian_wavefunction,
    hopping_spatial, momentum_phase, noise, smear_quark, wall, Dilution, Noise, QuarkSmearing,
    Support,
};
use std::f64::consts::{FRAC_1_SQRT_2, PI};
use std::path::Path;

fn nersc() -> GaugeField {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/lattices"))
        .join("ATB_nersc.l8t4b3360");
    read_gauge(&path, None, Some([8, 8, 8, 4]), DEFAULT_BOUNDARY)
        .unwrap()
        .0
}

fn lattice(dims: [usize; NDIM]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

/// max |a_k - b_k|.
fn max_diff(a: &SpinorField, b: &SpinorField) -> f64 {
    a.data
        .iter()
        .zip(&b.data)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
}

#[test]
fn the_wall_is_one_on_its_timeslice_in_its_component() {
    let l = lattice([4, 3, 2, 5]);
    let w = wall(&l, 3, 2, 1);
    for x in 0..l.volume() {
        for k in 0..SITE_LEN {
            let want = if l.coords(x)[3] == 3 && k == idx(0, 2, 1) {
                1.0
            } else {
                0.0
            };
            assert_eq!(w.data[x * SITE_LEN + k], C64::new(want, 0.0));
        }
    }
    // 24 = 4 x 3 x 2 spatial sites.
    assert_eq!(w.norm2(), 24.0);
}

const DILUTIONS: [Dilution; 4] = [
    Dilution::None,
    Dilution::Spin,
    Dilution::Colour,
    Dilution::SpinColour,
];

#[test]
fn noise_values_lie_in_their_sets() {
    // Z2: exactly +-1; Z4: exactly (+-1 +- i)/sqrt 2 (FRAC_1_SQRT_2 is how they are built;
    // the tolerance 1e-15 allows for another rounding of 1/sqrt 2). Each value is taken.
    let l = lattice([4, 4, 4, 4]);
    let z2 = &noise(&l, Noise::Z2, Support::Volume, Dilution::None, 5)[0];
    assert!(z2.data.iter().all(|z| z.im == 0.0 && z.re.abs() == 1.0));
    assert!(z2.data.iter().any(|z| z.re == 1.0) && z2.data.iter().any(|z| z.re == -1.0));
    let z4 = &noise(&l, Noise::Z4, Support::Volume, Dilution::None, 5)[0];
    let mut seen = [false; 4];
    for z in &z4.data {
        let k = (z.re > 0.0) as usize + 2 * (z.im > 0.0) as usize;
        seen[k] = true;
        assert!((z.re.abs() - FRAC_1_SQRT_2).abs() < 1e-15, "{z}");
        assert!((z.im.abs() - FRAC_1_SQRT_2).abs() < 1e-15, "{z}");
        assert!((z.norm() - 1.0).abs() < 1e-15);
    }
    assert_eq!(seen, [true; 4]);
}

#[test]
fn diluted_pieces_are_disjoint_and_sum_to_the_noise() {
    let l = lattice([4, 2, 3, 4]);
    for kind in [Noise::Z2, Noise::Z4] {
        for support in [Support::Volume, Support::Timeslice(2)] {
            let full = &noise(&l, kind, support, Dilution::None, 11)[0];
            for d in DILUTIONS {
                let pieces = noise(&l, kind, support, d, 11);
                assert_eq!(pieces.len(), [1, 4, 3, 12][d as usize]);
                for k in 0..full.data.len() {
                    let nonzero: Vec<usize> = (0..pieces.len())
                        .filter(|&p| pieces[p].data[k] != C64::new(0.0, 0.0))
                        .collect();
                    // Disjoint: every component in at most one piece; the sum (that one
                    // piece, or zero) is the undiluted noise exactly.
                    assert!(nonzero.len() <= 1, "component {k} in pieces {nonzero:?}");
                    let sum: C64 = pieces.iter().map(|p| p.data[k]).sum();
                    assert_eq!(sum, full.data[k]);
                    // The piece holding it is the one its spin/colour names.
                    if let Some(&p) = nonzero.first() {
                        let (spin, colour) = ((k % SITE_LEN) / 3, k % 3);
                        let want = match d {
                            Dilution::None => 0,
                            Dilution::Spin => spin,
                            Dilution::Colour => colour,
                            Dilution::SpinColour => 3 * spin + colour,
                        };
                        assert_eq!(p, want);
                    }
                }
            }
        }
    }
}

#[test]
fn timeslice_noise_is_the_volume_noise_on_that_timeslice() {
    let l = lattice([2, 3, 2, 5]);
    let vol = &noise(&l, Noise::Z4, Support::Volume, Dilution::None, 3)[0];
    let ts = &noise(&l, Noise::Z4, Support::Timeslice(4), Dilution::None, 3)[0];
    for x in 0..l.volume() {
        for k in 0..SITE_LEN {
            let want = if l.coords(x)[3] == 4 {
                vol.data[x * SITE_LEN + k]
            } else {
                C64::new(0.0, 0.0)
            };
            assert_eq!(ts.data[x * SITE_LEN + k], want);
        }
    }
}

#[test]
fn noise_depends_on_the_seed_only() {
    let l = lattice([4, 4, 4, 4]);
    let draw = |seed| noise(&l, Noise::Z4, Support::Volume, Dilution::Spin, seed);
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let one = pool(1).install(|| draw(8));
    let three = pool(3).install(|| draw(8));
    assert_eq!(one, three, "bit for bit on 1 or 3 threads");
    assert_eq!(one, draw(8), "same seed, same noise");
    // Another seed: each of the 3072 components agrees by chance with probability 1/4.
    let other = draw(9);
    let same = (0..4)
        .flat_map(|p| one[p].data.iter().zip(&other[p].data))
        .filter(|(a, b)| a == b && **a != C64::new(0.0, 0.0))
        .count();
    assert!(same < 1000, "{same} of 3072 components agree");
}

#[test]
fn the_noise_second_moment_is_the_identity() {
    // Sample mean over the V = 4096 sites of eta_a(x) eta_b(x)^* for the 12 components:
    // the diagonal is |eta|^2 = 1 exactly; an off-diagonal entry is a mean of V
    // independent terms of modulus 1 and mean 0, so E|mean|^2 = 1/V, sigma = 1/64.
    // |mean| > 5 sigma has probability below e^{-12.5} per entry (Z4: Rayleigh tail
    // e^{-25}; Z2: Gaussian tail); the first moment likewise.
    let l = lattice([8, 8, 8, 8]);
    let v = l.volume() as f64;
    let sigma = 1.0 / v.sqrt();
    for kind in [Noise::Z2, Noise::Z4] {
        let eta = &noise(&l, kind, Support::Volume, Dilution::None, 2024)[0];
        for a in 0..SITE_LEN {
            let first: C64 = (0..l.volume())
                .map(|x| eta.data[x * SITE_LEN + a])
                .sum::<C64>()
                / v;
            assert!(first.norm() < 5.0 * sigma, "{kind:?} mean of {a}: {first}");
            for b in 0..SITE_LEN {
                let m: C64 = (0..l.volume())
                    .map(|x| eta.data[x * SITE_LEN + a] * eta.data[x * SITE_LEN + b].conj())
                    .sum::<C64>()
                    / v;
                if a == b {
                    assert!((m - 1.0).norm() < 1e-14, "{kind:?} diagonal {a}: {m}");
                } else {
                    assert!(m.norm() < 5.0 * sigma, "{kind:?} ({a},{b}): {m}");
                }
            }
        }
    }
}

#[test]
fn the_gaussian_wavefunction_uses_the_periodic_distance() {
    // By hand on 8x6x5x4, source (1, 4, 2, 3), r0 = 2.5 (r0^2 = 6.25):
    // (6,0,4): |dx| = 5 -> 3, |dy| = 4 -> 2, |dz| = 2: r^2 = 9 + 4 + 4 = 17;
    // (1,4,2): r^2 = 0; (0,1,0): 1, 3, 2: r^2 = 14; (5,4,4): 4, 0, 2: r^2 = 20.
    let l = lattice([8, 6, 5, 4]);
    let src = [1, 4, 2, 3];
    let f = gaussian_wavefunction(&l, src, 2.5, 3, 0);
    for (site, r2) in [
        ([6, 0, 4], 17.0),
        ([1, 4, 2], 0.0),
        ([0, 1, 0], 14.0),
        ([5, 4, 4], 20.0),
    ] {
        let x = l.index([site[0], site[1], site[2], 3]);
        let want = (-r2 / 6.25f64).exp();
        assert!((f.data[idx(x, 3, 0)].re - want).abs() < 1e-15, "{site:?}");
        assert_eq!(f.data[idx(x, 3, 0)].im, 0.0);
        // Other timeslices and components hold nothing.
        assert_eq!(
            f.data[idx(l.index([site[0], site[1], site[2], 1]), 3, 0)],
            C64::new(0.0, 0.0)
        );
        assert_eq!(f.data[idx(x, 2, 0)], C64::new(0.0, 0.0));
    }
}

#[test]
fn the_momentum_phase_projects_onto_its_momentum() {
    // sum_x e^{-i q.x} e^{+i p.(x - o)} over a timeslice = V3 e^{-i p.o} delta_{p,q}
    // (q.x = 2 pi sum_i q_i x_i / L_i; orthogonality of the discrete Fourier modes;
    // p and p + L name the same mode).
    let l = lattice([4, 6, 3, 2]);
    let v3 = 72.0;
    for (p, origin) in [
        ([1, -2, 0], [0, 0, 0]),
        ([0, 3, 1], [3, 2, 1]),
        ([5, 0, -1], [1, 5, 2]),
    ] {
        let mut w = wall(&l, 1, 0, 2);
        momentum_phase(&l, &mut w, p, origin);
        let po: f64 = (0..3)
            .map(|i| 2.0 * PI * (p[i] * origin[i] as i64) as f64 / l.dims[i] as f64)
            .sum();
        for q in [
            p,
            [p[0] + 4, p[1] - 6, p[2] + 3],
            [0, 0, 0],
            [1, 1, 1],
            [2, -2, 1],
        ] {
            let sum: C64 = (0..l.volume())
                .map(|x| {
                    let c = l.coords(x);
                    let qx: f64 = (0..3)
                        .map(|i| 2.0 * PI * (q[i] * c[i] as i64) as f64 / l.dims[i] as f64)
                        .sum();
                    C64::from_polar(1.0, -qx) * w.data[idx(x, 0, 2)]
                })
                .sum();
            let same = (0..3).all(|i| (q[i] - p[i]).rem_euclid(l.dims[i] as i64) == 0);
            let want = if same {
                C64::from_polar(v3, -po)
            } else {
                C64::new(0.0, 0.0)
            };
            assert!(
                (sum - want).norm() < 1e-12,
                "p {p:?} q {q:?}: {sum} against {want}"
            );
        }
    }
}

/// The free field's factor per smearing for spatial momentum with h = sum_i 2 cos p_i:
/// Wuppertal (1 + alpha h) / (1 + 6 alpha), Jacobi sum_{k <= N} (kappa h)^k (analytic:
/// on U = 1, H e^{ipx} = h e^{ipx}).
fn free_factor(s: &QuarkSmearing, h: f64) -> f64 {
    match *s {
        QuarkSmearing::None => 1.0,
        QuarkSmearing::Wuppertal { alpha, iterations } => {
            ((1.0 + alpha * h) / (1.0 + 6.0 * alpha)).powi(iterations as i32)
        }
        QuarkSmearing::Jacobi { kappa, iterations } => {
            (0..=iterations).map(|k| (kappa * h).powi(k as i32)).sum()
        }
    }
}

#[test]
fn free_field_smearing_of_a_point_is_its_closed_form_fourier_sum() {
    // psi(x) = delta_{t,t0} (1/V3) sum_p e^{i p.(x - y)} f(p) for a point at y on U = 1,
    // p_i = (2 n_i + theta_i) pi / L_i (theta_i = 1 in an antiperiodic direction: the
    // hop's boundary phase), compared at every site. Lattices with unequal extents, one
    // with x antiperiodic.
    let mut anti = DEFAULT_BOUNDARY;
    anti[0] = Boundary::Antiperiodic;
    let smearings = [
        QuarkSmearing::Wuppertal {
            alpha: 0.3,
            iterations: 7,
        },
        QuarkSmearing::Jacobi {
            kappa: 0.12,
            iterations: 9,
        },
    ];
    for boundary in [DEFAULT_BOUNDARY, anti] {
        let l = Lattice::new([6, 5, 4, 3], boundary).unwrap();
        let unit = GaugeField::unit(&l);
        let (y, spin, colour) = ([2, 4, 1, 1], 1, 2);
        let point = SpinorField::point(&l, y, spin, colour);
        let v3 = 120.0;
        let momenta: Vec<[f64; 3]> = (0..120)
            .map(|k| {
                let n = [k % 6, (k / 6) % 5, k / 30];
                std::array::from_fn(|i| {
                    let theta = if boundary[i] == Boundary::Antiperiodic {
                        1.0
                    } else {
                        0.0
                    };
                    (2.0 * n[i] as f64 + theta) * PI / l.dims[i] as f64
                })
            })
            .collect();
        for s in smearings {
            let out = smear_quark(&unit, &point, &s);
            let mut worst: f64 = 0.0;
            for x in 0..l.volume() {
                let c = l.coords(x);
                let want: C64 = if c[3] != y[3] {
                    C64::new(0.0, 0.0)
                } else {
                    momenta
                        .iter()
                        .map(|p| {
                            let h: f64 = p.iter().map(|pi| 2.0 * pi.cos()).sum();
                            let px: f64 = (0..3).map(|i| p[i] * (c[i] as f64 - y[i] as f64)).sum();
                            C64::from_polar(free_factor(&s, h), px)
                        })
                        .sum::<C64>()
                        / v3
                };
                for k in 0..SITE_LEN {
                    let w = if k == idx(0, spin, colour) {
                        want
                    } else {
                        C64::new(0.0, 0.0)
                    };
                    worst = worst.max((out.data[x * SITE_LEN + k] - w).norm());
                }
            }
            assert!(worst < 1e-12, "{s:?} {boundary:?}: {worst:e}");
        }
    }
}

#[test]
fn quark_smearing_is_gauge_covariant_and_stays_on_its_timeslice() {
    // Analytic: H(G U) G psi = G H(U) psi, so every polynomial in H is covariant.
    let g = nersc();
    let l = g.lattice.clone();
    let gt: Vec<Su3> = (0..l.volume())
        .map(|x| Su3::random(&mut Stream::new(77, x as u64)))
        .collect();
    let gu = GaugeField {
        lattice: l.clone(),
        links: (0..g.links.len())
            .map(|k| {
                let (x, mu) = (k / NDIM, k % NDIM);
                gt[x] * g.links[k] * gt[l.neighbour(x, mu, true).0].dagger()
            })
            .collect(),
    };
    let rotate = |psi: &SpinorField| {
        let mut out = psi.clone();
        for x in 0..l.volume() {
            for spin in 0..4 {
                let v = std::array::from_fn(|c| psi.data[idx(x, spin, c)]);
                let w = gt[x].mul_vec(&v);
                for c in 0..3 {
                    out.data[idx(x, spin, c)] = w[c];
                }
            }
        }
        out
    };
    let psi = SpinorField::random(l.volume(), 5, 0);
    for s in [
        QuarkSmearing::Wuppertal {
            alpha: 2.5,
            iterations: 10,
        },
        QuarkSmearing::Jacobi {
            kappa: 0.15,
            iterations: 12,
        },
    ] {
        let a = smear_quark(&gu, &rotate(&psi), &s);
        let b = rotate(&smear_quark(&g, &psi, &s));
        let scale = b.data.iter().map(|z| z.norm()).fold(0.0, f64::max);
        let d = max_diff(&a, &b) / scale;
        assert!(d < 1e-12, "{s:?}: {d:e}");
        // Spatial hops only: a source on timeslice 2 stays there (exactly).
        let w = smear_quark(&g, &wall(&l, 2, 1, 1), &s);
        for x in (0..l.volume()).filter(|&x| l.coords(x)[3] != 2) {
            assert!(w.data[x * SITE_LEN..(x + 1) * SITE_LEN]
                .iter()
                .all(|z| *z == C64::new(0.0, 0.0)));
        }
    }
}

#[test]
fn chroma_gaussian_smearing_is_wuppertal_with_the_mapped_alpha() {
    // Chroma's gausSmear: N times psi <- (1 + a (H - 6)) psi, a = w^2 / (4N), computed
    // here directly; it equals Wuppertal with alpha = a / (1 - 6a) since
    // 1 / (1 + 6 alpha) = 1 - 6a.
    let g = nersc();
    let (width, n) = (3.0, 20);
    let a = width * width / (4.0 * n as f64);
    let mut chroma = SpinorField::random(g.lattice.volume(), 6, 0);
    let psi = chroma.clone();
    for _ in 0..n {
        let h = hopping_spatial(&g, &chroma);
        chroma = SpinorField {
            data: chroma
                .data
                .iter()
                .zip(&h.data)
                .map(|(p, h)| (1.0 - 6.0 * a) * p + a * h)
                .collect(),
        };
    }
    let s = QuarkSmearing::chroma_gaussian(width, n, "smear.width").unwrap();
    let ours = smear_quark(&g, &psi, &s);
    assert!(
        ours.rel_diff(&chroma) < 1e-13,
        "{:e}",
        ours.rel_diff(&chroma)
    );
    // w^2 / (4N) >= 1/6 has no such alpha: refused by key.
    let e = QuarkSmearing::chroma_gaussian(6.0, 5, "smear.width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("smear.width"), "{e}");
}

#[test]
fn bad_source_parameters_are_refused_by_key() {
    let l = lattice([4, 4, 4, 8]);
    let errors = [
        check_timeslice(&l, 8, "source.t").unwrap_err(),
        check_site(&l, [0, 4, 0, 0], "source.site").unwrap_err(),
        check_spin_colour(4, 0, "source.spin").unwrap_err(),
        check_spin_colour(0, 3, "source.spin").unwrap_err(),
        check_radius(0.0, "source.r0").unwrap_err(),
        QuarkSmearing::Jacobi {
            kappa: -0.1,
            iterations: 3,
        }
        .check("smear")
        .unwrap_err(),
        QuarkSmearing::Wuppertal {
            alpha: f64::INFINITY,
            iterations: 3,
        }
        .check("smear")
        .unwrap_err(),
    ];
    let keys = [
        "source.t",
        "source.site",
        "source.spin",
        "source.spin",
        "source.r0",
        "smear.kappa",
        "smear.alpha",
    ];
    for (e, key) in errors.iter().zip(keys) {
        assert!(e.to_string().contains(key), "{e}");
    }
    check_timeslice(&l, 7, "t").unwrap();
    check_site(&l, [3, 3, 3, 7], "site").unwrap();
    check_radius(1.5, "r0").unwrap();
}
