//! Tests of the quenched gauge generator (src/gauge_gen): SU(3) preservation, the heatbath
//! distribution, action conservation of overrelaxation, thread-count independence, physics
//! sanity at strong and at intermediate coupling, the ensemble API, the autocorrelation
//! analysis on AR(1) data, and that kernels/heatbath.cu compiles with NVRTC (skipped when
//! libnvrtc is not on LD_LIBRARY_PATH).

use qcd_solve::field::su3::C64;
use qcd_solve::field::GaugeField;
use qcd_solve::gauge_gen::draws::Su2Draws;
use qcd_solve::gauge_gen::stats::autocorrelation;
use qcd_solve::gauge_gen::su2::{heatbath_link, overrelax_link, su2_heatbath, Quat};
use qcd_solve::gauge_gen::update::{
    local_action, staple, update_pass, wilson_action, Geometry, Update,
};
use qcd_solve::gauge_gen::{
    generate, generate_ensemble, summarise, Generator, HeatbathParams, SweepRecord,
};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY, NDIM};
use qcd_solve::rng::Stream;

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

fn su2_deviation(q: &Quat) -> f64 {
    let m = q.matrix();
    let mut worst: f64 = 0.0;
    for i in 0..2 {
        for j in 0..2 {
            let p = m[i][0] * m[j][0].conj() + m[i][1] * m[j][1].conj();
            let target = if i == j { 1.0 } else { 0.0 };
            worst = worst.max((p - C64::new(target, 0.0)).norm());
        }
    }
    let det = m[0][0] * m[1][1] - m[0][1] * m[1][0];
    worst.max((det - C64::new(1.0, 0.0)).norm())
}

// ---------------------------------------------------------------------------------------
// SU(2) / SU(3) preservation

#[test]
fn every_update_keeps_su2_and_su3_to_1e_13() {
    // Analytic: R = a V and V V are products of unit quaternions, and R U stays in SU(3);
    // only rounding (~1e-16 per step) may move them. Tolerance 1e-13 on U U^+ - 1 and det - 1.
    let l = lattice([4, 4, 4, 4]);
    let f = GaugeField::random(&l, 21);
    let g = Geometry::new(&l).unwrap();
    let mut s = Stream::new(22, 0);
    for x in 0..l.volume() {
        let mu = x % NDIM;
        let a = staple(&f.links, &g, x, mu);
        // SU(2): heatbath elements over a range of alpha (both samplers) and OR elements.
        for (k, alpha) in [0.0, 0.3, 1.7, 5.0, 40.0].into_iter().enumerate() {
            let v = Quat([s.gaussian(), s.gaussian(), s.gaussian(), s.gaussian()]);
            let d = Su2Draws::new(5, 0, x as u32, mu, k % 3);
            let r = su2_heatbath(&v, alpha / v.norm(), &d);
            assert!(
                su2_deviation(&r) < 1e-13,
                "SU(2) heatbath {}",
                su2_deviation(&r)
            );
        }
        // SU(3): a chain of 20 heatbath and 20 overrelaxation link updates, no reunitarisation.
        let mut u = *f.link(x, mu);
        for step in 0..20 {
            u = heatbath_link(&u, &a, 6.0, |sg| Su2Draws::new(9, step, x as u32, mu, sg));
            assert!(
                u.unitarity_deviation() < 1e-13,
                "HB {}",
                u.unitarity_deviation()
            );
            u = overrelax_link(&u, &a);
            assert!(
                u.unitarity_deviation() < 1e-13,
                "OR {}",
                u.unitarity_deviation()
            );
        }
    }
    // A whole compound sweep (1 HB + 4 OR passes) before reunitarisation.
    let mut f = f;
    update_pass(
        &mut f,
        &g,
        Update::Heatbath {
            beta: 6.0,
            seed: 3,
            sweep: 0,
        },
    );
    for _ in 0..4 {
        update_pass(&mut f, &g, Update::Overrelax);
    }
    assert!(
        f.max_unitarity_deviation() < 1e-13,
        "{}",
        f.max_unitarity_deviation()
    );
}

