#![cfg(feature = "gpu-tests")]
//! GPU execution tests of the clover term and twisted mass on kernel 3.0 (the CLOVER builds
//! of kernels/stencil_v3.cu, kernels/clover.cuh) against the CPU backend, whose operator
//! the CPU tests hold to closed forms, an independent construction and tmLQCD
//! (tests/clover.rs, tests/twisted.rs, tests/twisted_tmlqcd.rs): every operator form, its
//! adjoint and the site inverse in double, single and half with 18, 12 and 8 real links;
//! then solves through the application's path with every method that applies, full and
//! even-odd, in double, single-double and half-double. Built only with `--features
//! gpu-tests`; every test opens the GPU first and fails loudly when there is none.
//!
//! Tolerances (relative, norm-wise, against the CPU's double result on the input as the GPU
//! stores it): double 1e-13 (summation order only); single 1e-6 (binary32 arithmetic and
//! links, as tests/gpu_fast.rs); half 1e-4 (the output, and in the Schur forms the odd
//! temporary, rounded to 16 bits: half a step, 1/65534 of a site's largest real, a few
//! 1e-5 norm-wise, and float arithmetic below that).

use qcd_solve::app::run::{build_problem, cpu_residual_of_d, solve_on, SolvePlan};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{CudaBackend, CudaOptions, Reconstruct, StencilVersion};
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{Layout, Precision, Subset};
use qcd_solve::config::LoadedConfig;
use qcd_solve::dirac::Action;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::solver::StopReason;
use std::path::PathBuf;

mod gpu_common;
use gpu_common::{cpu_tolerance, field, lattices, require_gpu, KAPPA, OPS};

/// The clover term alone, with a twist, and the twist alone (c_sw about the
/// non-perturbative value at beta 6.0; mu a light twisted quark's).
const ACTIONS: [(f64, f64); 3] = [(1.77, 0.0), (1.77, 0.05), (0.0, 0.05)];

/// A 3.0 backend on `gauge` with the site term of `action`.
fn gpu(gauge: &GaugeField, reconstruct: Reconstruct, action: &Action) -> CudaBackend {
    let mut g = gpu_common::gpu(gauge, reconstruct, 64);
    g.set_action(gauge, action).unwrap();
    assert!(g.has_site_term());
    g
}

/// The GPU's stored input and output of one operation, downloaded (double).
fn on_gpu<F>(
    g: &mut CudaBackend,
    host: &SpinorField,
    layout: Layout,
    f: F,
) -> (SpinorField, SpinorField)
where
    F: FnOnce(&mut CudaBackend, &mut <CudaBackend as Space>::Field, &<CudaBackend as Space>::Field),
{
    let x = field(g, host, layout);
    let mut y = g.alloc_layout(layout).unwrap();
    f(g, &mut y, &x);
    (g.download(&x).unwrap(), g.download(&y).unwrap())
}

/// The CPU backend's result of one operation on `x` (full double fields of `subset`).
fn on_cpu<F>(cpu: &mut CpuBackend, x: &SpinorField, subset: Subset, f: F) -> SpinorField
where
    F: FnOnce(
        &mut CpuBackend,
        &mut <CpuBackend<'_> as Space>::Field,
        &<CpuBackend<'_> as Space>::Field,
    ),
{
    let layout = Layout::new(subset, Precision::Double);
    let xc = field(cpu, x, layout);
    let mut yc = cpu.alloc_layout(layout).unwrap();
    f(cpu, &mut yc, &xc);
    cpu.download(&yc).unwrap()
}

