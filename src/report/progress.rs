//! Progress display for long solves and sweeps, on stderr: a bar (indicatif) when stderr
//! is a terminal; when it is not (a batch job's log), a plain log line at a steady
//! interval (`--progress-secs`, default 5 s; 0 = every update) so the log shows life.
//! Nothing with `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The default interval of the progress lines, seconds.
pub const DEFAULT_PROGRESS_SECS: f64 = 5.0;

/// The interval of the progress lines (`f64` bits; set once from `--progress-secs`).
static INTERVAL_BITS: AtomicU64 = AtomicU64::new(DEFAULT_PROGRESS_SECS.to_bits());

static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `--quiet` was given: no logs but errors, no progress, nothing on stdout from
/// commands whose results are files.
pub fn is_quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

fn enabled() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// Whether progress goes out as log lines: not quiet and stderr not a terminal.
fn lines_enabled() -> bool {
    !QUIET.load(Ordering::Relaxed) && !std::io::stderr().is_terminal()
}

/// Set the interval between progress lines (`--progress-secs`, checked by
/// `interval_of`).
pub fn set_line_interval(interval: Duration) {
    INTERVAL_BITS.store(interval.as_secs_f64().to_bits(), Ordering::Relaxed);
}

fn line_interval() -> Duration {
    Duration::from_secs_f64(f64::from_bits(INTERVAL_BITS.load(Ordering::Relaxed)))
}

/// `--progress-secs`'s value: seconds, finite, >= 0 (at most 1e9); anything else is an
/// error saying what is allowed and what was given.
pub fn interval_of(value: &str) -> std::result::Result<Duration, String> {
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=1e9).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "must be a number of seconds from 0 to 1e9, got {value:?}"
        )),
    }
}

/// Progress as log lines, at most one per interval.
pub struct Ticker {
    start: Instant,
    interval: Duration,
    last: Mutex<Instant>,
}

impl Ticker {
    /// A ticker when lines are enabled (stderr not a terminal, not quiet).
    pub fn new() -> Option<Ticker> {
        if !lines_enabled() {
            return None;
        }
        let now = Instant::now();
        Some(Ticker {
            start: now,
            interval: line_interval(),
            last: Mutex::new(now),
        })
    }

    /// Seconds since the start, when a line is due now (and marks it written).
    pub fn due(&self) -> Option<f64> {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if now.duration_since(*last) >= self.interval {
            *last = now;
            Some(now.duration_since(self.start).as_secs_f64())
        } else {
            None
        }
    }
}

/// A bar over the digits of residual reduction a solve needs: position 10 * log10(1/r)
/// out of 10 * log10(1/tol).
pub struct SolveProgress {
    bar: Option<ProgressBar>,
    lines: Option<(Ticker, String, f64)>,
}

impl SolveProgress {
    pub fn new(label: &str, tol: f64) -> Self {
        if !enabled() {
            return SolveProgress {
                bar: None,
                lines: Ticker::new().map(|t| (t, label.to_string(), tol)),
            };
        }
        let len = (10.0 * (1.0 / tol).log10()).ceil().max(1.0) as u64;
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {msg} ({elapsed})")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label.to_string());
        SolveProgress {
            bar: Some(bar),
            lines: None,
        }
    }

    /// No bar and no lines (the other ranks of a split lattice: rank 0 reports).
    pub fn silent() -> Self {
        SolveProgress {
            bar: None,
            lines: None,
        }
    }

    pub fn update(&self, iteration: usize, residual: f64) {
        if let Some((ticker, label, tol)) = &self.lines {
            if let Some(t) = ticker.due() {
                tracing::info!(
                    "{label} progress: iteration {iteration}, residual {residual:.3e} (tolerance {tol:.1e}), {:.1} iterations/s, {t:.1} s",
                    iteration as f64 / t.max(1e-9)
                );
            }
        }
        if let Some(b) = &self.bar {
            if residual > 0.0 && residual.is_finite() {
                b.set_position((10.0 * (1.0 / residual).log10()).max(0.0) as u64);
            }
            b.set_message(format!("iteration {iteration}, residual {residual:.3e}"));
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// A counting bar (sweeps, benchmark repeats).
pub fn counter(label: &str, total: u64) -> Option<ProgressBar> {
    if !enabled() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    Some(bar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_seconds_at_least_0_and_anything_else_is_refused() {
        assert_eq!(line_interval(), Duration::from_secs(5));
        assert_eq!(interval_of(" 0 ").unwrap(), Duration::ZERO);
        assert_eq!(interval_of("2.5").unwrap(), Duration::from_millis(2500));
        for bad in ["-1", "soon", "", "NaN", "inf", "2e9"] {
            let m = interval_of(bad).unwrap_err();
            assert!(m.contains(&format!("{bad:?}")), "{m}");
        }
    }
}
