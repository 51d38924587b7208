//! Issue 12, application side ("Nothing lost, nothing silently wrong"): each test runs the
//! built binary on a case that used to lose work or mislead, and checks the outcome the
//! README documents (exit code, message naming the flag, key, path or numbers).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
}

fn config(dir: &Path, dims: [usize; 4], extra: &str) -> PathBuf {
    let p = dir.join("run.toml");
    std::fs::write(
        &p,
        format!(
            "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
             [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n{extra}",
            dims[0], dims[1], dims[2], dims[3]
        ),
    )
    .unwrap();
    p
}

fn outputs(dir: &Path) -> String {
    format!(
        "[output]\nreport = \"{}\"\nsolution = \"{}\"\n",
        dir.join("r.json").display(),
        dir.join("x.npy").display()
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect()
}

// ---------------------------------------------------------------- 1. memory before work

/// Bytes per site of the CPU main job's host estimate (src/memory.rs, `run_need`): gauge
/// 576, source and g5 source 2 x 192, solution and residual temporaries 4 x 192, the
/// vectorised gauge copy 576, the solver's 10 fields 10 x 192.
const CPU_RUN_BYTES_PER_SITE: u64 = 576 + 2 * 192 + 4 * 192 + 576 + 10 * 192;

#[test]
fn a_memory_limit_below_the_estimate_refuses_the_run_with_both_numbers() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [8, 8, 8, 8], &outputs(d.path()));
    let out = bin()
        .arg("-q")
        .arg(&cfg)
        .env("QCD_SOLVE_MEMORY_LIMIT", "1000000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let err = stderr(&out);
    // 8^4 sites x 4224 B/site = 17301504 bytes (exact: the estimate is a per-site sum).
    let need = 4096 * CPU_RUN_BYTES_PER_SITE;
    assert_eq!(need, 17_301_504);
    assert!(err.contains("out of host memory"), "{err}");
    assert!(err.contains(&format!("needs {need} bytes")), "{err}");
    assert!(err.contains("1000000 bytes"), "{err}");
    assert!(err.contains("QCD_SOLVE_MEMORY_LIMIT"), "{err}");
    assert!(!d.path().join("r.json").exists() && !d.path().join("x.npy").exists());
    // The same run with the limit at the estimate runs.
    let ok = bin()
        .arg("-q")
        .arg(&cfg)
        .env("QCD_SOLVE_MEMORY_LIMIT", need.to_string())
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", stderr(&ok));
}

#[test]
fn the_host_estimate_bounds_the_measured_peak_of_every_plan() {
    // The report's peak_memory_bytes is the process's VmHWM (src/report/mod.rs). On 16^4
    // (estimate 65536 x 4224 = 276824064 bytes) the measured peaks were 182 MB (seed CR)
    // to 251 MB (fused even-odd single-double): the estimate, an upper bound over the
    // plans, must stay above every plan's peak and within 2x of it (useful, not wild).
    let d = tempfile::tempdir().unwrap();
    let cfg = config(
        d.path(),
        [16, 16, 16, 16],
        &format!("[solver]\ntolerance = 1e-3\n\n{}", outputs(d.path())),
    );
    let estimate = 65536 * CPU_RUN_BYTES_PER_SITE;
    for plan in [
        vec![],
        vec!["--iteration", "fused"],
        vec!["--preconditioning", "even-odd"],
        vec!["--precision", "single-double"],
        vec![
            "--preconditioning",
            "even-odd",
            "--precision",
            "single-double",
        ],
    ] {
        let out = bin().arg("-q").arg(&cfg).args(&plan).output().unwrap();
        assert!(out.status.success(), "{plan:?}: {}", stderr(&out));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("r.json")).unwrap()).unwrap();
        let peak = r["peak_memory_bytes"].as_u64().unwrap();
        assert!(
            peak <= estimate,
            "{plan:?}: peak {peak} > estimate {estimate}"
        );
        assert!(
            estimate as f64 <= 2.0 * peak as f64,
            "{plan:?}: estimate {estimate} > 2 x peak {peak}"
        );
        eprintln!(
            "{plan:?}: peak {peak}, estimate / peak {:.2}",
            estimate as f64 / peak as f64
        );
    }
}

