//! Coulomb and Landau gauge fixing (`gauge_fix`): the trivial orbit, real gauge files
//! (AnalysisToolbox's NERSC 8^3x4 and MILC's 4^3x8 sample), the Coulomb condition per
//! timeslice, covariance of the Wilson operator, thread-count independence, bad input.

use qcd_solve::dirac::apply_reference;
use qcd_solve::field::su3::{Su3, C64};
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::gauge_fix::{
    fix, functional, functional_per_timeslice, theta, theta_per_timeslice, FixOptions, FixReport,
    GaugeKind, GaugeTransform,
};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY, NDIM};
use qcd_solve::io::{read_gauge, GaugeFormat};
use qcd_solve::linalg::Operator;
use qcd_solve::Error;
use std::path::PathBuf;

/// A shared gauge file read through crate::io (its checksums and header verified).
fn shared(name: &str, format: GaugeFormat, dims: [usize; 4]) -> GaugeField {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/lattices")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: the shared lattices are part of the test set-up",
        path.display()
    );
    read_gauge(&path, Some(format), Some(dims), DEFAULT_BOUNDARY)
        .unwrap()
        .0
}

/// The AnalysisToolbox's thermalised 8^3x4 field (64-bit NERSC) and its header's
/// plaquette (../shared/lattices/MANIFEST.md: the header value reproduces exactly).
fn atb() -> (GaugeField, f64) {
    (
        shared("ATB_nersc.l8t4b3360", GaugeFormat::Nersc, [8, 8, 8, 4]),
        0.5038664469,
    )
}

/// MILC's 4^3x8 sample (32-bit, projected onto SU(3) in double by the reader) and its
/// plaquette as MANIFEST.md states it (MILC's own output; the binary header holds none).
fn milc() -> (GaugeField, f64) {
    (
        shared("milc_lat.sample.l4448", GaugeFormat::Milc, [4, 4, 4, 8]),
        0.5690557244,
    )
}

fn options(kind: GaugeKind) -> FixOptions {
    FixOptions {
        kind,
        ..FixOptions::default()
    }
}

fn max_link_diff(a: &GaugeField, b: &GaugeField) -> f64 {
    a.links
        .iter()
        .zip(&b.links)
        .map(|(x, y)| x.max_abs_diff(y))
        .fold(0.0, f64::max)
}

/// The Polyakov loop (1/(3 Vs)) sum_x tr prod_t U_t(x, t): gauge invariant (links
/// periodic).
fn polyakov(g: &GaugeField) -> C64 {
    let l = &g.lattice;
    let d = l.dims;
    let vs = d[0] * d[1] * d[2];
    let mut sum = C64::new(0.0, 0.0);
    for s in 0..vs {
        let mut p = Su3::identity();
        for t in 0..d[3] {
            p = p.mul(g.link(s + vs * t, 3));
        }
        sum += p.trace();
    }
    sum / (3.0 * vs as f64)
}

fn show(what: &str, r: &FixReport) {
    eprintln!(
        "{what}: {} iterations, F = {:.15}, theta = {:.2e}, converged {}, {:.3} s",
        r.iterations, r.functional, r.theta, r.converged, r.seconds
    );
}

