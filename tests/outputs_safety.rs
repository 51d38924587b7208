//! Outputs that could destroy inputs or each other, links planted at temporary names,
//! two runs on one output set, and targets that would fail only after the solve
//! (docs/reliability.md, "Outputs"). Each case asserts the exit code, the words that name
//! the problem, and that the files it must not touch are byte for byte as they were.

mod safety_common;
use safety_common::*;
use std::path::Path;

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// A solution or gauge output at the gauge input's path is refused before any work (exit
/// 2) naming both, and the input is untouched; before, the ILDG file became an `.npy`.
#[test]
fn an_output_at_the_gauge_input_is_refused_and_the_input_kept() {
    let d = tempfile::tempdir().unwrap();
    let gauge = d.path().join("g.lime");
    std::fs::copy(shared("ahmidas_conf.48"), &gauge).unwrap();
    let before = bytes(&gauge);
    for key in ["solution", "gauge"] {
        let body = format!(
            "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"file\"\n\
             path = \"g.lime\"\n\n[dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n\
             [output]\n{key} = \"{}\"\n",
            gauge.display()
        );
        let cfg = write_config(d.path(), &body);
        let (code, err) = run(bin().arg(&cfg));
        assert_eq!(code, 2, "{key}: {err}");
        assert!(
            err.contains("gauge file") && err.contains("g.lime"),
            "{err}"
        );
        assert_eq!(bytes(&gauge), before, "{key}");
    }
}

/// A report at the config's own path (reached through `..`) is refused (exit 2).
#[test]
fn a_report_over_the_config_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("sub")).unwrap();
    let cfg_path = d.path().join("run.toml");
    let body = small(&format!(
        "[output]\nreport = \"{}/sub/../run.toml\"\n",
        d.path().display()
    ));
    std::fs::write(&cfg_path, &body).unwrap();
    let (code, err) = run(bin().arg(&cfg_path));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("config") && err.contains("report"), "{err}");
    assert_eq!(bytes(&cfg_path), body.as_bytes());
}

/// Report and solution at one path: refused before the solve (exit 2) naming both, where
/// before the solution was lost and exit 3 came after the solve.
#[test]
fn report_and_solution_at_one_path_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("same");
    let cfg = write_config(d.path(), &small_outputs(&p, &p));
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the solution and the report are one file"),
        "{err}"
    );
    assert!(!p.exists());
}

/// A symlink planted at every name a temporary could take cannot redirect the write: the
/// temporaries are created exclusively under unpredictable names, so the file outside
/// is untouched and the outputs are regular files. Planting links at the old
/// predictable names (`<out>.tmp-<pid>`) for the next few pids is what overwrote an
/// outside file before; here every such name is planted too.
#[test]
fn links_at_temporary_names_are_never_followed() {
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside.txt");
    std::fs::write(&outside, b"precious").unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (rep, sol) = (out.join("r.json"), out.join("x.npy"));
    let first = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1);
    for pid in first..first + 200 {
        for name in ["r.json", "x.npy"] {
            let _ = std::os::unix::fs::symlink(&outside, out.join(format!("{name}.tmp-{pid}")));
        }
    }
    let cfg = write_config(d.path(), &small_outputs(&rep, &sol));
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 0, "{err}");
    assert_eq!(bytes(&outside), b"precious");
    for p in [&rep, &sol] {
        assert!(std::fs::symlink_metadata(p).unwrap().is_file(), "{p:?}");
    }
}

/// Targets that would fail only at the rename are found before the solve (exit 3): a
/// report path that is a directory, and a 256-byte solution name (over the 255-byte
/// limit). A 250-byte name, which failed before because the temporary's suffix passed
/// the limit, now works.
#[test]
fn targets_are_probed_before_the_solve() {
    let d = tempfile::tempdir().unwrap();
    let sol = d.path().join("x.npy");
    let dir_report = d.path().join("report-dir");
    std::fs::create_dir(&dir_report).unwrap();
    let cfg = write_config(d.path(), &small_outputs(&dir_report, &sol));
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("is a directory"), "{err}");
    assert!(!sol.exists(), "no solution without its report");

    let rep = d.path().join("r.json");
    let long = d.path().join(format!("{}.npy", "s".repeat(252)));
    let cfg = write_config(d.path(), &small_outputs(&rep, &long));
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("File name too long"), "{err}");
    assert!(!rep.exists());

    let fits = d.path().join(format!("{}.npy", "s".repeat(246)));
    let cfg = write_config(d.path(), &small_outputs(&rep, &fits));
    let (code, err) = run(bin().arg(&cfg));
    assert_eq!(code, 0, "{err}");
    assert!(fits.exists() && rep.exists());
}

