#![cfg(feature = "gpu-tests")]
//! GPU tests of the batched operator (`CudaBackend::apply_batch`, kernel 3.0's batch entries
//! in kernels/stencil_v3.cu): for 1, 3, 12 and 16 right-hand sides, every operator form (D,
//! g5 D, the Schur operator M_ee and g5 M_ee), the Wilson, clover and twisted-clover
//! actions, 18, 12 and 8 real links and double, single and half fields, each right-hand
//! side of a batch against `apply` on it alone on the same GPU and against the CPU
//! backend's operator (whose correctness tests/clover.rs, tests/twisted.rs and the Wilson
//! tests hold to closed forms and other codes); then the refusals. Built only with
//! `--features gpu-tests`; every test opens the GPU first and fails loudly when there is
//! none.
//!
//! Tolerances (relative, norm-wise):
//! - against `apply` on the same GPU: double 1e-15 and single 1e-6 (the batch entries run
//!   the one-right-hand-side code with the same arithmetic, bit for bit in the CPU
//!   emulation, validate/emu/emu_batch.cpp; the bound leaves room only for a compiler
//!   contracting an operation differently in the two entries), half 1e-4 (a flip of the
//!   last float bit can move a stored 16-bit value by one step, 1/32767 of the site's
//!   largest real). The test prints how many columns came out bit for bit.
//! - against the CPU's double result on the input as the GPU stores it: double 1e-13
//!   (summation order), single 1e-6, half 1e-4 (tests/gpu_clover.rs's bounds, the same
//!   arithmetic).

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{
    CudaBackend, CudaOptions, DeviceSpinor, Reconstruct, StencilVersion,
};
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{Layout, Operator, Precision, Subset};
use qcd_solve::dirac::Action;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::Error;

mod gpu_common;
use gpu_common::{cpu_tolerance, field, lattices, require_gpu, KAPPA, OPS};

/// The batch's argument forms: the outputs and the inputs by reference.
fn refs_mut(v: &mut [DeviceSpinor]) -> Vec<&mut DeviceSpinor> {
    v.iter_mut().collect()
}
fn refs(v: &[DeviceSpinor]) -> Vec<&DeviceSpinor> {
    v.iter().collect()
}

/// The module comment's tolerance against `apply` on the same GPU.
fn same_gpu_tolerance(p: Precision) -> f64 {
    match p {
        Precision::Double => 1e-15,
        Precision::Single => 1e-6,
        Precision::Half => 1e-4,
    }
}

/// Wilson, the clover term (c_sw about the non-perturbative value at beta 6.0) and the
/// twisted clover term (mu a light twisted quark's).
const ACTIONS: [(f64, f64); 3] = [(0.0, 0.0), (1.77, 0.0), (1.77, 0.05)];

/// The batch sizes: a few, and a point source's 12 columns (one and `BATCH_MAX` are in the
/// kernel emulation, validate/emu/emu_batch.cpp, as is half precision; every size and
/// precision here made the test run past the device's five minutes).
const COUNTS: [usize; 2] = [3, 12];

/// The CPU backend's op on `x` (full double fields of `subset`).
fn on_cpu(cpu: &mut CpuBackend, op: Operator, x: &SpinorField) -> SpinorField {
    let layout = Layout::new(op.subset(), Precision::Double);
    let xc = field(cpu, x, layout);
    let mut yc = cpu.alloc_layout(layout).unwrap();
    cpu.apply(op, &mut yc, &xc).unwrap();
    cpu.download(&yc).unwrap()
}

