//! Helpers shared by the file-format tests (tests/io_*.rs): reading a shared lattice,
//! comparing links, and copying a file with an edit to see it refused.

use super::shared;
use qcd_solve::field::GaugeField;
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::io::{read_gauge, GaugeFileInfo};
use qcd_solve::Error;
use std::path::{Path, PathBuf};

pub fn read(name: &str) -> (GaugeField, GaugeFileInfo) {
    read_gauge(&shared(name), None, None, DEFAULT_BOUNDARY)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn checksum(info: &GaugeFileInfo, name: &str) -> (u32, u32) {
    let c = info
        .checksums
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{}: no checksum {name}", info.path));
    (c.stored, c.computed)
}

pub fn max_link_diff(a: &GaugeField, b: &GaugeField) -> f64 {
    assert_eq!(a.links.len(), b.links.len());
    a.links
        .iter()
        .zip(&b.links)
        .flat_map(|(u, v)| {
            (0..3).flat_map(move |r| (0..3).map(move |c| (u.0[r][c] - v.0[r][c]).norm()))
        })
        .fold(0.0, f64::max)
}
pub fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).unwrap()
}

pub fn copy_modified(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(shared(name)).unwrap();
    edit(&mut bytes);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

pub fn format_error(p: &Path, expected: Option<[usize; 4]>) -> String {
    match read_gauge(p, None, expected, DEFAULT_BOUNDARY) {
        Err(e @ Error::Format { .. }) => {
            let s = e.to_string();
            assert!(s.contains(&p.display().to_string()), "names no path: {s}");
            assert_eq!(e.exit_code(), 4);
            s
        }
        Err(e) => panic!("expected a format error, got {e:?}"),
        Ok(_) => panic!("{} was accepted", p.display()),
    }
}
