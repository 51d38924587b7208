#![cfg(feature = "gpu-tests")]
//! GPU tests of the gauge fixing (`backend::cuda::gauge_fix::fix_on_gpu`, kernels/gauge_fix.cu)
//! against the CPU's `gauge_fix::fix`, whose correctness tests/gauge_fix.rs holds to
//! closed forms and real gauge files: a random gauge transform of a quenched beta 6.0
//! field (cold start, 20 + 1 compound sweeps) on 8^3x16 fixed to Landau and Coulomb gauge,
//! Coulomb on 8^3x5 (an odd LT: temporal links between two sites of one parity), a fix
//! stopped after a fixed number of sweeps, and the refusals. Built only with
//! `--features gpu-tests`; every test opens the GPU first and fails loudly when there is
//! none.
//!
//! Tolerances and where they come from:
//! - the kernels do the CPU's + and * in the CPU's order without FMA contraction (the
//!   emulation, validate/emu/run_gauge_fix.sh, gets the same bits), and the per-site
//!   sums are added on the host in the CPU's order; only atan2, sin and cos may differ
//!   from the host's libm by an ulp or two, a relative 1e-16 in a site's update. Near the
//!   maximum the iteration contracts such differences, so after the same sweeps F agrees
//!   to 1e-12 (F is about 0.8, its rounding 1e-16 a site) and theta to 1e-9 relative
//!   (theta is a squared gradient: a link error d moves it by about 2 d sqrt(theta));
//! - converged fixes: the iteration counts within 2 (a relative change of F or a theta
//!   within rounding of its tolerance can stop one side a sweep earlier), F to 1e-10
//!   (the rest of a converged fix's change, tolerance 1e-12 a sweep, over two sweeps and
//!   the rounding above), theta below its tolerance, and the two fixed fields within 1e-9
//!   link by link (the same trajectory to rounding: same maximum, not another Gribov copy);
//! - the fixed field is G U G^dagger of the input with the returned G to 1e-12 (three
//!   products of SU(3) matrices: rounding 1e-15).

use qcd_solve::backend::cuda::gauge_fix::fix_on_gpu;
use qcd_solve::field::su3::C64;
use qcd_solve::field::GaugeField;
use qcd_solve::gauge_fix::{fix, FixOptions, FixReport, GaugeKind, GaugeTransform};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY, NDIM};
use qcd_solve::Error;

mod common;
mod gpu_common;
use common::io::max_link_diff;
use gpu_common::require_gpu;

/// A random gauge transform (seed 99) of a quenched beta 6.0 field on `dims`.
fn field(dims: [usize; 4]) -> GaugeField {
    let u = gpu_common::quenched(dims);
    GaugeTransform::random(&u.lattice, 99).apply_gauge(&u)
}

fn show(what: &str, device: &str, r: &FixReport) {
    eprintln!(
        "{what} on the {device}: {} iterations, F = {:.15}, theta = {:.3e}, converged {}, {:.3} s",
        r.iterations, r.functional, r.theta, r.converged, r.seconds
    );
}

/// Fix `u` on both sides as `opts` says; check the module comment's bounds for converged
/// fixes and the GPU's fixed field against its G.
fn compare_converged(what: &str, u: &GaugeField, opts: &FixOptions) {
    let (cpu, _, rc) = fix(u, opts).unwrap();
    let (gpu, g, rg) = fix_on_gpu(u, opts).unwrap();
    show(what, "CPU", &rc);
    show(what, "GPU", &rg);
    assert!(rc.converged && rg.converged, "{what}: both must converge");
    assert!(
        rc.iterations.abs_diff(rg.iterations) <= 2,
        "{what}: {} CPU iterations, {} GPU iterations",
        rc.iterations,
        rg.iterations
    );
    let df = (rg.functional - rc.functional).abs();
    assert!(df < 1e-10, "{what}: F differs by {df:e}");
    assert!(
        rg.theta < opts.theta_tolerance,
        "{what}: theta {:e}",
        rg.theta
    );
    let links = max_link_diff(&gpu, &cpu);
    eprintln!("{what}: |F_gpu - F_cpu| = {df:.1e}, largest link difference {links:.1e}");
    assert!(links < 1e-9, "{what}: the fixed fields differ by {links:e}");
    let covariance = max_link_diff(&gpu, &g.apply_gauge(u));
    assert!(
        covariance < 1e-12,
        "{what}: the fixed field is not G U G^+ ({covariance:e})"
    );
    assert!(g.max_unitarity_deviation() < 1e-13);
}

