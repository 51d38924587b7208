//! The gauge functional and the gauge condition's violation theta, over the lattice and per
//! timeslice, in QUDA's normalisation (`gauge_fix_ovr`'s quality kernel).
//!
//! With `Ndir` the directions of the gauge condition (3 for Coulomb: x, y, z; 4 for
//! Landau) and `V` the volume:
//!
//! - functional `F = sum_x sum_{mu < Ndir} Re tr U_mu(x) / (3 V Ndir)`: 1 for the unit
//!   field, maximised by the gauge fixing;
//! - `Delta(x) = sum_{mu < Ndir} [U_mu(x - mu) - U_mu(x)]`,
//!   `M(x) = Delta(x) - Delta(x)^dagger` with its trace removed (`M - tr M / 3`), and
//!   `theta = sum_x tr[M(x) M(x)^dagger] / (3 V)`.
//!
//! `M(x)` is `-2 i` times the lattice divergence `sum_mu [A_mu(x) - A_mu(x - mu)]` of
//! `A_mu = [(U_mu - U_mu^dagger) / 2i]_traceless`, so this theta is 4 times
//! `sum_x tr[(d.A)(d.A)^dagger] / (3 V)`, the form some papers quote. It is also the
//! squared norm of the functional's gradient per site: a maximum of F has theta = 0.
//! Per timeslice the sums run over the timeslice's sites and `V` becomes the spatial
//! volume `LX LY LZ` (the Coulomb gauge condition holds on each timeslice separately).

use super::options::GaugeKind;
use crate::field::su3::{Su3, C64};
use crate::field::GaugeField;
use crate::geometry::lattice::{Lattice, NDIM};
use crate::reduce::det_sum;
use rayon::prelude::*;

/// Sites a rayon task takes at least in the per-site loops.
const MIN_SITES: usize = 256;

/// `sum_{mu < ndir} Re tr U_mu(x)` of every site x.
fn site_traces(g: &GaugeField, ndir: usize) -> Vec<f64> {
    g.links
        .par_chunks(NDIM)
        .with_min_len(MIN_SITES)
        .map(|l| l[..ndir].iter().map(|u| u.trace().re).sum())
        .collect()
}

/// `tr[M(x) M(x)^dagger]` of every site x (the module comment's M).
fn site_thetas(g: &GaugeField, ndir: usize) -> Vec<f64> {
    (0..g.lattice.volume())
        .into_par_iter()
        .with_min_len(MIN_SITES)
        .map(|x| site_theta(g, x, ndir))
        .collect()
}

/// `tr[M(x) M(x)^dagger]` at site x.
fn site_theta(g: &GaugeField, x: usize, ndir: usize) -> f64 {
    let nb = g.lattice.neighbours(x);
    let mut delta = Su3::zero();
    for mu in 0..ndir {
        let down = g.link(nb[mu][1].0, mu);
        let up = g.link(x, mu);
        for i in 0..3 {
            for j in 0..3 {
                delta.0[i][j] += down.0[i][j] - up.0[i][j];
            }
        }
    }
    traceless_antihermitian_norm2(&delta)
}

/// `tr[M M^dagger]` for `M = D - D^dagger` less its trace over 3.
pub(crate) fn traceless_antihermitian_norm2(d: &Su3) -> f64 {
    let mut m = Su3::zero();
    for i in 0..3 {
        for j in 0..3 {
            m.0[i][j] = d.0[i][j] - d.0[j][i].conj();
        }
    }
    let tr: C64 = m.trace() / 3.0;
    for i in 0..3 {
        m.0[i][i] -= tr;
    }
    m.0.iter().flatten().map(|z| z.norm_sqr()).sum()
}

/// The functional F of `kind` (module comment): 1 for the unit field.
pub fn functional(g: &GaugeField, kind: GaugeKind) -> f64 {
    let ndir = kind.ndir();
    det_sum(&site_traces(g, ndir), |s| *s) / (3.0 * g.lattice.volume() as f64 * ndir as f64)
}

/// theta of `kind` (module comment): 0 on a field that satisfies the gauge condition.
pub fn theta(g: &GaugeField, kind: GaugeKind) -> f64 {
    det_sum(&site_thetas(g, kind.ndir()), |s| *s) / (3.0 * g.lattice.volume() as f64)
}

/// The functional of each timeslice t = 0 .. LT-1 (normalised by its own volume).
pub fn functional_per_timeslice(g: &GaugeField, kind: GaugeKind) -> Vec<f64> {
    let ndir = kind.ndir();
    per_timeslice(&g.lattice, &site_traces(g, ndir), 3.0 * ndir as f64)
}

/// theta of each timeslice t = 0 .. LT-1 (normalised by its own volume). For Coulomb
/// gauge theta is their mean.
pub fn theta_per_timeslice(g: &GaugeField, kind: GaugeKind) -> Vec<f64> {
    per_timeslice(&g.lattice, &site_thetas(g, kind.ndir()), 3.0)
}