/// A tolerance below the documented floor (1e-14) is refused (exit 2); before, 1e-300 was
/// accepted, and the run's NaN solution replaced the previous good one.
#[test]
fn unreachable_tolerances_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(d.path(), &small(""));
    for tol in ["1e-300", "9e-15"] {
        let (code, err) = run(bin().arg(&cfg).args(["--tol", tol]));
        assert_eq!(code, 2, "{tol}: {err}");
        assert!(err.contains("at least 1e-14"), "{err}");
    }
}

/// A run that stops without converging (exit 7) leaves an earlier solution in place; its
/// report says the solution was withheld and why.
#[test]
fn an_unconverged_run_never_replaces_a_solution() {
    let d = tempfile::tempdir().unwrap();
    let (rep, sol) = (d.path().join("r.json"), d.path().join("x.npy"));
    let cfg = write_config(d.path(), &small_outputs(&rep, &sol));
    assert_eq!(run(bin().arg(&cfg)).0, 0);
    let good = bytes(&sol);
    let (code, err) = run(bin().arg(&cfg).args(["--max-iter", "2"]));
    assert_eq!(code, 7, "{err}");
    assert_eq!(bytes(&sol), good);
    let r: serde_json::Value = serde_json::from_slice(&bytes(&rep)).unwrap();
    assert_eq!(r["converged"], false);
    assert!(r["solution_file"].is_null());
    assert!(
        r["solution_withheld"]
            .as_str()
            .unwrap()
            .contains("did not converge"),
        "{r}"
    );
}

/// Two runs on one output set, started together: the second finds the first's lock and
/// fails at once (exit 3) naming the holder's pid, or starts after the first finished;
/// either way the report and the solution left describe the same run (the report's CRC
/// of the solution matches the file). Before, 8 of 60 trials left a mixed pair.
#[test]
fn two_runs_on_one_output_set_never_mix_their_pair() {
    let d = tempfile::tempdir().unwrap();
    let (rep, sol) = (d.path().join("r.json"), d.path().join("x.npy"));
    // 8^4: long enough (a few 100 ms) for the two runs to overlap.
    let body = small_outputs(&rep, &sol).replace(
        "LX = 4\nLY = 4\nLZ = 4\nLT = 4",
        "LX = 8\nLY = 8\nLZ = 8\nLT = 8",
    );
    let cfg = write_config(d.path(), &body);
    let mut refused = 0;
    for trial in 0..6 {
        let spawn = |kappa: &str| {
            bin()
                .arg(&cfg)
                .args(["--kappa", kappa])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn("0.11"), spawn("0.12"));
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        for o in &outs {
            let (code, err) = code_and_err(o);
            if code == 3 {
                refused += 1;
                assert!(
                    err.contains("being written by another run (process "),
                    "{err}"
                );
            } else {
                assert_eq!(code, 0, "trial {trial}: {err}");
            }
        }
        let r: serde_json::Value = serde_json::from_slice(&bytes(&rep)).unwrap();
        let crc = format!("{:08x}", crc32fast::hash(&bytes(&sol)));
        assert_eq!(r["solution_file"]["crc32"].as_str(), Some(crc.as_str()));
    }
    eprintln!("{refused} of 12 runs found the other's lock");
}

/// `generate --out dir/` is refused (exit 2): the stem would make dotfiles `dir/.N`.
#[test]
fn generate_out_must_be_a_stem_not_a_folder() {
    let d = tempfile::tempdir().unwrap();
    let out = format!("{}/", d.path().display());
    let (code, err) = run(bin().args([
        "generate", "--beta", "6.0", "--dims", "2,2,2,2", "--sweeps", "1", "--therm", "0", "--out",
        &out,
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("takes a file stem"), "{err}");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

/// No lock file outlives its run: the output folder holds the outputs alone.
#[test]
fn a_finished_run_leaves_only_its_outputs() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let cfg = write_config(
        d.path(),
        &small_outputs(&out.join("r.json"), &out.join("x.npy")),
    );
    assert_eq!(run(bin().arg(&cfg)).0, 0);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["r.json", "x.npy"]);
}

/// A side output of `ablate` or `scale` (their tables, JSON and charts in `--out`) at the
/// config's own path is refused before any measurement (exit 2) naming both, and the
/// config is untouched.
#[test]
fn side_outputs_over_the_config_are_refused() {
    for (command, name) in [("ablate", "ablation.csv"), ("scale", "scale.json")] {
        let d = tempfile::tempdir().unwrap();
        let cfg_path = d.path().join(name);
        let body = small("");
        std::fs::write(&cfg_path, &body).unwrap();
        let mut cmd = bin();
        cmd.arg(command).arg(&cfg_path).arg("--out").arg(d.path());
        if command == "scale" {
            cmd.args(["--threads", "1"]);
        }
        let (code, err) = run(&mut cmd);
        assert_eq!(code, 2, "{command}: {err}");
        assert!(
            err.contains("config") && err.contains(name),
            "{command}: {err}"
        );
        assert_eq!(bytes(&cfg_path), body.as_bytes(), "{command}");
    }
}