/// Relative and Landau/Coulomb-independent checks every fixed field must pass: theta
/// below the tolerance (reported and recomputed), the functional not lowered, the
/// plaquette and the Polyakov loop unchanged (gauge invariants: rounding only), every
/// link SU(3) to rounding, the report's numbers those of the field returned.
fn check_fixed(u: &GaugeField, fixed: &GaugeField, r: &FixReport, opts: &FixOptions) {
    let kind = opts.kind;
    assert!(
        r.converged,
        "{kind:?}: not converged after {}",
        r.iterations
    );
    assert!(r.theta < opts.theta_tolerance, "theta {:e}", r.theta);
    assert_eq!(r.theta, theta(fixed, kind));
    assert_eq!(r.functional, functional(fixed, kind));
    assert!(
        r.functional > functional(u, kind),
        "{kind:?}: F {} not above {}",
        r.functional,
        functional(u, kind)
    );
    // Gauge invariance: the closed loops' traces are unchanged to rounding (sums of
    // O(V) terms of size 1 with 1e-16 errors each).
    let (p0, p1) = (u.plaquette(), fixed.plaquette());
    assert!((p0.total - p1.total).abs() < 1e-12, "{p0:?} {p1:?}");
    assert!((p0.spatial - p1.spatial).abs() < 1e-12);
    assert!((p0.temporal - p1.temporal).abs() < 1e-12);
    assert!((polyakov(u) - polyakov(fixed)).norm() < 1e-12);
    // G U G^+ of SU(3) matrices with G reunitarised: SU(3) to rounding.
    assert!(fixed.max_unitarity_deviation() < 1e-12);
}

#[test]
fn a_random_transform_of_the_unit_field_is_landau_fixed_back_to_the_unit_field() {
    // Analytic: F = 1 only where every link is 1 (Re tr U = 3 for U in SU(3) means U = 1),
    // and G U G^+ = 1 for U = G0(x) G0(x + mu)^+ means G G0 is one constant matrix.
    let l = Lattice::new([8, 8, 8, 8], DEFAULT_BOUNDARY).unwrap();
    let g0 = GaugeTransform::random(&l, 1);
    let u = g0.apply_gauge(&GaugeField::unit(&l));
    assert!(
        functional(&u, GaugeKind::Landau) < 0.1,
        "a rough pure gauge"
    );
    let opts = options(GaugeKind::Landau);
    let (fixed, g, r) = fix(&u, &opts).unwrap();
    show("pure gauge 8^4, Landau", &r);
    check_fixed(&u, &fixed, &r, &opts);
    // F = 1 - sum |A|^2 / 6 per link: F within 1e-10 of 1 puts each link within about
    // 1e-5 of 1; theta below 1e-12 brings it far closer.
    assert!((r.functional - 1.0).abs() < 1e-10, "F = {}", r.functional);
    let worst = fixed
        .links
        .iter()
        .map(|m| m.max_abs_diff(&Su3::identity()))
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "a link {worst:e} from 1");
    let h = g.after(&g0);
    let spread = h
        .matrices
        .iter()
        .map(|m| m.max_abs_diff(&h.matrices[0]))
        .fold(0.0, f64::max);
    assert!(spread < 1e-5, "G G0 varies by {spread:e}");
}

#[test]
fn a_random_transform_of_the_unit_field_is_coulomb_fixed_to_unit_spatial_links() {
    // Analytic: Coulomb fixing maximises the spatial links only, so it reaches spatial
    // links 1 (F = 1) with G G0 constant on each timeslice, h(t); the temporal links are
    // then h(t) h(t + 1)^+, one matrix per timeslice. LT = 5 is odd: Coulomb gauge never
    // couples timeslices, so the checkerboard needs even spatial extents only.
    let l = Lattice::new([6, 6, 6, 5], DEFAULT_BOUNDARY).unwrap();
    let g0 = GaugeTransform::random(&l, 2);
    let u = g0.apply_gauge(&GaugeField::unit(&l));
    let opts = options(GaugeKind::Coulomb);
    let (fixed, _, r) = fix(&u, &opts).unwrap();
    show("pure gauge 6^3x5, Coulomb", &r);
    check_fixed(&u, &fixed, &r, &opts);
    assert!((r.functional - 1.0).abs() < 1e-10, "F = {}", r.functional);
    for f in functional_per_timeslice(&fixed, GaugeKind::Coulomb) {
        assert!((f - 1.0).abs() < 1e-10);
    }
    let vs = 6 * 6 * 6;
    for t in 0..5 {
        let first = fixed.link(vs * t, 3);
        for s in 0..vs {
            assert!(fixed.link(vs * t + s, 3).max_abs_diff(first) < 1e-5);
        }
    }
    // The temporal links were random and stay so (h(t) is random): the Landau functional
    // of the Coulomb-fixed field is below 1 by far more than the tolerance.
    assert!(functional(&fixed, GaugeKind::Landau) < 1.0 - 1e-3);
}

