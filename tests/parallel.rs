//! The main job on a split lattice (issue 11), end to end through the binary on the CPU
//! (ranks as threads over the decomposed CPU backend). Expected values come from the same
//! binary solving the same problem undecomposed (grid 1,1,1,1): the decomposition changes
//! only the order of additions inside the operator's faces and the reductions' partials.

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qcd-solve"));
    c.arg("--quiet")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("LOCAL_RANK")
        .env_remove("QCD_SOLVE_MASTER");
    c
}

const CONFIG: &str =
    "[lattice]\nLX = 8\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"random\"\nseed = 5\n\n\
[dirac]\nkappa = 0.12\n\n[source]\ntype = \"random\"\nseed = 9\n\n[solver]\ntolerance = 1e-10\n\n\
[backend]\ndevice = \"cpu\"\n\n[output]\nreport = \"r.json\"\nsolution = \"x.npy\"\n";

fn solve(dir: &Path, name: &str, args: &[&str]) -> serde_json::Value {
    let cfg = dir.join("run.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    run_config(&cfg, &dir.join(name), args)
}

/// The binary on `cfg` with `args`, its outputs in `out_dir`; it must succeed. Its report.
fn run_config(cfg: &Path, out_dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = bin()
        .arg(cfg)
        .args(args)
        .arg("--output")
        .arg(out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out_dir.join("r.json")).unwrap()).unwrap()
}

fn history(r: &serde_json::Value) -> Vec<f64> {
    r["residual_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn split_solves_match_the_undecomposed_one() {
    let dir = tempfile::tempdir().unwrap();
    for (method, extra) in [
        ("cr", &[][..]),
        ("bicgstab", &[][..]),
        ("cr", &["--preconditioning", "even-odd"][..]),
        ("bicgstab", &["--preconditioning", "even-odd"][..]),
    ] {
        let mut base = vec!["--method", method];
        base.extend_from_slice(extra);
        let one = solve(dir.path(), &format!("{method}-one"), &base);
        assert!(one["parallel"].is_null());
        for grid in ["1,1,1,2", "2,1,1,2"] {
            let mut args = base.clone();
            args.extend_from_slice(&["--grid", grid]);
            let split = solve(dir.path(), &format!("{method}-{grid}"), &args);
            assert_eq!(split["iterations"], one["iterations"], "{args:?}");
            let (a, b) = (history(&one), history(&split));
            let worst = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f64::max);
            // Rounding of a different summation order: 1e-12 absolute on ||r||/||b||.
            assert!(worst <= 1e-12, "{args:?}: history differs by {worst:e}");
            assert!(split["true_residual_of_d_cpu"].as_f64().unwrap() <= 1e-10);
            let ranks = split["parallel"]["ranks"].as_array().unwrap();
            let expect = if grid == "1,1,1,2" { 2 } else { 4 };
            assert_eq!(ranks.len(), expect);
            assert!(ranks
                .iter()
                .all(|r| r["bytes_exchanged"].as_u64().unwrap() > 0));
            // The time line's upload phase holds the longest rank's share of the problem
            // (a timed step of each rank): at least the longest such step, exactly as
            // measured (the phase adds the backend's construction, >= 0).
            let time = &split["time"];
            let share = time["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["name"] == "the rank's share of the problem")
                .map(|s| s["seconds"].as_f64().unwrap())
                .collect::<Vec<_>>();
            assert_eq!(share.len(), expect, "{args:?}");
            let longest = share.iter().cloned().fold(0.0, f64::max);
            assert!(
                time["upload"].as_f64().unwrap() >= longest,
                "{args:?}: upload {} < the longest share {longest}",
                time["upload"]
            );
            println!(
                "{method} {extra:?} grid {grid}: {} iterations, history {worst:.1e}",
                split["iterations"]
            );
        }
    }
}

#[test]
fn launcher_mistakes_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("run.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    for (env, grid, expect) in [
        (
            &[("RANK", "0"), ("WORLD_SIZE", "2")][..],
            "1,1,1,2",
            "QCD_SOLVE_MASTER",
        ),
        (
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("QCD_SOLVE_MASTER", "127.0.0.1:1"),
            ][..],
            "1,1,1,1",
            "has 1 ranks but the launcher (torchrun) started 2 processes",
        ),
        (
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("QCD_SOLVE_MASTER", "127.0.0.1:1"),
            ][..],
            "1,1,1,2",
            "one process per rank needs a GPU per process",
        ),
        (&[("RANK", "3"), ("WORLD_SIZE", "2")][..], "1,1,1,2", "RANK"),
    ] {
        let mut c = bin();
        c.arg(&cfg).args(["--grid", grid]);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?}: {err}");
        assert!(err.contains(expect), "{env:?}: `{err}` lacks `{expect}`");
    }
}