// ---------------------------------------------------------------------------------------
// Heatbath distribution

/// Probability of a0 = cos(theta) in [cos th1, cos th0] for th0 < th1 under
/// P(a0) ∝ sqrt(1-a0^2) exp(alpha a0), unnormalised: the integral of
/// sin^2(theta) exp(alpha (cos theta - 1)) over [th0, th1] (Simpson, 64 intervals; the
/// integrand is smooth in theta, so this is accurate to far below the statistical error).
fn weight(alpha: f64, th0: f64, th1: f64) -> f64 {
    let n = 64;
    let h = (th1 - th0) / n as f64;
    let f = |t: f64| t.sin().powi(2) * (alpha * (t.cos() - 1.0)).exp();
    let mut s = f(th0) + f(th1);
    for i in 1..n {
        s += f(th0 + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

/// Chi-square of the samples a0 against the KP density at `alpha`, in about 40 bins of
/// roughly equal expected count (fine theta bins merged); returns (chi2, degrees of freedom).
fn chi_square(samples: &[f64], alpha: f64) -> (f64, usize) {
    let fine = 2000;
    let dth = std::f64::consts::PI / fine as f64;
    let w: Vec<f64> = (0..fine)
        .map(|i| weight(alpha, i as f64 * dth, (i + 1) as f64 * dth))
        .collect();
    let total: f64 = w.iter().sum();
    // Merge fine bins (theta increasing = a0 decreasing) into groups of >= 1/40 probability.
    let mut edges = vec![0usize];
    let mut probs = vec![];
    let mut acc = 0.0;
    for (i, wi) in w.iter().enumerate() {
        acc += wi / total;
        if acc >= 1.0 / 40.0 {
            edges.push(i + 1);
            probs.push(acc);
            acc = 0.0;
        }
    }
    if acc > 0.0 {
        *probs.last_mut().unwrap() += acc;
        *edges.last_mut().unwrap() = fine;
    }
    let mut counts = vec![0usize; probs.len()];
    for &a0 in samples {
        let theta = a0.clamp(-1.0, 1.0).acos();
        let fine_bin = ((theta / dth) as usize).min(fine - 1);
        let group = edges.partition_point(|&e| e <= fine_bin) - 1;
        counts[group] += 1;
    }
    let n = samples.len() as f64;
    let chi2 = counts
        .iter()
        .zip(&probs)
        .map(|(&c, &p)| (c as f64 - n * p).powi(2) / (n * p))
        .sum();
    (chi2, probs.len() - 1)
}

#[test]
fn heatbath_draws_the_kennedy_pendleton_density() {
    // For a fixed staple projection v the new SU(2) element R must have R.v/|v| = a0
    // distributed as sqrt(1 - a0^2) exp(alpha a0), alpha = beta_eff k (here scale * |v|),
    // and the rest of R V^+ isotropic. 400k samples per alpha, fixed seed. Threshold:
    // chi2 < dof + 5 sqrt(2 dof) (p ~ 1e-4 at 40 dof). alpha 0.3 and 1.69 use Creutz's
    // sampler, 1.71, 4 and 12 Kennedy-Pendleton's (switch at 1.7).
    let n = 400_000;
    let mut s = Stream::new(77, 0);
    for alpha in [0.3, 1.69, 1.71, 4.0, 12.0] {
        let v = Quat([s.gaussian(), s.gaussian(), s.gaussian(), s.gaussian()]);
        let vn = v.norm();
        let vhat = Quat([v.0[0] / vn, v.0[1] / vn, v.0[2] / vn, v.0[3] / vn]);
        let vconj = Quat([vhat.0[0], -vhat.0[1], -vhat.0[2], -vhat.0[3]]);
        let mut a0s = Vec::with_capacity(n);
        let mut m1 = [0.0; 3];
        let mut m2 = [0.0; 3];
        for i in 0..n {
            let r = su2_heatbath(&v, alpha / vn, &Su2Draws::new(2024, 1, i as u32, 2, 1));
            let a = r.mul(&vconj); // a = R V^+, a0 = R . V
            a0s.push(a.0[0]);
            for k in 0..3 {
                m1[k] += a.0[k + 1];
                m2[k] += a.0[k + 1] * a.0[k + 1];
            }
        }
        let (chi2, dof) = chi_square(&a0s, alpha);
        eprintln!("alpha {alpha}: chi2 {chi2:.1} / {dof} dof");
        let limit = dof as f64 + 5.0 * (2.0 * dof as f64).sqrt();
        assert!(
            chi2 < limit,
            "alpha {alpha}: chi2 {chi2:.1} for {dof} dof (limit {limit:.1})"
        );
        // Isotropy: <a_k> = 0 and <a_k^2> = (1 - <a0^2>)/3; 5 sigma with sigma <= sqrt(1/(3n)).
        let a0sq = a0s.iter().map(|a| a * a).sum::<f64>() / n as f64;
        let tol = 5.0 / (3.0 * n as f64).sqrt();
        for k in 0..3 {
            assert!(
                (m1[k] / n as f64).abs() < tol,
                "alpha {alpha}: <a{}> = {}",
                k + 1,
                m1[k] / n as f64
            );
            assert!(
                (m2[k] / n as f64 - (1.0 - a0sq) / 3.0).abs() < tol,
                "alpha {alpha}: <a{}^2> = {}",
                k + 1,
                m2[k] / n as f64
            );
        }
        // The test has power: the same samples fail against a 5 % larger alpha.
        if alpha >= 1.0 {
            let (wrong, dof) = chi_square(&a0s, 1.05 * alpha);
            eprintln!("alpha {alpha}: chi2 against 1.05 alpha {wrong:.1} / {dof} dof");
            assert!(
                wrong > dof as f64 + 5.0 * (2.0 * dof as f64).sqrt(),
                "alpha {alpha}: chi2 {wrong}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Overrelaxation

#[test]
fn overrelaxation_keeps_the_action_to_1e_12() {
    // Analytic: each SU(2) reflection keeps Re Tr(U A) for its link, so an OR pass keeps the
    // total Wilson action; rounding only. Local: |dS_link| < 1e-12 (|S_link| ~ 10). Total:
    // plaquette difference < 1e-12 and |dS| / S < 1e-12. Checked on a hot field and on one
    // after 5 heatbath sweeps at beta = 6 (no reunitarisation between).
    let l = lattice([4, 4, 4, 6]);
    let g = Geometry::new(&l).unwrap();
    let hot = GaugeField::random(&l, 8);
    let mut warm = hot.clone();
    for sweep in 0..5 {
        update_pass(
            &mut warm,
            &g,
            Update::Heatbath {
                beta: 6.0,
                seed: 8,
                sweep,
            },
        );
    }
    for f in [hot, warm] {
        for x in (0..l.volume()).step_by(7) {
            for mu in 0..NDIM {
                let before = local_action(&f, &g, x, mu, 6.0);
                let mut f2 = f.clone();
                let a = staple(&f.links, &g, x, mu);
                f2.links[x * NDIM + mu] = overrelax_link(f.link(x, mu), &a);
                let after = local_action(&f2, &g, x, mu, 6.0);
                assert!((after - before).abs() < 1e-12, "local {before} -> {after}");
            }
        }
        let s0 = wilson_action(&f, 6.0);
        let p0 = f.plaquette().total;
        let mut f2 = f.clone();
        update_pass(&mut f2, &g, Update::Overrelax);
        let s1 = wilson_action(&f2, 6.0);
        assert!((f2.plaquette().total - p0).abs() < 1e-12);
        eprintln!("OR: action {s0} -> {s1}");
        assert!(((s1 - s0) / s0).abs() < 1e-12, "total {s0} -> {s1}");
        // ... while the links themselves did move.
        let moved = f
            .links
            .iter()
            .zip(&f2.links)
            .filter(|(a, b)| a != b)
            .count();
        assert!(moved > f.links.len() / 2);
    }
}

// ---------------------------------------------------------------------------------------
// Thread-count independence

fn run_in_pool(threads: usize, l: &Lattice, p: &HeatbathParams) -> (GaugeField, Vec<SweepRecord>) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut rec = vec![];
        let f = generate(l, p, |r| rec.push(r)).unwrap();
        (f, rec)
    })
}

#[test]
fn bitwise_identical_for_1_2_and_3_threads() {
    // Every draw is a pure function of (seed, sweep, site, mu, subgroup, step), each set is
    // updated from the field before it, and sums use fixed chunks: no thread dependence at all.
    let l = lattice([8, 4, 4, 6]);
    let p = HeatbathParams {
        beta: 5.7,
        sweeps: 2,
        therm: 1,
        every: 1,
        overrelax: 2,
        seed: 99,
        hot_start: true,
    };
    let (f1, r1) = run_in_pool(1, &l, &p);
    for threads in [2, 3] {
        let (f, r) = run_in_pool(threads, &l, &p);
        let same = f1.links.iter().zip(&f.links).all(|(a, b)| {
            a.0.iter()
                .flatten()
                .zip(b.0.iter().flatten())
                .all(|(x, y)| x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits())
        });
        assert!(same, "links differ between 1 and {threads} threads");
        for (a, b) in r1.iter().zip(&r) {
            assert_eq!(a.plaquette.total.to_bits(), b.plaquette.total.to_bits());
            assert_eq!(a.plaquette.spatial.to_bits(), b.plaquette.spatial.to_bits());
        }
    }
}

// ---------------------------------------------------------------------------------------
// Physics sanity

fn measured_mean(l: &Lattice, p: &HeatbathParams) -> qcd_solve::gauge_gen::AutocorrEstimate {
    let mut rec = vec![];
    let f = generate(l, p, |r| rec.push(r)).unwrap();
    assert!(f.max_unitarity_deviation() < 1e-14);
    let s = summarise(&rec).unwrap();
    assert!(s.total.window_found);
    s.total
}

#[test]
fn strong_coupling_plaquette_at_beta_half() {
    // Strong-coupling expansion of the SU(3) Wilson plaquette: <P> = u + 4 u^5 + ..., with
    // u = beta/18 + beta^2/216 - beta^4/10368 + ... (single-plaquette character expansion;
    // the beta^3 term vanishes for SU(3)). At beta = 0.5: 0.0289294 (the higher terms are
    // below 1e-6). This fixes the normalisation of beta independently of any simulation.
    // Tolerance: 4 sigma (autocorrelation-aware) + 1e-5. Mostly Creutz's sampler (alpha < 1.7).
    let l = lattice([4, 4, 4, 4]);
    let p = HeatbathParams {
        beta: 0.5,
        sweeps: 1500,
        therm: 20,
        every: 1,
        overrelax: 1,
        seed: 5,
        hot_start: true,
    };
    let e = measured_mean(&l, &p);
    eprintln!("beta 0.5: {e:?}");
    let b: f64 = 0.5;
    let u = b / 18.0 + b * b / 216.0 - b.powi(4) / 10368.0;
    let expect = u + 4.0 * u.powi(5);
    assert!(
        (e.mean - expect).abs() < 4.0 * e.error + 1e-5,
        "plaquette {} +- {} vs strong coupling {expect}",
        e.mean,
        e.error
    );
    // The test can tell: the leading term alone differs by 6 sigma, so the beta^2 term is seen.
    assert!(e.error < 2.5e-4, "error {}", e.error);
}

#[test]
fn hot_and_cold_starts_agree_at_beta_6_on_4_to_the_4() {
    // 4^4 at beta = 6.0, 1 HB + 4 OR per sweep, 40 thermalisation + 400 measured sweeps from
    // a hot and a cold start. They must agree within 4 combined sigma (autocorrelation-aware),
    // and each must lie within 0.006 of the large-volume 0.5937 (a 1 % shift in beta moves
    // <P> by about 0.006); the 4^4 box sits some 0.003 above it (measured here: 0.5967(5)
    // and 0.5973(5) from 1000 sweeps), so the band is about twice the finite-size shift.
    // Mostly the Kennedy-Pendleton sampler (alpha ~ 4-8 here).
    let l = lattice([4, 4, 4, 4]);
    let mut p = HeatbathParams {
        beta: 6.0,
        sweeps: 400,
        therm: 40,
        every: 1,
        overrelax: 4,
        seed: 11,
        hot_start: false,
    };
    let cold = measured_mean(&l, &p);
    p.hot_start = true;
    p.seed = 12;
    let hot = measured_mean(&l, &p);
    eprintln!("beta 6 cold: {cold:?}\nbeta 6 hot: {hot:?}");
    let sigma = (cold.error.powi(2) + hot.error.powi(2)).sqrt();
    assert!(
        (cold.mean - hot.mean).abs() < 4.0 * sigma,
        "cold {cold:?} hot {hot:?}"
    );
    for e in [cold, hot] {
        assert!(
            (e.mean - 0.5937).abs() < 0.006,
            "plaquette {} +- {}",
            e.mean,
            e.error
        );
        assert!(e.error < 1.5e-3);
    }
}

// ---------------------------------------------------------------------------------------
// The ensemble API

#[test]
fn ensemble_hands_out_every_kth_field_and_resumes() {
    // therm 3, sweeps 6, every 2: sweeps 0..8, measured 3..8, handed out after sweeps 4, 6, 8.
    let l = lattice([4, 4, 4, 4]);
    let p = HeatbathParams {
        beta: 6.0,
        sweeps: 6,
        therm: 3,
        every: 2,
        overrelax: 1,
        seed: 4,
        hot_start: true,
    };
    let mut records = vec![];
    let mut saved: Vec<(usize, GaugeField)> = vec![];
    let last = generate_ensemble(
        &l,
        &p,
        |r| records.push(r),
        |r, f| {
            saved.push((r.sweep, f.clone()));
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(records.len(), 9);
    assert_eq!(records.iter().filter(|r| r.measured).count(), 6);
    assert_eq!(saved.iter().map(|s| s.0).collect::<Vec<_>>(), vec![4, 6, 8]);
    assert_eq!(saved[2].1.links, last.links);
    // Resuming from the field after sweep 4 with first_sweep = 5 repeats sweeps 5..8 exactly.
    let mut g = Generator::from_field(saved[0].1.clone(), &p, 5).unwrap();
    for _ in 5..9 {
        g.sweep();
    }
    assert_eq!(g.field().links, last.links);
    // A callback error stops the run and comes back.
    let err = generate_ensemble(
        &l,
        &p,
        |_| {},
        |_, _| Err(qcd_solve::Error::CheckFailed("stop".into())),
    );
    assert!(err.is_err());
    // Odd extents are refused with an error naming the extent.
    let e = generate(&lattice([4, 4, 5, 4]), &p, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("LZ"), "{e}");
}

// ---------------------------------------------------------------------------------------
// Autocorrelation analysis

/// x_{t+1} = rho x_t + sqrt(1 - rho^2) eta_t, stationary start, unit variance.
fn ar1(rho: f64, n: usize, stream: u64) -> Vec<f64> {
    let mut s = Stream::new(31337, stream);
    let mut x = s.gaussian();
    let c = (1.0 - rho * rho).sqrt();
    (0..n)
        .map(|_| {
            let out = x;
            x = rho * x + c * s.gaussian();
            out
        })
        .collect()
}

#[test]
fn autocorrelation_time_of_ar1_series() {
    // AR(1) has Gamma(t) = rho^|t|, so tau_int = (1 + rho) / (2 (1 - rho)) exactly, and the
    // error of the mean of N samples is sqrt(2 tau_int / N) for large N. Tolerances:
    // tau_int within 4 of its own stated error (Wolff's eq. 42), and the error of the mean
    // within 10 % of the analytic one (its relative uncertainty is about tau_err / (2 tau)).
    let n = 200_000;
    for (k, rho) in [0.0, 0.5, 0.9, 0.97].into_iter().enumerate() {
        let d = ar1(rho, n, k as u64);
        let e = autocorrelation(&d).unwrap();
        let tau = (1.0 + rho) / (2.0 * (1.0 - rho));
        eprintln!(
            "rho {rho}: tau {tau}, {e:?}, analytic error {}",
            (2.0 * tau / n as f64).sqrt()
        );
        assert!(e.window_found);
        assert!(
            (e.tau_int - tau).abs() < 4.0 * e.tau_int_error + 0.01,
            "rho {rho}: tau_int {} +- {} vs {tau}",
            e.tau_int,
            e.tau_int_error
        );
        let analytic = (2.0 * tau / n as f64).sqrt();
        assert!(
            (e.error / analytic - 1.0).abs() < 0.1,
            "rho {rho}: error {} vs {analytic}",
            e.error
        );
        assert!((e.naive_error - (1.0 / n as f64).sqrt()).abs() < 0.02 * e.naive_error);
    }
}

#[test]
fn autocorrelated_error_bars_cover_the_true_mean() {
    // 400 independent AR(1) chains (rho = 0.8, tau_int = 4.5, N = 4000): the true mean 0 must
    // lie within one error bar in 68.3 % of them; binomial sigma 2.3 %, so 60 % - 77 % (3.5
    // sigma) passes. The naive error (no autocorrelation) would cover only ~ 36 %.
    let chains = 400;
    let mut covered = 0;
    for c in 0..chains {
        let e = autocorrelation(&ar1(0.8, 4000, 1000 + c)).unwrap();
        if e.mean.abs() < e.error {
            covered += 1;
        }
    }
    let frac = covered as f64 / chains as f64;
    eprintln!("coverage {frac}");
    assert!((0.60..0.77).contains(&frac), "coverage {frac}");
}

// ---------------------------------------------------------------------------------------
// The CUDA kernel compiles with NVRTC (sm_90)

#[test]
fn heatbath_kernel_compiles_with_nvrtc() {
    // Needs libnvrtc.so.13 on LD_LIBRARY_PATH (see examples/heatbath_nvrtc.rs). A
    // developer machine may lack it: then nothing was compiled, which is said loudly
    // (SKIPPED on stderr) rather than passed quietly. CI installs libnvrtc and puts it on
    // the loader path before the tests (.ci/run), so under CI=true its absence is a
    // failure (it used to return early everywhere: issue 10).
    // SAFETY: only tries to dlopen the library by its usual names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!(
            "SKIPPED: heatbath_kernel_compiles_with_nvrtc: libnvrtc not found, kernels/heatbath.cu was not compiled (set LD_LIBRARY_PATH to .nvrtc/nvidia/cu13/lib)"
        );
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but libnvrtc is not on the loader path: kernels/heatbath.cu was not compiled"
        );
        return;
    }
    let src = include_str!("../kernels/heatbath.cu");
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some("sm_90"),
        fmad: Some(false),
        name: Some("heatbath.cu".into()),
        // Its #include "su3.cuh".
        include_paths: vec![concat!(env!("CARGO_MANIFEST_DIR"), "/kernels").into()],
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts)
        .expect("NVRTC compile of kernels/heatbath.cu");
    let text = ptx.to_src();
    for entry in [
        "heatbath_update",
        "overrelax_update",
        "reunitarise_links",
        "philox_probe",
    ] {
        assert!(
            text.contains(&format!(".entry {entry}")),
            "no entry point {entry}"
        );
    }
}