#[test]
fn bench_and_generate_are_refused_under_a_memory_limit() {
    let d = tempfile::tempdir().unwrap();
    let b = bin()
        .args(["-q", "bench", "--dims", "8,8,8,8", "--repeat", "1"])
        .env("QCD_SOLVE_MEMORY_LIMIT", "1000")
        .output()
        .unwrap();
    assert_eq!(b.status.code(), Some(6), "{}", stderr(&b));
    // bench_need: 2 x 576 + 4 x 192 + 960 = 2880 B/site over 4096 sites.
    assert!(
        stderr(&b).contains("needs 11796480 bytes"),
        "{}",
        stderr(&b)
    );
    let g = bin()
        .args([
            "-q", "generate", "--beta", "6", "--dims", "8,8,8,8", "--sweeps", "1",
        ])
        .arg("--out")
        .arg(d.path().join("g"))
        .env("QCD_SOLVE_MEMORY_LIMIT", "1000")
        .output()
        .unwrap();
    assert_eq!(g.status.code(), Some(6), "{}", stderr(&g));
    // generate_need: 576 + 40 + 576 + 72 = 1264 B/site over 4096 sites.
    assert!(stderr(&g).contains("needs 5177344 bytes"), "{}", stderr(&g));
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn a_64_4_lattice_is_refused_at_once_without_allocating() {
    // 64^4 needs 16777216 x 4224 = 70866960384 bytes (66 GiB) by the estimate; the
    // development machine has 24 GiB. Where a machine has more, LT doubles until the need
    // exceeds what this machine has (the test stays a refusal, never a 64 GiB solve).
    let avail = qcd_solve::app::memory::host_available()
        .unwrap()
        .expect("Linux: /proc/meminfo is readable")
        .bytes;
    let mut lt = 64u64;
    while 64 * 64 * 64 * lt * CPU_RUN_BYTES_PER_SITE <= avail {
        lt *= 2;
    }
    assert!(
        64 * 64 * 64 * lt <= (i32::MAX as u64) / 24,
        "machine too large for this test"
    );
    if lt == 64 {
        assert_eq!(64u64.pow(4) * CPU_RUN_BYTES_PER_SITE, 70_866_960_384);
    }
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [64, 64, 64, lt as usize], &outputs(d.path()));
    // Under an address-space limit of 4 GiB, any attempt at the 9 GiB gauge field would
    // abort in the allocator (exit 134): exit 6 shows nothing large was allocated.
    let t = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4194304 && exec '{}' -q '{}'",
            env!("CARGO_BIN_EXE_qcd-solve"),
            cfg.display()
        ))
        .env_remove("QCD_SOLVE_MEMORY_LIMIT")
        .output()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let need = 64 * 64 * 64 * lt * CPU_RUN_BYTES_PER_SITE;
    assert!(
        stderr(&out).contains(&format!("needs {need} bytes")),
        "{}",
        stderr(&out)
    );
    // The source named is the least of MemAvailable, the cgroup and the 4 GiB
    // address-space limit set above (docs/reliability.md, "Bounds").
    assert!(
        ["MemAvailable", "cgroup", "ulimit -v"]
            .iter()
            .any(|s| stderr(&out).contains(s)),
        "{}",
        stderr(&out)
    );
    // "At once": well under the 0.5 s a 64^4 gauge field alone takes to fill.
    assert!(secs < 5.0, "took {secs} s");
}

// --------------------------------------------------------------------------- 2. threads