/// `qcd-solve scale CFG ARGS... --out OUT` (ARGS before --out).
fn scale(cfg: &std::path::Path, args: &[&str], out: &std::path::Path) -> std::process::Output {
    bin()
        .arg("scale")
        .arg(cfg)
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// The rows `scale --gpus` wrote to OUT/scale-ranks.json.
fn rank_rows(out: &std::path::Path) -> Vec<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(out.join("scale-ranks.json")).unwrap()).unwrap()
}

#[test]
fn scale_over_ranks_writes_strong_and_weak_tables_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("run.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let out = dir.path().join("scale");
    let run = scale(&cfg, &["--gpus", "1,2", "--device", "cpu"], &out);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for f in [
        "scale-ranks.csv",
        "scale-ranks.json",
        "scale-strong.svg",
        "scale-weak.png",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let rows = rank_rows(&out);
    // Each series: the undecomposed solve (the counts hold 1), then 1 and 2 ranks.
    assert_eq!(rows.len(), 6);
    let undecomposed: Vec<bool> = rows
        .iter()
        .map(|r| r["undecomposed"].as_bool().unwrap())
        .collect();
    assert_eq!(undecomposed, [true, false, false, true, false, false]);
    // Strong scaling solves one problem: the split changes only rounding, so the
    // iteration count is the same (the first row is the reference: speed-up 1 exactly).
    assert_eq!(rows[0]["iterations"], rows[1]["iterations"]);
    assert_eq!(rows[1]["iterations"], rows[2]["iterations"]);
    assert_eq!(rows[0]["speedup"].as_f64(), Some(1.0));
    assert_eq!(rows[0]["efficiency"].as_f64(), Some(1.0));
    // The split rows are against it: speed-up = its time over theirs.
    let t0 = rows[0]["seconds"].as_f64().unwrap();
    let t1 = rows[1]["seconds"].as_f64().unwrap();
    let sp1 = rows[1]["speedup"].as_f64().unwrap();
    assert!(
        (sp1 - t0 / t1).abs() <= 1e-12 * sp1,
        "{sp1} against {t0} / {t1}"
    );
    // Weak scaling doubles LT with the ranks.
    assert_eq!(rows[5]["lattice"][3].as_u64(), Some(16));
    // A count the lattice cannot split into is refused by its flag.
    let bad = scale(&cfg, &["--gpus", "3", "--device", "cpu"], &out);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--gpus"));
}

#[test]
fn scale_over_ranks_can_split_along_z_and_t() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("run.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let out = dir.path().join("scale");
    let run = scale(
        &cfg,
        &["--gpus", "1,4", "--split", "zt", "--device", "cpu"],
        &out,
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = rank_rows(&out);
    // Each series: the undecomposed solve, then 1 and 4 ranks.
    assert_eq!(rows.len(), 6);
    let grid = |r: &serde_json::Value| -> Vec<u64> {
        r["grid"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    // 4 ranks as 1,1,2,2; strong: the config's 8x4x4x8 in both rows, the same iterations
    // (the split changes only rounding); weak: LZ and LT doubled.
    assert_eq!(rows[0]["undecomposed"].as_bool(), Some(true));
    assert_eq!(grid(&rows[1]), [1, 1, 1, 1]);
    assert_eq!(grid(&rows[2]), [1, 1, 2, 2]);
    assert_eq!(rows[2]["lattice"], serde_json::json!([8, 4, 4, 8]));
    assert_eq!(rows[1]["iterations"], rows[2]["iterations"]);
    assert_eq!(grid(&rows[5]), [1, 1, 2, 2]);
    assert_eq!(rows[5]["lattice"], serde_json::json!([8, 4, 8, 16]));
    // An unknown split is refused by clap (exit 2) naming the flag.
    let bad = scale(
        &cfg,
        &["--gpus", "2", "--split", "xy", "--device", "cpu"],
        &out,
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--split"));
}

/// The 8^3x4 NERSC file of shared/lattices (MANIFEST.md), solved split in x and t.
const FILE_CONFIG: &str = "[lattice]\nLX = 8\nLY = 8\nLZ = 8\nLT = 4\n\n[gauge]\ntype = \"file\"\n\
path = \"ATB_nersc.l8t4b3360\"\n\n[dirac]\nkappa = 0.12\n\n[source]\ntype = \"random\"\nseed = 9\n\n\
[solver]\ntolerance = 1e-10\n\n[backend]\ndevice = \"cpu\"\n\n[parallel]\ngrid = [2, 1, 1, 2]\n\n\
[output]\nreport = \"r.json\"\nsolution = \"x.npy\"\n";

#[test]
fn each_rank_reading_its_slab_solves_the_same_problem_as_rank_0_reading_the_file() {
    // Expected: the default read = "rank0" (rank 0 reads and verifies the whole file and
    // scatters it). With --read slab every rank reads its own part and the field is
    // gathered: the same bits, so the same solve, history and solution exactly.
    let dir = tempfile::tempdir().unwrap();
    let lattices = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/lattices");
    // shared/ is read-only: the config lives in the tempdir and names the file by an
    // absolute path (relative gauge paths resolve against the config's folder).
    let text = FILE_CONFIG.replace(
        "path = \"ATB_nersc.l8t4b3360\"",
        &format!(
            "path = \"{}\"",
            lattices.join("ATB_nersc.l8t4b3360").display()
        ),
    );
    let cfg_path = dir.path().join("file.toml");
    std::fs::write(&cfg_path, text).unwrap();
    let run = |name: &str, args: &[&str]| -> (serde_json::Value, Vec<u8>) {
        let out_dir = dir.path().join(name);
        let report = run_config(&cfg_path, &out_dir, args);
        (report, std::fs::read(out_dir.join("x.npy")).unwrap())
    };
    let (rank0, x0) = run("rank0", &[]);
    let (slab, x1) = run("slab", &["--read", "slab"]);
    assert_eq!(slab["iterations"], rank0["iterations"]);
    assert_eq!(history(&slab), history(&rank0));
    assert_eq!(x1, x0, "solutions differ");
    assert_eq!(slab["plaquette"], rank0["plaquette"]);
    assert!(slab["true_residual_of_d_cpu"].as_f64().unwrap() <= 1e-10);
    // An unknown value is refused by clap, naming the flag and the values.
    let out = bin()
        .arg(&cfg_path)
        .args(["--read", "everyone"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--read") && err.contains("slab"), "{err}");
    // A corrupted copy is refused by every rank's combined checksum: exit 4, the file
    // and both checksums named (the stored one from MANIFEST.md).
    let mut bytes = std::fs::read(lattices.join("ATB_nersc.l8t4b3360")).unwrap();
    let k = bytes.len() / 2;
    bytes[k] ^= 1;
    let bad = dir.path().join("bad.nersc");
    std::fs::write(&bad, bytes).unwrap();
    let text = std::fs::read_to_string(&cfg_path).unwrap().replace(
        &lattices.join("ATB_nersc.l8t4b3360").display().to_string(),
        &bad.display().to_string(),
    );
    std::fs::write(&cfg_path, text).unwrap();
    let out = bin()
        .arg(&cfg_path)
        .args(["--read", "slab"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("bad.nersc") && err.contains("CHECKSUM mismatch: file says b379560a"),
        "{err}"
    );
}