/// The functional and the theta the stopping rule compares with its tolerance, in one
/// pass over the links: theta itself for Landau gauge, the largest timeslice's theta for
/// Coulomb gauge (every timeslice must meet the tolerance, not only their mean).
pub(crate) fn quality(g: &GaugeField, kind: GaugeKind) -> (f64, f64) {
    let ndir = kind.ndir();
    let (traces, thetas): (Vec<f64>, Vec<f64>) = (0..g.lattice.volume())
        .into_par_iter()
        .with_min_len(MIN_SITES)
        .map(|x| {
            let trace: f64 = (0..ndir).map(|mu| g.link(x, mu).trace().re).sum();
            (trace, site_theta(g, x, ndir))
        })
        .unzip();
    quality_of_sites(&g.lattice, kind, &traces, &thetas)
}

/// `quality` from the per-site sums: `traces[x] = sum_{mu < Ndir} Re tr U_mu(x)` and
/// `thetas[x] = tr[M(x) M(x)^dagger]`, added in a fixed order (the GPU path computes the
/// per-site sums on the device and adds them here, as the CPU does).
pub(crate) fn quality_of_sites(
    lattice: &Lattice,
    kind: GaugeKind,
    traces: &[f64],
    thetas: &[f64],
) -> (f64, f64) {
    let v = lattice.volume() as f64;
    let f = det_sum(traces, |s| *s) / (3.0 * v * kind.ndir() as f64);
    let th = match kind {
        GaugeKind::Landau => det_sum(thetas, |s| *s) / (3.0 * v),
        GaugeKind::Coulomb => {
            per_timeslice(lattice, thetas, 3.0)
                .into_iter()
                .fold(
                    0.0,
                    |worst, t| if t.is_nan() || t > worst { t } else { worst },
                )
        }
    };
    (f, th)
}

/// Sums of `per_site` over each timeslice (contiguous: t is the slowest index), divided
/// by `norm` times the spatial volume.
fn per_timeslice(lattice: &Lattice, per_site: &[f64], norm: f64) -> Vec<f64> {
    let d = lattice.dims;
    let vs = d[0] * d[1] * d[2];
    per_site
        .chunks(vs)
        .map(|s| det_sum(s, |v| *v) / (norm * vs as f64))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};

    #[test]
    fn the_unit_field_is_fixed_and_a_constant_field_is_not() {
        let l = Lattice::new([4, 4, 4, 6], DEFAULT_BOUNDARY).unwrap();
        let unit = GaugeField::unit(&l);
        for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
            // Analytic: Re tr 1 = 3 on every link, Delta = 0.
            assert!((functional(&unit, kind) - 1.0).abs() < 1e-15);
            assert_eq!(theta(&unit, kind), 0.0);
        }
        // Every link U = diag(e^{ia}, e^{-ia}, 1): F = (2 cos a + 1) / 3 for either kind,
        // and Delta = 0 (U(x - mu) = U(x)) so theta = 0: a constant field is a stationary
        // point of F (every global rotation leaves it so).
        let a = 0.3f64;
        let mut u = Su3::identity();
        u.0[0][0] = C64::from_polar(1.0, a);
        u.0[1][1] = C64::from_polar(1.0, -a);
        let mut c = unit.clone();
        c.links.iter_mut().for_each(|l| *l = u);
        let want = (2.0 * a.cos() + 1.0) / 3.0;
        for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
            assert!((functional(&c, kind) - want).abs() < 1e-14);
            assert!(theta(&c, kind) < 1e-30);
            for f in functional_per_timeslice(&c, kind) {
                assert!((f - want).abs() < 1e-14);
            }
        }
    }

    #[test]
    fn theta_of_one_twisted_link_is_its_closed_form() {
        // One link U_0(x0) = diag(e^{ia}, e^{-ia}, 1), all others 1. Delta at x0 is
        // 1 - U, at x0 + 0 it is U - 1. M = D - D^+ at x0: diag(-2i sin a, 2i sin a, 0),
        // traceless already; tr M M^+ = 8 sin^2 a; the same at x0 + 0. So
        // theta = 16 sin^2 a / (3 V), for Landau and Coulomb alike (mu = 0 is spatial).
        let l = Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
        let mut g = GaugeField::unit(&l);
        let a = 0.4f64;
        let x0 = l.index([1, 2, 3, 0]);
        let mut u = Su3::identity();
        u.0[0][0] = C64::from_polar(1.0, a);
        u.0[1][1] = C64::from_polar(1.0, -a);
        g.links[x0 * NDIM] = u;
        let want = 16.0 * a.sin().powi(2) / (3.0 * l.volume() as f64);
        for kind in [GaugeKind::Landau, GaugeKind::Coulomb] {
            let t = theta(&g, kind);
            assert!(
                (t - want).abs() < 1e-15 * want.max(1.0),
                "{kind:?}: {t} vs {want}"
            );
        }
        // The timeslice t = 0 holds both sites: its theta is V / Vs times the whole.
        let ts = theta_per_timeslice(&g, GaugeKind::Coulomb);
        assert!((ts[0] - want * 4.0).abs() < 1e-14);
        assert!(ts[1..].iter().all(|&t| t == 0.0));
    }
}
