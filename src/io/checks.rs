//! Which checks ran on each input of this process, and their results: `qcd-solve info`
//! prints a gauge file's, and the main job's report lists every input's
//! (`input_checks`: the config, the gauge file or heatbath cache, the source file). The
//! readers record here as they succeed, so the list holds exactly the inputs read.

use serde::Serialize;
use std::sync::Mutex;

/// One check and its result ("ok: ...", "accepted unchecked: ...", "none stored").
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    pub check: String,
    pub result: String,
}

impl Check {
    pub fn new(check: impl Into<String>, result: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            result: result.into(),
        }
    }
}

/// The checks of one input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputChecks {
    /// "config", "gauge file", "source file", "heatbath cache".
    pub input: String,
    pub path: String,
    pub checks: Vec<Check>,
}

static RECORDED: Mutex<Vec<InputChecks>> = Mutex::new(Vec::new());

/// Record the checks of an input read by this process (a later read of the same input
/// and path replaces the earlier one).
pub fn record(input: &str, path: &std::path::Path, checks: Vec<Check>) {
    let entry = InputChecks {
        input: input.to_string(),
        path: path.display().to_string(),
        checks,
    };
    let mut all = RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|e| !(e.input == entry.input && e.path == entry.path));
    all.push(entry);
}

/// Every input's checks recorded so far, in the order read.
pub fn recorded() -> Vec<InputChecks> {
    RECORDED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
