//! The stop rules every solver shares, and the record of a solve. A solver reports the
//! iterated residual norm at each check; the monitor says whether to go on, stop (and
//! why), or hand back to a wrapper (the reliable update of `mixed`).

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    Converged,
    MaxIterations,
    Stagnation,
    Divergence,
    NotANumber,
}

impl StopReason {
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::MaxIterations => "reached the maximum number of iterations",
            StopReason::Stagnation => "stagnated (no progress in the stagnation window)",
            StopReason::Divergence => "diverged (residual grew past the divergence limit)",
            StopReason::NotANumber => "produced NaN or infinity",
        }
    }
}

/// When to stop: shared by every method.
#[derive(Clone, Debug)]
pub struct StopRules {
    /// Stop when ||r|| / ||b|| <= tol.
    pub tol: f64,
    pub max_iterations: usize,
    /// Declare stagnation when the residual has not reached a new minimum (by 1%) for
    /// this many iterations.
    pub stagnation_window: usize,
    /// Declare divergence when ||r|| / ||b|| exceeds this.
    pub divergence_limit: f64,
}

impl StopRules {
    pub fn new(tol: f64, max_iterations: usize) -> Self {
        StopRules {
            tol,
            max_iterations,
            stagnation_window: 200,
            divergence_limit: 1e8,
        }
    }
}

/// What a check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Continue,
    Stop(StopReason),
    /// The iterated residual fell below the hand-off threshold (or the device iteration
    /// stopped by itself): return to the wrapper, which verifies it in higher precision.
    Handoff,
}

/// The stop rules applied to one solve (across restarts and reliable updates).
pub struct Monitor<'o> {
    pub rules: StopRules,
    /// (b|b) of the system being solved.
    pub nb: f64,
    /// tol^2 (b|b).
    pub eps: f64,
    best: f64,
    best_at: usize,
    /// Set by a mixed-precision wrapper: hand back when nr <= this.
    pub handoff_below: Option<f64>,
    observe: &'o mut dyn FnMut(usize, f64),
}

impl<'o> Monitor<'o> {
    pub fn new(rules: StopRules, nb: f64, observe: &'o mut dyn FnMut(usize, f64)) -> Self {
        let eps = rules.tol * rules.tol * nb;
        Monitor {
            rules,
            nb,
            eps,
            best: f64::INFINITY,
            best_at: 0,
            handoff_below: None,
            observe,
        }
    }

    /// A check inside an iteration: `nr` the iterated (r|r) after `iter` iterations,
    /// `running` whether the iteration would go on by itself (the fused device flag; true
    /// for host-driven solvers). Under a wrapper the iterated residual is not trusted for
    /// convergence: the wrapper verifies it (`judge` with `verified`).
    pub fn check(&mut self, iter: usize, nr: f64, running: bool) -> Verdict {
        if let Some(h) = self.handoff_below {
            if nr.is_finite() && (nr <= h || !running) {
                return Verdict::Handoff;
            }
        }
        let verified = self.handoff_below.is_none();
        match self.judge(iter, nr, verified) {
            Some(r) => Verdict::Stop(r),
            None => Verdict::Continue,
        }
    }

    /// The stop rules on (r|r) = nr after `iter` iterations; convergence only counts when
    /// `verified` (the residual is the true one, or the solver's own in full precision).
    pub fn judge(&mut self, iter: usize, nr: f64, verified: bool) -> Option<StopReason> {
        if !nr.is_finite() {
            return Some(StopReason::NotANumber);
        }
        if nr <= self.eps && verified {
            return Some(StopReason::Converged);
        }
        let rel = (nr / self.nb).sqrt();
        if rel > self.rules.divergence_limit {
            return Some(StopReason::Divergence);
        }
        if rel < 0.99 * self.best {
            self.best = rel;
            self.best_at = iter;
        } else if iter - self.best_at >= self.rules.stagnation_window {
            return Some(StopReason::Stagnation);
        }
        if iter >= self.rules.max_iterations {
            return Some(StopReason::MaxIterations);
        }
        if iter > 0 {
            (self.observe)(iter, rel);
            tracing::debug!(iteration = iter, residual = rel, "solver");
        }
        None
    }

    /// Start the stagnation window afresh at `iter` from the true (r|r) = nr_true (a
    /// wrapper restarting a stalled run from its true residual; the minimum the stalled run
    /// left may be a low precision's drift below the true residual).
    pub fn restart_window(&mut self, iter: usize, nr_true: f64) {
        self.best = (nr_true / self.nb).sqrt();
        self.best_at = iter;
    }

    /// Relative residuals sqrt(nr / (b|b)) of a history of nr.
    pub fn relative(&self, nr: &[f64]) -> Vec<f64> {
        nr.iter().map(|v| (v / self.nb).sqrt()).collect()
    }
}

/// What one run of a solver (between hand-offs) produced.
pub struct Run {
    /// Iteration count at the end (continuing the count it started from).
    pub iter: usize,
    /// (r|r) at each iteration from the start of this run (entry 0: the start).
    pub history: Vec<f64>,
    pub verdict: Verdict,
    /// Applications of the operator made (in the operator's own units).
    pub applications: usize,
    /// Host reads of scalars (checks).
    pub checks: usize,
}

/// A solver that can run on a right-hand side in its own workspace, handing back to a
/// wrapper: every method implements it, so `mixed` and `eo` wrap any of them.
pub trait Iterate<S: crate::linalg::Space> {
    /// Solve A x = rhs from x = 0, starting the iteration count at `start_iter` and the
    /// residual record at `nr0` ((rhs|rhs) when None). The solution stays in the
    /// workspace (`solution`).
    fn run(
        &mut self,
        space: &mut S,
        rhs: &S::Field,
        monitor: &mut Monitor,
        start_iter: usize,
        nr0: Option<f64>,
    ) -> crate::Result<Run>;
    /// The solution of the last run.
    fn solution(&self) -> Option<&S::Field>;
    /// The solution of the last run, taking it out of the workspace.
    fn take_solution(&mut self) -> Option<S::Field>;
    /// Free the workspace (and anything recorded on it).
    fn release(&mut self, space: &mut S);
}

/// The most iterations a solve may be asked for (`[solver] max_iterations`,
/// `--max-iter`): 10^7. Host histories grow as the solve goes, but a GPU engine keeps
/// its residual history in device memory sized up front (8 bytes an iteration: 80 MB at
/// this bound), and no Wilson solve that needs more than a few 10^5 iterations is worth
/// running (docs/reliability.md).
pub const MAX_ITERATIONS: i64 = 10_000_000;

pub use crate::linalg::engines::record;

/// The smallest tolerance a solve may be asked for: 1e-14, about 45 units of double
/// rounding (2.2e-16). Every precision's residual is computed and updated in double
/// (mixed precision restarts from a double residual), and the rounding of one Wilson
/// operator application and of the norms over a lattice's sums leaves a floor of a few
/// 1e-15 on ||r|| / ||b||; below it a solve can only run to `max_iterations` or stagnate
/// (docs/reliability.md).
pub const MIN_TOLERANCE: f64 = 1e-14;
