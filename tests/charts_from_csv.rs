//! `qcd-solve chart KIND CSV`: the reference charts drawn again from the CSV files
//! committed in validate/reference/, with no GPU. Each chart is a whole SVG and a PNG that
//! decodes to the charts' size; a CSV without the device or date and no flag for it is
//! refused with the flag's name.

use qcd_solve::app::chart::{run, Given, Kind};
use qcd_solve::report::charts::SIZE;
use std::path::{Path, PathBuf};
use std::process::Command;

fn reference(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("validate/reference")
        .join(rel)
}

fn given(device: &str, date: &str, lattice: Option<&str>) -> Given {
    Given {
        device: Some(device.into()),
        date: Some(date.into()),
        lattice: lattice.map(str::to_string),
        ..Given::default()
    }
}

/// Each file of `files` is `names`' SVG or PNG; the PNGs decode (the `image` crate) to
/// `SIZE` and the SVGs are SVG documents of that size.
fn check(files: &[PathBuf], dir: &Path, names: &[&str]) {
    assert_eq!(files.len(), 2 * names.len(), "{files:?}");
    for name in names {
        let png = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
        let img = image::load_from_memory(&png).unwrap();
        assert_eq!((img.width(), img.height()), SIZE, "{name}.png");
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
        let (w, h) = SIZE;
        assert!(
            svg.contains("<svg") && svg.contains(&format!("width=\"{w}\" height=\"{h}\"")),
            "{name}.svg"
        );
    }
}

#[test]
fn scaling_charts_redraw_from_the_committed_csv() {
    let d = tempfile::tempdir().unwrap();
    let mut g = given("NVIDIA H200", "2026-11-26", None);
    g.split = Some("t".into());
    let csv = reference("scale-t/scale-ranks.csv");
    let files = run(Kind::ScaleRanks, &csv, Some(d.path()), &g).unwrap();
    check(&files, d.path(), &["scale-strong", "scale-weak"]);
    // The title names the split, the lattice (read from the CSV) and the device; the GPU
    // axis is labelled with whole counts only (1, 2, 3, 4: no 1.5).
    let svg = std::fs::read_to_string(d.path().join("scale-weak.svg")).unwrap();
    assert!(svg.contains("split along t"), "split in the title");
    assert!(svg.contains("32x32x32x64 per GPU"), "lattice in the title");
    assert!(svg.contains("NVIDIA H200") && svg.contains("2026-11-26"));
    assert!(
        !svg.contains(">\n1.5\n<") && !svg.contains(">1.5<"),
        "no half GPU"
    );
}

#[test]
fn ablation_and_residual_charts_redraw_from_the_committed_csv() {
    let d = tempfile::tempdir().unwrap();
    let g = given("NVIDIA H100 80GB HBM3", "2026-11-23", Some("16x16x16x32"));
    let files = run(
        Kind::Ablate,
        &reference("ablate/ablation.csv"),
        Some(d.path()),
        &g,
    )
    .unwrap();
    check(&files, d.path(), &["speedup", "gflops", "gflops_own"]);
    let csv = reference("ablate/residuals.csv");
    let files = run(Kind::Residuals, &csv, Some(d.path()), &g).unwrap();
    check(&files, d.path(), &["residuals"]);
}

#[test]
fn kappa_scan_and_plaquette_charts_redraw_through_the_command_line() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .arg("chart")
        .arg("kappa-scan")
        .arg(reference("multigrid/kappa-scan.csv"))
        .arg("--out")
        .arg(d.path())
        .args(["--device", "NVIDIA H200", "--date", "2026-11-28"])
        .args(["--lattice", "16x16x16x32"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.matches("wrote ").count(), 4, "{printed}");
    let files: Vec<PathBuf> = ["iterations", "time"]
        .iter()
        .flat_map(|k| ["svg", "png"].map(|e| d.path().join(format!("kappa-scan-{k}.{e}"))))
        .collect();
    check(
        &files,
        d.path(),
        &["kappa-scan-iterations", "kappa-scan-time"],
    );
    let csv = reference("generate/b6.0_16x16x16x16.plaquette.csv");
    let g = given("NVIDIA H100 80GB HBM3", "2026-11-22", Some("16x16x16x16"));
    let files = run(Kind::Plaquette, &csv, Some(d.path()), &g).unwrap();
    check(&files, d.path(), &["b6.0_16x16x16x16.plaquette"]);
}

#[test]
fn a_csv_without_device_or_date_needs_the_flag() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .arg("chart")
        .arg("ablate")
        .arg(reference("ablate/ablation.csv"))
        .arg("--out")
        .arg(d.path())
        .args([
            "--device",
            "NVIDIA H100 80GB HBM3",
            "--lattice",
            "16x16x16x32",
        ])
        .output()
        .unwrap();
    // Exit 2: a bad or missing value, named.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--date"), "{err}");
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        0,
        "nothing drawn"
    );
}
