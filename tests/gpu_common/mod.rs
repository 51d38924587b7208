//! Helpers shared by the GPU test files of kernel 3.0 (tests/gpu_fast.rs, tests/gpu_half.rs;
//! each has `mod gpu_common;`): the GPU check, the test lattices, a 3.0 backend and a field
//! of a given layout.
#![allow(dead_code)]

use qcd_solve::backend::cuda::{
    device_info, CudaBackend, CudaOptions, Reconstruct, StencilVersion,
};
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{Layout, Operator, Precision};
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};

/// Fail loudly without a GPU (these tests never pass silently on a machine without one).
pub fn require_gpu() {
    match device_info() {
        Ok(info) => eprintln!("GPU: {} (sm_{}{})", info.name, info.cc.0, info.cc.1),
        Err(e) => panic!("the gpu tests need an NVIDIA GPU with its driver and libnvrtc: {e}"),
    }
}

pub const KAPPA: f64 = 0.124;

/// The test lattices: antiperiodic t (the default) on 4x4x4x8, and 6x4x8x4 with
/// antiperiodic t and x (the in-kernel phases in two directions).
pub fn lattices() -> Vec<Lattice> {
    let mut b = DEFAULT_BOUNDARY;
    assert_eq!(b[3], Boundary::Antiperiodic);
    let first = Lattice::new([4, 4, 4, 8], b).unwrap();
    b[0] = Boundary::Antiperiodic;
    vec![first, Lattice::new([6, 4, 8, 4], b).unwrap()]
}

/// A 3.0 backend on `gauge` (kappa `KAPPA`) with these links and block.
pub fn gpu(gauge: &GaugeField, reconstruct: Reconstruct, block: usize) -> CudaBackend {
    let opts = CudaOptions {
        version: StencilVersion::V3_0,
        coarse_block: block,
        reconstruct,
        ..CudaOptions::default()
    };
    CudaBackend::new(gauge, KAPPA, &opts).unwrap()
}

/// A field of `layout` holding `host`'s sites of that subset (upload, then convert).
pub fn field<B: Backend>(b: &mut B, host: &SpinorField, layout: Layout) -> B::Field {
    let full = b.upload(host).unwrap();
    let mut f = b.alloc_layout(layout).unwrap();
    b.convert(&mut f, &full).unwrap();
    f
}

/// The operators of kernel 3.0 the GPU tests compare: the full D and g5 D, the Schur
/// forms.
pub const OPS: [Operator; 4] = [
    Operator::D,
    Operator::G5D,
    Operator::Schur,
    Operator::G5Schur,
];

/// A GPU operator against the CPU's: double to summation order, single and half to their
/// rounding (tests/gpu_clover.rs's and tests/gpu_batch.rs's bounds).
pub fn cpu_tolerance(p: Precision) -> f64 {
    match p {
        Precision::Double => 1e-13,
        Precision::Single => 1e-6,
        Precision::Half => 1e-4,
    }
}

/// A quenched beta 6.0 field on `dims` (cold start, 20 + 1 compound sweeps, seed 7).
pub fn quenched(dims: [usize; 4]) -> GaugeField {
    let lattice = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
    let params = qcd_solve::gauge_gen::HeatbathParams {
        beta: 6.0,
        therm: 20,
        sweeps: 1,
        every: 1,
        overrelax: 1,
        seed: 7,
        hot_start: false,
    };
    qcd_solve::gauge_gen::generate(&lattice, &params, |_| {}).unwrap()
}
