//! End-to-end tests of the `qcd-solve` binary: exit codes of the README, outputs written
//! only on success, and the report's numbers.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qcd-solve"));
    c.arg("--quiet");
    c
}

/// Without --quiet: the summary goes to stdout (quiet prints nothing there).
fn bin_loud() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn write_config(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("run.toml");
    std::fs::write(&p, body).unwrap();
    p
}

fn small(extra: &str) -> String {
    format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n\
         [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n{extra}"
    )
}

/// The small config with a report and a solution in `dir`: (report, solution, config).
fn small_with_outputs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let rep = dir.join("r.json");
    let sol = dir.join("x.npy");
    let cfg = write_config(
        dir,
        &small(&format!(
            "[output]\nreport = \"{}\"\nsolution = \"{}\"\n",
            rep.display(),
            sol.display()
        )),
    );
    (rep, sol, cfg)
}

#[test]
fn small_run_converges_and_writes_report_and_solution() {
    let d = tempfile::tempdir().unwrap();
    let (rep, sol, cfg) = small_with_outputs(d.path());
    // Not --quiet: the summary goes to stdout (quiet prints nothing there).
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("converged after"), "{stdout}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    assert_eq!(r["converged"], true);
    let tol = r["tolerance"].as_f64().unwrap();
    // The true residual recomputed on the CPU is within 10x of the tolerance.
    assert!(r["true_residual_of_d_cpu"].as_f64().unwrap() <= 10.0 * tol);
    let hist = r["residual_history"].as_array().unwrap();
    assert_eq!(hist.len(), r["iterations"].as_u64().unwrap() as usize + 1);
    assert_eq!(
        hist[0].as_f64().unwrap(),
        1.0,
        "history starts at ||b||/||b||"
    );
    // 4^4 sites x 12 complex x 16 bytes plus the npy header (a multiple of 64 bytes).
    let len = std::fs::metadata(&sol).unwrap().len();
    assert_eq!((len - 256 * 12 * 16) % 64, 0);
}

#[test]
fn overrides_apply_and_output_folder_is_used() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(
        d.path(),
        &small("[output]\nreport = \"somewhere/r.json\"\n"),
    );
    let out = bin()
        .arg(&cfg)
        .args([
            "--kappa",
            "0.1",
            "--tol",
            "1e-6",
            "--threads",
            "1",
            "--output",
        ])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["kappa"].as_f64(), Some(0.1));
    assert_eq!(r["tolerance"].as_f64(), Some(1e-6));
    assert_eq!(r["threads"].as_u64(), Some(1));
}

#[test]
fn bad_config_exits_2_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let rep = d.path().join("r.json");
    let cfg = write_config(
        d.path(),
        &small(&format!("[output]\nreport = \"{}\"\n", rep.display()))
            .replace("kappa = 0.12", "kappa = -1.0"),
    );
    let out = bin().arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dirac.kappa") && err.contains("line 12"),
        "{err}"
    );
    assert!(!rep.exists());
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        1,
        "only the config remains"
    );
}

#[test]
fn missing_config_exits_3() {
    let out = bin().arg("/nonexistent/run.toml").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/run.toml"));
}

#[test]
fn odd_dims_are_fine_for_the_full_operator() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(
        d.path(),
        &small("")
            .replace("LX = 4", "LX = 3")
            .replace("LT = 4", "LT = 5"),
    );
    let out = bin().arg(&cfg).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn non_convergence_exits_7_with_the_report_written() {
    // CR on the non-Hermitian D stagnates (README, "Solver"): exit 7, report written.
    let d = tempfile::tempdir().unwrap();
    let rep = d.path().join("r.json");
    let cfg = write_config(
        d.path(),
        &small(&format!(
            "[solver]\noperator = \"D\"\nmax_iterations = 50\n\n[output]\nreport = \"{}\"\n",
            rep.display()
        )),
    );
    let out = bin().arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&out.stderr).contains("maximum number of iterations"));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    assert_eq!(r["converged"], false);
    assert_eq!(r["iterations"].as_u64(), Some(50));
}

