//! Helpers of the tests of bad inputs and unsafe outputs (tests/outputs_safety.rs,
//! tests/readers_strict.rs, tests/limits.rs, tests/heatbath_cache.rs): the binary, a small
//! CPU config, and a run's exit code with its stderr.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary with `--quiet` (errors still go to stderr).
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qcd-solve"));
    c.arg("--quiet");
    c
}

/// A gauge file of ../shared/lattices, used in place.
pub fn shared(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/lattices")).join(name)
}

/// A 4^4 CPU problem on a random field, with `extra` appended (an `[output]` table, ...).
pub fn small(extra: &str) -> String {
    format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
         [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n{extra}"
    )
}

/// `small` with a report and a solution at the given paths.
pub fn small_outputs(report: &Path, solution: &Path) -> String {
    small(&format!(
        "[output]\nreport = \"{}\"\nsolution = \"{}\"\n",
        report.display(),
        solution.display()
    ))
}

/// Write `body` as `dir/run.toml` and return its path.
pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("run.toml");
    std::fs::write(&p, body).unwrap();
    p
}

/// Exit code and stderr of a finished run.
pub fn code_and_err(out: &Output) -> (i32, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `cmd` and return its exit code and stderr.
pub fn run(cmd: &mut Command) -> (i32, String) {
    code_and_err(&cmd.output().unwrap())
}

/// An npy (1.0) file: the magic, `header` padded so the data starts on a 64-byte boundary,
/// then `data_bytes` zero bytes.
pub fn npy_bytes(header: &str, data_bytes: usize) -> Vec<u8> {
    let mut header = header.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    b.resize(b.len() + data_bytes, 0);
    b
}
