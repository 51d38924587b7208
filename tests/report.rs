//! The self-describing report (docs/report.md) of real runs of the binary on a real
//! gauge file (../shared/lattices): each input's size and SHA-256 against the file itself,
//! the schema version, the build, the layout, the options in force, every key against
//! docs/report.schema.json; the logging's default and `-v`; `--help` of every subcommand.

use clap::CommandFactory;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The NERSC 8^3 x 4 file of ../shared/lattices (MANIFEST.md: a stored checksum, header
/// plaquette and link trace), used in place.
fn gauge_path() -> PathBuf {
    root().join("../shared/lattices/ATB_nersc.l8t4b3360")
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qcd-solve"));
    c.env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("RUST_LOG");
    c
}

/// An 8^3 x 4 CPU solve on the NERSC file, writing report, solution and gauge copy in `dir`.
fn config(dir: &Path, extra: &str) -> PathBuf {
    let p = dir.join("run.toml");
    let body = format!(
        "[lattice]\nLX = 8\nLY = 8\nLZ = 8\nLT = 4\n\n[gauge]\ntype = \"file\"\npath = \"{}\"\n\n\
         [dirac]\nkappa = 0.1\n\n[backend]\ndevice = \"cpu\"\n\n[output]\n\
         report = \"{d}/r.json\"\nsolution = \"{d}/x.npy\"\ngauge = \"{d}/copy.nersc\"\n{extra}",
        gauge_path().display(),
        d = dir.display()
    );
    std::fs::write(&p, body).unwrap();
    p
}

/// Run the main job on `cfg` with `args`; (stdout, stderr), asserting success.
fn run(cfg: &Path, args: &[&str]) -> (String, String) {
    let out = bin().args(args).arg(cfg).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// SHA-256 of a file's bytes in one call (the report streams the file in blocks), and,
/// where coreutils' `sha256sum` runs, the same from it: two computations apart from the
/// report's.
fn independent_sha256(p: &Path) -> String {
    let bytes = std::fs::read(p).unwrap();
    let ours: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Ok(out) = Command::new("sha256sum").arg(p).output() {
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(text.split_whitespace().next(), Some(ours.as_str()));
        }
    }
    ours
}

fn schema() -> Value {
    read_json(&root().join("docs/report.schema.json"))
}

/// The keys of a report of `kind` that the schema allows, and those it requires.
fn schema_keys(kind: &str) -> (Vec<String>, Vec<String>) {
    let s = schema();
    let def = &s["$defs"][kind];
    let props = def["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema $defs.{kind} has no properties"));
    let required = def["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    (props.keys().cloned().collect(), required)
}

/// Every key of `report` is one the schema names, and every key it requires is there
/// (the whole validation runs in tests/python/test_report_schema.py with `jsonschema`).
fn assert_keys_match_schema(report: &Value, kind: &str) {
    let (allowed, required) = schema_keys(kind);
    let obj = report.as_object().unwrap();
    for k in obj.keys() {
        assert!(
            allowed.contains(k),
            "report key {k} not in the schema's {kind}"
        );
    }
    for k in &required {
        assert!(
            obj.contains_key(k),
            "required key {k} missing from the report"
        );
    }
}

#[test]
fn a_cpu_report_names_its_inputs_by_size_and_sha256() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), "");
    run(&cfg, &["--quiet"]);
    let r = read_json(&d.path().join("r.json"));
    assert_eq!(r["schema_version"], "2.3");
    assert_eq!(r["kind"], "solve");
    // The gauge file: the input, not the copy; size from the file system, hash computed
    // apart from the report's code.
    let g = &r["gauge_file"];
    let input = gauge_path();
    assert_eq!(g["path"].as_str(), Some(input.to_str().unwrap()));
    assert_eq!(
        g["bytes"].as_u64(),
        Some(std::fs::metadata(&input).unwrap().len())
    );
    assert_eq!(
        g["sha256"].as_str(),
        Some(independent_sha256(&input).as_str())
    );
    // The NERSC reader's checks (MANIFEST.md: the header's CHECKSUM and PLAQUETTE
    // reproduce), and the links' unitarity.
    let checks = g["checks"].as_array().unwrap();
    let check_text: Vec<String> = checks.iter().map(|c| c.to_string()).collect();
    for what in ["checksum", "plaquette", "su(3)"] {
        assert!(
            checks.iter().any(
                |c| c["check"].as_str().unwrap().to_lowercase().contains(what)
                    && c["result"].as_str().unwrap().starts_with("ok")
            ),
            "no passed {what} check in {check_text:?}"
        );
    }
    // The same entry in `inputs`, beside the config's own.
    let inputs = r["inputs"].as_array().unwrap();
    assert!(inputs.iter().any(|i| i == g));
    let c = inputs.iter().find(|i| i["input"] == "config").unwrap();
    assert_eq!(
        c["sha256"].as_str(),
        Some(independent_sha256(&cfg).as_str())
    );
    // The copy written is named apart.
    let copy = &r["gauge_output_file"];
    assert_eq!(
        copy["path"].as_str(),
        Some(d.path().join("copy.nersc").to_str().unwrap())
    );
    assert_keys_match_schema(&r, "solve");
}