#[test]
fn scale_gives_one_row_per_thread_count() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(d.path(), &small(""));
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .args(["--quiet", "scale"])
        .arg(&cfg)
        .args(["--threads", "1,2,3", "--out"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(d.path().join("scale.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 3);
    for (row, n) in rows.iter().zip([1, 2, 3]) {
        assert!(row.starts_with(&format!("{n},")), "{row}");
    }
    // The solve is bitwise the same for every thread count, so is the iteration count.
    let its: Vec<&str> = rows.iter().map(|r| r.split(',').nth(1).unwrap()).collect();
    assert!(its.windows(2).all(|w| w[0] == w[1]), "{its:?}");
    for ext in ["svg", "png"] {
        let bytes = std::fs::read(d.path().join(format!("scale.{ext}"))).unwrap();
        match ext {
            "svg" => assert!(String::from_utf8_lossy(&bytes).contains("<svg")),
            _ => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n"),
        }
    }
}

#[test]
fn shipped_main_config_is_the_readme_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(readme.contains("cargo run --release -- configs/16x16x16x32.toml"));
    assert!(root().join("configs/16x16x16x32.toml").exists());
}

#[test]
fn every_real_gauge_config_solves_with_its_manifest_plaquette() {
    // configs/<format>-*.toml read ../shared/lattices; plaquettes from its MANIFEST.md
    // (32-bit files are reunitarised, which moves the plaquette by ~1e-8: tolerance 1e-6).
    let cases = [
        ("nersc-atb", 0.5038664469),
        ("ildg-atb", 0.5038664469),
        ("milc-l4448", 0.5690557244),
        ("scidac-l4448", 0.5690557244),
        ("ildg-tmlqcd", 0.6350055722),
        ("clover-weak-field", 0.9948041323),
    ];
    let d = tempfile::tempdir().unwrap();
    for (name, plaq) in cases {
        let out = bin_loud()
            .arg(root().join("configs").join(format!("{name}.toml")))
            .args(["--device", "cpu", "--output"])
            .arg(d.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join(format!("{name}.json"))).unwrap())
                .unwrap();
        let p = r["plaquette"].as_f64().unwrap();
        assert!(
            (p - plaq).abs() < 1e-6,
            "{name}: plaquette {p} vs MANIFEST {plaq}"
        );
        assert_eq!(r["converged"], true, "{name}");
        // The 32-bit files (MANIFEST: milc/scidac l4448) are reunitarised, and the report
        // and the summary say so; the 64-bit ones are used as stored.
        let single = name.contains("l4448");
        assert_eq!(r["gauge_reunitarised"], single, "{name}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout.contains("gauge reunitarised     32-bit links reunitarised in double"),
            single,
            "{name}: {stdout}"
        );
    }
}

#[test]
fn info_prints_the_verified_header_values() {
    let f = root().join("../shared/lattices/ATB_nersc.l8t4b3360");
    let out = bin().arg("info").arg(&f).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    // MANIFEST: NERSC CHECKSUM b379560a, plaquette 0.5038664469.
    assert!(s.contains("b379560a") && s.contains("0.50386644"), "{s}");
}

#[test]
fn info_on_a_truncated_file_exits_4() {
    let d = tempfile::tempdir().unwrap();
    let src = std::fs::read(root().join("../shared/lattices/ATB_nersc.l8t4b3360")).unwrap();
    let f = d.path().join("cut.nersc");
    std::fs::write(&f, &src[..src.len() / 2]).unwrap();
    let out = bin().arg("info").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut.nersc"));
}

fn atb_config(dir: &Path, dims: [usize; 4], extra: &str) -> PathBuf {
    let f = root().join("../shared/lattices/ATB_nersc.l8t4b3360");
    write_config(
        dir,
        &format!(
            "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n\n[gauge]\ntype = \"file\"\n\
             path = \"{}\"\n\n[dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n{extra}",
            dims[0],
            dims[1],
            dims[2],
            dims[3],
            f.display()
        ),
    )
}

#[test]
fn wrong_dims_for_a_gauge_file_exit_2_and_write_nothing() {
    // [lattice] against the file's header (MANIFEST: 8x8x8x4) is checked when the config
    // is loaded: a bad value (exit 2) naming the key and the file with its extents.
    let d = tempfile::tempdir().unwrap();
    let rep = d.path().join("r.json");
    let cfg = atb_config(
        d.path(),
        [8, 8, 8, 8],
        &format!("[output]\nreport = \"{}\"\n", rep.display()),
    );
    let out = bin().arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ATB_nersc.l8t4b3360")
            && err.contains("lattice.LT")
            && err.contains("8x8x8x4"),
        "{err}"
    );
    assert!(!rep.exists());
    assert!(!d.path().join("out").exists());
}

