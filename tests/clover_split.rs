//! The clover term and the twisted mass on a split lattice on the CPU (ranks as threads
//! over the decomposed CPU backend, each with `SiteTerms::restrict` of the site term built
//! on the whole lattice). Where each expected value comes from:
//!
//! - the operators (D, g5 D, M_ee, g5 M_ee, their adjoints and A^-1 on either parity):
//!   the single-device `CpuBackend::with_action` on the whole lattice (itself checked
//!   against the reference operator and a second construction of A in tests/clover.rs and
//!   tests/twisted.rs); the decomposition changes only the order of the 8 hops' additions,
//!   so the gathered results agree to 1e-14 of the largest value (a few ulps);
//! - the restriction: the whole lattice's blocks at each rank's global sites, bit for bit
//!   (`SiteTerms::block`), since it is a copy;
//! - the solves: the same solve (`app::run::solve_on`, the same plan) on the single-device
//!   CPU backend; the split one runs through the app's own path
//!   (`app::parallel::solve_split`). Both stop at ||r||/||b|| <= 1e-10 and differ only
//!   in rounding, so the split solution must equal the single-device one to that
//!   tolerance (relative), and its residual of D (recomputed on the CPU with a freshly
//!   built A) must be below it too (2x for even-odd, whose full residual is at most ~2x
//!   the Schur system's: tests/clover.rs);
//! - the fields: a 4^3 x 8 random gauge field (`GaugeField::random`, seed 7) and PyQUDA's
//!   weak_field.lime (4^3 x 8) at PyQUDA's clover test's kappa 0.115, c_sw 1.17;
//! - the binary: `--grid 1,1,1,2 --csw 1.0 --device cpu` must converge (exit 0, report's
//!   converged, CPU residual of D below the tolerance), the split report present; the
//!   same under a launcher's variables (ranks as processes, GPUs only) is the README's
//!   exit code 2 naming `parallel.grid`.

mod clover_common;
use clover_common::*;
use qcd_solve::app::parallel::shares::partitions;
use qcd_solve::app::parallel::solve_split;
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cpu_decomposed::DecomposedCpu;
use qcd_solve::backend::cpu_decomposed::{gather_spinor, scatter_gauge, scatter_spinor};
use qcd_solve::backend::prelude::*;
use qcd_solve::comms::threads::run_ranks;
use qcd_solve::comms::Comms;
use qcd_solve::config::{LoadedConfig, Preconditioning};
use qcd_solve::dirac::clover::SiteTerms;
use qcd_solve::dirac::Action;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::partition::Partition;
use qcd_solve::linalg::{Layout, Operator, Precision, Subset};
use qcd_solve::solver::{Method, StopReason};
use qcd_solve::Result;
use std::path::PathBuf;
use std::process::Command;

const GRIDS: [[usize; 4]; 3] = [[1, 1, 1, 2], [2, 1, 1, 2], [1, 2, 2, 1]];
/// Operator results: max |diff| / max |value| at most this.
const OP_TOL: f64 = 1e-14;
/// The solves' tolerance, and the bound on the split solution's relative difference.
const TOL: f64 = 1e-10;