#[test]
fn real_gauge_files_are_landau_and_coulomb_fixed() {
    for (name, (u, header), header_tol) in
        [("ATB 8^3x4", atb(), 1e-10), ("MILC 4^3x8", milc(), 1e-7)]
    {
        // The file's plaquette (MANIFEST.md; 64-bit ATB to its 10 digits, 32-bit MILC to
        // single precision) before fixing, the fixed field's to rounding (check_fixed).
        assert!((u.plaquette().total - header).abs() < header_tol, "{name}");
        for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
            let opts = options(kind);
            let (fixed, g, r) = fix(&u, &opts).unwrap();
            show(&format!("{name}, {kind:?}"), &r);
            check_fixed(&u, &fixed, &r, &opts);
            assert!((fixed.plaquette().total - header).abs() < header_tol);
            assert!(g.max_unitarity_deviation() < 1e-14);
            // The field returned is G applied to the input, bit for bit.
            assert_eq!(fixed.links, g.apply_gauge(&u).links);
        }
    }
}

#[test]
fn a_fix_stopped_by_max_iterations_says_so() {
    let (u, _) = atb();
    let opts = FixOptions {
        max_iterations: 5,
        ..options(GaugeKind::Landau)
    };
    let (fixed, _, r) = fix(&u, &opts).unwrap();
    // 5 sweeps cannot reach theta 1e-12 on a thermalised field (the converged runs above
    // take hundreds), but each raises F.
    assert!(!r.converged);
    assert_eq!(r.iterations, 5);
    assert!(r.theta > opts.theta_tolerance);
    assert!(functional(&fixed, GaugeKind::Landau) > functional(&u, GaugeKind::Landau) + 0.1);
}

#[test]
fn fixing_another_point_of_the_gauge_orbit_reaches_an_equivalent_maximum() {
    // (1) A small transform (G = 1 + O(0.1)) of the Landau-fixed ATB field lies in the
    // basin of the same maximum: refixing must give the same F to the convergence
    // accuracy, and a field that differs from the first by one global rotation h: the
    // transform that took the first fixed field to the second is constant. Its spread is
    // the distance of the two stopping points from the maximum, about the gradient
    // (sqrt(theta) ~ 1e-6) over the smallest Faddeev-Popov eigenvalue of an 8^3x4 lattice
    // (O(0.01) or more): 1e-3 bounds it.
    let (u, _) = atb();
    let opts = options(GaugeKind::Landau);
    let (u1, _, r1) = fix(&u, &opts).unwrap();
    let small = near_identity(&u.lattice, 7, 0.1);
    let (u2, g2, r2) = fix(&small.apply_gauge(&u1), &opts).unwrap();
    assert!((r1.functional - r2.functional).abs() < 1e-10);
    let h = g2.after(&small);
    let spread = h
        .matrices
        .iter()
        .map(|m| m.max_abs_diff(&h.matrices[0]))
        .fold(0.0, f64::max);
    let global = GaugeTransform {
        matrices: vec![h.matrices[0]; u.lattice.volume()],
    };
    let link_diff = max_link_diff(&u2, &global.apply_gauge(&u1));
    eprintln!("orbit: h spread {spread:.2e}, links off h U1 h^+ by {link_diff:.2e}");
    assert!(spread < 1e-3 && link_diff < 1e-3);

    // (2) From a random point of the orbit the iteration may reach another local maximum
    // (a Gribov copy): on the thermalised ATB field it does for Landau gauge. What must
    // hold is that it is a maximum on the same orbit: converged, theta below tolerance,
    // plaquette and Polyakov loop those of U (check_fixed).
    for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
        let opts = options(kind);
        let gu = GaugeTransform::random(&u.lattice, 11).apply_gauge(&u);
        let (fixed, _, r) = fix(&gu, &opts).unwrap();
        show(&format!("ATB from a random G U, {kind:?}"), &r);
        check_fixed(&u, &fixed, &r, &opts);
    }

    // (3) On MILC's smoother 4^3x8 sample every start tried reaches one maximum: fix(G U)
    // and fix(U) have the same F to the convergence accuracy (1e-10; they agree to
    // 1e-14) for three random G, Landau and Coulomb.
    let (m, _) = milc();
    for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
        let opts = options(kind);
        let (_, _, r) = fix(&m, &opts).unwrap();
        for seed in [1, 2, 3] {
            let gm = GaugeTransform::random(&m.lattice, seed).apply_gauge(&m);
            let (fixed, _, r2) = fix(&gm, &opts).unwrap();
            check_fixed(&m, &fixed, &r2, &opts);
            assert!(
                (r.functional - r2.functional).abs() < 1e-10,
                "{kind:?}, seed {seed}: {} vs {}",
                r.functional,
                r2.functional
            );
        }
    }
}