#[test]
fn flipped_byte_in_a_gauge_file_exits_4_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(root().join("../shared/lattices/ATB_nersc.l8t4b3360")).unwrap();
    let n = bytes.len();
    bytes[n - 1000] ^= 0x10;
    let f = d.path().join("flipped.nersc");
    std::fs::write(&f, bytes).unwrap();
    let rep = d.path().join("r.json");
    let cfg = write_config(
        d.path(),
        &format!(
            "[lattice]\nLX = 8\nLY = 8\nLZ = 8\nLT = 4\n\n[gauge]\ntype = \"file\"\npath = \"flipped.nersc\"\n\n\
             [dirac]\nkappa = 0.12\n\n[output]\nreport = \"{}\"\n",
            rep.display()
        ),
    );
    let out = bin().arg(&cfg).arg("--device").arg("cpu").output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CHECKSUM"), "{err}");
    assert!(!rep.exists());
}

#[test]
fn gauge_output_reads_back_with_the_same_plaquette() {
    let d = tempfile::tempdir().unwrap();
    let g = d.path().join("u.nersc");
    let cfg = write_config(
        d.path(),
        &small(&format!("[output]\ngauge = \"{}\"\n", g.display())),
    );
    let out = bin().arg(&cfg).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info = bin().arg("info").arg(&g).output().unwrap();
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    let s = String::from_utf8_lossy(&info.stdout);
    assert!(
        s.contains("IEEE64BIG") || s.contains("64-bit, big-endian"),
        "{s}"
    );
}

// ---- issue 12: non-finite values and links off SU(3) ----------------------------------

/// ATB_nersc with a NaN at site (3,1,2,1), mu 2, element [1][0] im, and its CHECKSUM
/// recomputed (conventions.md: the sum of the payload's 32-bit words), so only the NaN is
/// wrong.
fn atb_with_nan(dir: &Path) -> PathBuf {
    let mut b = std::fs::read(root().join("../shared/lattices/ATB_nersc.l8t4b3360")).unwrap();
    let tag = b"END_HEADER\n";
    let start = b.windows(tag.len()).position(|w| w == tag).unwrap() + tag.len();
    let site = 3 + 8 * (1 + 8 * (2 + 8));
    // Element [1][0] is the 4th complex number of the link (16 bytes each), im 8 bytes on.
    let off = start + (site * 4 + 2) * 144 + 3 * 16 + 8;
    b[off..off + 8].copy_from_slice(&f64::NAN.to_be_bytes());
    let sum = b[start..].chunks_exact(8).fold(0u32, |s, w| {
        let bits = u64::from_be_bytes(w.try_into().unwrap());
        s.wrapping_add(bits as u32)
            .wrapping_add((bits >> 32) as u32)
    });
    let at = b
        .windows(19)
        .position(|w| w == b"CHECKSUM = b379560a")
        .unwrap();
    b[at..at + 19].copy_from_slice(format!("CHECKSUM = {sum:08x}").as_bytes());
    let p = dir.join("nan.nersc");
    std::fs::write(&p, b).unwrap();
    p
}