#[test]
fn the_report_describes_build_host_layout_and_every_option() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), "");
    run(&cfg, &["--quiet", "--tuning", "stage_mib=32"]);
    let r = read_json(&d.path().join("r.json"));
    // The build: the package's version; a commit (or "unknown" outside git).
    assert_eq!(r["build"]["version"], env!("CARGO_PKG_VERSION"));
    let commit = r["build"]["git_commit"].as_str().unwrap();
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{commit}"
    );
    assert!(r["host"]["cpus"].as_u64().unwrap() >= 1);
    assert!(!r["host"]["name"].as_str().unwrap().is_empty());
    assert_eq!(r["device"]["kind"], "cpu");
    // The solution's layout: the npy's shape for 8^3 x 4, t slowest (src/io/npy.rs).
    let l = &r["solution_layout"];
    assert_eq!(l["shape"], serde_json::json!([4, 8, 8, 8, 4, 3]));
    assert_eq!(
        l["axes"],
        serde_json::json!(["t", "z", "y", "x", "spin", "colour"])
    );
    assert_eq!(l["dtype"], "complex128");
    // The default point source holds 1 at one site, spin and colour: ||b|| = 1 exactly.
    assert_eq!(l["source_norm"].as_f64(), Some(1.0));
    // Options in force: the flag's tuning value, the defaults the file left out (the
    // tolerance's 1e-10 and the tuning defaults of docs/tuning.md), and the operator the
    // default method (cr) iterates on, g5D.
    let c = &r["config"];
    assert_eq!(c["tuning"]["stage_mib"], 32);
    assert_eq!(c["tuning"]["stage_buffers"], 2);
    assert_eq!(c["solver"]["tolerance"].as_f64(), Some(1e-10));
    assert_eq!(c["solver"]["operator"], "g5D");
}

#[test]
fn the_propagator_report_carries_the_same_description() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), "");
    let out = bin()
        .args(["--quiet", "propagator"])
        .arg(&cfg)
        .arg("--out")
        .arg(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = read_json(&d.path().join("run.propagator.json"));
    assert_eq!(r["schema_version"], "2.3");
    assert_eq!(r["kind"], "propagator");
    let input = gauge_path();
    assert_eq!(
        r["gauge_file"]["sha256"].as_str(),
        Some(independent_sha256(&input).as_str())
    );
    assert_eq!(
        r["propagator_layout"]["shape"],
        serde_json::json!([4, 8, 8, 8, 4, 3, 4, 3])
    );
    assert_keys_match_schema(&r, "propagator");
}

/// Lines of the log on stderr that are timed steps.
fn step_lines(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains("step: ")).count()
}

#[test]
fn steps_are_logged_at_debug_only() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), "");
    let (_, quiet_default) = run(&cfg, &[]);
    assert_eq!(step_lines(&quiet_default), 0, "{quiet_default}");
    // A handful of lines: what runs and where the outputs go (a bound, not a count: the
    // lines are the app's to choose).
    let info = quiet_default.lines().count();
    assert!(info <= 10, "{info} log lines by default:\n{quiet_default}");
    let (_, verbose) = run(&cfg, &["-v"]);
    assert!(step_lines(&verbose) >= 5, "{verbose}");
    let out = bin().env("RUST_LOG", "debug").arg(&cfg).output().unwrap();
    assert!(step_lines(&String::from_utf8_lossy(&out.stderr)) >= 5);
}

#[test]
fn help_of_every_subcommand_is_for_users() {
    let cli = qcd_solve::app::cli::Cli::command();
    // clap's own consistency checks (unique names and short flags, valid relations).
    cli.clone().debug_assert();
    let mut commands: Vec<Vec<String>> = vec![vec![]];
    commands.extend(
        cli.get_subcommands()
            .map(|s| vec![s.get_name().to_string()]),
    );
    assert!(commands.len() > 8, "subcommands: {commands:?}");
    for sub in commands {
        let out = bin().args(&sub).arg("--help").output().unwrap();
        assert!(out.status.success(), "{sub:?} --help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("::"),
            "{sub:?} --help names an internal path:\n{text}"
        );
        for stale in ["Conjugate Residual solver", "Maximum CR iterations"] {
            assert!(!text.contains(stale), "{sub:?} --help says {stale:?}");
        }
    }
    // The program's line names every method.
    let out = bin().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for m in ["CR", "BiCGStab", "GCR", "CGNE", "multigrid"] {
        assert!(text.contains(m), "--help does not name {m}");
    }
}
