//! Helpers shared by the integration tests (each test file that needs them has
//! `mod common;`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// A gauge file of ../shared/lattices, used in place.
pub fn shared(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/lattices")).join(name)
}

/// Replace the first occurrence of `from` in the bytes of a file by `to` (panics when it
/// is not there: the test's premise is wrong).
pub fn replace(b: &mut Vec<u8>, from: &str, to: &str) {
    let at = b
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("{from:?} not in file"));
    b.splice(at..at + from.len(), to.bytes());
}

/// Helpers of the file-format tests (tests/io_*.rs).
pub mod io;
