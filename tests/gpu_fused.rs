#![cfg(feature = "gpu-tests")]
//! GPU execution tests of the fused CR iteration's element-wise kernels (cr_fused.cu) and
//! of `repeat` with CUDA graphs (built only with `--features gpu-tests`; CI has no GPU).
//! Every test opens the GPU first and fails loudly when there is none.
//!
//! Expected values: the CPU backend's cr_update_xr / cr_update_p on the same fields and
//! scalars (the field updates round identically: both compute y + a*x without FMA; the
//! norms differ only in summation order, so 1e-13 relative).

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{device_info, CudaBackend, CudaOptions, StencilVersion};
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::CrScalars;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::{Error, Result};

fn require_gpu() {
    match device_info() {
        Ok(info) => eprintln!("GPU: {} (sm_{}{})", info.name, info.cc.0, info.cc.1),
        Err(e) => panic!("the gpu tests need an NVIDIA GPU with its driver and libnvrtc: {e}"),
    }
}

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

fn gpu(g: &GaugeField, version: StencilVersion) -> CudaBackend {
    let opts = CudaOptions {
        version,
        ..CudaOptions::default()
    };
    CudaBackend::new(g, 0.124, &opts).expect("opening the GPU backend")
}

fn scalars() -> CrScalars {
    CrScalars {
        rar: C64::new(2.5, -0.75),
        apap: 1.0,
        nr: 1e6,
        eps: 1e-20,
        alpha: C64::new(0.37, -1.25),
        beta: C64::new(-0.61, 0.44),
        iter: 2,
        max_iter: 100,
        active: true,
    }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

fn field_rel(a: &SpinorField, b: &SpinorField) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in a.data.iter().zip(&b.data) {
        num += (x - y).norm_sqr();
        den += y.norm_sqr();
    }
    (num / den).sqrt()
}

fn assert_scalars_close(g: &CrScalars, c: &CrScalars, what: &str) {
    for (name, a, b) in [
        ("nr", g.nr, c.nr),
        ("apap", g.apap, c.apap),
        ("alpha.re", g.alpha.re, c.alpha.re),
        ("alpha.im", g.alpha.im, c.alpha.im),
    ] {
        assert!(
            rel(a, b) < 1e-13,
            "{what}: {name} {a} vs CPU {b} ({:.1e})",
            rel(a, b)
        );
    }
    assert_eq!(g.rar, c.rar, "{what}: rar");
    assert_eq!(g.beta, c.beta, "{what}: beta");
    assert_eq!(g.eps, c.eps, "{what}: eps");
    assert_eq!(g.iter, c.iter, "{what}: iter");
    assert_eq!(g.max_iter, c.max_iter, "{what}: max_iter");
    assert_eq!(g.active, c.active, "{what}: active");
}

/// Five random fields: x, r, p, Ap, Ar.
fn fields(l: &Lattice, seed: u64) -> Vec<SpinorField> {
    (0..5)
        .map(|k| SpinorField::random(l.volume(), seed, (k as u64) << 40))
        .collect()
}

/// One xr then one p update on any backend; returns the downloaded x, r, p, Ap, the
/// scalars after each kernel and the history.
fn xr_then_p<B: Backend>(
    be: &mut B,
    host: &[SpinorField],
    s: &CrScalars,
) -> (Vec<SpinorField>, CrScalars, CrScalars, Vec<f64>) {
    let mut f: Vec<B::Field> = host.iter().map(|h| be.upload(h).unwrap()).collect();
    let mut st = be.cr_state(s).unwrap();
    let [x, r, p, ap, ar] = f.as_mut_slice() else {
        unreachable!()
    };
    be.cr_update_xr(&mut st, p, ap, x, r).unwrap();
    let after_xr = be.cr_get(&st).unwrap();
    be.cr_update_p(&mut st, r, ar, p, ap).unwrap();
    let after_p = be.cr_get(&st).unwrap();
    let hist = be.cr_history(&st).unwrap();
    let out = f[..4].iter().map(|d| be.download(d).unwrap()).collect();
    (out, after_xr, after_p, hist)
}

