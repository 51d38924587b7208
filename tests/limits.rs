//! Documented bounds on what a run may be asked for (docs/reliability.md, "Bounds"):
//! iteration counts, thread counts, config sizes, and headers whose extents claim more
//! than the file holds. Each is refused with its exit code before anything large is
//! allocated.

mod safety_common;
use safety_common::*;

/// `--max-iter` beyond the documented bound (10^7) is a bad value (exit 2) naming the
/// key and the bound; before, i64::MAX panicked on a capacity overflow (exit 101) and
/// 2^32 aborted (exit 134).
#[test]
fn max_iterations_beyond_the_bound_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(d.path(), &small(""));
    for n in ["9223372036854775807", "4294967296", "10000001"] {
        let (code, err) = run(bin().arg(&cfg).args(["--max-iter", n]));
        assert_eq!(code, 2, "--max-iter {n}: {err}");
        assert!(
            err.contains("max_iterations") && err.contains("10000000"),
            "{err}"
        );
    }
}

/// The bound itself is accepted and costs nothing up front: the histories grow as the
/// solve goes, so a 4^4 solve asked for 10^7 iterations converges (in a few dozen) with a
/// peak memory far below the 80 MB a history of that length would take.
#[test]
fn max_iterations_at_the_bound_allocates_nothing_up_front() {
    let d = tempfile::tempdir().unwrap();
    let rep = d.path().join("r.json");
    let cfg = write_config(
        d.path(),
        &small(&format!("[output]\nreport = \"{}\"\n", rep.display())),
    );
    let (code, err) = run(bin().arg(&cfg).args(["--max-iter", "10000000"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    let hist = v["residual_history"].as_array().unwrap().len();
    assert!(hist < 1000, "history of {hist} entries");
}