#[test]
fn coulomb_gauge_fixes_each_timeslice_and_transforms_the_temporal_links() {
    let (u, _) = atb();
    let opts = options(GaugeKind::Coulomb);
    let (fixed, g, r) = fix(&u, &opts).unwrap();
    check_fixed(&u, &fixed, &r, &opts);
    let lt = u.lattice.dims[3];
    let vs = u.lattice.volume() / lt;

    // The stopping rule holds per timeslice; the reported theta is their mean.
    let thetas = theta_per_timeslice(&fixed, GaugeKind::Coulomb);
    assert!(
        thetas.iter().all(|&t| t < opts.theta_tolerance),
        "{thetas:?}"
    );
    let mean = thetas.iter().sum::<f64>() / lt as f64;
    assert!((mean - r.theta).abs() < 1e-14 * r.theta.max(1e-30) + 1e-26);

    // The temporal links are transformed, G(x) U_t(x) G(x + t)^+ (by more than rounding:
    // G is far from 1), but not fixed: the Landau theta of the field stays large.
    let l = &u.lattice;
    let mut moved: f64 = 0.0;
    for x in 0..l.volume() {
        let xt = l.neighbour(x, 3, true).0;
        let want = g.matrices[x]
            .mul(u.link(x, 3))
            .mul(&g.matrices[xt].dagger());
        assert!(fixed.link(x, 3).max_abs_diff(&want) < 1e-14);
        moved = moved.max(fixed.link(x, 3).max_abs_diff(u.link(x, 3)));
    }
    assert!(moved > 0.1);
    assert!(theta(&fixed, GaugeKind::Landau) > 1e-3);

    // Each timeslice's spatial functional is a local maximum: a small transform on one
    // timeslice lowers that timeslice's functional (second order: the first-order change
    // is bounded by sqrt(theta) ~ 1e-6 times eps) and leaves the others' unchanged bit
    // for bit (their spatial links are untouched).
    let f0 = functional_per_timeslice(&fixed, GaugeKind::Coulomb);
    for (t0, eps) in [(1, 1e-2), (3, 1e-1)] {
        let mut kick = near_identity(l, 5, eps);
        for x in 0..l.volume() {
            if x / vs != t0 {
                kick.matrices[x] = Su3::identity();
            }
        }
        let f1 = functional_per_timeslice(&kick.apply_gauge(&fixed), GaugeKind::Coulomb);
        for t in 0..lt {
            if t == t0 {
                assert!(
                    f1[t] < f0[t] - 1e-4 * eps * eps,
                    "t {t}: {} vs {}",
                    f1[t],
                    f0[t]
                );
            } else {
                assert_eq!(f1[t], f0[t]);
            }
        }
    }
}