#[test]
fn fused_updates_match_the_cpu_backend() {
    require_gpu();
    // 4^4: one block; 8^4 x 12 = 49152 complex: 24 blocks; 16^3 x 8 (393216): 192 blocks.
    for dims in [[4, 4, 4, 4], [8, 8, 8, 8], [16, 16, 16, 8]] {
        let l = lattice(dims);
        let g = GaugeField::random(&l, 3);
        let host = fields(&l, 17);
        let s = scalars();
        let mut cpu = CpuBackend::new(&g, 0.124);
        let mut gpu = gpu(&g, StencilVersion::V3_0);
        let (cf, c_xr, c_p, c_hist) = xr_then_p(&mut cpu, &host, &s);
        let (gf, g_xr, g_p, g_hist) = xr_then_p(&mut gpu, &host, &s);
        let what = format!("{dims:?}");
        for (k, name) in ["x", "r", "p", "Ap"].iter().enumerate() {
            let d = field_rel(&gf[k], &cf[k]);
            assert!(
                d < 1e-15,
                "{what}: field {name} differs from the CPU by {d:.1e}"
            );
        }
        assert_scalars_close(&g_xr, &c_xr, &format!("{what} after xr"));
        assert_scalars_close(&g_p, &c_p, &format!("{what} after p"));
        assert_eq!(g_xr.iter, 3);
        assert_eq!(g_hist.len(), 4);
        assert!(g_hist[..2].iter().all(|h| h.is_nan()) && c_hist[..2].iter().all(|h| h.is_nan()));
        for k in 2..4 {
            assert!(rel(g_hist[k], c_hist[k]) < 1e-13, "{what}: history {k}");
        }
    }
}

#[test]
fn inactive_and_stopping_blocks_match_the_cpu_backend() {
    require_gpu();
    let l = lattice([4, 4, 4, 8]);
    let g = GaugeField::random(&l, 5);
    let host = fields(&l, 23);
    for (what, s) in [
        (
            "inactive",
            CrScalars {
                active: false,
                ..scalars()
            },
        ),
        (
            "last iteration",
            CrScalars {
                iter: 99,
                ..scalars()
            },
        ),
        (
            "converging",
            CrScalars {
                eps: 1e9,
                ..scalars()
            },
        ),
    ] {
        let mut cpu = CpuBackend::new(&g, 0.124);
        let mut gpu = gpu(&g, StencilVersion::V3_0);
        let (cf, c_xr, c_p, c_hist) = xr_then_p(&mut cpu, &host, &s);
        let (gf, g_xr, g_p, g_hist) = xr_then_p(&mut gpu, &host, &s);
        for k in 0..4 {
            assert!(field_rel(&gf[k], &cf[k]) < 1e-15, "{what}: field {k}");
        }
        assert_scalars_close(&g_xr, &c_xr, what);
        assert_scalars_close(&g_p, &c_p, what);
        assert_eq!(g_hist.len(), c_hist.len(), "{what}");
    }
}

#[test]
fn fused_updates_are_bitwise_reproducible() {
    require_gpu();
    let l = lattice([16, 16, 16, 16]); // 786432 complex: 384 blocks
    let g = GaugeField::unit(&l);
    let host = fields(&l, 29);
    let mut gpu = gpu(&g, StencilVersion::V3_0);
    let a = xr_then_p(&mut gpu, &host, &scalars());
    let b = xr_then_p(&mut gpu, &host, &scalars());
    for k in 0..4 {
        assert_eq!(a.0[k].data, b.0[k].data, "field {k}");
    }
    assert_eq!(a.1.nr.to_bits(), b.1.nr.to_bits());
    assert_eq!(a.2.apap.to_bits(), b.2.apap.to_bits());
    assert_eq!(a.2, b.2);
}

/// k fused iterations (xr, p) on the GPU, through `repeat` (a graph) or directly; returns
/// the scalars after each batch and the final fields.
fn iterate(
    gpu: &mut CudaBackend,
    host: &[SpinorField],
    batches: usize,
    k: usize,
    graph: bool,
) -> (Vec<CrScalars>, Vec<SpinorField>) {
    let mut f: Vec<_> = host.iter().map(|h| gpu.upload(h).unwrap()).collect();
    let mut st = gpu.cr_state(&scalars()).unwrap();
    let mut seen = Vec::new();
    for _ in 0..batches {
        {
            let [x, r, p, ap, ar] = f.as_mut_slice() else {
                unreachable!()
            };
            let mut body = |b: &mut CudaBackend| -> Result<()> {
                b.cr_update_xr(&mut st, p, ap, x, r)?;
                b.cr_update_p(&mut st, r, ar, p, ap)
            };
            if graph {
                gpu.repeat(42, k, &mut body).unwrap();
            } else {
                for _ in 0..k {
                    body(&mut *gpu).unwrap();
                }
            }
        }
        seen.push(gpu.cr_get(&st).unwrap());
    }
    gpu.forget_graphs();
    let out = f.iter().map(|d| gpu.download(d).unwrap()).collect();
    (seen, out)
}