#[test]
fn a_thread_count_above_four_per_core_is_refused_naming_flag_or_key() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [4, 4, 4, 4], "");
    let t = Instant::now();
    let out = bin()
        .arg("-q")
        .arg(&cfg)
        .args(["--threads", "100000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(t.elapsed() < Duration::from_secs(5), "refused at once");
    let err = stderr(&out);
    assert!(
        err.contains("`--threads`") && err.contains(&format!("at most {}", 4 * cores)),
        "{err}"
    );
    // The same from the config names the key and its line (line 16 of `config`).
    let cfg = config(d.path(), [4, 4, 4, 4], "")
        .to_string_lossy()
        .into_owned();
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("device = \"cpu\"", "device = \"cpu\"\nthreads = 100000");
    std::fs::write(&cfg, text).unwrap();
    let out = bin().arg("-q").arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("backend.threads") && stderr(&out).contains("line 16"),
        "{}",
        stderr(&out)
    );
    for args in [
        vec!["bench", "--dims", "4,4,4,4", "--threads", "100000"],
        vec![
            "generate",
            "--beta",
            "6",
            "--dims",
            "4,4,4,4",
            "--sweeps",
            "1",
            "--threads",
            "100000",
            "--out",
            "/nonexistent/g",
        ],
    ] {
        let out = bin().arg("-q").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("`--threads`"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = bin()
        .args(["-q", "scale"])
        .arg(&cfg)
        .args(["--threads", "1,100000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn one_thread_is_printed_as_1_thread() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [4, 4, 4, 4], "");
    let out = bin().arg(&cfg).args(["--threads", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s = stdout(&out);
    assert!(s.contains("1 thread,") && !s.contains("1 threads"), "{s}");
}

// ------------------------------------------------------------------ 3. outputs as a pair

fn crc_of(path: &Path) -> String {
    let (_, crc) = qcd_solve::app::outputs::file_crc32(path).unwrap();
    format!("{crc:08x}")
}

fn recorded_crc(report: &[u8]) -> String {
    let r: serde_json::Value = serde_json::from_slice(report).unwrap();
    r["solution_file"]["crc32"].as_str().unwrap().to_string()
}

#[test]
fn killed_runs_leave_a_consistent_pair_and_the_next_run_clears_temporaries() {
    let d = tempfile::tempdir().unwrap();
    let (rep, sol) = (d.path().join("r.json"), d.path().join("x.npy"));
    // 16^4 at tol 1e-3: a 12.6 MB solution, so output writing is a sizeable part of a run.
    let cfg = config(
        d.path(),
        [16, 16, 16, 16],
        &format!("[solver]\ntolerance = 1e-3\n\n{}", outputs(d.path())),
    );
    let run = |kappa: f64| {
        bin()
            .arg("-q")
            .arg(&cfg)
            .args(["--kappa", &kappa.to_string()])
            .spawn()
            .unwrap()
    };
    let t = Instant::now();
    let first = run(0.100).wait().unwrap();
    let full = t.elapsed();
    assert!(first.success());
    assert_eq!(recorded_crc(&std::fs::read(&rep).unwrap()), crc_of(&sol));
    let (mut interrupted, mut between) = (0, 0);
    for i in 0..10u32 {
        let old_report = std::fs::read(&rep).unwrap();
        let old_crc = crc_of(&sol);
        // Kill delays spread over 0.3 to 1.2 of a full run's time, with a jitter.
        let frac = 0.3 + 0.1 * i as f64 + 0.05 * ((i * 7919) % 10) as f64 / 10.0;
        let mut child = run(0.101 + 0.001 * i as f64);
        std::thread::sleep(full.mul_f64(frac));
        if child.try_wait().unwrap().is_none() {
            interrupted += 1;
        }
        let _ = child.kill();
        child.wait().unwrap();
        let report = std::fs::read(&rep).unwrap();
        let now_crc = crc_of(&sol);
        if recorded_crc(&report) == now_crc {
            continue; // the old pair or the new pair, whole
        }
        if report == old_report && now_crc == old_crc {
            // Killed before either rename, after an earlier kill had left the old report
            // beside a newer solution: the files are as this run found them.
            continue;
        }
        // Killed between the two renames: the old report beside the new solution, which the
        // report's checksum exposes.
        assert_eq!(
            report, old_report,
            "kill {i}: a report that matches no solution"
        );
        assert_ne!(now_crc, old_crc, "kill {i}");
        between += 1;
    }
    assert!(
        interrupted >= 3,
        "only {interrupted} kills landed in a running process"
    );
    eprintln!("{interrupted} kills interrupted a run, {between} between the renames");
    let last = run(0.2).wait().unwrap();
    assert!(last.success());
    assert_eq!(recorded_crc(&std::fs::read(&rep).unwrap()), crc_of(&sol));
    assert_eq!(temporaries(d.path()), Vec::<String>::new());
}

// ---------------------------------------------------------------- 4. writability first

#[test]
fn an_unwritable_output_folder_is_refused_before_the_solve() {
    let d = tempfile::tempdir().unwrap();
    let blocker = d.path().join("file");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let cfg = config(
        d.path(),
        [4, 4, 4, 4],
        &format!("[output]\nreport = \"{}/sub/r.json\"\n", blocker.display()),
    );
    // Not quiet: the log would show "problem ready" had the work begun.
    let out = bin().arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(err.contains(&format!("{}/sub", blocker.display())), "{err}");
    assert!(
        !err.contains("problem ready") && stdout(&out).is_empty(),
        "{err}"
    );
}

// ------------------------------------------------------------------------ 7. generate

#[test]
fn generate_always_writes_the_final_configuration_and_refuses_zero_sweeps() {
    let d = tempfile::tempdir().unwrap();
    let stem = d.path().join("g");
    let out = bin()
        .args([
            "-q", "generate", "--beta", "6", "--dims", "4,4,4,4", "--sweeps", "5", "--every", "10",
            "--therm", "2", "--device", "cpu", "--out",
        ])
        .arg(&stem)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // 2 thermalisation + 5 measured sweeps: the final configuration is g.7.
    let last = d.path().join("g.7");
    let info = bin().arg("info").arg(&last).output().unwrap();
    assert!(info.status.success(), "{}", stderr(&info));
    let h: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("g.history.json")).unwrap()).unwrap();
    assert_eq!(h["saved"].as_array().unwrap().len(), 1);
    for (flag, value) in [("--sweeps", "0"), ("--every", "0")] {
        let mut args = vec![
            "generate", "--beta", "6", "--dims", "4,4,4,4", "--sweeps", "1",
        ];
        args.extend([flag, value]);
        let out = bin().args(&args).arg("--out").arg(&stem).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(stderr(&out).contains(flag), "{}", stderr(&out));
    }
}

// ---------------------------------------------------------------- 8. command-line values

#[test]
fn bad_flag_values_name_the_flag_not_the_config_line() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [4, 4, 4, 4], "");
    for (flag, value, said) in [
        ("--kappa", "nan", "must be positive, got NaN"),
        ("--kappa", "-0.1", "must be positive, got -0.1"),
        ("--tol", "2", "must be in (0, 1)"),
        ("--max-iter", "-5", "must be at least 1"),
    ] {
        let out = bin()
            .arg("-q")
            .arg(&cfg)
            .args([flag, value])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("`{flag}`")) && err.contains(said),
            "{err}"
        );
        assert!(!err.contains("line "), "{err}");
    }
}

