//! GPU execution tests of the CUDA backend (built only with `--features gpu-tests`; CI has
//! no GPU and never builds them). Every test opens the GPU first and fails loudly when
//! there is none, so they never pass silently.
//!
//! Expected values: the CPU reference operator `dirac::apply_reference` (the seed's form)
//! and the CPU backend; tolerances as in src/app/validate.rs.

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::{
    check_device_memory, device_info, CudaBackend, CudaOptions, Reconstruct, StencilVersion,
};
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::Operator;
use qcd_solve::dirac::apply_reference;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::solver::{conjugate_residual, CrParams};
use qcd_solve::Error;

fn require_gpu() {
    match device_info() {
        Ok(info) => eprintln!("GPU: {} (sm_{}{})", info.name, info.cc.0, info.cc.1),
        Err(e) => panic!("the gpu tests need an NVIDIA GPU with its driver and libnvrtc: {e}"),
    }
}

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

/// Launch geometries exercised per version, as (multiple, 1.0's block): multiples 1 (one
/// site per block), 5 (odd: blocks start on odd sites, the last block is partial) and 16
/// (the seed's Fermi choice); for 1.0 blocks of 64, 256 (the seed's) and 512 (the
/// most that launches: 1024 runs out of registers on an H100); for 3.0
/// blocks of 32, 96 (not a power of two), 256 and 512 (its launch bound).
fn multiples(v: StencilVersion) -> Vec<(usize, usize)> {
    if v.uses_multiple() {
        vec![(1, 256), (5, 256), (16, 256)]
    } else if v == StencilVersion::V1_0 {
        vec![(16, 64), (16, 256), (16, 512)]
    } else if v == StencilVersion::V3_0 {
        vec![(16, 32), (16, 96), (16, 256), (16, 512)]
    } else {
        vec![(16, 256)]
    }
}