/// cr_load (the start of a run's fields in one pass) against its definition, the copy and
/// three zeroings it replaces: on fields holding other values, r must equal rhs bit for
/// bit and x, p, Ap be zero, in double and in single (even half fields).
#[test]
fn cr_load_copies_the_rhs_and_zeroes_the_rest() {
    use qcd_solve::backend::{Layout, Precision, Subset};
    require_gpu();
    let l = lattice([4, 4, 6, 8]);
    let g = GaugeField::random(&l, 5);
    let mut be = gpu(&g, StencilVersion::V3_0);
    let f = fields(&l, 7);
    for prec in [Precision::Double, Precision::Single] {
        let layout = Layout::new(Subset::Even, prec);
        let mut load = |k: usize| {
            let full = be.upload(&f[k]).unwrap();
            let mut h = be.alloc_layout(layout).unwrap();
            be.convert(&mut h, &full).unwrap();
            h
        };
        let (rhs, mut r, mut x, mut p, mut ap) = (load(0), load(1), load(2), load(3), load(4));
        be.cr_load(&rhs, &mut r, &mut x, &mut p, &mut ap).unwrap();
        assert_eq!(be.download(&r).unwrap(), be.download(&rhs).unwrap());
        let zero = SpinorField::zeros(l.volume());
        for (name, z) in [("x", &x), ("p", &p), ("Ap", &ap)] {
            assert_eq!(be.download(z).unwrap(), zero, "{prec:?} {name}");
        }
    }
}

#[test]
fn a_graph_gives_the_scalars_of_the_launches_it_records() {
    require_gpu();
    let l = lattice([8, 8, 8, 8]);
    let g = GaugeField::unit(&l);
    // Small fields so that the iteration stays finite for a while.
    let host: Vec<SpinorField> = fields(&l, 31)
        .into_iter()
        .map(|mut f| {
            f.data.iter_mut().for_each(|z| *z *= 0.05);
            f
        })
        .collect();
    let mut gpu = gpu(&g, StencilVersion::V3_0);
    gpu.reset_stats().unwrap();
    // 3 batches of 4: the first captures, the others replay the cached graph.
    let (with, fw) = iterate(&mut gpu, &host, 3, 4, true);
    let stats = gpu.kernel_stats();
    let graph = stats
        .iter()
        .find(|s| s.name == "cr graph")
        .expect("a cr graph stat");
    assert_eq!(graph.launches, 3);
    assert!(graph.millis > 0.0);
    let n = (l.volume() * 12) as u64;
    assert!(graph.bytes >= 3 * 4 * 2 * 6 * 16 * n, "{graph:?}");
    assert!(
        !stats
            .iter()
            .any(|s| s.name.starts_with("cr_xr") && s.launches > 0),
        "captured launches were booked one by one: {stats:?}"
    );
    let (without, fo) = iterate(&mut gpu, &host, 3, 4, false);
    assert_eq!(with, without);
    assert_eq!(with[2].iter, 2 + 12);
    for k in 0..5 {
        assert_eq!(fw[k].data, fo[k].data, "field {k}");
    }
}

#[test]
fn a_body_that_reads_to_the_host_cannot_be_captured() {
    require_gpu();
    let l = lattice([4, 4, 4, 4]);
    let g = GaugeField::unit(&l);
    let mut gpu = gpu(&g, StencilVersion::V3_0);
    let st = gpu.cr_state(&scalars()).unwrap();
    let e = gpu
        .repeat(1, 2, &mut |b: &mut CudaBackend| b.cr_get(&st).map(|_| ()))
        .unwrap_err();
    match e {
        Error::Cuda(m) => assert!(m.contains("captur"), "{m}"),
        other => panic!("expected Error::Cuda, got {other}"),
    }
    // The stream works after the failed capture.
    assert_eq!(gpu.cr_get(&st).unwrap(), scalars());
}

