//! The heatbath cache (docs/reliability.md, "Heatbath cache"): per user, under
//! $XDG_CACHE_HOME, never the current directory; each entry reused only when the record
//! beside it names the same parameters and its file and plaquette are the recorded ones.

mod safety_common;
use safety_common::*;
use std::path::{Path, PathBuf};

/// A 4^4 heatbath run (2 + 2 sweeps), its report in `dir`.
fn heatbath(dir: &Path, seed: u64) -> PathBuf {
    write_config(
        dir,
        &small(&format!(
            "[output]\nreport = \"{}\"\nsolution = false\n",
            dir.join("r.json").display()
        ))
        .replace(
            "type = \"random\"\nseed = 3",
            &format!("type = \"heatbath\"\nbeta = 6.0\ntherm = 2\nsweeps = 2\nseed = {seed}"),
        ),
    )
}

fn plaquette(dir: &Path) -> f64 {
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
    r["plaquette"].as_f64().unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn the_cache_is_per_user_and_checked_before_reuse() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("xdg");
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let run_in = |seed: u64| {
        let cfg = heatbath(&work, seed);
        let (code, err) = run(bin()
            .arg(&cfg)
            .current_dir(&work)
            .env("XDG_CACHE_HOME", &cache));
        assert_eq!(code, 0, "{err}");
        plaquette(&work)
    };
    let p1 = run_in(1);
    // Nothing in the current directory but the config and the report.
    assert_eq!(entries(&work), ["r.json", "run.toml"]);
    let folder = cache.join("qcd-solve/heatbath");
    let names = entries(&folder);
    // The field and its record: no temporaries, no lock file left.
    assert_eq!(names.len(), 2, "{names:?}");
    let field = folder.join(names.iter().find(|n| n.ends_with(".nersc")).unwrap());
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(folder.join(format!(
            "{}.json",
            field.file_name().unwrap().to_string_lossy()
        )))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(record["params"]["seed"], 1);
    assert_eq!(record["plaquette"].as_f64(), Some(p1));
    // Reused: the same plaquette, bit for bit.
    assert_eq!(run_in(1), p1);
    // Another ensemble's valid file put under this entry's name is not reused: its CRC is
    // not the recorded one, so the field is generated again (the seed-1 plaquette).
    let p2 = run_in(2);
    assert_ne!(p2, p1);
    let other = entries(&folder)
        .into_iter()
        .find(|n| n.contains("seed2") && n.ends_with(".nersc"))
        .unwrap();
    std::fs::copy(folder.join(other), &field).unwrap();
    assert_eq!(run_in(1), p1);
}
