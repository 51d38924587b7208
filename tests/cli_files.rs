//! The command line for one's own files, on the real gauge files of ../shared/lattices:
//! `--gauge` (format detected, extents from the header, `[lattice]` checked against it),
//! `--source`, `--boundary`, the default outputs `out/<stem>.{npy,json}` and the one rule
//! for relative paths, `--output DIR` for every output, the summary's last lines,
//! `qcd-solve init`, `color` beside `colour`, and flags that do not
//! apply refused or warned about.

mod common;

use common::shared;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The MANIFEST of ../shared/lattices: ATB_nersc.l8t4b3360 is 8x8x8x4 with plaquette
/// 0.5038664469 (NERSC header, reproduced exactly by the reader).
const ATB: &str = "ATB_nersc.l8t4b3360";
const ATB_PLAQUETTE: f64 = 0.5038664469;

fn bin(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qcd-solve"));
    c.current_dir(cwd);
    c
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// The shape an `.npy` header states (NumPy format 1.0: magic, version, header length,
/// then the header dict's text).
fn npy_shape(p: &Path) -> Vec<usize> {
    let b = std::fs::read(p).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let len = u16::from_le_bytes([b[8], b[9]]) as usize;
    let h = String::from_utf8_lossy(&b[10..10 + len]).into_owned();
    assert!(h.contains("'descr': '<c16'"), "{h}");
    let inner = h
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    inner
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect()
}

fn write(p: &Path, text: &str) -> PathBuf {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, text).unwrap();
    p.to_path_buf()
}

#[test]
fn gauge_flag_solves_a_file_with_no_config_into_out() {
    let d = tempfile::tempdir().unwrap();
    let out = bin(d.path())
        .arg("--gauge")
        .arg(shared(ATB))
        .args(["--kappa", "0.12", "--source", "point:1,2,3,1:2:1"])
        .args(["--device", "cpu", "--tol", "1e-8"])
        .output()
        .unwrap();
    let stdout = ok(&out);
    // No config: the outputs are named after the gauge file, in out/ of the current
    // directory.
    let sol = d.path().join(format!("out/{ATB}.npy"));
    let rep = d.path().join(format!("out/{ATB}.json"));
    // [LT, LZ, LY, LX, spin, colour] of the file's 8x8x8x4 header.
    assert_eq!(npy_shape(&sol), vec![4, 8, 8, 8, 4, 3]);
    let r = json(&rep);
    assert_eq!(r["lattice"], serde_json::json!([8, 8, 8, 4]));
    let p = r["plaquette"].as_f64().unwrap();
    assert!((p - ATB_PLAQUETTE).abs() < 1e-9, "plaquette {p}");
    assert_eq!(r["kappa"].as_f64(), Some(0.12));
    let source = r["source"].as_str().unwrap();
    assert!(
        source.contains("[1, 2, 3, 1]") && source.contains("spin 2"),
        "{source}"
    );
    assert_eq!(r["converged"], true);
    // The summary's last lines: the boundary conditions and both files by absolute path.
    let canon = d.path().canonicalize().unwrap();
    assert!(
        stdout.contains("periodic in x, y, z; antiperiodic in t"),
        "{stdout}"
    );
    for f in [&sol, &rep] {
        let abs = canon.join(f.strip_prefix(d.path()).unwrap());
        assert!(stdout.contains(&abs.display().to_string()), "{stdout}");
    }
}