#[test]
fn a_negative_beta_parses_and_is_refused_by_its_flag() {
    let out = bin()
        .args([
            "-q",
            "generate",
            "--beta",
            "-1",
            "--dims",
            "4,4,4,4",
            "--sweeps",
            "1",
            "--out",
            "/nonexistent/g",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The program's own check (clap would say "unexpected argument '-1'").
    assert!(
        stderr(&out).contains("`--beta`: must be finite and >= 0, got -1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn repeat_zero_is_refused_by_bench_and_scale() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [4, 4, 4, 4], "");
    let b = bin().args(["bench", "--repeat", "0"]).output().unwrap();
    let s = bin()
        .arg("scale")
        .arg(&cfg)
        .args(["--repeat", "0"])
        .output()
        .unwrap();
    for out in [b, s] {
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains("--repeat") && stderr(&out).contains("at least 1"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn quiet_means_no_stdout_and_only_errors_on_stderr() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [4, 4, 4, 4], &outputs(d.path()));
    let loud = bin().arg(&cfg).output().unwrap();
    assert!(loud.status.success());
    assert!(stdout(&loud).contains("converged after"));
    let quiet = bin()
        .arg("-q")
        .arg(&cfg)
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert_eq!(stdout(&quiet), "");
    assert_eq!(stderr(&quiet), "");
    assert!(d.path().join("r.json").exists());
    // generate and scale too: their results are files.
    let g = bin()
        .args([
            "-q", "generate", "--beta", "6", "--dims", "4,4,4,4", "--sweeps", "1",
        ])
        .args(["--therm", "0", "--device", "cpu", "--out"])
        .arg(d.path().join("g"))
        .output()
        .unwrap();
    let s = bin()
        .args(["-q", "scale"])
        .arg(&cfg)
        .args(["--threads", "1", "--out"])
        .arg(d.path())
        .output()
        .unwrap();
    for out in [g, s] {
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), "");
    }
    assert!(d.path().join("g.1").exists() && d.path().join("scale.csv").exists());
}

// ------------------------------------------------------------- 9. logs when piped

#[test]
fn piped_logs_have_no_colour_codes_and_show_progress_lines() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), [8, 8, 8, 8], "");
    // Output::stderr is a pipe, not a terminal.
    let out = bin()
        .arg(&cfg)
        .args(["--progress-secs", "0"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("\x1b["), "{err}");
    assert!(err.contains("problem ready"), "{err}");
    let lines = err
        .lines()
        .filter(|l| l.contains("CR progress: iteration"))
        .count();
    assert!(lines >= 1, "{err}");
    assert!(err.contains("iterations/s"), "{err}");
}
