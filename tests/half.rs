//! Half precision (issue 13, item 2) on the CPU backend, the validator of the GPU's: the
//! per-site rounding of half fields (every write rounds each site as a whole to 16-bit
//! integers with one f32 norm, `linalg::half`), and half-double solves (the inner
//! iteration on half fields, reliable updates in double) on a real gauge file written by
//! another code (tmLQCD's 4^3x8, ../shared/lattices/MANIFEST.md). Expected values: the
//! format's analytic rounding bound (|error| <= site norm / 32767), and the tolerance
//! itself (true residuals of D x = b recomputed from scratch on the CPU).

use qcd_solve::app::run::{build_problem, cpu_residual_of_d, solve_on, SolvePlan};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::Capabilities;
use qcd_solve::config::LoadedConfig;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::linalg::half::{round_site, MAX_SHORT};
use qcd_solve::linalg::{Layout, Precision, Subset};
use qcd_solve::solver::{Method, StopReason};
use std::path::PathBuf;

fn site_norm(s: &[C64]) -> f64 {
    s.iter()
        .fold(0.0f64, |m, z| m.max(z.re.abs()).max(z.im.abs()))
}

/// Every site of `got` is `want`'s site rounded: within the site's norm / 32767 of it
/// (the format's bound), and a fixed point of the rounding (it is what a half field
/// stores, not merely close to it).
fn assert_rounded_sites(want: &SpinorField, got: &SpinorField, sites: impl Iterator<Item = usize>) {
    for x in sites {
        let (w, g) = (
            &want.data[12 * x..12 * x + 12],
            &got.data[12 * x..12 * x + 12],
        );
        let n = site_norm(w);
        for (a, b) in w.iter().zip(g) {
            assert!(
                (a.re - b.re).abs() <= n / MAX_SHORT && (a.im - b.im).abs() <= n / MAX_SHORT,
                "site {x}: {a} stored as {b} (norm {n})"
            );
        }
        let mut again = g.to_vec();
        round_site(&mut again);
        assert_eq!(again, g, "site {x} is not a stored half site");
    }
}

#[test]
fn half_fields_round_each_site_within_its_norm_over_32767() {
    let l = Lattice::new([4, 4, 4, 8], DEFAULT_BOUNDARY).unwrap();
    let gauge = GaugeField::random(&l, 7);
    let mut be = CpuBackend::new(&gauge, 0.12);
    // Sites of very different magnitudes: the norm is per site, so a small site keeps
    // its relative precision next to a large one.
    let mut host = SpinorField::random(l.volume(), 3, 0);
    for x in 0..l.volume() {
        let scale = 10f64.powi((x % 7) as i32 - 3);
        for z in &mut host.data[12 * x..12 * x + 12] {
            *z *= scale;
        }
    }
    let full = be.upload(&host).unwrap();
    for subset in [Subset::Full, Subset::Even, Subset::Odd] {
        let mut h = be
            .alloc_layout(Layout::new(subset, Precision::Half))
            .unwrap();
        be.convert(&mut h, &full).unwrap();
        let got = be.download(&h).unwrap();
        let sites = (0..l.volume()).filter(|&x| subset.parity().is_none_or(|p| l.parity(x) == p));
        assert_rounded_sites(&host, &got, sites);
    }
    // y = y + a x on half fields: the exact result (computed here in double from the
    // stored inputs) rounded site by site.
    let lay = Layout::new(Subset::Full, Precision::Half);
    let (mut x, mut y) = (be.alloc_layout(lay).unwrap(), be.alloc_layout(lay).unwrap());
    be.convert(&mut x, &full).unwrap();
    let other = be.upload(&SpinorField::random(l.volume(), 4, 0)).unwrap();
    be.convert(&mut y, &other).unwrap();
    let (xh, yh) = (be.download(&x).unwrap(), be.download(&y).unwrap());
    let a = C64::new(0.3, -1.7);
    be.axpy(a, &x, &mut y).unwrap();
    let mut want = yh.clone();
    for (w, xv) in want.data.iter_mut().zip(&xh.data) {
        *w += a * *xv;
    }
    assert_rounded_sites(&want, &be.download(&y).unwrap(), 0..l.volume());
    // The norm of a half field is that of its stored values (reductions in double).
    let n2: f64 = xh.data.iter().map(|z| z.norm_sqr()).sum();
    let got = be.norm2(&x).unwrap();
    assert!((got - n2).abs() <= 1e-12 * n2, "{got} vs {n2}");
}

/// The config text of a solve on tmLQCD's 4^3x8 file; `solver` and `backend` add lines to
/// those sections.
fn config_text(precision: &str, method: &str, pre: &str, solver: &str, backend: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/lattices/ahmidas_conf.48");
    assert!(
        path.exists(),
        "{} is missing: the shared lattices are part of the test set-up",
        path.display()
    );
    format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n[gauge]\ntype = \"file\"\npath = {:?}\n\
         format = \"ildg\"\n[dirac]\nkappa = 0.125\n[source]\ntype = \"random\"\nseed = 7\n\
         [solver]\ntolerance = 1e-10\nmax_iterations = 3000\nmethod = \"{method}\"\n\
         precision = \"{precision}\"\npreconditioning = \"{pre}\"\n{solver}\n[backend]\n{backend}\n\
         [output]\n",
        path.display().to_string()
    )
}