#[test]
fn lattice_is_optional_with_a_gauge_file_and_checked_when_given() {
    let d = tempfile::tempdir().unwrap();
    let body = |lattice: &str| {
        format!(
            "{lattice}[gauge]\ntype = \"file\"\npath = \"{}\"\n\n[dirac]\nkappa = 0.12\n\n\
             [backend]\ndevice = \"cpu\"\n",
            shared(ATB).display()
        )
    };
    // No [lattice]: the file's extents.
    let cfg = write(&d.path().join("free.toml"), &body(""));
    ok(&bin(d.path()).arg(&cfg).arg("-q").output().unwrap());
    let r = json(&d.path().join("out/free.json"));
    assert_eq!(r["lattice"], serde_json::json!([8, 8, 8, 4]));
    // LT = 8 against the file's 4: a bad value (exit 2) naming the key, its line and the
    // file with its extents; nothing written.
    let cfg = write(
        &d.path().join("wrong.toml"),
        &body("[lattice]\nLX = 8\nLY = 8\nLZ = 8\nLT = 8\n\n"),
    );
    let out = bin(d.path()).arg(&cfg).arg("-q").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lattice.LT")
            && err.contains("line 5")
            && err.contains(ATB)
            && err.contains("8x8x8x4"),
        "{err}"
    );
    assert!(!d.path().join("out/wrong.json").exists());
    // The same mismatch from the command line: the config's lattice, --gauge's file.
    let cfg = write(
        &d.path().join("random.toml"),
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"random\"\nseed = 1\n\n\
         [dirac]\nkappa = 0.12\n",
    );
    let out = bin(d.path())
        .arg(&cfg)
        .arg("--gauge")
        .arg(shared(ATB))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lattice.LX") && err.contains("--gauge") && err.contains("8x8x8x4"),
        "{err}"
    );
}

fn random_config(extra: &str) -> String {
    format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
         [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n{extra}"
    )
}

#[test]
fn outputs_default_to_out_beside_the_config_wherever_it_runs() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("runs/beta6.toml"), &random_config(""));
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    // Run from another folder with a relative config path: the outputs land beside the
    // config (its keys, defaults included, are relative to its folder).
    let out = bin(&elsewhere).arg("../runs/beta6.toml").output().unwrap();
    let stdout = ok(&out);
    let sol = d.path().join("runs/out/beta6.npy");
    assert_eq!(npy_shape(&sol), vec![4, 4, 4, 4, 4, 3]);
    assert_eq!(
        json(&d.path().join("runs/out/beta6.json"))["converged"],
        true
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(stdout.contains("relative paths"), "{stdout}");
    // A relative key in [output] follows the same rule.
    write(
        &d.path().join("runs/named.toml"),
        &random_config("[output]\nreport = \"res/r.json\"\nsolution = false\n"),
    );
    ok(&bin(&elsewhere)
        .arg("../runs/named.toml")
        .arg("-q")
        .output()
        .unwrap());
    assert!(d.path().join("runs/res/r.json").exists());
    assert!(!d.path().join("runs/out/named.npy").exists());
}

#[test]
fn output_flag_puts_every_output_in_one_folder() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(
        &d.path().join("run.toml"),
        &random_config("[output]\nreport = \"a/r.json\"\ngauge = \"b/u.nersc\"\n"),
    );
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--output", "results", "-q"])
        .output()
        .unwrap();
    ok(&out);
    let names: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(d.path().join("results"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names, ["r.json", "run.npy", "u.nersc"]);
    assert!(!d.path().join("a").exists() && !d.path().join("b").exists());
    // The report names the gauge output it wrote.
    let r = json(&d.path().join("results/r.json"));
    assert!(r["gauge_output_file"]["path"]
        .as_str()
        .unwrap()
        .ends_with("results/u.nersc"));
}

#[test]
fn output_false_writes_nothing_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(
        &d.path().join("run.toml"),
        &random_config("[output]\nreport = false\nsolution = false\n"),
    );
    let stdout = ok(&bin(d.path()).arg(&cfg).output().unwrap());
    assert!(stdout.contains("wrote nothing"), "{stdout}");
    // --quiet: nothing on stdout, these lines included.
    let quiet = bin(d.path()).arg(&cfg).arg("-q").output().unwrap();
    assert_eq!(ok(&quiet), "");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    // `true` names no file.
    let cfg = write(
        &d.path().join("run.toml"),
        &random_config("[output]\nreport = true\n"),
    );
    let out = bin(d.path()).arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("names no file"));
}

#[test]
fn a_default_output_that_would_replace_an_input_is_refused() {
    // The source file is out/run.npy beside the config: the default solution path.
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("out/run.npy");
    std::fs::create_dir_all(src.parent().unwrap()).unwrap();
    std::fs::write(&src, b"not overwritten").unwrap();
    let cfg = write(
        &d.path().join("run.toml"),
        &random_config("[source]\ntype = \"file\"\npath = \"out/run.npy\"\n"),
    );
    let out = bin(d.path()).arg(&cfg).arg("-q").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("would replace the source file"), "{err}");
    assert_eq!(std::fs::read(&src).unwrap(), b"not overwritten");
}

