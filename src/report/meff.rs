//! Effective masses of a two-point function and their chart. With periodic time a
//! single state gives C(t) = A cosh(m (t - T/2)), so the cosh effective mass
//! m(t) = acosh((C(t-1) + C(t+1)) / (2 C(t))) is m exactly at every t; the log ratio
//! ln(C(t) / C(t+1)) is m only far from T/2 and is given for t < T/2. Both are returned;
//! the chart draws both.

use crate::error::Result;
use std::path::{Path, PathBuf};

/// One timeslice's effective masses (`None` where the formula has no real value).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EffectiveMass {
    pub t: usize,
    /// acosh((C(t-1) + C(t+1)) / (2 C(t))), t = 1 .. T-2.
    pub cosh: Option<f64>,
    /// ln(C(t) / C(t+1)), t < T/2 (past it the backward-moving state dominates).
    pub log: Option<f64>,
}

/// The effective masses of `c` (t = 0 .. T-1 from the source).
pub fn effective_mass(c: &[f64]) -> Vec<EffectiveMass> {
    let n = c.len();
    (0..n)
        .map(|t| {
            let log = (t + 1 < n && 2 * t < n)
                .then(|| c[t] / c[t + 1])
                .filter(|r| r.is_finite() && *r > 0.0)
                .map(f64::ln);
            let cosh = (t >= 1 && t + 1 < n)
                .then(|| (c[t - 1] + c[t + 1]) / (2.0 * c[t]))
                .filter(|r| r.is_finite() && *r >= 1.0)
                .map(f64::acosh);
            EffectiveMass { t, cosh, log }
        })
        .collect()
}

/// The chart `<stem>.svg` and `.png` of the effective masses: what it is of in `title`
/// (the correlator, the gauge field), the lattice, device and date in `context`.
pub fn chart(
    stem: &Path,
    title: &str,
    context: &super::charts::Context,
    m: &[EffectiveMass],
) -> Result<Vec<PathBuf>> {
    use super::charts::{Axis, Chart, Series};
    let pick = |f: fn(&EffectiveMass) -> Option<f64>| -> Vec<(f64, f64)> {
        m.iter()
            .filter_map(|e| f(e).map(|v| (e.t as f64, v)))
            .collect()
    };
    let series = [
        Series::measured("cosh: acosh((C(t-1)+C(t+1))/2C(t))", pick(|e| e.cosh)),
        Series::measured("log: ln(C(t)/C(t+1))", pick(|e| e.log)),
    ];
    super::charts::draw(
        stem,
        &Chart::Lines {
            title,
            context: &context.line(),
            x_label: "t (from the source)",
            x_axis: Axis::Count,
            y_label: "effective mass (lattice units)",
            y_axis: Axis::Linear,
            series: &series,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_state_gives_its_mass_at_every_t() {
        // C(t) = cosh(m (t - T/2)): the cosh formula is m exactly (analytic), the log
        // ratio is m tanh-corrected, m exactly only in the limit; at t = 0 it is
        // ln(cosh(mT/2) / cosh(m(T/2 - 1))).
        let (m, n) = (0.37, 16usize);
        let c: Vec<f64> = (0..n)
            .map(|t| (m * (t as f64 - n as f64 / 2.0)).cosh())
            .collect();
        let e = effective_mass(&c);
        for x in &e[1..n - 1] {
            assert!((x.cosh.unwrap() - m).abs() < 1e-12, "{x:?}");
        }
        assert!(e[0].cosh.is_none() && e[n - 1].cosh.is_none());
        let expect0 = ((m * 8.0).cosh() / (m * 7.0).cosh()).ln();
        assert!((e[0].log.unwrap() - expect0).abs() < 1e-12);
        assert!(e[n / 2].log.is_none() && e[n - 1].log.is_none());
    }

    #[test]
    fn no_value_where_the_formula_has_none() {
        // A concave correlator gives a cosh ratio below 1 ((1 + 4) / 6): no cosh mass;
        // a zero after t = 1: no log mass there.
        let e = effective_mass(&[1.0, 3.0, 0.0, 0.0, 1.0, 1.0]);
        assert_eq!(e[1].cosh, None);
        assert_eq!(e[1].log, None);
    }
}