#[test]
fn coulomb_gauge_reads_no_temporal_link_and_keeps_timeslices_apart() {
    // The update at a site reads only its spatial links (Coulomb's w(x)), so: (1) other
    // temporal links give the same transform, bit for bit; (2) with a fixed number of
    // sweeps (tolerance 0: never converged), other spatial links on timeslice 2 change G
    // on timeslice 2 only.
    let (u, _) = atb();
    let l = u.lattice.clone();
    let vs = l.volume() / l.dims[3];
    let opts = FixOptions {
        theta_tolerance: 0.0,
        max_iterations: 30,
        ..options(GaugeKind::Coulomb)
    };
    let (_, g, r) = fix(&u, &opts).unwrap();
    assert_eq!(r.iterations, 30);
    let hot = GaugeField::random(&l, 99);
    let mut other_t = u.clone();
    for x in 0..l.volume() {
        other_t.links[x * NDIM + 3] = *hot.link(x, 3);
    }
    let (fixed_t, g_t, _) = fix(&other_t, &opts).unwrap();
    assert_eq!(g.matrices, g_t.matrices);
    let fixed = g.apply_gauge(&u);
    for x in 0..l.volume() {
        for mu in 0..3 {
            assert_eq!(fixed_t.link(x, mu), fixed.link(x, mu));
        }
    }
    let mut other_slice = u.clone();
    for x in 2 * vs..3 * vs {
        for mu in 0..3 {
            other_slice.links[x * NDIM + mu] = *hot.link(x, mu);
        }
    }
    let (_, g_s, _) = fix(&other_slice, &opts).unwrap();
    for x in 0..l.volume() {
        if x / vs == 2 {
            assert_ne!(g_s.matrices[x], g.matrices[x]);
        } else {
            assert_eq!(g_s.matrices[x], g.matrices[x]);
        }
    }
}

#[test]
fn the_wilson_operator_is_covariant_under_the_transforms() {
    // D[G U] (G psi) = G (D[U] psi) for any G (conventions.md, "Gauge covariance"), with
    // the reference operator, the fermions antiperiodic in t (a property of D, not of the
    // links), for a random G and for the G a Landau fix returns. Rounding: a few 1e-16
    // per site relative.
    let (u, _) = atb();
    let l = &u.lattice;
    let psi = SpinorField::random(l.volume(), 3, 0);
    let kappa = 0.124;
    let (fixed, g_fix, _) = fix(&u, &options(GaugeKind::Landau)).unwrap();
    for (what, g, gu) in [
        ("random", GaugeTransform::random(l, 4), None),
        ("Landau fix", g_fix, Some(fixed)),
    ] {
        let gu = gu.unwrap_or_else(|| g.apply_gauge(&u));
        let lhs = apply_reference(Operator::D, &gu, kappa, &g.apply_spinor(&psi));
        let rhs = g.apply_spinor(&apply_reference(Operator::D, &u, kappa, &psi));
        let d = lhs.rel_diff(&rhs);
        assert!(d < 1e-12, "{what}: {d:e}");
    }
}

#[test]
fn the_fix_is_the_same_for_any_thread_count() {
    // Each site's update is a function of its links only and the sums are deterministic
    // (reduce::det_sum): bit for bit the same on 1 and 2 threads.
    let (u, _) = milc();
    let opts = options(GaugeKind::Landau);
    let run = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
            .install(|| fix(&u, &opts).unwrap())
    };
    let (f1, g1, r1) = run(1);
    let (f2, g2, r2) = run(2);
    assert_eq!(f1.links, f2.links);
    assert_eq!(g1.matrices, g2.matrices);
    assert_eq!(
        (r1.iterations, r1.functional, r1.theta),
        (r2.iterations, r2.functional, r2.theta)
    );
    let t1 = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| GaugeTransform::random(&u.lattice, 5));
    assert_eq!(t1, GaugeTransform::random(&u.lattice, 5));
}