fn fields() -> [(&'static str, GaugeField); 2] {
    [
        ("random 4^3x8", GaugeField::random(&lattice(DIMS), 7)),
        ("weak_field.lime", weak_field()),
    ]
}

fn actions() -> [Action; 2] {
    [
        Action {
            kappa: 0.115,
            csw: 1.17,
            mu: 0.0,
        },
        Action {
            kappa: 0.115,
            csw: 1.17,
            mu: 0.05,
        },
    ]
}

fn max_abs(f: &SpinorField) -> f64 {
    f.data.iter().map(|z| z.norm()).fold(0.0, f64::max)
}

fn max_rel_diff(got: &SpinorField, want: &SpinorField) -> f64 {
    let d = got
        .data
        .iter()
        .zip(&want.data)
        .map(|(a, b)| (a - b).norm())
        .fold(0.0, f64::max);
    d / max_abs(want)
}

/// Every form with the site term, in double: D, g5 D (full), M_ee, g5 M_ee (even), each
/// by `apply` and `apply_adjoint`, and A^-1 on each parity (`site_inverse`). Each result
/// downloaded as a full field, with its name.
fn operator_results<S: WilsonKernels>(
    s: &mut S,
    a: &SpinorField,
) -> Result<Vec<(String, SpinorField)>> {
    assert!(s.has_site_term());
    let mut out = Vec::new();
    let a = s.upload(a)?;
    let field = |s: &mut S, subset: Subset| -> Result<S::Field> {
        let mut f = s.alloc_layout(Layout::new(subset, Precision::Double))?;
        s.convert(&mut f, &a)?;
        Ok(f)
    };
    for op in [
        Operator::D,
        Operator::G5D,
        Operator::Schur,
        Operator::G5Schur,
    ] {
        let x = field(s, op.subset())?;
        for adjoint in [false, true] {
            let mut y = s.alloc_layout(Layout::new(op.subset(), Precision::Double))?;
            if adjoint {
                s.apply_adjoint(op, &mut y, &x)?;
            } else {
                s.apply(op, &mut y, &x)?;
            }
            out.push((format!("{op} adjoint {adjoint}"), s.download(&y)?));
        }
    }
    for p in [0, 1] {
        let x = field(s, Subset::from_parity(p))?;
        let mut y = s.alloc_layout(Layout::new(Subset::from_parity(p), Precision::Double))?;
        s.site_inverse(&mut y, &x)?;
        out.push((format!("A^-1 parity {p}"), s.download(&y)?));
    }
    Ok(out)
}

/// Run `body` on every rank of `grid` with its decomposed backend carrying its part of
/// the site term built on the whole lattice.
fn on_ranks<T: Send>(
    gauge: &GaugeField,
    action: &Action,
    grid: [usize; 4],
    body: impl Fn(&mut DecomposedCpu<qcd_solve::comms::threads::ThreadComms>, &Partition) -> Result<T>
        + Sync,
) -> Vec<T> {
    let terms = SiteTerms::new(gauge, action).unwrap();
    run_ranks(grid.iter().product(), |comms| {
        let p = Partition::new(gauge.lattice.dims, grid, comms.rank())?;
        let local = scatter_gauge(gauge, &p)?;
        let mut be = DecomposedCpu::new(p.clone(), local, action.kappa, comms)?
            .with_site_terms(terms.restrict(&gauge.lattice, &p)?)?;
        body(&mut be, &p)
    })
    .unwrap()
}

#[test]
fn the_restriction_holds_each_ranks_sites_blocks() {
    let gauge = GaugeField::random(&lattice(DIMS), 7);
    let action = actions()[1];
    let terms = SiteTerms::new(&gauge, &action).unwrap();
    for grid in GRIDS {
        for p in partitions(DIMS, grid).unwrap() {
            let r = terms.restrict(&gauge.lattice, &p).unwrap();
            assert_eq!(r.volume(), DIMS.iter().product::<usize>() / p.ranks());
            assert_eq!(
                (r.kappa, r.csw, r.twist),
                (terms.kappa, terms.csw, terms.twist)
            );
            for x in 0..r.volume() {
                let g = p.global_site(x);
                assert_eq!(r.clover[x], terms.clover[g], "{grid:?} rank {}", p.rank());
                for b in 0..2 {
                    assert_eq!(r.block(x, b), terms.block(g, b));
                }
                let (psi, mut u, mut v) = (
                    SpinorField::random(1, x as u64, 0).data,
                    [qcd_solve::field::C64::new(0.0, 0.0); 12],
                    [qcd_solve::field::C64::new(0.0, 0.0); 12],
                );
                r.apply_site(x, &psi, &mut u, true, false);
                terms.apply_site(g, &psi, &mut v, true, false);
                assert_eq!(u, v, "A^-1 at {grid:?} rank {} site {x}", p.rank());
            }
        }
    }
    // A site term of another lattice is refused.
    let small = GaugeField::random(&lattice([4, 4, 4, 4]), 1);
    let t4 = SiteTerms::new(&small, &action).unwrap();
    let p = Partition::new(DIMS, [1, 1, 1, 2], 0).unwrap();
    assert!(t4.restrict(&small.lattice, &p).is_err());
}

#[test]
fn split_operators_match_the_single_device_ones() {
    for (what, gauge) in fields() {
        let a = SpinorField::random(gauge.lattice.volume(), 5, 0);
        for action in actions() {
            let mut whole = CpuBackend::with_action(&gauge, &action).unwrap();
            let want = operator_results(&mut whole, &a).unwrap();
            for grid in GRIDS {
                let per_rank = on_ranks(&gauge, &action, grid, |be, p| {
                    operator_results(be, &scatter_spinor(&a, p)?)
                });
                let parts = partitions(DIMS, grid).unwrap();
                let mut worst = 0.0f64;
                for (k, (name, w)) in want.iter().enumerate() {
                    let pieces: Vec<SpinorField> =
                        per_rank.iter().map(|r| r[k].1.clone()).collect();
                    let got = gather_spinor(&pieces, &parts).unwrap();
                    let d = max_rel_diff(&got, w);
                    assert!(max_abs(w) > 0.1, "{what} {grid:?} {name}: a zero result");
                    assert!(
                        d <= OP_TOL,
                        "{what} mu {} grid {grid:?} {name}: max|diff|/max|value| = {d:.3e}",
                        action.mu
                    );
                    worst = worst.max(d);
                }
                eprintln!("{what} mu {} grid {grid:?}: worst {worst:.2e}", action.mu);
            }
        }
    }
}

/// The config of a split solve as the app reads it: the same [solver] as
/// `clover_common::plan` (tolerance, 4000 iterations) on `grid`, on the CPU.
fn split_config(
    action: &Action,
    method: Method,
    pre: Preconditioning,
    single: bool,
    grid: [usize; 4],
) -> LoadedConfig {
    let text = format!(
        "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n[gauge]\ntype = \"unit\"\n\
         [dirac]\nkappa = {:?}\ncsw = {:?}\nmu = {:?}\n\
         [source]\ntype = \"random\"\nseed = 1\n\
         [solver]\nmethod = \"{}\"\npreconditioning = \"{}\"\nprecision = \"{}\"\n\
         tolerance = {TOL:?}\nmax_iterations = 4000\n[backend]\ndevice = \"cpu\"\n\
         [parallel]\ngrid = {grid:?}\n[output]\n",
        DIMS[0],
        DIMS[1],
        DIMS[2],
        DIMS[3],
        action.kappa,
        action.csw,
        action.mu,
        method.name(),
        match pre {
            Preconditioning::None => "none",
            Preconditioning::EvenOdd => "even-odd",
        },
        if single { "single-double" } else { "double" },
    );
    let cfg = LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap();
    assert_eq!(cfg.config.solver.method, method);
    assert_eq!(cfg.config.solver.preconditioning, pre);
    cfg
}

#[test]
fn split_solves_match_the_single_device_solves() {
    for (what, gauge) in fields() {
        let source = SpinorField::random(gauge.lattice.volume(), 21, 0);
        for action in actions() {
            let methods: &[Method] = if action.mu == 0.0 {
                &[Method::Bicgstab, Method::Cr]
            } else {
                &[Method::Bicgstab, Method::Gcr, Method::Cgne]
            };
            for &method in methods {
                for pre in [Preconditioning::None, Preconditioning::EvenOdd] {
                    for single in [false, true] {
                        let name =
                            format!("{what} mu {} {method} {pre:?} single {single}", action.mu);
                        let mut p = problem(&gauge, &action, source.clone());
                        // Expected: the single-device CPU solve.
                        let want = solve(&mut p, method, pre, single, TOL);
                        assert_eq!(want.reason, StopReason::Converged, "{name}");
                        for grid in GRIDS {
                            let cfg = split_config(&action, method, pre, single, grid);
                            let parts = partitions(DIMS, grid).unwrap();
                            let got = solve_split(&cfg, &p, &parts).unwrap().result;
                            let d = got.solution.rel_diff(&want.solution);
                            let r = qcd_solve::app::run::cpu_residual_of_d(&p, &got.solution);
                            eprintln!(
                                "{name} grid {grid:?}: {} iterations (single device {}), \
                                 |x - x_1|/|x_1| {d:.2e}, residual of D {r:.2e}",
                                got.iterations, want.iterations
                            );
                            assert_eq!(got.reason, StopReason::Converged, "{name} {grid:?}");
                            assert!(d <= TOL, "{name} {grid:?}: solution differs by {d:.3e}");
                            let bound = if pre == Preconditioning::EvenOdd {
                                2.0 * TOL
                            } else {
                                TOL
                            };
                            assert!(r <= bound, "{name} {grid:?}: residual of D {r:.3e}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_binary_solves_a_split_clover_problem_on_the_cpu() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("run.toml");
    let report = d.path().join("r.json");
    std::fs::write(
        &cfg,
        format!(
            "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
             [dirac]\nkappa = 0.12\n\n[source]\ntype = \"random\"\nseed = 4\n\n\
             [solver]\ntolerance = 1e-10\n\n[output]\nreport = \"{}\"\n",
            report.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("LOCAL_RANK")
        .env_remove("QCD_SOLVE_MASTER")
        .arg("--quiet")
        .arg(&cfg)
        .args(["--grid", "1,1,1,2", "--csw", "1.0", "--device", "cpu"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {err}", out.status.code());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let res = r["true_residual_of_d_cpu"].as_f64().unwrap();
    eprintln!(
        "binary: {} iterations, residual of D {res:.2e}, grid {}",
        r["iterations"], r["parallel"]["grid"]
    );
    assert_eq!(r["converged"], serde_json::Value::Bool(true));
    assert!(res <= 1e-10, "{res:e}");
    assert!(r["parallel"].is_object(), "no split report: {r}");

    // Launched ranks build their term from their links and a ring of their neighbours'
    // (the GPU run is in tests/gpu_clover.rs and validate/clover.sh): the term is not
    // refused; on the CPU a launched rank is refused by `backend.device` (one process a
    // GPU), before the rendezvous.
    std::fs::remove_file(&report).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", "0")
        .env("QCD_SOLVE_MASTER", "127.0.0.1:1")
        .arg("--quiet")
        .arg(&cfg)
        .args(["--grid", "1,1,1,2", "--csw", "1.0", "--device", "cpu"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "launched: {err}");
    assert!(
        err.contains("backend.device") && !err.contains("c_sw"),
        "{err}"
    );
    assert!(!report.exists(), "a launched clover run wrote a report");
}

#[test]
fn scale_runs_the_clover_term_and_the_twist_over_ranks_and_threads() {
    // `scale` solves the config's action. Expected: strong scaling solves one problem, so
    // every strong row (the undecomposed solve, then 1 and 2 ranks) takes the same
    // iterations (the split changes only rounding), as for Wilson in tests/parallel.rs;
    // the twist with BiCGStab. Thread scaling takes the same iterations at 1 and 2
    // threads (the same arithmetic).
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("run.toml");
    std::fs::write(
        &cfg,
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
         [dirac]\nkappa = 0.12\ncsw = 1.2\nmu = 0.02\n\n[source]\ntype = \"random\"\nseed = 4\n\n\
         [solver]\nmethod = \"bicgstab\"\ntolerance = 1e-10\n\n[backend]\ndevice = \"cpu\"\n",
    )
    .unwrap();
    let run = |args: &[&str], out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
            .env_remove("WORLD_SIZE")
            .arg("--quiet")
            .arg("scale")
            .arg(&cfg)
            .args(args)
            .arg("--out")
            .arg(d.path().join(out))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "{args:?}: exit {:?}: {err}",
            o.status.code()
        );
    };
    run(&["--gpus", "1,2"], "ranks");
    let rows: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("ranks/scale-ranks.json")).unwrap(),
    )
    .unwrap();
    let strong: Vec<u64> = rows
        .iter()
        .filter(|r| r["kind"] == "strong")
        .map(|r| r["iterations"].as_u64().unwrap())
        .collect();
    eprintln!("strong iterations: {strong:?}");
    assert_eq!(strong.len(), 3);
    assert!(
        strong.iter().all(|&n| n == strong[0] && n > 0),
        "{strong:?}"
    );
    run(&["--threads", "1,2"], "threads");
    let threads = std::fs::read_to_string(d.path().join("threads/scale.csv")).unwrap();
    let iterations: Vec<&str> = threads
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap())
        .collect();
    eprintln!("{threads}");
    assert_eq!(iterations.len(), 2);
    assert_eq!(iterations[0], iterations[1]);
}
