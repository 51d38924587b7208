#![cfg(feature = "gpu-tests")]
//! GPU tests of multigrid (`solver::mg`) with kernel 3.0 on the fine level: the same
//! algorithm as on the CPU (tests/multigrid.rs holds that to closed forms and gauge files
//! written by other codes), its fine level on the GPU's fields and its coarse levels on the
//! GPU too (`cuda::mg`: the coarse operator, the transfers and coarse BLAS as kernels).
//! Built only with `--features gpu-tests`; every test opens the GPU first and fails loudly
//! when there is none.
//!
//! Tolerances and where they come from:
//! - the solution's true residual, recomputed by the CPU backend's operator from the
//!   downloaded solution, within 1.5 x the tolerance (the outer GCR iterates in double;
//!   the GPU's D differs from the CPU's by rounding, 1e-15 relative);
//! - the device's coarse operator, Schur complement, restriction and prolongation against
//!   the host's (`CoarseOp`, `Prolongator`: the CPU reference) to 1e-12 relative in double
//!   (sums of a few hundred products in another order) and 1e-5 in single;
//! - the outer iterations within 2 of the CPU's (the single-precision preconditioner and
//!   the batched BiCGStab set-up in single round differently on the two devices, so the outer residuals are not the same bits;
//!   each cycle's contraction is the same to a few percent).

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{CudaBackend, CudaOptions, StencilVersion};
use qcd_solve::backend::prelude::*;
use qcd_solve::dirac::clover::SiteTerms;
use qcd_solve::dirac::coarse::{
    galerkin, Aggregation, CoarseLevelSpace, Coarsen, Prolongator, WilsonStencil,
};
use qcd_solve::dirac::Action;
use qcd_solve::field::SpinorField;
use qcd_solve::field::C64;
use qcd_solve::linalg::{Layout, Operator, Precision, Subset};
use qcd_solve::solver::mg::{self, MgParams, SetupSolver};
use qcd_solve::solver::{true_residual, StopReason, StopRules};
use std::sync::Arc;

mod gpu_common;
use gpu_common::require_gpu;

/// Solve D x = b by multigrid on `be`; the outer iterations and the true residual
/// recomputed on the CPU.
fn solve<B: Backend>(
    be: &mut B,
    cpu: &mut CpuBackend,
    stencil: &WilsonStencil,
    params: &MgParams,
    b: &SpinorField,
    tol: f64,
) -> (usize, f64) {
    let bf = be.upload(b).unwrap();
    let rules = StopRules::new(tol, 500);
    let (out, stats) = mg::solve(
        be,
        stencil,
        params,
        10,
        &bf,
        rules,
        &mut |_, _| {},
        &mut None,
    )
    .unwrap();
    assert_eq!(out.reason, StopReason::Converged, "{:?}", out.history);
    eprintln!(
        "{}: {} iterations; {}",
        be.describe(),
        out.iterations,
        stats.describe()
    );
    let x = be.download(&out.x).unwrap();
    let xc = cpu.upload(&x).unwrap();
    let bc = cpu.upload(b).unwrap();
    let res = true_residual(cpu, Operator::D, &bc, &xc).unwrap();
    (out.iterations, res)
}

