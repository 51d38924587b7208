//! Config fixtures (tests/configs): every good file loads; every bad file is refused with
//! the message its first line `# expect: ...` names, and with the line number where the
//! problem is a value.

use qcd_solve::config::LoadedConfig;
use std::path::Path;

fn dir(kind: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs")
        .join(kind)
}

#[test]
fn good_configs_load() {
    let mut n = 0;
    for e in std::fs::read_dir(dir("good")).unwrap() {
        let p = e.unwrap().path();
        LoadedConfig::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    assert!(n >= 2);
}

#[test]
fn bad_configs_give_their_documented_error() {
    let mut n = 0;
    for e in std::fs::read_dir(dir("bad")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", p.display()));
        let err = LoadedConfig::from_file(&p).expect_err(&p.display().to_string());
        let msg = err.to_string();
        assert!(
            msg.contains(expect),
            "{}: `{msg}` lacks `{expect}`",
            p.display()
        );
        assert_eq!(err.exit_code(), 2, "{}", p.display());
        // Every message points at a line of the file.
        assert!(
            msg.contains("line "),
            "{}: `{msg}` names no line",
            p.display()
        );
        n += 1;
    }
    assert!(n >= 10);
}

#[test]
fn repository_configs_load() {
    // Every shipped config parses and validates (the ones naming ../shared files are
    // only parsed here; tests/cli.rs runs them).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            LoadedConfig::from_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }
}

#[test]
fn embedded_default_is_the_seed_problem() {
    let c = LoadedConfig::embedded_default();
    assert_eq!(c.dims(), [16, 16, 16, 32]);
}