#[test]
fn a_batch_equals_its_columns_applied_one_by_one_and_the_cpu() {
    require_gpu();
    let (mut columns, mut identical) = (0usize, 0usize);
    for l in lattices() {
        let gauge = GaugeField::random(&l, 2041);
        let sources: Vec<SpinorField> = (0..16)
            .map(|k| SpinorField::random(l.volume(), 300 + k as u64, 0))
            .collect();
        for (csw, mu) in ACTIONS {
            let action = Action {
                kappa: KAPPA,
                csw,
                mu,
            };
            let mut cpu = CpuBackend::with_action(&gauge, &action).unwrap();
            for r in Reconstruct::ALL {
                let mut g = gpu_common::gpu(&gauge, r, 64);
                g.set_action(&gauge, &action).unwrap();
                for p in [Precision::Double, Precision::Single] {
                    for op in OPS {
                        let lay = Layout::new(op.subset(), p);
                        for n in COUNTS {
                            let inps: Vec<DeviceSpinor> =
                                sources[..n].iter().map(|s| field(&mut g, s, lay)).collect();
                            let mut outs: Vec<DeviceSpinor> =
                                (0..n).map(|_| g.alloc_layout(lay).unwrap()).collect();
                            g.apply_batch(op, &mut refs_mut(&mut outs), &refs(&inps))
                                .unwrap();
                            for k in 0..n {
                                let mut one = g.alloc_layout(lay).unwrap();
                                g.apply(op, &mut one, &inps[k]).unwrap();
                                let got = g.download(&outs[k]).unwrap();
                                let want = g.download(&one).unwrap();
                                let x = g.download(&inps[k]).unwrap();
                                let what = format!(
                                    "{} csw {csw} mu {mu} {r:?} {p:?} {op} batch {n} column {k}",
                                    l.dims_string()
                                );
                                let rel = got.rel_diff(&want);
                                assert!(rel <= same_gpu_tolerance(p), "{what}: vs apply {rel:e}");
                                columns += 1;
                                identical += (got.data == want.data) as usize;
                                let rel = got.rel_diff(&on_cpu(&mut cpu, op, &x));
                                assert!(rel <= cpu_tolerance(p), "{what}: vs CPU {rel:e}");
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!("{identical} of {columns} columns bit for bit the one-right-hand-side apply's");
}

#[test]
fn a_batch_is_refused_with_a_clear_error() {
    require_gpu();
    let l = &lattices()[0];
    let gauge = GaugeField::random(l, 2042);
    let psi = SpinorField::random(l.volume(), 7, 0);
    let mut g = gpu_common::gpu(&gauge, Reconstruct::R18, 64);
    let full = Layout::new(Subset::Full, Precision::Double);
    let single = Layout::new(Subset::Full, Precision::Single);
    let even = Layout::new(Subset::Even, Precision::Double);
    let mut of = |lay: Layout, n: usize| -> Vec<DeviceSpinor> {
        (0..n).map(|_| field(&mut g, &psi, lay)).collect()
    };
    let (x17, mut y17) = (of(full, 17), of(full, 17));
    let (xs, mut ys) = (of(single, 1), of(full, 1));
    let (xe, mut ye) = (of(even, 2), of(even, 2));
    let mut y2 = of(full, 2);
    let x3 = of(full, 3);
    let expect = |r: qcd_solve::Result<()>, needle: &str| match r {
        Err(Error::InvalidValue { key, message }) => {
            assert_eq!(key, "batch", "{message}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
        other => panic!("expected a refusal naming {needle:?}, got {other:?}"),
    };
    // No right-hand side, and one more than the most.
    expect(g.apply_batch(Operator::D, &mut [], &[]), "got 0");
    expect(
        g.apply_batch(Operator::D, &mut refs_mut(&mut y17), &refs(&x17)),
        "got 17",
    );
    // An output per input; one precision; the operator's subset.
    expect(
        g.apply_batch(Operator::D, &mut refs_mut(&mut y2), &refs(&x3)),
        "2 outputs for 3 inputs",
    );
    expect(
        g.apply_batch(Operator::D, &mut refs_mut(&mut ys), &refs(&xs)),
        "one layout",
    );
    expect(
        g.apply_batch(Operator::D, &mut refs_mut(&mut ye), &refs(&xe)),
        "acts on Full fields",
    );
    // A seed version has no batch entries: refused by name, nothing launched.
    let opts = CudaOptions {
        version: StencilVersion::V1_6_1,
        ..CudaOptions::default()
    };
    let mut seed = CudaBackend::new(&gauge, KAPPA, &opts).unwrap();
    let x = vec![seed.upload(&psi).unwrap()];
    let mut y = vec![seed.alloc().unwrap()];
    match seed.apply_batch(Operator::D, &mut refs_mut(&mut y), &refs(&x)) {
        Err(Error::InvalidValue { message, .. }) => {
            assert!(message.contains("the batched operator"), "{message}")
        }
        other => panic!("a seed version ran a batch: {other:?}"),
    }
}

#[test]
fn a_batched_solve_is_each_columns_own_solve_and_mixed_batches_converge() {
    // Twelve point-source columns on a random 4^3x8 field with the clover term, solved as
    // one batch (solver::batch: the batched operator; CR and BiCGStab with host scalars,
    // BiCGStab through the fused passes with graphs) against each column solved alone by
    // the same method and engine on the same GPU (solver::solve). Expected:
    // the same iterations and solutions within 1e-12 relative (the same arithmetic step by
    // step; the bound leaves room for the batch entry's compilation contracting an
    // operation differently, which the Krylov recurrence can carry; the test prints how
    // many came out bit for bit). Then single-double batches: every column's true
    // residual ||b - D x|| / ||b|| in double at most the tolerance.
    use qcd_solve::solver::batch::solve_batch;
    use qcd_solve::solver::{solve, true_residual, Method, SolveSpec, StopReason, StopRules};
    require_gpu();
    let l = &lattices()[0];
    let gauge = GaugeField::random(l, 4242);
    let action = Action {
        kappa: KAPPA,
        csw: 1.77,
        mu: 0.0,
    };
    let sources: Vec<SpinorField> = (0..12)
        .map(|k| SpinorField::point(l, [1, 2, 3, 5], k / 3, k % 3))
        .collect();
    let mut g = gpu_common::gpu(&gauge, Reconstruct::R18, 64);
    g.set_action(&gauge, &action).unwrap();
    let mut bitwise = 0;
    for (method, fused) in [
        (Method::Cr, false),
        (Method::Bicgstab, false),
        (Method::Bicgstab, true),
    ] {
        let mut spec = SolveSpec::new(method, StopRules::new(1e-10, 2000));
        spec.even_odd = true;
        spec.fused = fused;
        spec.check_every = if fused { 4 } else { 1 };
        let op = method.default_operator();
        let inputs = sources.iter().map(|s| g.upload(s).unwrap()).collect();
        let batch = solve_batch(&mut g, &spec, op, inputs).unwrap();
        for (k, (s, got)) in sources.iter().zip(&batch).enumerate() {
            let src = g.upload(s).unwrap();
            let one = solve(&mut g, &spec, op, &src, Some(&src), &mut |_, _| {}).unwrap();
            assert_eq!(one.reason, StopReason::Converged, "{method:?} {k}");
            assert_eq!(got.iterations, one.iterations, "{method:?} column {k}");
            let (x, y) = (g.download(&got.x).unwrap(), g.download(&one.x).unwrap());
            let d = x.rel_diff(&y);
            assert!(d <= 1e-12, "{method:?} column {k}: {d:e}");
            bitwise += (x.data == y.data) as usize;
        }
        spec.precision = Precision::Single;
        let inputs = sources.iter().map(|s| g.upload(s).unwrap()).collect();
        let mixed = solve_batch(&mut g, &spec, op, inputs).unwrap();
        for (k, (s, got)) in sources.iter().zip(&mixed).enumerate() {
            assert_eq!(got.reason, StopReason::Converged, "{method:?} mixed {k}");
            let b = g.upload(s).unwrap();
            let r = true_residual(&mut g, Operator::D, &b, &got.x).unwrap();
            assert!(r <= 1e-10, "{method:?} mixed column {k}: {r:e}");
        }
    }
    println!("batched solves: {bitwise} of 36 columns bit for bit");
}