#[test]
fn multigrid_on_the_gpu_solves_wilson_clover_as_the_cpu_does() {
    require_gpu();
    let gauge = gpu_common::quenched([8, 8, 8, 16]);
    let action = Action {
        kappa: 0.135,
        csw: 1.77,
        mu: 0.0,
    };
    let terms = SiteTerms::new(&gauge, &action).unwrap();
    let stencil = WilsonStencil::new(&gauge, action.kappa, Some(&terms));
    let mut cpu = CpuBackend::with_action(&gauge, &action).unwrap();
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        ..CudaOptions::default()
    };
    let mut gpu = CudaBackend::new(&gauge, action.kappa, &opts).unwrap();
    gpu.set_action(&gauge, &action).unwrap();
    let b = SpinorField::random(gauge.lattice.volume(), 3, 0);
    let tol = 1e-10;
    for (precision, setup) in [
        (Precision::Single, SetupSolver::Bicgstab),
        (Precision::Double, SetupSolver::Bicgstab),
        (Precision::Single, SetupSolver::Gcr),
    ] {
        let params = MgParams {
            vectors: vec![12],
            precision,
            setup_solver: setup,
            ..MgParams::default()
        };
        let (it_gpu, res_gpu) = solve(&mut gpu, &mut cpu, &stencil, &params, &b, tol);
        let mut cpu2 = CpuBackend::with_action(&gauge, &action).unwrap();
        let (it_cpu, res_cpu) = solve(&mut cpu2, &mut cpu, &stencil, &params, &b, tol);
        eprintln!(
            "{precision:?}, {setup:?} set-up: GPU {it_gpu} iterations ({res_gpu:.2e}), CPU {it_cpu} \
             ({res_cpu:.2e})"
        );
        assert!(res_gpu <= 1.5 * tol, "GPU true residual {res_gpu}");
        assert!(
            it_gpu.abs_diff(it_cpu) <= 2,
            "{precision:?}, {setup:?} set-up: GPU {it_gpu} iterations, CPU {it_cpu}"
        );
    }
}

fn rel(a: &[C64], b: &[C64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).norm_sqr()).sum();
    let den: f64 = b.iter().map(|y| y.norm_sqr()).sum();
    (num / den).sqrt()
}

fn gaussian(n: usize, seed: u64) -> Vec<C64> {
    let mut rng = qcd_solve::rng::Stream::new(seed, 3);
    (0..n)
        .map(|_| C64::new(rng.gaussian(), rng.gaussian()))
        .collect()
}

#[test]
fn the_device_coarse_level_applies_what_the_host_does() {
    require_gpu();
    let gauge = gpu_common::quenched([8, 8, 8, 8]);
    let action = Action {
        kappa: 0.13,
        csw: 1.77,
        mu: 0.0,
    };
    let terms = SiteTerms::new(&gauge, &action).unwrap();
    let stencil = WilsonStencil::new(&gauge, action.kappa, Some(&terms));
    let v = gauge.lattice.volume();
    let vectors: Vec<Vec<C64>> = (0..6).map(|k| gaussian(v * 12, 40 + k)).collect();
    let agg = Aggregation::new(&gauge.lattice, [2, 2, 2, 2], "blocks").unwrap();
    let p = Prolongator::new(agg, 12, &vectors).unwrap();
    let op = Arc::new(galerkin(&stencil, &p).unwrap().with_site_inverse().unwrap());
    let (vc, dof) = (op.volume(), op.dof);
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        ..CudaOptions::default()
    };
    let mut gpu = CudaBackend::new(&gauge, action.kappa, &opts).unwrap();
    let fine = SpinorField::random(v, 8, 0);
    let c = gaussian(vc * dof, 9);
    let mut want_r = vec![C64::new(0.0, 0.0); vc * dof];
    p.restrict(&fine.data, &mut want_r);
    let mut want_p = vec![C64::new(0.0, 0.0); v * 12];
    p.prolong(&c, &mut want_p);
    let mut want_d = vec![C64::new(0.0, 0.0); vc * dof];
    op.apply(&c, &mut want_d);
    let e = gaussian(vc / 2 * dof, 10);
    let mut want_s = vec![C64::new(0.0, 0.0); vc / 2 * dof];
    let mut tmp = [want_s.clone(), want_s.clone()];
    op.apply_schur(&e, &mut want_s, &mut tmp).unwrap();
    for (precision, tol) in [(Precision::Double, 1e-12), (Precision::Single, 1e-5)] {
        let full = Layout::new(Subset::Full, precision);
        let even = Layout::new(Subset::Even, precision);
        let mut space = gpu.coarse_space(op.clone(), precision).unwrap();
        let t = gpu.transfer(&p, precision).unwrap();
        let f = gpu.field_from_host(fine.data.clone(), full).unwrap();
        let mut rc = space.alloc_layout(full).unwrap();
        gpu.restrict(&t, &f, &mut space, &mut rc).unwrap();
        let got = space.to_host(&rc).unwrap();
        let cf = space.field_from_host(c.clone(), full).unwrap();
        let mut pf = gpu.alloc_layout(full).unwrap();
        gpu.prolong(&t, &mut space, &cf, &mut pf).unwrap();
        let got_p = gpu.to_host(&pf).unwrap();
        let mut dc = space.alloc_layout(full).unwrap();
        space.apply_coarse(false, &mut dc, &cf).unwrap();
        let got_d = space.to_host(&dc).unwrap();
        let mut half = space.alloc_layout(even).unwrap();
        let mut e_full = vec![C64::new(0.0, 0.0); vc * dof];
        for (cb, z) in e.chunks(dof).enumerate() {
            let x = op.lattice.checkerboard_site(0, cb);
            e_full[x * dof..(x + 1) * dof].copy_from_slice(z);
        }
        let ef = space.field_from_host(e_full, full).unwrap();
        space.convert(&mut half, &ef).unwrap();
        let mut sc = space.alloc_layout(even).unwrap();
        space.apply_coarse(true, &mut sc, &half).unwrap();
        let got_s = space.to_host(&sc).unwrap();
        let diffs = [
            ("restriction", rel(&got, &want_r)),
            ("prolongation", rel(&got_p, &want_p)),
            ("coarse operator", rel(&got_d, &want_d)),
            ("Schur complement", rel(&got_s, &want_s)),
        ];
        eprintln!("{precision:?}: {diffs:?}");
        for (what, d) in diffs {
            assert!(d <= tol, "{precision:?} {what}: {d:.2e} > {tol:.0e}");
        }
    }
}

