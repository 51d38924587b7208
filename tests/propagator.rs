//! `qcd-solve propagator`: the 12 columns of a point source in one process, against the
//! free field's pion correlator in closed form and against separate main-job solves.

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qcd-solve"));
    c.env_remove("RANK").env_remove("WORLD_SIZE").arg("--quiet");
    c
}

/// `qcd-solve propagator CFG --out OUT`.
fn propagator(cfg: &Path, out: &Path) -> std::process::Output {
    bin()
        .arg("propagator")
        .arg(cfg)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn config(dir: &Path, name: &str, gauge: &str, source: &str, extra: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\n{gauge}\n\n[dirac]\n\
             kappa = 0.1\n\n[source]\n{source}\n\n[solver]\nmethod = \"bicgstab\"\n\
             tolerance = 1e-12\n\n[backend]\ndevice = \"cpu\"\n{extra}"
        ),
    )
    .unwrap();
    p
}

/// The complex128 values of an `.npy` file (format 1.0) and its shape.
fn read_npy(path: &Path) -> (Vec<usize>, Vec<(f64, f64)>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(header.contains("'descr': '<c16'"), "{header}");
    let shape = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let data = b[10 + hlen..]
        .chunks_exact(16)
        .map(|c| {
            (
                f64::from_le_bytes(c[..8].try_into().unwrap()),
                f64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect();
    (shape, data)
}

/// The free Wilson pion correlator C(t) = sum_x tr[S(x, t) S(x, t)^+] in closed form:
/// S(p) = (a - i gamma.b) / (a^2 + b^2) with a = 1 - 2 kappa sum cos p, b = 2 kappa sin p,
/// periodic in space, antiperiodic in time, so that
/// C(t) = 12 / (L^3 T^2) sum_p3 sum_{p4, q4} e^{i (p4 - q4) t} (a a' + b.b') / (|.|^2 |.|^2)
/// (the trace of gamma_mu gamma_nu is 4 delta; three colours). Independent of the gamma
/// basis and of the sign of the gamma term.
fn free_pion(l: usize, lt: usize, kappa: f64) -> Vec<f64> {
    use std::f64::consts::PI;
    let ab = |p: [f64; 4]| {
        let a = 1.0 - 2.0 * kappa * p.iter().map(|x| x.cos()).sum::<f64>();
        let b = p.map(|x| 2.0 * kappa * x.sin());
        (a, b)
    };
    let mut c = vec![0.0; lt];
    for n1 in 0..l {
        for n2 in 0..l {
            for n3 in 0..l {
                let sp = [n1, n2, n3].map(|n| 2.0 * PI * n as f64 / l as f64);
                let modes: Vec<(f64, f64, [f64; 4])> = (0..lt)
                    .map(|n4| {
                        let p4 = (2 * n4 + 1) as f64 * PI / lt as f64;
                        let (a, b) = ab([sp[0], sp[1], sp[2], p4]);
                        (p4, a, b)
                    })
                    .collect();
                for (t, ct) in c.iter_mut().enumerate() {
                    for &(p4, a1, b1) in &modes {
                        let n1 = a1 * a1 + b1.iter().map(|x| x * x).sum::<f64>();
                        for &(q4, a2, b2) in &modes {
                            let n2 = a2 * a2 + b2.iter().map(|x| x * x).sum::<f64>();
                            let dot: f64 = b1.iter().zip(&b2).map(|(x, y)| x * y).sum();
                            *ct +=
                                ((p4 - q4) * t as f64).cos() * 12.0 * (a1 * a2 + dot) / (n1 * n2);
                        }
                    }
                }
            }
        }
    }
    let norm = (l * l * l * lt * lt) as f64;
    c.iter().map(|v| v / norm).collect()
}

#[test]
fn the_free_pion_follows_its_closed_form_and_the_file_holds_twelve_columns() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(
        d.path(),
        "free.toml",
        "type = \"unit\"",
        "type = \"point\"\nsite = [1, 2, 3, 5]",
        "",
    );
    let out = propagator(&cfg, &d.path().join("o"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(d.path().join("o/free.correlators.csv")).unwrap();
    let want = free_pion(4, 8, 0.1);
    let mut rows = csv.lines();
    assert_eq!(
        rows.next(),
        Some("source_gamma,sink_gamma,px,py,pz,t,re,im")
    );
    // Without [measure], the 16 x 16 structures at zero momentum: 256 x LT rows.
    let rows: Vec<Vec<&str>> = rows.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 256 * 8);
    let got: Vec<f64> = rows
        .iter()
        .filter(|f| f[..5] == ["G5", "G5", "0", "0", "0"])
        .map(|f| f[6].parse().unwrap())
        .collect();
    assert_eq!(got.len(), 8);
    for (t, (g, w)) in got.iter().zip(&want).enumerate() {
        // Solver tolerance 1e-12 a column: the correlator to about 1e-11 relative.
        assert!(
            (g - w).abs() <= 1e-9 * w.abs(),
            "t = {t}: {g:e} against {w:e}"
        );
    }
    let (shape, data) = read_npy(&d.path().join("o/free.propagator.npy"));
    assert_eq!(shape, [8, 4, 4, 4, 4, 3, 4, 3]);
    // At the source site (x, y, z, t) = (1, 2, 3, 5) the propagator is 1 + O(kappa) on
    // the diagonal: well away from zero, unlike a column left unwritten.
    let at = |t: usize, z: usize, y: usize, x: usize, i: usize, k: usize| {
        data[((((t * 4 + z) * 4 + y) * 4 + x) * 12 + i) * 12 + k]
    };
    for k in 0..12 {
        assert!(at(5, 3, 2, 1, k, k).0 > 0.5, "diagonal {k}");
    }
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("o/free.propagator.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["columns"].as_array().unwrap().len(), 12);
}

#[test]
fn a_column_has_the_bits_of_the_main_jobs_solve_of_that_spin_and_colour() {
    // Expected: the main job's solution for the point source of spin 2, colour 1 (the
    // same backend, the same arithmetic) on a random field.
    let d = tempfile::tempdir().unwrap();
    let gauge = "type = \"random\"\nseed = 5";
    let prop = config(
        d.path(),
        "p.toml",
        gauge,
        "type = \"point\"\nsite = [0, 1, 2, 3]",
        "",
    );
    let main = config(
        d.path(),
        "m.toml",
        gauge,
        "type = \"point\"\nsite = [0, 1, 2, 3]\nspin = 2\ncolour = 1",
        &format!(
            "\n[output]\nsolution = \"{}\"\n",
            d.path().join("m.npy").display()
        ),
    );
    let p = propagator(&prop, d.path());
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    let m = bin().arg(&main).output().unwrap();
    assert!(m.status.success(), "{}", String::from_utf8_lossy(&m.stderr));
    let (_, whole) = read_npy(&d.path().join("p.propagator.npy"));
    let (shape, column) = read_npy(&d.path().join("m.npy"));
    assert_eq!(shape, [8, 4, 4, 4, 4, 3]);
    let k = 2 * 3 + 1;
    for (x, site) in column.chunks_exact(12).enumerate() {
        for (i, z) in site.iter().enumerate() {
            let w = whole[x * 144 + i * 12 + k];
            assert_eq!(
                (w.0.to_bits(), w.1.to_bits()),
                (z.0.to_bits(), z.1.to_bits()),
                "site {x}, component {i}"
            );
        }
    }
}

#[test]
fn batches_of_columns_give_the_bits_of_columns_solved_one_at_a_time() {
    // Expected: the same run with batch = 1 (each column the host BiCGStab alone). With
    // batch = 5 the 12 columns go as batches of 5, 5 and 2, each step's operator applied
    // to the batch and a converged column leaving it; the arithmetic of each column is
    // that of its own solve, so the propagator is the same bits.
    let d = tempfile::tempdir().unwrap();
    let gauge = "type = \"random\"\nseed = 5";
    let source = "type = \"point\"\nsite = [0, 1, 2, 3]";
    let one = config(d.path(), "one.toml", gauge, source, "");
    let five = config(d.path(), "five.toml", gauge, source, "");
    let text = std::fs::read_to_string(&five).unwrap();
    std::fs::write(
        &five,
        text.replace("tolerance = 1e-12\n", "tolerance = 1e-12\nbatch = 5\n"),
    )
    .unwrap();
    for cfg in [&one, &five] {
        let out = propagator(cfg, d.path());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (_, a) = read_npy(&d.path().join("one.propagator.npy"));
    let (_, b) = read_npy(&d.path().join("five.propagator.npy"));
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(
            (x.0.to_bits(), x.1.to_bits()),
            (y.0.to_bits(), y.1.to_bits()),
            "element {i}"
        );
    }
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("five.propagator.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["batch"], 5);
}

#[test]
fn volume_noise_for_correlators_and_a_split_lattice_are_refused_by_key() {
    let d = tempfile::tempdir().unwrap();
    for (name, source, extra, key) in [
        (
            "noise.toml",
            "type = \"z2\"\nseed = 1\ndilution = \"spin\"",
            "\n[measure]\n",
            "source.timeslice",
        ),
        (
            "split.toml",
            "type = \"point\"",
            "\n[parallel]\ngrid = [1, 1, 1, 2]\n",
            "parallel.grid",
        ),
    ] {
        let cfg = config(d.path(), name, "type = \"unit\"", source, extra);
        let out = propagator(&cfg, &d.path().join("o"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(key), "{name}: {err}");
        assert!(!d
            .path()
            .join("o")
            .join(name.replace(".toml", ".propagator.npy"))
            .exists());
    }
}

#[test]
fn a_column_that_does_not_converge_stops_the_run_with_nothing_written() {
    // Two iterations cannot reach 1e-12 on a random field: exit 7 (README), no files.
    let d = tempfile::tempdir().unwrap();
    let cfg = config(
        d.path(),
        "short.toml",
        "type = \"random\"\nseed = 2",
        "type = \"point\"",
        "",
    );
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("tolerance = 1e-12", "tolerance = 1e-12\nmax_iterations = 2");
    std::fs::write(&cfg, text).unwrap();
    let out = propagator(&cfg, &d.path().join("o"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("did not converge"), "{err}");
    for f in [
        "short.propagator.npy",
        "short.correlators.csv",
        "short.propagator.json",
        "short.propagator.h5",
        "short.propagator.lime",
    ] {
        assert!(!d.path().join("o").join(f).exists(), "{f}");
    }
}

#[test]
fn a_multigrid_propagator_agrees_with_bicgstab_and_sets_up_once() {
    // The 12 columns by multigrid-preconditioned GCR (one set-up for all of them) and by
    // BiCGStab, both to 1e-12 on a random field: the propagators agree to the accuracy
    // the tolerance allows (1e-9 relative, element by element against the largest).
    let d = tempfile::tempdir().unwrap();
    let gauge = "type = \"random\"\nseed = 5";
    let source = "type = \"point\"\nsite = [0, 1, 2, 3]";
    let bicg = config(d.path(), "bicg.toml", gauge, source, "");
    let mg = config(
        d.path(),
        "mg.toml",
        gauge,
        source,
        "\n[multigrid]\nblocks = [[2, 2, 2, 2]]\nvectors = [6]\n",
    );
    let text = std::fs::read_to_string(&mg).unwrap();
    std::fs::write(
        &mg,
        text.replace("method = \"bicgstab\"", "method = \"mg\""),
    )
    .unwrap();
    for cfg in [&bicg, &mg] {
        let out = propagator(cfg, d.path());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (_, a) = read_npy(&d.path().join("bicg.propagator.npy"));
    let (_, b) = read_npy(&d.path().join("mg.propagator.npy"));
    let scale = a.iter().map(|z| z.0.hypot(z.1)).fold(0.0, f64::max);
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x.0 - y.0).hypot(x.1 - y.1))
        .fold(0.0, f64::max);
    assert!(
        worst <= 1e-9 * scale,
        "max deviation {worst} against {scale}"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("mg.propagator.json")).unwrap(),
    )
    .unwrap();
    let setups: Vec<f64> = report["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["multigrid_setup_seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(setups.len(), 12);
    assert!(setups[0] > 0.0, "{setups:?}");
    assert!(setups[1..].iter().all(|&t| t == 0.0), "{setups:?}");
}
