//! The mean of a Monte Carlo time series with an autocorrelation-aware error: the
//! integrated autocorrelation time with U. Wolff's automatic windowing ("Monte Carlo errors
//! with less errors", Comput. Phys. Commun. 156 (2004) 143), as a pure function of the data.
//!
//! With Gamma(t) the autocovariance at lag t and tau_int(W) = 1/2 + sum_{t=1..W} Gamma(t) /
//! Gamma(0), the window W is the first W >= 1 at which
//! `g(W) = exp(-W / tau_W) - tau_W / sqrt(W N)` turns negative, with
//! `tau_W = S / ln((2 tau_int(W) + 1) / (2 tau_int(W) - 1))` (S = 1.5; tau_W -> 0 when
//! tau_int(W) <= 1/2). Gamma is then corrected for the bias of the estimated mean
//! (Gamma(t) += C_F / N), and
//! `error = sqrt(C_F / N)`, `C_F = Gamma(0) + 2 sum_{t=1..W} Gamma(t) = 2 tau_int Gamma(0)`,
//! `error of tau_int = tau_int * 2 sqrt((W + 1/2 - tau_int) / N)` (Wolff, eq. 42).

use serde::Serialize;

/// Wolff's default ratio S of the window to the exponential time scale.
pub const WOLFF_S: f64 = 1.5;

/// Mean, errors and autocorrelation of one series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AutocorrEstimate {
    /// Number of measurements.
    pub n: usize,
    pub mean: f64,
    /// Error of the mean including autocorrelations: sqrt(2 tau_int Gamma(0) / N).
    pub error: f64,
    /// The error as if the data were independent: sqrt(Gamma(0) / N).
    pub naive_error: f64,
    /// Integrated autocorrelation time (1/2 for independent data), in measurements.
    pub tau_int: f64,
    pub tau_int_error: f64,
    /// The summation window W chosen by the automatic windowing.
    pub window: usize,
    /// false when g(W) never turned negative before W = N/2 (series too short for its
    /// autocorrelation time; the error is then not to be trusted).
    pub window_found: bool,
}

fn autocovariance(data: &[f64], mean: f64, t: usize) -> f64 {
    let n = data.len();
    let s: f64 = data[..n - t]
        .iter()
        .zip(&data[t..])
        .map(|(a, b)| (a - mean) * (b - mean))
        .sum();
    s / (n - t) as f64
}

/// Mean and error of `data` with Wolff's automatic windowing and ratio `s` (use WOLFF_S).
/// Needs at least two measurements.
pub fn autocorrelation_with(data: &[f64], s: f64) -> Option<AutocorrEstimate> {
    let n = data.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mean = data.iter().sum::<f64>() / nf;
    let gamma0 = autocovariance(data, mean, 0);
    if gamma0 <= 0.0 {
        // Constant series: no fluctuation, no autocorrelation to measure.
        return Some(AutocorrEstimate {
            n,
            mean,
            error: 0.0,
            naive_error: 0.0,
            tau_int: 0.5,
            tau_int_error: 0.0,
            window: 0,
            window_found: true,
        });
    }
    let mut gamma = vec![gamma0];
    let mut sum = 0.0; // sum_{t=1..W} Gamma(t)
    let w_max = (n / 2).max(1);
    let mut window = w_max;
    let mut window_found = false;
    for w in 1..=w_max {
        let g = autocovariance(data, mean, w);
        gamma.push(g);
        sum += g;
        let tau = 0.5 + sum / gamma0;
        let tau_w = if tau > 0.5 {
            s / ((2.0 * tau + 1.0) / (2.0 * tau - 1.0)).ln()
        } else {
            f64::MIN_POSITIVE
        };
        let g_w = (-(w as f64) / tau_w).exp() - tau_w / (w as f64 * nf).sqrt();
        if g_w < 0.0 {
            window = w;
            window_found = true;
            break;
        }
    }
    // Bias correction of Gamma for the estimated mean, then C_F and tau_int.
    let c_f_raw = gamma0 + 2.0 * gamma[1..=window].iter().sum::<f64>();
    let shift = c_f_raw / nf;
    let gamma0_c = gamma0 + shift;
    let c_f = c_f_raw + (2 * window + 1) as f64 * shift;
    let tau_int = c_f / (2.0 * gamma0_c);
    let error = (c_f.max(0.0) / nf).sqrt();
    let tau_int_error = tau_int * 2.0 * ((window as f64 + 0.5 - tau_int).max(0.0) / nf).sqrt();
    Some(AutocorrEstimate {
        n,
        mean,
        error,
        naive_error: (gamma0 / nf).sqrt(),
        tau_int,
        tau_int_error,
        window,
        window_found,
    })
}

/// `autocorrelation_with(data, WOLFF_S)`.
pub fn autocorrelation(data: &[f64]) -> Option<AutocorrEstimate> {
    autocorrelation_with(data, WOLFF_S)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_short_and_constant_series() {
        assert!(autocorrelation(&[1.0]).is_none());
        let c = autocorrelation(&[2.0; 10]).unwrap();
        assert_eq!((c.mean, c.error, c.tau_int), (2.0, 0.0, 0.5));
    }

    #[test]
    fn alternating_series_has_small_tau() {
        // Perfect anticorrelation: Gamma(1) = -Gamma(0); the window closes at once.
        let d: Vec<f64> = (0..1000)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let e = autocorrelation(&d).unwrap();
        assert_eq!(e.window, 1);
        assert!(e.tau_int < 0.5);
    }
}
