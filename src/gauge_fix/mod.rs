//! Coulomb and Landau gauge fixing on the CPU by overrelaxation (Mandula and Ogilvie's
//! overrelaxed local maximisation, through Cabibbo-Marinari SU(2) subgroups).
//!
//! `fix` maximises the functional `F = sum_x sum_mu Re tr U_mu(x) / (3 V Ndir)` over gauge
//! transformations (mu over x, y, z for Coulomb gauge, all four directions for Landau
//! gauge): sweeps of even then odd sites (`sweep`), each site's transform the overrelaxed
//! local maximum (`su2`), until theta (`measure`, QUDA's normalisation) and the relative
//! change of F both fall below their tolerances. It returns the fixed field
//! `G(x) U_mu(x) G(x + mu)^dagger`, computed from the input and the accumulated G (so it
//! is exactly that gauge transform of the input, SU(3) to rounding), with G and a report.
//!
//! The links are periodic in every direction (the fermion boundary condition is the Dirac
//! operator's, not the links'). A maximum reached from another point of the same gauge
//! orbit may be another local maximum (a Gribov copy). No Fourier acceleration.
//!
//! `backend::cuda::gauge_fix::fix_on_gpu` runs the same iteration on the GPU, sharing
//! `check_input`, the stopping rule `met` and `finish` with this one.

pub mod measure;
pub mod options;
pub mod su2;
pub mod sweep;
pub mod transform;

pub use measure::{functional, functional_per_timeslice, theta, theta_per_timeslice};
pub use options::{FixOptions, FixReport, GaugeKind};
pub use transform::GaugeTransform;

use crate::error::{Error, Result};
use crate::field::gauge::reunitarise;
use crate::field::su3::Su3;
use crate::field::GaugeField;
use crate::geometry::lattice::NDIM;
use std::time::Instant;
use sweep::{State, Tables};

/// Iterations between reunitarisations of the working links and of G (each sweep
/// multiplies every link by two SU(3) matrices and so adds rounding).
pub const REUNITARISE_EVERY: usize = 10;

/// Gauge-fix `g` as `opts` asks: the fixed field, the transform G that gives it from `g`,
/// and the report (which says whether the tolerances were met; reaching
/// `max_iterations` is not an error).
pub fn fix(g: &GaugeField, opts: &FixOptions) -> Result<(GaugeField, GaugeTransform, FixReport)> {
    let start = Instant::now();
    check_input(g, opts)?;
    let tables = Tables::new(&g.lattice);
    let mut state = State::new(&tables, g.links.clone());
    let (iterations, converged) = iterate(&mut state, g, opts);
    Ok(finish(
        g,
        state.transform,
        opts.kind,
        (iterations, converged),
        start,
    ))
}

/// Refuse bad options, a lattice the checkerboard cannot fix, and a field whose links are
/// not all finite (the GPU path's check too).
pub(crate) fn check_input(g: &GaugeField, opts: &FixOptions) -> Result<()> {
    opts.check()?;
    opts.check_lattice(&g.lattice)?;
    if g.links.len() != g.lattice.volume() * NDIM {
        return Err(Error::Internal(format!(
            "gauge field of {} links on a lattice of {} sites",
            g.links.len(),
            g.lattice.volume()
        )));
    }
    if let Some((bad, count)) = g.first_non_finite() {
        return Err(Error::invalid(
            "gauge field",
            format!(
                "{count} links hold a value that is not a finite number (the first: site {}, \
                 mu {}, value {}); such a field cannot be gauge fixed",
                bad.link / NDIM,
                bad.link % NDIM,
                bad.value
            ),
        ));
    }
    Ok(())
}

/// Sweep until converged or out of iterations: (iterations made, converged). Converged
/// means theta below its tolerance (for Coulomb gauge on every timeslice) and the
/// functional's relative change over the last sweep below its tolerance.
fn iterate(state: &mut State, g: &GaugeField, opts: &FixOptions) -> (usize, bool) {
    let mut work = GaugeField {
        lattice: g.lattice.clone(),
        links: Vec::new(),
    };
    let mut previous = functional(g, opts.kind);
    for iteration in 1..=opts.max_iterations {
        state.sweep(opts.kind.ndir(), opts.omega);
        if iteration % REUNITARISE_EVERY == 0 {
            reunitarise(&mut state.links);
            reunitarise(&mut state.transform);
        }
        // Measure on the working links without copying them.
        std::mem::swap(&mut work.links, &mut state.links);
        let (f, th) = measure::quality(&work, opts.kind);
        std::mem::swap(&mut work.links, &mut state.links);
        if met(opts, iteration, f, std::mem::replace(&mut previous, f), th) {
            return (iteration, true);
        }
    }
    (opts.max_iterations, false)
}

/// The stopping rule after `iteration` (`iterate`): theta `th` below its tolerance and the
/// functional's relative change from `previous` to `f` below its own (the GPU path's rule
/// too).
pub(crate) fn met(opts: &FixOptions, iteration: usize, f: f64, previous: f64, th: f64) -> bool {
    let change = (f - previous).abs() / f.abs().max(f64::MIN_POSITIVE);
    tracing::debug!("gauge fix iteration {iteration}: F = {f:.15}, theta = {th:.3e}");
    th < opts.theta_tolerance && change < opts.functional_tolerance
}

/// The accumulated transform `matrices` reunitarised, the fixed field computed from the
/// input with it, and the report of `(iterations, converged)` with the fixed field's
/// functional and theta and the time since `start` (the GPU path's end too).
pub(crate) fn finish(
    g: &GaugeField,
    mut matrices: Vec<Su3>,
    kind: GaugeKind,
    (iterations, converged): (usize, bool),
    start: Instant,
) -> (GaugeField, GaugeTransform, FixReport) {
    reunitarise(&mut matrices);
    let transform = GaugeTransform { matrices };
    let fixed = transform.apply_gauge(g);
    let report = FixReport {
        iterations,
        functional: functional(&fixed, kind),
        theta: theta(&fixed, kind),
        converged,
        seconds: start.elapsed().as_secs_f64(),
    };
    (fixed, transform, report)
}
