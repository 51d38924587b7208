//! The process clock and its timed steps (the report's `time.steps`): a leaf module, so
//! that any layer (the backend's warm-up, the file writers) can time a step without
//! depending on the report.

use serde::Serialize;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

static PROCESS_START: OnceLock<Instant> = OnceLock::new();
static STEPS: Mutex<Vec<Step>> = Mutex::new(Vec::new());

/// One timed step inside the phases (the report's `time.steps`): what ran, when it started
/// (seconds since the process start) and how long it took. Steps can nest or overlap (a
/// background warm-up beside the generation), so they do not sum to the total.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub name: String,
    pub start: f64,
    pub seconds: f64,
}

/// Run `f` and record it as a step named `name` (also logged at debug level: `-v`).
pub fn timed<T>(name: &str, f: impl FnOnce() -> T) -> T {
    timed_seconds(name, f).0
}

/// `timed`, also returning the step's seconds (for a caller that books them elsewhere too).
pub fn timed_seconds<T>(name: &str, f: impl FnOnce() -> T) -> (T, f64) {
    let start = process_seconds();
    let t = Instant::now();
    let out = f();
    let seconds = t.elapsed().as_secs_f64();
    record(name, start, seconds);
    (out, seconds)
}

/// Record a step that began at `since` and ends now (for a span of code that defines
/// several values, which `timed`'s closure would have to hand back).
pub fn record_since(name: &str, since: Instant) {
    let seconds = since.elapsed().as_secs_f64();
    record(name, process_seconds() - seconds, seconds);
}

/// Record a step measured elsewhere.
pub fn record(name: &str, start: f64, seconds: f64) {
    tracing::debug!(start, seconds, "step: {name}");
    if let Ok(mut steps) = STEPS.lock() {
        steps.push(Step {
            name: name.to_string(),
            start,
            seconds,
        });
    }
}

/// The steps recorded so far in this process, in the order they ended.
pub fn steps() -> Vec<Step> {
    STEPS.lock().map(|s| s.clone()).unwrap_or_default()
}

/// Mark the start of the process (the binary does this first); later calls keep the first
/// mark. Library callers that never mark get the time of their first `process_seconds`.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

/// Seconds since `mark_process_start`.
pub fn process_seconds() -> f64 {
    PROCESS_START
        .get_or_init(Instant::now)
        .elapsed()
        .as_secs_f64()
}