#[test]
fn bad_options_and_lattices_are_refused_by_name() {
    let l = Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
    let u = GaugeField::unit(&l);
    let key_of = |g: &GaugeField, o: FixOptions| match fix(g, &o) {
        Err(Error::InvalidValue { key, .. }) => key,
        other => panic!("expected a refusal, got {:?}", other.map(|r| r.2)),
    };
    let landau = options(GaugeKind::Landau);
    for omega in [0.0, 2.0, f64::NAN] {
        assert_eq!(key_of(&u, FixOptions { omega, ..landau }), "omega");
    }
    assert_eq!(
        key_of(
            &u,
            FixOptions {
                theta_tolerance: -1.0,
                ..landau
            }
        ),
        "theta_tolerance"
    );
    assert_eq!(
        key_of(
            &u,
            FixOptions {
                functional_tolerance: f64::INFINITY,
                ..landau
            }
        ),
        "functional_tolerance"
    );
    assert_eq!(
        key_of(
            &u,
            FixOptions {
                max_iterations: 0,
                ..landau
            }
        ),
        "max_iterations"
    );
    let odd = GaugeField::unit(&Lattice::new([4, 5, 4, 4], DEFAULT_BOUNDARY).unwrap());
    assert_eq!(key_of(&odd, landau), "LY");
    let odd_t = GaugeField::unit(&Lattice::new([4, 4, 4, 5], DEFAULT_BOUNDARY).unwrap());
    assert_eq!(key_of(&odd_t, landau), "LT");
    // Coulomb gauge accepts an odd LT (timeslices are not coupled): the unit field is
    // fixed already.
    let (_, _, r) = fix(&odd_t, &options(GaugeKind::Coulomb)).unwrap();
    assert!(r.converged && r.theta == 0.0 && r.functional == 1.0);
    let mut nan = u.clone();
    nan.links[17].0[1][2] = C64::new(f64::NAN, 0.0);
    assert_eq!(key_of(&nan, landau), "gauge field");
}

/// Landau gauge on a 16^3x32 quenched field (beta 6.0, 20 heatbath sweeps from a cold
/// start): the time a production-sized fix takes. Run by hand:
/// `cargo test --release --test gauge_fix -- --ignored --nocapture`.
#[test]
#[ignore]
fn landau_timing_16c32() {
    use qcd_solve::gauge_gen::{generate, HeatbathParams};
    let l = Lattice::new([16, 16, 16, 32], DEFAULT_BOUNDARY).unwrap();
    let params = HeatbathParams {
        beta: 6.0,
        therm: 20,
        sweeps: 0,
        ..HeatbathParams::default()
    };
    let u = generate(&l, &params, |_| {}).unwrap();
    eprintln!("plaquette {:.6}", u.plaquette().total);
    let opts = options(GaugeKind::Landau);
    let (fixed, _, r) = fix(&u, &opts).unwrap();
    show(
        &format!("16^3x32 Landau on {}", rayon::current_num_threads()),
        &r,
    );
    check_fixed(&u, &fixed, &r, &opts);
}

/// A transform near 1: each G(x) the SU(3) projection of 1 + eps X, X with Gaussian
/// entries from the stream (seed, site).
fn near_identity(lattice: &Lattice, seed: u64, eps: f64) -> GaugeTransform {
    let matrices = (0..lattice.volume())
        .map(|x| {
            let mut s = qcd_solve::rng::Stream::new(seed, x as u64);
            let mut m = Su3::identity();
            for z in m.0.iter_mut().flatten() {
                *z += C64::new(eps * s.gaussian(), eps * s.gaussian());
            }
            m.reunitarise()
        })
        .collect();
    GaugeTransform { matrices }
}