/// The device's Galerkin product (kernels/mg_galerkin.cu, `Coarsen::galerkin` of the CUDA
/// backend) against the host's (`dirac::coarse::galerkin`, the CPU reference) to 1e-12
/// relative (both in double, the same sums in another order): plain Wilson, clover and
/// clover with twisted mass; 2^4 blocks with 6 vectors (every hop leaves its aggregate)
/// and 4^4 blocks with 40 vectors (an output of 80 x 80 numbers, in two tiles).
#[test]
fn the_device_galerkin_product_is_the_hosts() {
    require_gpu();
    let gauge = gpu_common::quenched([8, 8, 8, 8]);
    let v = gauge.lattice.volume();
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        ..CudaOptions::default()
    };
    let mut gpu = CudaBackend::new(&gauge, 0.13, &opts).unwrap();
    for (csw, mu) in [(0.0, 0.0), (1.77, 0.0), (1.77, 0.05)] {
        let action = Action {
            kappa: 0.13,
            csw,
            mu,
        };
        let terms = (csw != 0.0 || mu != 0.0).then(|| SiteTerms::new(&gauge, &action).unwrap());
        let stencil = WilsonStencil::new(&gauge, action.kappa, terms.as_ref());
        for (block, nvec) in [(2, 6), (4, 40)] {
            let vectors: Vec<Vec<C64>> =
                (0..nvec).map(|k| gaussian(v * 12, 60 + k as u64)).collect();
            let agg = Aggregation::new(&gauge.lattice, [block; 4], "blocks").unwrap();
            let p = Prolongator::new(agg, 12, &vectors).unwrap();
            let want = galerkin(&stencil, &p).unwrap();
            let got = gpu.galerkin(&stencil, &p).unwrap();
            let (ds, dh) = (rel(&got.site, &want.site), rel(&got.hops, &want.hops));
            eprintln!("c_sw {csw}, mu {mu}, {block}^4 blocks, {nvec} vectors: site {ds:.2e}, hops {dh:.2e}");
            assert!(
                ds <= 1e-12 && dh <= 1e-12,
                "site {ds:.2e}, hops {dh:.2e} > 1e-12"
            );
        }
    }
}