#[test]
fn clover_and_twisted_operators_match_the_cpu_in_every_precision_and_link_form() {
    require_gpu();
    for l in lattices() {
        let gauge = GaugeField::random(&l, 2031);
        let psi = SpinorField::random(l.volume(), 9, 0);
        for (csw, mu) in ACTIONS {
            let action = Action {
                kappa: KAPPA,
                csw,
                mu,
            };
            let mut cpu = CpuBackend::with_action(&gauge, &action).unwrap();
            for r in Reconstruct::ALL {
                let mut g = gpu(&gauge, r, &action);
                for p in [Precision::Double, Precision::Single, Precision::Half] {
                    for op in OPS {
                        let lay = Layout::new(op.subset(), p);
                        for adjoint in [false, true] {
                            let (x, y) = on_gpu(&mut g, &psi, lay, |g, y, x| {
                                if adjoint {
                                    g.apply_adjoint(op, y, x).unwrap()
                                } else {
                                    g.apply(op, y, x).unwrap()
                                }
                            });
                            let want = on_cpu(&mut cpu, &x, op.subset(), |c, y, x| {
                                if adjoint {
                                    c.apply_adjoint(op, y, x).unwrap()
                                } else {
                                    c.apply(op, y, x).unwrap()
                                }
                            });
                            let rel = y.rel_diff(&want);
                            let what = format!(
                                "{} csw {csw} mu {mu} {r:?} {p:?} {op} adjoint {adjoint}",
                                l.dims_string()
                            );
                            eprintln!("{what}: {rel:.2e}");
                            assert!(rel <= cpu_tolerance(p), "{what}: {rel:e}");
                        }
                    }
                    for subset in [Subset::Even, Subset::Odd] {
                        let lay = Layout::new(subset, p);
                        let (x, y) =
                            on_gpu(&mut g, &psi, lay, |g, y, x| g.site_inverse(y, x).unwrap());
                        let want = on_cpu(&mut cpu, &x, subset, |c, y, x| {
                            c.site_inverse(y, x).unwrap()
                        });
                        let rel = y.rel_diff(&want);
                        let what = format!(
                            "{} csw {csw} mu {mu} {r:?} {p:?} A^-1 on {subset:?}",
                            l.dims_string()
                        );
                        assert!(rel <= cpu_tolerance(p), "{what}: {rel:e}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_wilson_action_installs_nothing_and_the_seed_versions_refuse_the_clover_term() {
    require_gpu();
    let l = &lattices()[0];
    let gauge = GaugeField::random(l, 5);
    let wilson = Action {
        kappa: KAPPA,
        csw: 0.0,
        mu: 0.0,
    };
    let mut g = gpu_common::gpu(&gauge, Reconstruct::R18, 64);
    g.set_action(&gauge, &wilson).unwrap();
    assert!(!g.has_site_term());
    let opts = CudaOptions {
        version: StencilVersion::V1_6_1,
        ..CudaOptions::default()
    };
    let mut seed = CudaBackend::new(&gauge, KAPPA, &opts).unwrap();
    let clover = Action { csw: 1.0, ..wilson };
    let e = seed.set_action(&gauge, &clover).unwrap_err().to_string();
    assert!(e.contains("clover"), "{e}");
}

/// A solve's config on a random gauge field on the GPU with kernel 3.0.
fn config(csw: f64, mu: f64, method: &str, precision: &str, pre: &str) -> LoadedConfig {
    config_with(csw, mu, method, precision, pre, "")
}

/// `config` with more text appended (e.g. a `[parallel]` table).
fn config_with(
    csw: f64,
    mu: f64,
    method: &str,
    precision: &str,
    pre: &str,
    extra: &str,
) -> LoadedConfig {
    let text = format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n[gauge]\ntype = \"random\"\nseed = 5\n\
         [dirac]\nkappa = 0.124\ncsw = {csw}\nmu = {mu}\n\
         [source]\ntype = \"random\"\nseed = 7\n[solver]\nmethod = \"{method}\"\n\
         tolerance = 1e-10\nmax_iterations = 4000\nprecision = \"{precision}\"\n\
         preconditioning = \"{pre}\"\n[backend]\ndevice = \"cuda\"\nkernel = \"3.0\"\n{extra}[output]\nreport = false\nsolution = false\n"
    );
    LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap()
}

#[test]
fn clover_and_twisted_solves_reach_tol_and_the_cpus_solution_by_every_method() {
    require_gpu();
    for (csw, mu) in ACTIONS {
        // CR needs a Hermitian g5 D: the plan refuses it with a twist.
        let methods: &[&str] = if mu == 0.0 {
            &["cr", "bicgstab", "gcr", "cgne"]
        } else {
            &["bicgstab", "gcr", "cgne"]
        };
        for method in methods {
            for pre in ["none", "even-odd"] {
                for precision in ["double", "single-double", "half-double"] {
                    let cfg = config(csw, mu, method, precision, pre);
                    let problem = build_problem(&cfg).unwrap();
                    let plan = SolvePlan::from_config(&cfg.config, true);
                    let opts = CudaOptions {
                        version: StencilVersion::V3_0,
                        ..CudaOptions::default()
                    };
                    let what = format!("csw {csw} mu {mu} {} ({precision})", plan.describe());
                    if plan
                        .check(qcd_solve::backend::Capabilities::of_stencil(opts.version))
                        .is_err()
                    {
                        // A combination the plan refuses for every action (e.g. a method
                        // without a half-precision path): not this file's subject.
                        eprintln!("{what}: refused by the plan");
                        continue;
                    }
                    let mut g = CudaBackend::new(&problem.gauge, problem.kappa, &opts).unwrap();
                    g.set_action(&problem.gauge, &problem.action()).unwrap();
                    let r = solve_on(&mut g, &problem, &plan).unwrap();
                    assert_eq!(r.reason, StopReason::Converged, "{what}");
                    // The residual of D x = b recomputed from scratch on the CPU (its own
                    // clover term): the GPU stopped on its true residual <= tol; the
                    // recomputation differs by rounding, far below the factor 2.
                    let tr = cpu_residual_of_d(&problem, &r.solution);
                    let mut cpu =
                        CpuBackend::with_action(&problem.gauge, &problem.action()).unwrap();
                    let c = solve_on(&mut cpu, &problem, &plan).unwrap();
                    let dx = r.solution.rel_diff(&c.solution);
                    eprintln!(
                        "{what}: {} iterations (CPU {}), true residual {tr:.2e}, |x - x_cpu| {dx:.1e}",
                        r.iterations, c.iterations
                    );
                    assert!(tr <= 2e-10, "{what}: true residual {tr:.3e}");
                    // Both solutions within tol of the system's: their difference is
                    // bounded by the condition number (tens here) times 2 tol.
                    assert!(dx <= 1e-7, "{what}: solutions differ by {dx:.3e}");
                }
            }
        }
    }
}

#[test]
fn split_clover_and_twisted_solves_follow_the_undecomposed_ones() {
    // The main job with the lattice split in two along t and along x and t, the ranks as
    // threads (on one GPU: sub-lattices exchanging faces by device copies), against the
    // same solve on one GPU: the same iteration count within 3 (the split sums in another
    // order), the CPU's true residual of D x = b <= 2 tol (as above).
    require_gpu();
    for (csw, mu) in [(1.77, 0.0), (1.77, 0.05)] {
        let method = if mu == 0.0 { "cr" } else { "bicgstab" };
        for pre in ["none", "even-odd"] {
            for precision in ["double", "single-double"] {
                let one = config(csw, mu, method, precision, pre);
                let whole = qcd_solve::app::run::run(&one).unwrap();
                for grid in ["[1, 1, 1, 2]", "[2, 1, 1, 2]"] {
                    let what = format!("csw {csw} mu {mu} {method} {pre} {precision} grid {grid}");
                    let cfg = config_with(
                        csw,
                        mu,
                        method,
                        precision,
                        pre,
                        &format!("[parallel]\ngrid = {grid}\n"),
                    );
                    let split = qcd_solve::app::run::run(&cfg).unwrap();
                    eprintln!(
                        "{what}: {} iterations (one GPU {}), true residual {:.2e}",
                        split.iterations, whole.iterations, split.true_residual_of_d_cpu
                    );
                    assert!(split.parallel.is_some(), "{what}: not split");
                    assert!(split.converged, "{what}");
                    assert!(split.true_residual_of_d_cpu <= 2e-10, "{what}");
                    assert!(
                        split.iterations.abs_diff(whole.iterations) <= 3,
                        "{what}: {} against {}",
                        split.iterations,
                        whole.iterations
                    );
                }
            }
        }
    }
}

#[test]
fn the_propagator_on_the_gpu_follows_the_cpus() {
    // `qcd-solve propagator` with the twisted clover on kernel 3.0 (BiCGStab, even-odd,
    // single-double: the fast path) and on the CPU backend (double), from the same point
    // source. Expected: every GPU column converged (true residual <= tol on the GPU) and
    // the pion within 1e-8 of the CPU's: each column is within about ten times tol of
    // the exact one (condition number), and C(t) sums their squares.
    require_gpu();
    let source = "[source]\ntype = \"point\"\nsite = [1, 0, 2, 3]\nspin = \"all\"\n\
                  colour = \"all\"\n";
    let dir = tempfile::tempdir().unwrap();
    let mut pions = Vec::new();
    for device in ["cuda", "cpu"] {
        let text = format!(
            "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n[gauge]\ntype = \"random\"\nseed = 5\n\
             [dirac]\nkappa = 0.124\ncsw = 1.0\nmu = 0.05\n{source}[solver]\n\
             method = \"bicgstab\"\ntolerance = 1e-10\nprecision = \"single-double\"\n\
             preconditioning = \"even-odd\"\n[backend]\ndevice = \"{device}\"\n\
             kernel = \"3.0\"\n"
        );
        let cfg =
            LoadedConfig::from_str(&text, &format!("{device}.toml"), PathBuf::from(".")).unwrap();
        let r = qcd_solve::app::propagator::run(&cfg, dir.path()).unwrap();
        eprintln!(
            "{device}: {}; iterations {:?}",
            r.backend,
            r.columns.iter().map(|c| c.iterations).collect::<Vec<_>>()
        );
        assert_eq!(r.columns.len(), 12);
        for c in &r.columns {
            assert!(c.true_residual <= 1e-10, "{device} {c:?}");
        }
        assert!(dir
            .path()
            .join(format!("{device}.propagator.npy"))
            .is_file());
        pions.push(r.pion);
    }
    for (t, (g, c)) in pions[0].iter().zip(&pions[1]).enumerate() {
        let d = (g - c).abs() / c.abs();
        eprintln!("t = {t}: GPU {g:.12e}, CPU {c:.12e}, relative {d:.1e}");
        assert!(d <= 1e-8, "t = {t}: {d:e}");
    }
}