#[test]
fn landau_gauge_on_the_gpu_is_the_cpus() {
    require_gpu();
    let u = field([8, 8, 8, 16]);
    let opts = FixOptions {
        kind: GaugeKind::Landau,
        ..FixOptions::default()
    };
    compare_converged("Landau 8^3x16", &u, &opts);
}

#[test]
fn coulomb_gauge_on_the_gpu_is_the_cpus() {
    require_gpu();
    let opts = FixOptions {
        kind: GaugeKind::Coulomb,
        ..FixOptions::default()
    };
    compare_converged("Coulomb 8^3x16", &field([8, 8, 8, 16]), &opts);
    let odd_lt = first_timeslices(&field([8, 8, 8, 6]), 5);
    compare_converged("Coulomb 8^3x5", &odd_lt, &opts);
}

#[test]
fn the_same_sweeps_give_the_same_functional_and_theta() {
    // Tolerance 0: both sides make exactly 50 sweeps (5 reunitarisations) and say they
    // did not converge.
    require_gpu();
    let u = field([8, 8, 8, 16]);
    for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
        let opts = FixOptions {
            kind,
            theta_tolerance: 0.0,
            functional_tolerance: 0.0,
            max_iterations: 50,
            ..FixOptions::default()
        };
        let (_, _, rc) = fix(&u, &opts).unwrap();
        let (_, _, rg) = fix_on_gpu(&u, &opts).unwrap();
        show(&format!("{kind:?}, 50 sweeps"), "CPU", &rc);
        show(&format!("{kind:?}, 50 sweeps"), "GPU", &rg);
        assert!(!rc.converged && !rg.converged);
        assert_eq!((rc.iterations, rg.iterations), (50, 50));
        let df = (rg.functional - rc.functional).abs();
        let dt = (rg.theta - rc.theta).abs() / rc.theta;
        eprintln!("{kind:?}: |dF| = {df:.1e}, |d theta| / theta = {dt:.1e}");
        assert!(df < 1e-12, "{kind:?}: F differs by {df:e}");
        assert!(dt < 1e-9, "{kind:?}: theta differs by {dt:e} relative");
    }
}

#[test]
fn bad_input_is_refused_as_on_the_cpu() {
    require_gpu();
    let mut u = field([4, 4, 4, 4]);
    let good = FixOptions::default();
    // The same checks as the CPU's fix, by name: omega outside (0, 2), an odd extent the
    // condition couples, a link that is not finite.
    let omega = FixOptions { omega: 2.0, ..good };
    assert!(
        matches!(fix_on_gpu(&u, &omega), Err(Error::InvalidValue { key, .. }) if key == "omega")
    );
    let odd = GaugeField::random(&Lattice::new([4, 4, 5, 4], DEFAULT_BOUNDARY).unwrap(), 3);
    assert!(matches!(fix_on_gpu(&odd, &good), Err(Error::InvalidValue { key, .. }) if key == "LZ"));
    u.links[3 * NDIM + 1].0[2][0] = C64::new(f64::NAN, 0.0);
    let (cpu, gpu) = (fix(&u, &good), fix_on_gpu(&u, &good));
    assert_eq!(
        cpu.unwrap_err().to_string(),
        gpu.unwrap_err().to_string(),
        "the same message for a link that is not finite"
    );
}

/// The first `lt` timeslices of `u`, a field of LT = `lt` (Coulomb gauge never couples
/// timeslices, so an odd LT is allowed).
fn first_timeslices(u: &GaugeField, lt: usize) -> GaugeField {
    let d = u.lattice.dims;
    let lattice = Lattice::new([d[0], d[1], d[2], lt], DEFAULT_BOUNDARY).unwrap();
    let links = u.links[..lattice.volume() * NDIM].to_vec();
    GaugeField { lattice, links }
}