fn operator_matches_reference(dims: [usize; 4]) {
    require_gpu();
    let l = lattice(dims);
    let kappa = 0.124;
    let gauge = GaugeField::random(&l, 11);
    let psi = SpinorField::random(l.volume(), 11, 1 << 40);
    let mut failures = Vec::new();
    for op in [Operator::D, Operator::G5D] {
        let want = apply_reference(op, &gauge, kappa, &psi);
        for &version in StencilVersion::all() {
            for (multiple, coarse_block) in multiples(version) {
                let opts = CudaOptions {
                    version,
                    multiple,
                    coarse_block,
                    device: 0,
                    reconstruct: Reconstruct::R18,
                    ..CudaOptions::default()
                };
                if version == StencilVersion::V3_0 && dims.iter().any(|d| d % 2 == 1) {
                    // 3.0 stores fields by parity: odd extents are refused by name.
                    match CudaBackend::new(&gauge, kappa, &opts) {
                        Err(Error::InvalidValue { message, .. }) => {
                            assert!(message.contains("even extents"), "{message}")
                        }
                        other => {
                            panic!("3.0 on {dims:?}: expected a refusal, got {:?}", other.err())
                        }
                    }
                    continue;
                }
                let mut gpu = CudaBackend::new(&gauge, kappa, &opts)
                    .unwrap_or_else(|e| panic!("version {version} multiple {multiple}: {e}"));
                let d_psi = gpu.upload(&psi).unwrap();
                let mut d_out = gpu.alloc().unwrap();
                gpu.apply(op, &mut d_out, &d_psi).unwrap();
                let got = gpu.download(&d_out).unwrap();
                let rel = got.rel_diff(&want);
                eprintln!(
                    "{} {op} version {version} multiple {multiple} block {}: {rel:.2e}",
                    l.dims_string(),
                    gpu.block_threads()
                );
                if rel.is_nan() || rel >= 1e-13 {
                    failures.push(format!(
                        "{op} {version} m{multiple} b{coarse_block}: {rel:e}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "operator mismatches: {failures:?}");
}

#[test]
fn every_version_matches_the_reference_on_6x6x6x10() {
    operator_matches_reference([6, 6, 6, 10]);
}

#[test]
fn every_version_matches_the_reference_on_odd_3x5x7x9() {
    // Odd extents and an odd volume (945): wrap-around at 3, the 1.6 layout's padded
    // last pair, partial last blocks. 3.0 (parity-major fields) must refuse it.
    operator_matches_reference([3, 5, 7, 9]);
}

/// Version 3.0 applies the fermion phases in-kernel from the lattice's per-direction
/// boundary, and optionally rebuilds links from 12 or 8 stored reals: both against the
/// reference, for boundaries other than the default, and 12 and 8 against 18 reals on an
/// SU(3) field (equal to rounding: norm-wise 1e-14 in double).
#[test]
fn version_3_0_boundaries_and_reconstruct_12() {
    use qcd_solve::geometry::lattice::Boundary::{Antiperiodic as A, Periodic as P};
    require_gpu();
    let kappa = 0.124;
    let mut failures = Vec::new();
    for (dims, boundary) in [
        ([6, 6, 6, 10], DEFAULT_BOUNDARY),
        ([4, 6, 2, 8], [A, P, A, P]),
        ([4, 6, 4, 6], [P, P, P, P]),
        ([6, 4, 2, 8], [A, A, A, A]),
    ] {
        let l = Lattice::new(dims, boundary).unwrap();
        let gauge = GaugeField::random(&l, 5);
        let psi = SpinorField::random(l.volume(), 5, 1 << 40);
        for op in [Operator::D, Operator::G5D] {
            let want = apply_reference(op, &gauge, kappa, &psi);
            let mut outs = Vec::new();
            for reconstruct in Reconstruct::ALL {
                let opts = CudaOptions {
                    version: StencilVersion::V3_0,
                    coarse_block: 64,
                    reconstruct,
                    ..CudaOptions::default()
                };
                let mut gpu = CudaBackend::new(&gauge, kappa, &opts).unwrap();
                let d_psi = gpu.upload(&psi).unwrap();
                let mut d_out = gpu.alloc().unwrap();
                gpu.apply(op, &mut d_out, &d_psi).unwrap();
                let got = gpu.download(&d_out).unwrap();
                let rel = got.rel_diff(&want);
                eprintln!(
                    "{} {boundary:?} {op} 3.0 {}: {rel:.2e}",
                    l.dims_string(),
                    reconstruct.label()
                );
                if rel.is_nan() || rel >= 1e-13 {
                    failures.push(format!("{dims:?} {op} {}: {rel:e}", reconstruct.label()));
                }
                outs.push(got);
            }
            for (k, r) in Reconstruct::ALL.iter().enumerate().skip(1) {
                let rel = outs[k].rel_diff(&outs[0]);
                if rel.is_nan() || rel >= 1e-14 {
                    failures.push(format!("{dims:?} {op} {} vs 18 reals: {rel:e}", r.reals()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "3.0 mismatches: {failures:?}");
}

#[test]
fn reductions_give_identical_bits_on_every_run_and_match_the_cpu() {
    require_gpu();
    let l = lattice([8, 8, 8, 16]);
    let gauge = GaugeField::unit(&l);
    let x = SpinorField::random(l.volume(), 3, 1 << 40);
    let y = SpinorField::random(l.volume(), 3, 2 << 40);
    let mut gpu = CudaBackend::new(&gauge, 0.1, &CudaOptions::default()).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let dy = gpu.upload(&y).unwrap();
    let n0 = gpu.norm2(&dx).unwrap();
    let d0 = gpu.dot(&dx, &dy).unwrap();
    for _ in 0..50 {
        assert_eq!(gpu.norm2(&dx).unwrap().to_bits(), n0.to_bits());
        let d = gpu.dot(&dx, &dy).unwrap();
        assert_eq!(
            (d.re.to_bits(), d.im.to_bits()),
            (d0.re.to_bits(), d0.im.to_bits())
        );
    }
    let mut cpu = CpuBackend::new(&gauge, 0.1);
    let (cx, cy) = (cpu.upload(&x).unwrap(), cpu.upload(&y).unwrap());
    let nc = cpu.norm2(&cx).unwrap();
    let dc = cpu.dot(&cx, &cy).unwrap();
    assert!((n0 - nc).abs() / nc < 1e-13, "norm2 {n0} vs {nc}");
    assert!((d0 - dc).norm() / dc.norm() < 1e-12, "dot {d0} vs {dc}");
}

/// The one-launch reductions (kernels/reduce.cu: a first pass, then the last block of each
/// group climbing the seed's summing tree) on fields big enough for two levels above the
/// first pass, several groups at the first: a full 16x16x16x32 field is 1572864 complex
/// numbers, 3072 first-pass blocks, 6 groups, then 1. Expected values: fields of small
/// integers, whose squares and products and every partial sum are exact in double, so the
/// exact integer sums (computed on the host) are the only right answer whatever the order;
/// a block lost or counted twice, or a ticket left non-zero by a launch, would change them.
/// The same on the even half in single precision (786432 complex, 1536 blocks: 3 groups)
/// and in half precision (65536 sites: 128 blocks, one level; against the host's dequantized
/// values to 1e-12 of the norm, and of |x| |y| for the dot), and 20 repeats give the same
/// bits.
#[test]
fn one_launch_reductions_climb_several_groups_exactly() {
    use qcd_solve::backend::{Layout, Precision, Subset};
    require_gpu();
    let l = lattice([16, 16, 16, 32]);
    let gauge = GaugeField::unit(&l);
    let mut x = SpinorField::zeros(l.volume());
    let mut y = SpinorField::zeros(l.volume());
    for (k, (a, b)) in x.data.iter_mut().zip(y.data.iter_mut()).enumerate() {
        let i = k as i64;
        *a = C64::new((i % 7 - 3) as f64, (i % 5 - 2) as f64);
        *b = C64::new((i % 3 - 1) as f64, (i % 11 - 5) as f64);
    }
    let exact_norm: f64 = x.data.iter().map(|z| z.norm_sqr()).sum();
    let exact_dot: C64 = x.data.iter().zip(&y.data).map(|(a, b)| a.conj() * b).sum();
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        ..CudaOptions::default()
    };
    let mut gpu = CudaBackend::new(&gauge, 0.1, &opts).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let dy = gpu.upload(&y).unwrap();
    let even = Layout::new(Subset::Even, Precision::Single);
    let (mut sx, mut sy) = (
        gpu.alloc_layout(even).unwrap(),
        gpu.alloc_layout(even).unwrap(),
    );
    gpu.convert(&mut sx, &dx).unwrap();
    gpu.convert(&mut sy, &dy).unwrap();
    let host_even = |f: &SpinorField| -> Vec<C64> {
        let mut out = Vec::new();
        for site in 0..l.volume() {
            if l.parity(site) == 0 {
                out.extend_from_slice(&f.data[site * 12..site * 12 + 12]);
            }
        }
        out
    };
    let (ex, ey) = (host_even(&x), host_even(&y));
    let even_norm: f64 = ex.iter().map(|z| z.norm_sqr()).sum();
    let even_dot: C64 = ex.iter().zip(&ey).map(|(a, b)| a.conj() * b).sum();
    for _ in 0..20 {
        assert_eq!(gpu.norm2(&dx).unwrap(), exact_norm);
        assert_eq!(gpu.dot(&dx, &dy).unwrap(), exact_dot);
        assert_eq!(gpu.norm2(&sx).unwrap(), even_norm);
        assert_eq!(gpu.dot(&sx, &sy).unwrap(), even_dot);
    }
    // Half precision: the host's dequantized values (linalg::half), to rounding order.
    let half = Layout::new(Subset::Even, Precision::Half);
    let (mut hx, mut hy) = (
        gpu.alloc_layout(half).unwrap(),
        gpu.alloc_layout(half).unwrap(),
    );
    gpu.convert(&mut hx, &dx).unwrap();
    gpu.convert(&mut hy, &dy).unwrap();
    let (qx, qy) = (gpu.download(&hx).unwrap(), gpu.download(&hy).unwrap());
    let (qx, qy) = (host_even(&qx), host_even(&qy));
    let half_norm: f64 = qx.iter().map(|z| z.norm_sqr()).sum();
    let half_dot: C64 = qx.iter().zip(&qy).map(|(a, b)| a.conj() * b).sum();
    let n0 = gpu.norm2(&hx).unwrap();
    let d0 = gpu.dot(&hx, &hy).unwrap();
    assert!(
        (n0 - half_norm).abs() / half_norm < 1e-12,
        "{n0} vs {half_norm}"
    );
    // A dot product's rounding scales with |x| |y| (Cauchy-Schwarz), not with the result:
    // this one cancels to ~11 against |x| |y| of order 1e6 (run on the H100, session 8:
    // 3e-10 apart in the sum order, 2.9e-11 of the result, ~1e-16 of |x| |y|).
    let half_norm_y: f64 = qy.iter().map(|z| z.norm_sqr()).sum();
    let scale = (half_norm * half_norm_y).sqrt();
    assert!(
        (d0 - half_dot).norm() / scale < 1e-12,
        "{d0} vs {half_dot} (|x| |y| = {scale})"
    );
    for _ in 0..20 {
        assert_eq!(gpu.norm2(&hx).unwrap().to_bits(), n0.to_bits());
        assert_eq!(gpu.dot(&hx, &hy).unwrap(), d0);
    }
}

#[test]
fn blas1_matches_the_cpu() {
    require_gpu();
    let l = lattice([4, 6, 6, 8]);
    let gauge = GaugeField::unit(&l);
    let x = SpinorField::random(l.volume(), 5, 1 << 40);
    let y = SpinorField::random(l.volume(), 5, 2 << 40);
    let a = C64::new(0.7, -1.3);
    let mut gpu = CudaBackend::new(&gauge, 0.1, &CudaOptions::default()).unwrap();
    let mut cpu = CpuBackend::new(&gauge, 0.1);
    let dx = gpu.upload(&x).unwrap();
    let mut dy = gpu.upload(&y).unwrap();
    let cx = cpu.upload(&x).unwrap();
    let mut hy = cpu.upload(&y).unwrap();
    gpu.axpy(a, &dx, &mut dy).unwrap();
    cpu.axpy(a, &cx, &mut hy).unwrap();
    let h = cpu.download(&hy).unwrap();
    assert!(gpu.download(&dy).unwrap().rel_diff(&h) < 1e-15);
    gpu.xpay(&dx, a, &mut dy).unwrap();
    cpu.xpay(&cx, a, &mut hy).unwrap();
    let h = cpu.download(&hy).unwrap();
    assert!(gpu.download(&dy).unwrap().rel_diff(&h) < 1e-15);
    let mut dz = gpu.alloc().unwrap();
    gpu.copy(&mut dz, &dy).unwrap();
    assert_eq!(gpu.download(&dz).unwrap(), gpu.download(&dy).unwrap());
}

#[test]
fn cr_on_the_gpu_follows_the_cpu() {
    require_gpu();
    let l = lattice([4, 4, 6, 8]);
    let kappa = 0.12;
    let gauge = GaugeField::random(&l, 9);
    let b = SpinorField::random(l.volume(), 9, 1 << 40);
    let params = CrParams::new(1e-10, 1000);
    // The Hermitian g5 D: the seed's CR converges on it (on D it stagnates).
    let op = Operator::G5D;
    let mut cpu_be = CpuBackend::new(&gauge, kappa);
    let cb = cpu_be.upload(&b).unwrap();
    let cpu = conjugate_residual(&mut cpu_be, op, &cb, &params).unwrap();
    assert_eq!(cpu.reason, qcd_solve::solver::StopReason::Converged);
    for &version in StencilVersion::all() {
        let opts = CudaOptions {
            version,
            multiple: 16,
            ..CudaOptions::default()
        };
        let mut gpu = CudaBackend::new(&gauge, kappa, &opts).unwrap();
        let db = gpu.upload(&b).unwrap();
        let out = conjugate_residual(&mut gpu, op, &db, &params).unwrap();
        assert!(
            out.iterations.abs_diff(cpu.iterations) <= 1,
            "{version}: {} vs {} iterations",
            out.iterations,
            cpu.iterations
        );
        for (k, (g, c)) in out.history.iter().zip(&cpu.history).take(51).enumerate() {
            assert!(
                (g - c).abs() / c <= 1e-6,
                "{version} iteration {k}: {g} vs {c}"
            );
        }
    }
}

#[test]
fn kernel_books_count_the_launches() {
    require_gpu();
    let l = lattice([4, 4, 4, 4]);
    let gauge = GaugeField::random(&l, 1);
    let opts = CudaOptions {
        version: StencilVersion::V2_0,
        multiple: 16,
        ..CudaOptions::default()
    };
    let mut gpu = CudaBackend::new(&gauge, 0.1, &opts).unwrap();
    let x = gpu.upload(&SpinorField::random(l.volume(), 1, 0)).unwrap();
    let mut y = gpu.alloc().unwrap();
    gpu.apply(Operator::D, &mut y, &x).unwrap();
    gpu.apply(Operator::D, &mut y, &x).unwrap();
    let stats = gpu.kernel_stats();
    let get = |name: &str| stats.iter().find(|s| s.name == name).unwrap().clone();
    assert_eq!(get("xgemm34x44 (2.0)").launches, 16);
    assert_eq!(get("xgemm33x34 (2.0)").launches, 16);
    assert_eq!(get("dslash_combine (2.0)").launches, 2);
    let st = gpu.stencil_stats();
    assert_eq!(st.flops, 2 * 2520 * 256);
    assert!(st.millis > 0.0);
}

#[test]
fn a_sample_of_the_launches_is_timed_and_the_rest_estimated_from_it() {
    require_gpu();
    // timing.rs: each kernel's first 16 launches, then launches 64, 128, ... are event-
    // timed (`[tuning] launch_events = "all"`: every one; `"none"`: none).
    use qcd_solve::backend::tuning::LaunchEvents;
    let l = lattice([8, 8, 8, 8]);
    let gauge = GaugeField::random(&l, 1);
    for (mode, want) in [
        (LaunchEvents::Sample, 17), // 0..16 and 64
        (LaunchEvents::All, 100),
        (LaunchEvents::None, 0),
    ] {
        let mut opts = CudaOptions {
            version: StencilVersion::V3_0,
            ..CudaOptions::default()
        };
        opts.tuning.launch_events = mode;
        let mut gpu = CudaBackend::new(&gauge, 0.1, &opts).unwrap();
        let x = gpu.upload(&SpinorField::random(l.volume(), 1, 0)).unwrap();
        let mut y = gpu.alloc().unwrap();
        gpu.reset_stats().unwrap();
        for _ in 0..100 {
            gpu.apply(Operator::D, &mut y, &x).unwrap();
        }
        let st = gpu.stencil_stats();
        assert_eq!(st.launches, 100);
        assert_eq!(st.timed, want, "launch_events = {mode:?}");
        if want > 0 {
            // The estimate is a time per launch of the timed ones times 100: between the
            // fastest plausible launch (1 us) and a slow one (10 ms).
            assert!(
                st.millis > 100.0 * 1e-3 && st.millis < 100.0 * 10.0,
                "{st:?}"
            );
        } else {
            assert_eq!(st.millis, 0.0);
        }
    }
}

#[test]
fn a_lattice_larger_than_the_device_is_refused_before_allocating() {
    require_gpu();
    // 96^4 = 8.5e7 sites need about 370 GB with version 1.6, more than any single GPU
    // has (no host field is built: the check comes first).
    let l = lattice([96, 96, 96, 96]);
    match check_device_memory(&l, StencilVersion::V1_6, 0) {
        Err(Error::DeviceMemory(m)) => {
            assert!(m.contains("needs") && m.contains("free"), "{m}");
            eprintln!("{m}");
        }
        other => panic!("expected DeviceMemory, got {:?}", other.err()),
    }
}

fn heatbath(therm: usize, sweeps: usize, hot: bool) -> qcd_solve::gauge_gen::HeatbathParams {
    qcd_solve::gauge_gen::HeatbathParams {
        beta: 6.0,
        sweeps,
        therm,
        every: 1,
        overrelax: 4,
        seed: 11,
        hot_start: hot,
    }
}

#[test]
fn gpu_heatbath_follows_the_cpu_sweep_by_sweep_at_first() {
    // Same Philox draws and update order (kernels/heatbath.cu's contract), so the first
    // sweep agrees to rounding (1e-10). log/cos may differ from the host libm by an ulp,
    // which can flip one accept/reject decision of the a0 sampler: after that the chains
    // separate link by link. Measured on an H100 (validate/RESULTS.md): hot start, second
    // sweep, spatial plaquettes 1.4e-8 apart. So later sweeps are held to 1e-4 only (one
    // differing link moves an 8^4 plaquette by at most ~1e-4).
    require_gpu();
    let l = lattice([8, 8, 8, 8]);
    for hot in [false, true] {
        let p = heatbath(0, 3, hot);
        let mut cpu = qcd_solve::gauge_gen::Generator::new(&l, &p).unwrap();
        let mut gpu = qcd_solve::backend::cuda::heatbath::GpuGenerator::new(&l, &p).unwrap();
        for s in 0..3 {
            let a = cpu.sweep().plaquette;
            let b = gpu.sweep().unwrap().plaquette;
            let tol = if s == 0 { 1e-10 } else { 1e-4 };
            for (x, y) in [
                (a.total, b.total),
                (a.spatial, b.spatial),
                (a.temporal, b.temporal),
            ] {
                assert!(
                    (x - y).abs() < tol,
                    "hot {hot}, sweep {s}: CPU {a:?} GPU {b:?}"
                );
            }
        }
        let f = gpu.field().unwrap();
        assert!(f.max_unitarity_deviation() < 1e-13, "SU(3) kept on the GPU");
    }
}

#[test]
fn gpu_heatbath_agrees_with_the_cpu_statistically() {
    // After thermalisation the two chains are independent samples of one distribution:
    // their mean plaquettes agree within 4 combined (autocorrelation-aware) errors.
    require_gpu();
    let l = lattice([8, 8, 8, 8]);
    let p = heatbath(50, 300, false);
    let mut cpu_rec = Vec::new();
    qcd_solve::gauge_gen::generate(&l, &p, |r| cpu_rec.push(r)).unwrap();
    let mut gpu = qcd_solve::backend::cuda::heatbath::GpuGenerator::new(&l, &p).unwrap();
    let gpu_rec: Vec<_> = (0..350).map(|_| gpu.sweep().unwrap()).collect();
    let a = qcd_solve::gauge_gen::summarise(&cpu_rec).unwrap().total;
    let b = qcd_solve::gauge_gen::summarise(&gpu_rec).unwrap().total;
    let sigma = (a.error * a.error + b.error * b.error).sqrt();
    assert!(
        (a.mean - b.mean).abs() < 4.0 * sigma,
        "CPU {} +- {}, GPU {} +- {}",
        a.mean,
        a.error,
        b.mean,
        b.error
    );
}