fn config_for(dir: &Path, dims: [usize; 4], gauge: &Path, extra: &str) -> PathBuf {
    write_config(
        dir,
        &format!(
            "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n\n[gauge]\ntype = \"file\"\n\
             path = \"{}\"\n{extra}\n[dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"cpu\"\n\n\
             [output]\nreport = \"{}\"\nsolution = \"{}\"\n",
            dims[0],
            dims[1],
            dims[2],
            dims[3],
            gauge.display(),
            dir.join("r.json").display(),
            dir.join("x.npy").display()
        ),
    )
}

#[test]
fn a_nan_link_exits_4_in_info_and_in_the_run_and_writes_nothing() {
    // Issue 12 item 5: info printed it with exit 0, the run exited 7 with a zero solution.
    let d = tempfile::tempdir().unwrap();
    let f = atb_with_nan(d.path());
    let out = bin().arg("info").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nan.nersc")
            && err.contains("(x,y,z,t) = (3,1,2,1)")
            && err.contains("mu = 2"),
        "{err}"
    );
    for flag in [None, Some("--reunitarise")] {
        let cfg = config_for(d.path(), [8, 8, 8, 4], &f, "");
        let out = bin().arg(&cfg).args(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(4), "{flag:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("non-finite link value NaN"), "{err}");
        assert!(!d.path().join("r.json").exists() && !d.path().join("x.npy").exists());
    }
}

#[test]
fn a_nan_in_the_source_file_exits_4_naming_site_spin_and_colour() {
    let d = tempfile::tempdir().unwrap();
    let l = qcd_solve::geometry::lattice::Lattice::new(
        [4, 4, 4, 4],
        qcd_solve::geometry::lattice::DEFAULT_BOUNDARY,
    )
    .unwrap();
    let mut b = qcd_solve::field::SpinorField::random(l.volume(), 1, 0);
    b.data[qcd_solve::field::spinor::idx(l.index([2, 3, 0, 1]), 3, 2)].re = f64::NAN;
    qcd_solve::io::write_spinor_npy(&d.path().join("b.npy"), &l, &b).unwrap();
    let cfg = write_config(
        d.path(),
        &small(&format!(
            "[source]\ntype = \"file\"\npath = \"b.npy\"\n\n[output]\nreport = \"{}\"\n",
            d.path().join("r.json").display()
        )),
    );
    let out = bin().arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("b.npy")
            && err.contains("(x,y,z,t) = (2,3,0,1), spin 3, colour 2")
            && err.contains("real part"),
        "{err}"
    );
    assert!(!d.path().join("r.json").exists());
}

/// milc_lat.sample.l4444.ildg (32-bit, 4^4) without its checksum record and with an
/// exponent bit flipped in link (2,1,0,3), mu 0: 0.83 away from SU(3).
fn milc_ildg_flipped(dir: &Path) -> PathBuf {
    let src = root().join("../shared/lattices/milc_lat.sample.l4444.ildg");
    let rec = qcd_solve::io::lime::records(&src)
        .unwrap()
        .into_iter()
        .find(|r| r.type_name == "ildg-binary-data")
        .unwrap();
    let mut b = std::fs::read(&src).unwrap();
    let at = b.windows(15).position(|w| w == b"scidac-checksum").unwrap();
    b[at + 14] = b'X';
    let site = 2 + 4 * (1 + 4 * 12);
    b[rec.data_offset as usize + site * 4 * 72] ^= 0x08;
    let p = dir.join("flipped.ildg");
    std::fs::write(&p, b).unwrap();
    p
}

