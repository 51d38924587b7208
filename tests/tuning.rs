//! The `[tuning]` table and the repeatable `--tuning KEY=VALUE` flag: read through one serde
//! path, bad keys and values refused by name (exit 2), the options recorded in the report;
//! and the remaining environment variables refusing bad values by name.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
}

/// A small CPU run writing its report to `dir/r.json`, with `extra` appended.
fn config(dir: &Path, extra: &str) -> (PathBuf, PathBuf) {
    let rep = dir.join("r.json");
    let body = format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
         [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n[output]\nreport = \"{}\"\n\n{extra}",
        rep.display()
    );
    let cfg = dir.join("run.toml");
    std::fs::write(&cfg, body).unwrap();
    (cfg, rep)
}

#[test]
fn the_config_table_and_the_flag_reach_the_report() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, rep) = config(d.path(), "[tuning]\nstage_mib = 16\npdl = false\n");
    let out = bin()
        .arg("--quiet")
        .arg(&cfg)
        .args([
            "--tuning",
            "pack_on=main",
            "--tuning",
            "launch_events=\"all\"",
        ])
        .args(["--tuning", "lane_buffers = 3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    let t = &r["config"]["tuning"];
    assert_eq!(t["stage_mib"].as_u64(), Some(16), "{t}");
    assert_eq!(t["pdl"].as_bool(), Some(false), "{t}");
    assert_eq!(t["pack_on"].as_str(), Some("main"), "{t}");
    assert_eq!(t["launch_events"].as_str(), Some("all"), "{t}");
    assert_eq!(t["lane_buffers"].as_u64(), Some(3), "{t}");
    // Untouched keys keep their defaults.
    assert_eq!(t["comm_priority"].as_bool(), Some(true), "{t}");
    assert_eq!(t["bicgstab_graphs"].as_bool(), Some(true), "{t}");
    assert_eq!(t["lane_mib"].as_u64(), Some(3), "{t}");
    assert_eq!(r["converged"], true);
}

/// Exit 2 with the message naming `want` (each of them); no report written.
fn refused(d: &Path, extra: &str, args: &[&str], env: &[(&str, &str)], want: &[&str]) {
    let (cfg, rep) = config(d, extra);
    let mut c = bin();
    c.arg(&cfg).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?} {env:?}: expected {w:?} in {err}");
    }
    assert!(!rep.exists());
}

#[test]
fn bad_keys_and_values_are_refused_by_name() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    refused(
        p,
        "",
        &["--tuning", "no_such_key=1"],
        &[],
        &["--tuning", "no_such_key"],
    );
    refused(
        p,
        "",
        &["--tuning", "pack_on=side"],
        &[],
        &["--tuning", "side"],
    );
    refused(p, "", &["--tuning", "pdl"], &[], &["--tuning", "KEY=VALUE"]);
    refused(
        p,
        "",
        &["--tuning", "stage_mib=0"],
        &[],
        &["tuning.stage_mib", "got 0"],
    );
    refused(
        p,
        "[tuning]\nlane_mib = 65\n",
        &[],
        &[],
        &["tuning.lane_mib", "got 65"],
    );
    refused(p, "[tuning]\nexterior = \"all\"\n", &[], &[], &["exterior"]);
    refused(
        p,
        "[tuning]\npool_keep_mib = -1\n",
        &[],
        &[],
        &["pool_keep_mib", "all"],
    );
    refused(
        p,
        "",
        &["--tuning", "pool_keep_mib=lots"],
        &[],
        &["pool_keep_mib", "lots"],
    );
}

#[test]
fn the_remaining_numeric_variables_refuse_bad_values_by_name() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    // The progress lines' interval is a flag now: a bad value is refused by name.
    for v in ["-1", "soon"] {
        refused(p, "", &["--progress-secs", v], &[], &["--progress-secs", v]);
    }
    let env = [("QCD_SOLVE_MEMORY_LIMIT", "lots")];
    refused(p, "", &[], &env, &["QCD_SOLVE_MEMORY_LIMIT", "lots"]);
}
