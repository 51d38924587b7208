//! Progress display for long solves and sweeps (indicatif), on stderr, only when stderr is
//! a terminal and `--quiet` was not given; otherwise every call is a no-op.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

fn enabled() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// A bar over the digits of residual reduction a solve needs: position 10 * log10(1/r)
/// out of 10 * log10(1/tol).
pub struct SolveProgress {
    bar: Option<ProgressBar>,
}

impl SolveProgress {
    pub fn new(label: &str, tol: f64) -> Self {
        if !enabled() {
            return SolveProgress { bar: None };
        }
        let len = (10.0 * (1.0 / tol).log10()).ceil().max(1.0) as u64;
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {msg} ({elapsed})")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label.to_string());
        SolveProgress { bar: Some(bar) }
    }

    pub fn update(&self, iteration: usize, residual: f64) {
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