fn config(precision: &str, method: &str, pre: &str) -> LoadedConfig {
    let text = config_text(precision, method, pre, "", "device = \"cpu\"");
    LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap()
}

fn refusal(solver: &str, backend: &str) -> String {
    let text = config_text("half-double", "cr", "none", solver, backend);
    LoadedConfig::from_str(&text, "test", PathBuf::from("."))
        .and_then(|c| qcd_solve::app::plan::check(&c))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| panic!("the config must be refused"))
}

#[test]
fn half_double_cr_and_bicgstab_reach_tol_with_reliable_updates_on_a_real_gauge_file() {
    for method in [Method::Cr, Method::Bicgstab] {
        for pre in ["none", "even-odd"] {
            let mut iterations = [0usize; 2];
            for (k, precision) in ["single-double", "half-double"].iter().enumerate() {
                let cfg = config(precision, method.name(), pre);
                let mut problem = build_problem(&cfg).unwrap();
                problem.operator = method.default_operator();
                let mut plan = SolvePlan::from_config(&cfg.config, false);
                let what = format!("{method} {pre} {precision}");
                if k == 1 {
                    assert!(
                        !plan.fused,
                        "{what}: half-double runs the generic iteration"
                    );
                }
                // Single-double through the same generic loop, for the iteration count.
                plan.fused = false;
                let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
                let r = solve_on(&mut be, &problem, &plan).unwrap();
                assert_eq!(r.reason, StopReason::Converged, "{what}");
                // The residual of D x = b recomputed from scratch: at or below tol, since
                // the mixed wrapper ends only on a double true residual <= tol.
                let tr = cpu_residual_of_d(&problem, &r.solution);
                let st = r.fused.expect("the wrapper's statistics");
                eprintln!(
                    "{what}: {} iterations, {} reliable updates, true residual {tr:.2e}",
                    r.iterations, st.reliable_updates
                );
                assert!(tr <= 1e-10, "{what}: true residual {tr:.3e}");
                // 16-bit spinors: the iterated residual drifts from the true one after
                // about 4 decades, so a 1e-10 solve needs several reliable updates.
                assert!(st.reliable_updates >= 2, "{what}: {}", st.reliable_updates);
                iterations[k] = r.iterations;
            }
            // Half costs iterations (restarts lose the Krylov space more often), but not
            // many: within 2x of single-double here.
            assert!(
                iterations[1] <= 2 * iterations[0],
                "{method} {pre}: half {} vs single {}",
                iterations[1],
                iterations[0]
            );
        }
    }
}

#[test]
fn half_double_is_refused_by_key_where_it_cannot_run() {
    // The fused CR has no half kernels: iteration = "fused" is refused by name.
    let e = refusal("iteration = \"fused\"", "device = \"cpu\"");
    assert!(e.contains("iteration") && e.contains("half-double"), "{e}");
    // A seed kernel holds full double fields only: solver.precision named, by the plan
    // check and, on an explicit GPU, by the config check before any device is touched.
    use qcd_solve::backend::cuda::StencilVersion;
    let cfg = config("half-double", "cr", "none");
    let plan = SolvePlan::from_config(&cfg.config, false);
    let e = plan
        .check(Capabilities::of_stencil(StencilVersion::V1_6_1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("solver.precision") && e.contains("half"), "{e}");
    assert!(plan.check(Capabilities::ALL_CPU).is_ok());
    let e = refusal("", "device = \"cuda\"\nkernel = \"1.6.1\"");
    assert!(e.contains("precision") && e.contains("3.0"), "{e}");
    // A split lattice on the GPU: the halo kernels have no half build.
    let e = refusal(
        "",
        "device = \"cuda\"\nkernel = \"3.0\"\n[parallel]\ngrid = [1, 1, 1, 2]",
    );
    assert!(e.contains("solver.precision") && e.contains("split"), "{e}");
}

/// A half-double CR run that stalls by itself (validate/RESULTS.md run 32): on the full
/// operator, a random 4x4x4x16 field (seed 31), kappa 0.124, random source, the CPU's half
/// CR stopped as stagnated after 2 reliable updates at a true residual of 4.0e-3. The
/// mixed wrapper now restarts a stalled run once from the true residual; the solve must
/// reach tol (<= 1e-10, the wrapper's own rule, recomputed here from scratch).
#[test]
fn a_stalled_half_double_cr_run_is_restarted_and_reaches_tol() {
    let text =
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 16\n[gauge]\ntype = \"random\"\nseed = 31\n\
                [dirac]\nkappa = 0.124\n[source]\ntype = \"random\"\nseed = 7\n[solver]\n\
                tolerance = 1e-10\nmax_iterations = 3000\nprecision = \"half-double\"\n\
                preconditioning = \"none\"\n[backend]\ndevice = \"cpu\"\n[output]\n";
    let cfg = LoadedConfig::from_str(text, "test", PathBuf::from(".")).unwrap();
    let problem = build_problem(&cfg).unwrap();
    let plan = SolvePlan::from_config(&cfg.config, false);
    let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
    let r = solve_on(&mut be, &problem, &plan).unwrap();
    let tr = cpu_residual_of_d(&problem, &r.solution);
    eprintln!(
        "{} iterations, {:?}, true residual {tr:.2e}",
        r.iterations, r.reason
    );
    assert_eq!(r.reason, StopReason::Converged);
    assert!(tr <= 1e-10, "true residual {tr:.3e}");
}