/// The prolongator made on the device from near-null vectors held there (`Coarsen::coarsen`
/// of the CUDA backend: kernels/mg_galerkin.cu's gather, orthonormalisation and
/// narrowing) against the host's `Prolongator::new` and `galerkin` (the CPU reference): the
/// coarse operator to 1e-12 relative (the same sums in another order, both in double), the
/// restriction and prolongation through its transfer to 1e-12 in double and 1e-5 in single;
/// and vectors that are linearly dependent refused as the host refuses them (the same
/// message, naming multigrid.vectors).
#[test]
fn the_device_prolongator_is_the_hosts() {
    require_gpu();
    let gauge = gpu_common::quenched([8, 8, 8, 8]);
    let action = Action {
        kappa: 0.13,
        csw: 1.77,
        mu: 0.0,
    };
    let terms = SiteTerms::new(&gauge, &action).unwrap();
    let stencil = WilsonStencil::new(&gauge, action.kappa, Some(&terms));
    let v = gauge.lattice.volume();
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        ..CudaOptions::default()
    };
    let mut gpu = CudaBackend::new(&gauge, action.kappa, &opts).unwrap();
    gpu.set_action(&gauge, &action).unwrap();
    let agg = Aggregation::new(&gauge.lattice, [4, 4, 2, 2], "blocks").unwrap();
    let vectors: Vec<Vec<C64>> = (0..8).map(|k| gaussian(v * 12, 80 + k)).collect();
    let p = Prolongator::new(agg.clone(), 12, &vectors).unwrap();
    let want = galerkin(&stencil, &p).unwrap();
    let fields: Vec<_> = vectors
        .iter()
        .map(|x| gpu.field_from_host(x.clone(), Layout::FULL).unwrap())
        .collect();
    let refs: Vec<_> = fields.iter().collect();
    let fine = SpinorField::random(v, 8, 0);
    let nc = agg.coarse.volume() * p.coarse_dof();
    let c = gaussian(nc, 9);
    let mut want_r = vec![C64::new(0.0, 0.0); nc];
    p.restrict(&fine.data, &mut want_r);
    let mut want_p = vec![C64::new(0.0, 0.0); v * 12];
    p.prolong(&c, &mut want_p);
    for (precision, tol) in [(Precision::Double, 1e-12), (Precision::Single, 1e-5)] {
        let (got, t) = gpu
            .coarsen(&stencil, agg.clone(), &refs, precision)
            .unwrap();
        let (ds, dh) = (rel(&got.site, &want.site), rel(&got.hops, &want.hops));
        let full = Layout::new(Subset::Full, precision);
        let mut space = gpu.coarse_space(Arc::new(got), precision).unwrap();
        let f = gpu.field_from_host(fine.data.clone(), full).unwrap();
        let mut rc = space.alloc_layout(full).unwrap();
        gpu.restrict(&t, &f, &mut space, &mut rc).unwrap();
        let dr = rel(&space.to_host(&rc).unwrap(), &want_r);
        let cf = space.field_from_host(c.clone(), full).unwrap();
        let mut pf = gpu.alloc_layout(full).unwrap();
        gpu.prolong(&t, &mut space, &cf, &mut pf).unwrap();
        let dp = rel(&gpu.to_host(&pf).unwrap(), &want_p);
        eprintln!("{precision:?}: site {ds:.2e}, hops {dh:.2e}, restriction {dr:.2e}, prolongation {dp:.2e}");
        assert!(ds <= 1e-12 && dh <= 1e-12, "site {ds:.2e}, hops {dh:.2e}");
        assert!(
            dr <= tol && dp <= tol,
            "restriction {dr:.2e}, prolongation {dp:.2e}"
        );
    }
    // Vector 3 a multiple of vector 1: dependent on every aggregate and chirality.
    let mut dependent = vectors.clone();
    dependent[3] = vectors[1].iter().map(|z| z * 2.0).collect();
    let host = Prolongator::new(agg.clone(), 12, &dependent).unwrap_err();
    let d_fields: Vec<_> = dependent
        .iter()
        .map(|x| gpu.field_from_host(x.clone(), Layout::FULL).unwrap())
        .collect();
    let d_refs: Vec<_> = d_fields.iter().collect();
    let device = match gpu.coarsen(&stencil, agg, &d_refs, Precision::Single) {
        Ok(_) => panic!("dependent vectors were accepted"),
        Err(e) => e,
    };
    assert_eq!(device.to_string(), host.to_string());
    assert!(device.to_string().contains("multigrid.vectors"), "{device}");
}