#[test]
fn links_off_su3_exit_4_unless_reunitarise_is_asked() {
    // Issue 12 item 6: such a file was silently reunitarised.
    let d = tempfile::tempdir().unwrap();
    let f = milc_ildg_flipped(d.path());
    // The checksum record is renamed away, so --accept-unchecked is needed to reach the
    // link check (without it the file is refused for the missing checksum).
    let out = bin()
        .arg("info")
        .arg(&f)
        .arg("--accept-unchecked")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("flipped.ildg") && err.contains("(x,y,z,t) = (2,1,0,3), mu = 0"),
        "{err}"
    );
    let out = bin()
        .arg("info")
        .arg("--reunitarise")
        .arg("--accept-unchecked")
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("1 links beyond the tolerance were projected"),
        "{s}"
    );

    let rep = d.path().join("r.json");
    // keyed.toml sets the config key; run.toml (written second) does not.
    let keyed = d.path().join("keyed.toml");
    let with_key = config_for(
        d.path(),
        [4, 4, 4, 4],
        &f,
        "reunitarise = true\naccept_unchecked = true\n",
    );
    std::fs::rename(with_key, &keyed).unwrap();
    let cfg = config_for(d.path(), [4, 4, 4, 4], &f, "accept_unchecked = true\n");
    let out = bin().arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(!rep.exists());
    // The flag, or the config key, lets it run; the report says what was done.
    for run in [
        vec![cfg.clone().into_os_string(), "--reunitarise".into()],
        vec![keyed.into_os_string()],
    ] {
        let _ = std::fs::remove_file(&rep);
        let out = bin_loud().args(&run).output().unwrap();
        assert!(
            out.status.success(),
            "{run:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
        assert_eq!(r["gauge_reunitarised"], true);
        let note = r["gauge_reunitarisation"].as_str().unwrap();
        assert!(note.contains("1 links off SU(3) beyond 1e-5"), "{note}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("gauge reunitarised"), "{stdout}");
    }
}

/// The report's time line: the named phases and `other` add up to the total, and the
/// timed steps lie inside the run, with the solve step the solve phase itself (the same
/// measurement, so equal).
#[test]
fn the_time_line_adds_up_and_its_steps_lie_inside_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (rep, _solution, cfg) = small_with_outputs(d.path());
    let out = bin().arg(&cfg).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&rep).unwrap()).unwrap();
    let t = &r["time"];
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("time.{k} in {t}"));
    let phases: f64 = [
        "read_generate",
        "upload",
        "tune",
        "solve",
        "verify",
        "write",
        "other",
    ]
    .iter()
    .map(|k| f(k))
    .sum();
    let total = f("total");
    // other = total - named (clamped at 0): the sum is the total to rounding.
    assert!(
        (phases - total).abs() <= 1e-9 * total.max(1.0),
        "{phases} vs {total}"
    );
    let steps = t["steps"].as_array().expect("time.steps");
    let named: Vec<&str> = steps.iter().filter_map(|s| s["name"].as_str()).collect();
    for want in [
        "gauge field (read or generated)",
        "solve",
        "CPU check of D x = b",
        "write the solution",
    ] {
        assert!(
            named.contains(&want),
            "step {want:?} missing from {named:?}"
        );
    }
    for s in steps {
        let (start, secs) = (s["start"].as_f64().unwrap(), s["seconds"].as_f64().unwrap());
        assert!(
            start >= 0.0 && secs >= 0.0 && start + secs <= total + 1e-6,
            "{s} (total {total})"
        );
    }
    let solve = steps.iter().find(|s| s["name"] == "solve").unwrap();
    assert_eq!(solve["seconds"].as_f64().unwrap(), f("solve"));
}

#[test]
fn reliable_delta_flag_sets_the_plan_and_refuses_values_outside_0_1() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write_config(d.path(), &small(""));
    let out = bin_loud()
        .arg(&cfg)
        .args(["--precision", "single-double", "--reliable-delta", "0.01"])
        .args(["--output"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("single-double (delta 0.01)"), "{text}");
    let out = bin()
        .arg(&cfg)
        .args(["--reliable-delta", "1.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--reliable-delta") && err.contains("solver.reliable_delta"),
        "{err}"
    );
}
