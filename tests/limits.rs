//! Documented bounds on what a run may be asked for (docs/reliability.md, "Bounds"):
//! iteration counts, thread counts, config sizes, and headers whose extents claim more
//! than the file holds. Each is refused with its exit code before anything large is
//! allocated.

mod safety_common;
use safety_common::*;
use std::path::Path;

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

/// Wait for `child` at most `secs` seconds; kill it and fail if it is still running (a
/// FIFO read used to hang forever).
fn wait_bounded(mut child: std::process::Child, secs: u64) -> (i32, String) {
    let t = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed().as_secs() >= secs {
            let _ = child.kill();
            panic!("still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    code_and_err(&child.wait_with_output().unwrap())
}

/// `RAYON_NUM_THREADS` is held to the `--threads` cap (4 x cores): 100000 is a bad value
/// (exit 2) naming the variable, where before it started that many threads.
#[test]
fn rayon_num_threads_beyond_the_cap_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(d.path(), &small(""));
    for v in ["100000", "lots"] {
        let (code, err) = run(bin().arg(&cfg).env("RAYON_NUM_THREADS", v));
        assert_eq!(code, 2, "{v}: {err}");
        assert!(err.contains("RAYON_NUM_THREADS"), "{err}");
    }
    let (code, err) = run(bin().arg(&cfg).env("RAYON_NUM_THREADS", "1"));
    assert_eq!(code, 0, "{err}");
}

/// Only regular files are read: a FIFO or a device as the config, the gauge file or the
/// source is refused at once (exit 3) naming what it is; before, a FIFO hung forever and
/// /dev/zero as the config grew to 6.5 GB.
#[test]
fn fifos_and_devices_are_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for (config, said) in [
        (fifo.as_path(), "a FIFO"),
        (Path::new("/dev/zero"), "a device"),
    ] {
        let child = bin()
            .arg(config)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (code, err) = wait_bounded(child, 10);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains(&format!("the config is {said}")), "{err}");
    }
    let gauge = small("").replace(
        "type = \"random\"\nseed = 3",
        &format!("type = \"file\"\npath = \"{}\"", fifo.display()),
    );
    let source = small(&format!(
        "[source]\ntype = \"file\"\npath = \"{}\"\n",
        fifo.display()
    ));
    for (body, said) in [(gauge, "the gauge file is a FIFO"), (source, "is a FIFO")] {
        let cfg = write_config(d.path(), &body);
        let child = bin()
            .arg(&cfg)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (code, err) = wait_bounded(child, 10);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains(said), "{err}");
    }
    let child = bin()
        .arg("info")
        .arg(&fifo)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, err) = wait_bounded(child, 10);
    assert_eq!(code, 3, "{err}");
}

/// A config over the documented 1 MiB is refused (exit 3) naming the bound, before it is
/// read whole.
#[test]
fn an_oversized_config_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let body = format!("{}\n# {}\n", small(""), "x".repeat(2 << 20));
    let cfg = write_config(d.path(), &body);
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("at most 1048576 are read"), "{err}");
}

/// Under an address-space limit (`ulimit -v 300000`, 293 MiB) a 16^3x32 run, which needs
/// 528 MiB by the host estimate, is refused before it allocates (exit 6) with both
/// numbers; before, the allocator aborted (exit 134).
#[test]
fn an_address_space_limit_gives_exit_6_not_an_abort() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(
        d.path(),
        &small("").replace(
            "LX = 4\nLY = 4\nLZ = 4\nLT = 4",
            "LX = 16\nLY = 16\nLZ = 16\nLT = 32",
        ),
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 300000 && exec \"{}\" -q \"{}\"",
            env!("CARGO_BIN_EXE_qcd-solve"),
            cfg.display()
        ))
        .output()
        .unwrap();
    let (code, err) = code_and_err(&out);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("553648128 bytes") && err.contains("ulimit -v"),
        "{err}"
    );
}

/// A NERSC header of 160 bytes claiming 96^4 in double: the extents are checked against
/// the file's size before anything is allocated (exit 4, naming the 48922361856 bytes a
/// 96^4 field needs: 96^4 sites x 4 links x 18 reals x 8 bytes).
#[test]
fn a_header_claiming_more_than_the_file_holds_allocates_nothing() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("big.nersc");
    std::fs::write(
        &f,
        "BEGIN_HEADER\nDATATYPE = 4D_SU3_GAUGE_3x3\nDIMENSION_1 = 96\nDIMENSION_2 = 96\n\
         DIMENSION_3 = 96\nDIMENSION_4 = 96\nCHECKSUM = 0\nFLOATING_POINT = IEEE64BIG\n\
         END_HEADER\n",
    )
    .unwrap();
    let (code, err) = run(bin().arg("info").arg(&f));
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("needs 48922361856 bytes"), "{err}");
}