#[test]
fn seed_versions_refuse_the_fused_iteration_by_name() {
    require_gpu();
    let l = lattice([4, 4, 4, 4]);
    let g = GaugeField::unit(&l);
    let mut gpu = gpu(&g, StencilVersion::V1_5);
    match gpu.cr_state(&scalars()) {
        Err(Error::InvalidValue { message, .. }) => {
            assert!(message.contains("fused CR"), "{message}")
        }
        other => panic!("expected a refusal, got {:?}", other.err()),
    }
}

/// The whole fused solve on the GPU: the residual history of the seed's CR on the same
/// backend to rounding (issue 6: "the same residual history as the seed path"), and the
/// same bits when run twice (single-pass reductions finished by the last block), also for
/// even-odd with single-double through the main job's solve_on.
#[test]
fn fused_solve_follows_the_seed_history_and_repeats_bitwise() {
    use qcd_solve::app::run::{solve_on, Problem, SolvePlan};
    use qcd_solve::backend::Operator;
    use qcd_solve::solver::{conjugate_residual, fused_cr, CrParams, FusedParams, StopReason};
    require_gpu();
    let l = lattice([8, 8, 8, 16]);
    let g = GaugeField::random(&l, 7);
    let src = SpinorField::random(l.volume(), 8, 0);
    let mut be = gpu(&g, StencilVersion::V3_0);
    let b = be.upload(&src.gamma5()).unwrap();
    let seed = conjugate_residual(&mut be, Operator::G5D, &b, &CrParams::new(1e-10, 1000)).unwrap();
    assert_eq!(seed.reason, StopReason::Converged);
    let fp = FusedParams {
        check_every: 10,
        ..FusedParams::new(1e-10, 1000)
    };
    let mut runs = vec![];
    for _ in 0..2 {
        let (out, _) = fused_cr(&mut be, Operator::G5D, &b, &fp, &mut |_, _| {}).unwrap();
        assert_eq!(out.reason, StopReason::Converged);
        let x = be.download(&out.x).unwrap();
        runs.push((out.history, x));
    }
    let (hist, x) = &runs[0];
    assert!(
        hist.len().abs_diff(seed.history.len()) <= 1,
        "fused {} vs seed {} iterations",
        hist.len() - 1,
        seed.history.len() - 1
    );
    let worst = hist
        .iter()
        .zip(&seed.history)
        .map(|(f, s)| rel(*f, *s))
        .fold(0.0, f64::max);
    eprintln!(
        "fused vs seed history on the GPU: {worst:.2e} over {} iterations",
        hist.len() - 1
    );
    assert!(worst <= 1e-8, "fused vs seed history: {worst:.2e}");
    assert_eq!(runs[0].0, runs[1].0, "history bits differ between two runs");
    assert_eq!(
        x.data, runs[1].1.data,
        "solution bits differ between two runs"
    );

    let p = gauge_problem(&l, g.clone(), src.clone());
    let mut plan = SolvePlan::seed(CrParams::new(1e-10, 1000));
    plan.fused = true;
    plan.preconditioning = qcd_solve::config::Preconditioning::EvenOdd;
    plan.precision = qcd_solve::backend::Precision::Single;
    plan.check_every = 5;
    let a = solve_on(&mut be, &p, &plan).unwrap();
    let c = solve_on(&mut be, &p, &plan).unwrap();
    assert_eq!(a.reason, StopReason::Converged);
    assert_eq!(a.history, c.history, "even-odd single-double history bits");
    assert_eq!(
        a.solution.data, c.solution.data,
        "even-odd single-double solution bits"
    );
    assert!(a.true_residual <= 1.5e-10, "{}", a.true_residual);

    fn gauge_problem(l: &Lattice, gauge: GaugeField, source: SpinorField) -> Problem {
        Problem {
            lattice: l.clone(),
            plaquette: gauge.plaquette(),
            link_trace: gauge.link_trace(),
            gauge,
            gauge_description: "random".into(),
            gauge_reunitarised: None,
            kappa: 0.124,
            csw: 0.0,
            mu: 0.0,
            operator: Operator::G5D,
            source,
            source_description: "random".into(),
            gauge_fixing: None,
            setup_seconds: 0.0,
        }
    }
}