#[test]
fn boundary_flag_sets_the_boundary_conditions_in_force() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(&d.path().join("run.toml"), &random_config(""));
    let stdout = ok(&bin(d.path())
        .arg(&cfg)
        .args(["--boundary", "periodic"])
        .output()
        .unwrap());
    assert!(stdout.contains("periodic in x, y, z, t"), "{stdout}");
    let r = json(&d.path().join("out/run.json"));
    assert_eq!(
        r["config"]["lattice"]["boundary"],
        serde_json::json!(["periodic", "periodic", "periodic", "periodic"])
    );
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--boundary", "p,p,p"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--boundary"));
}

#[test]
fn a_bad_source_flag_names_the_forms() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(&d.path().join("run.toml"), &random_config(""));
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--source", "point:1,2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--source") && err.contains("4 numbers"),
        "{err}"
    );
    // A site off the 4^4 lattice is refused by the config's check, naming the site.
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--source", "point:0,0,0,9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains('9'));
}

#[test]
fn color_is_accepted_beside_colour() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(
        &d.path().join("run.toml"),
        &random_config("[source]\ntype = \"point\"\nsite = [0, 0, 0, 0]\nspin = 1\ncolor = 2\n"),
    );
    ok(&bin(d.path()).arg(&cfg).arg("-q").output().unwrap());
    let r = json(&d.path().join("out/run.json"));
    assert!(
        r["source"].as_str().unwrap().contains("colour 2"),
        "{}",
        r["source"]
    );
}

#[test]
fn init_writes_a_config_that_solves_and_never_replaces_one() {
    let d = tempfile::tempdir().unwrap();
    let out = bin(d.path())
        .arg("init")
        .arg("--gauge")
        .arg(shared(ATB))
        .args(["--out", "mine.toml"])
        .output()
        .unwrap();
    ok(&out);
    let text = std::fs::read_to_string(d.path().join("mine.toml")).unwrap();
    // The file's header: 8x8x8x4, NERSC.
    for line in ["LX = 8", "LY = 8", "LZ = 8", "LT = 4", "format = \"nersc\""] {
        assert!(text.contains(line), "{line}: {text}");
    }
    let out = bin(d.path())
        .args(["mine.toml", "--device", "cpu", "-q"])
        .output()
        .unwrap();
    ok(&out);
    let r = json(&d.path().join("out/mine.json"));
    assert!((r["plaquette"].as_f64().unwrap() - ATB_PLAQUETTE).abs() < 1e-9);
    assert_eq!(r["converged"], true);
    // A second init on the same path: refused (exit 3), the file unchanged.
    let again = bin(d.path())
        .args(["init", "--out", "mine.toml"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&again.stderr).contains("never replaces"));
    assert_eq!(
        std::fs::read_to_string(d.path().join("mine.toml")).unwrap(),
        text
    );
    // Without a gauge file: a random-field config that solves as it stands.
    ok(&bin(d.path()).arg("init").output().unwrap());
    ok(&bin(d.path())
        .args(["run.toml", "--device", "cpu", "-q"])
        .output()
        .unwrap());
    assert_eq!(json(&d.path().join("out/run.json"))["converged"], true);
}

#[test]
fn gpu_flags_that_do_not_apply_are_warned_about_or_refused() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(&d.path().join("run.toml"), &random_config(""));
    // On the CPU: solved, with a warning for each GPU flag (not --quiet: warnings show).
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--kernel", "3.0", "--reconstruct", "12"])
        .output()
        .unwrap();
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--kernel sets the GPU") && err.contains("--reconstruct sets the GPU"),
        "{err}"
    );
    // On a GPU, 12 reals with the config's kernel 1.6.1: refused before any device is
    // touched, saying which flag to add.
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--device", "cuda", "--reconstruct", "12"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("add --kernel 3.0"), "{err}");
    // --multiple with the autotuner on: refused, saying --no-tune.
    let out = bin(d.path())
        .arg(&cfg)
        .args(["--device", "auto", "--multiple", "8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-tune"));
}
