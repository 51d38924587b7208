//! The ablation's outputs without a GPU: table and CSV agree, charts are valid SVG/PNG with
//! one bar per version (failed versions drawn as such, not as results), and the CLI says
//! clearly that there is nothing to ablate on the CPU. The GPU run itself is done by
//! validate/on-device.sh (results in validate/results/).

use qcd_solve::app::ablate::{self, AblateReport, AblateRow, MethodRow};
use qcd_solve::backend::cuda::UploadBenchRow;
use std::process::Command;

/// The header and the records of a CSV table, read by the `csv` crate (a quoted field
/// with commas is one field).
fn read_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

fn row(v: &str, speedup: f64, valid: bool) -> AblateRow {
    AblateRow {
        version: v.into(),
        solver: "seed CR".into(),
        block_threads: 192,
        multiple: 16,
        // As the live ablation writes it: commas inside one field.
        geometry: "block 64, multiple 8 (tune cache)".into(),
        valid,
        operator_rel_diff: 1.5e-16,
        iterations: 92,
        ms_per_iteration_median: 0.44 + speedup / 1000.0,
        ms_per_iteration_spread: 0.01,
        seconds_to_solution_median: 0.0405,
        seconds_to_solution_spread: 0.001,
        speedup_over_cpu: speedup,
        gflops_model_1320: 1100.0 + speedup,
        gflops_own_count: 2200.0,
        gbytes_per_second_model: 2500.0,
        fraction_of_triad: 0.86,
        true_residual: 6.3e-11,
        compile_ms: 20.0,
        alloc_ms: 1.0,
        upload_ms: 30.0,
        layout_ms: 2.0,
        tune_ms: 4.0,
        download_ms: 3.0,
        stencil_share_of_solve: 0.7,
        error: if valid {
            None
        } else {
            Some("operator differs".into())
        },
        history: vec![1.0, 0.1, 0.01],
    }
}

fn report() -> AblateReport {
    AblateReport {
        config_file: "x.toml".into(),
        lattice: [16, 16, 16, 32],
        kappa: 0.124,
        operator: "g5D".into(),
        tolerance: 1e-10,
        device: "Test GPU".into(),
        repeat: 3,
        cpu_threads: 2,
        cpu_seconds: 8.0,
        cpu_iterations: 93,
        triad_gbytes_per_second: 2900.0,
        upload_pinned_gbytes_per_second: 25.0,
        upload_pageable_gbytes_per_second: 10.0,
        host_memcpy_gbytes_per_second: 20.0,
        host_memcpy_streaming_gbytes_per_second: 30.0,
        upload_register_ms: 30.0,
        upload_registered_gbytes_per_second: 50.0,
        upload_unregister_ms: 5.0,
        tune_cache: "t.tsv".into(),
        rows: vec![
            row("1.0", 150.0, true),
            row("1.3", 170.0, true),
            row("2.0", 60.0, false),
        ],
        methods: vec![],
        link_upload_lattice: None,
        link_uploads: vec![],
    }
}

fn method_row(method: &str, options: &str, ms: f64, valid: bool) -> MethodRow {
    MethodRow {
        method: method.into(),
        options: options.into(),
        solver: format!("{method}, {options}"),
        operator: "D".into(),
        iterations: 40,
        operator_applications: 81,
        seconds_to_solution_median: ms / 1e3,
        seconds_to_solution_spread: 0.0001,
        true_residual: 7.5e-11,
        valid,
        error: (!valid).then(|| "solve stagnated with true residual of D x = b 1.00e-3".into()),
    }
}

#[test]
fn table_and_csv_agree() {
    let r = report();
    let csv = ablate::csv(&r).unwrap();
    let table = ablate::table(&r);
    assert!(
        table.contains("parallel memcpy 20.0 GB/s (30.0 GB/s with streaming stores); registered in place 30.0 ms, then upload 50.0 GB/s, unregistered 5.0 ms"),
        "{table}"
    );
    let (header, rows) = read_csv(&csv);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    assert_eq!(rows.len(), r.rows.len());
    for (x, c) in r.rows.iter().zip(&rows) {
        assert_eq!(c.len(), header.len());
        assert_eq!(c[col("version")], x.version);
        assert_eq!(c[col("geometry")], x.geometry);
        let speedup: f64 = c[col("speedup_over_cpu")].parse().unwrap();
        assert_eq!(speedup, x.speedup_over_cpu, "CSV carries the full value");
        let iters: usize = c[col("iterations")].parse().unwrap();
        assert_eq!(iters, x.iterations);
        // The table shows the same numbers, rounded to the printed digits.
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{} ", x.version)))
            .unwrap();
        assert!(
            line.contains(&format!("{:.1}", x.speedup_over_cpu)),
            "{line}"
        );
        assert!(
            line.contains(&format!("{:.0}", x.gflops_model_1320)),
            "{line}"
        );
        assert_eq!(line.contains("FAILED"), !x.valid, "{line}");
    }
}

/// The link upload bench's lines: the median repetition's rate against the pinned
/// bandwidth of the same report (25 GB/s here): 4e9 bytes in a median 100 ms is 40 GB/s,
/// 160%.
#[test]
fn link_upload_lines_rate_the_median_against_pinned() {
    let mut r = report();
    assert!(!ablate::table(&r).contains("link upload"));
    r.link_upload_lattice = Some([48, 48, 48, 96]);
    r.link_uploads = vec![UploadBenchRow {
        variant: "device 64 MiB x2 streaming".into(),
        bytes: 4_000_000_000,
        wall_ms: vec![120.0, 80.0, 100.0],
        pin_ms: 0.0,
        copy_ms: 95.0,
        wait_ms: 2.0,
        unpin_ms: 0.0,
        kernel_ms: 5.0,
        queue_ms: 1.5,
        spread_ms: 3.0,
    }];
    let table = ablate::table(&r);
    assert!(
        table.contains("link upload, 48x48x48x96 double 12-real links (4.00 GB), median of 3:"),
        "{table}"
    );
    assert!(
        table.contains("  device 64 MiB x2 streaming       40.0 GB/s 160.0% of pinned (copy 95.0 ms, wait 2.0 ms, queue 1.5 ms, spread 3.0 ms, kernels 5.0 ms, buffers 0.0 + 0.0 ms)"),
        "{table}"
    );
}

#[test]
fn gains_table_divides_by_the_fastest_valid_seed_version() {
    let mut r = report();
    r.rows[1].seconds_to_solution_median = 0.040; // 1.3, the fastest valid seed row
    r.rows[2].seconds_to_solution_median = 0.001; // 2.0, failed: must not count
    let mut v3 = row("3.0", 200.0, true);
    v3.seconds_to_solution_median = 0.032;
    let mut opt = row("3.0 fused+eo+single", 900.0, true);
    opt.solver = "fused CR, even-odd, single-double (delta 0.1), check every 10".into();
    opt.seconds_to_solution_median = 0.002;
    r.rows.push(v3);
    r.rows.push(opt);
    let g = ablate::gains_table(&r);
    assert!(g.contains("fastest seed version (1.3, 40.00 ms"), "{g}");
    let line = g
        .lines()
        .find(|l| l.starts_with("3.0 fused+eo+single "))
        .unwrap();
    // 40 ms / 2 ms = 20x over the seed, 32 / 2 = 16x over 3.0 with the seed's CR.
    assert!(
        line.contains(" 20.00 ") && line.contains(" 16.00 "),
        "{line}"
    );
    // The CSV quotes the solver (it has commas) and keeps one row per variant.
    let csv = ablate::csv(&r).unwrap();
    assert!(csv.contains("\"fused CR, even-odd, single-double (delta 0.1), check every 10\""));
}

#[test]
fn methods_table_follows_the_others_and_agrees_with_its_csv() {
    // Hand-made rows: CR plain 8 ms, BiCGStab plain 4 ms (2x CR), GCR plain failed,
    // CGNE eo+single 6 ms with no valid CR eo+single row to divide by.
    let mut r = report();
    assert_eq!(ablate::methods_table(&r), "", "no 3.0: no table");
    r.methods = vec![
        method_row("cr", "plain", 8.0, true),
        method_row("bicgstab", "plain", 4.0, true),
        method_row("gcr", "plain", 5.0, false),
        method_row("cgne", "eo+single", 6.0, true),
    ];
    let table = ablate::table(&r);
    let at = table
        .find("methods on kernel 3.0 (median of 3 solves)")
        .unwrap();
    assert!(at > table.find("ver ").unwrap(), "after the version table");
    let t = &table[at..];
    let line = |m: &str| t.lines().find(|l| l.starts_with(&format!("{m} "))).unwrap();
    assert!(
        line("cr").contains(" 8.000 ") && line("cr").contains(" 1.00 "),
        "{t}"
    );
    assert!(
        line("bicgstab").contains(" 4.000 ") && line("bicgstab").contains(" 2.00 "),
        "{t}"
    );
    assert!(line("gcr").contains("FAILED: solve stagnated"), "{t}");
    assert!(
        line("cgne").contains(" - "),
        "no valid CR eo+single row: {t}"
    );
    assert!(
        line("cgne").contains(" 40 ") && line("cgne").contains(" 81 "),
        "{t}"
    );

    let csv = ablate::methods_csv(&r).unwrap();
    let (header, rows) = read_csv(&csv);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    assert_eq!(rows.len(), 4);
    for (x, c) in r.methods.iter().zip(&rows) {
        // Solvers here have one comma, inside one quoted field.
        assert_eq!(c.len(), header.len());
        assert_eq!(c[col("method")], x.method.to_string());
        assert_eq!(c[col("options")], x.options.to_string());
        assert_eq!(c[col("solver")], x.solver);
        let it: usize = c[col("iterations")].parse().unwrap();
        assert_eq!(it, x.iterations);
        let s: f64 = c[col("seconds_to_solution_median")].parse().unwrap();
        assert_eq!(
            s, x.seconds_to_solution_median,
            "CSV carries the full value"
        );
    }
    // The JSON report carries the rows.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["methods"].as_array().unwrap().len(), 4);
    assert_eq!(json["methods"][1]["operator_applications"], 81);
}

#[test]
fn charts_have_one_bar_per_version() {
    let d = tempfile::tempdir().unwrap();
    let r = report();
    let files = ablate::draw_charts(&r, &[1.0, 0.2, 0.03], d.path()).unwrap();
    if let Some(keep) = std::env::var_os("QCD_SOLVE_KEEP_CHARTS") {
        for f in &files {
            std::fs::copy(f, std::path::Path::new(&keep).join(f.file_name().unwrap())).unwrap();
        }
    }
    assert_eq!(files.len(), 9, "4 charts x (svg, png) and residuals.csv");
    let svg = std::fs::read_to_string(d.path().join("speedup.svg")).unwrap();
    assert!(svg.starts_with("<svg") || svg.contains("<svg"));
    // Valid versions are drawn in the result colour, the failed one in grey with a label.
    assert_eq!(
        svg.matches("fill=\"#1F77B4\"").count(),
        2,
        "one bar per valid version"
    );
    assert_eq!(
        svg.matches("fill=\"#AAAAAA\"").count(),
        1,
        "the failed version marked"
    );
    assert!(svg.contains("failed"), "the failed bar is labelled");
    for v in ["1.0", "1.3", "2.0"] {
        assert!(svg.contains(&format!(">\n{v}\n</text>")), "label {v}");
    }
    // The title names the lattice and the device; the residual histories are saved as
    // CSV (the CPU's first), one row per iteration.
    assert!(svg.contains(&format!(
        "lattice {}",
        r.lattice.map(|d| d.to_string()).join("x")
    )));
    assert!(svg.contains(&r.device));
    let csv = std::fs::read_to_string(d.path().join("residuals.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "series,iteration,residual");
    assert_eq!(lines[1], "CPU,0,1e0");
    assert_eq!(lines[3], "CPU,2,3e-2");
    for name in ["speedup", "gflops", "gflops_own", "residuals"] {
        let png = std::fs::read(d.path().join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}.png");
        assert!(png.len() > 1000);
    }
}

#[test]
fn ablate_on_the_cpu_says_there_is_nothing_to_ablate() {
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/8x8x8x8.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .args(["ablate", cfg, "--device", "cpu"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to ablate"));
}

#[test]
fn upload_dims_need_four_extents() {
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/8x8x8x8.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_qcd-solve"))
        .args(["ablate", cfg, "--upload-dims", "48,48,48"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--upload-dims") && err.contains("needs 4 values"),
        "{err}"
    );
}

#[test]
fn tuning_candidates_cover_every_free_launch_geometry() {
    use qcd_solve::backend::cuda::{CudaOptions, StencilVersion};
    let base = CudaOptions::default();
    // 1.0: its block size (the seed's 256 among them).
    let c = qcd_solve::app::tuning::candidates(StencilVersion::V1_0, &base);
    let blocks: Vec<usize> = c.iter().map(|o| o.coarse_block).collect();
    assert_eq!(blocks, [64, 128, 256, 512], "1024 runs out of registers");
    // 3.0: its block size in sites (= threads), warp multiples up to its launch bound.
    let c = qcd_solve::app::tuning::candidates(StencilVersion::V3_0, &base);
    let blocks: Vec<usize> = c.iter().map(|o| o.coarse_block).collect();
    assert_eq!(blocks, [32, 64, 96, 128, 192, 256, 384, 512]);
    // 1.1: none (one site per 16-thread block by definition).
    assert_eq!(
        qcd_solve::app::tuning::candidates(StencilVersion::V1_1, &base).len(),
        1
    );
    // 1.6 stages U in 48 KB of shared memory: multiples above 27 are not candidates
    // (stencil-versions.md: the reason for 1.6.1), while 1.6.1 goes up to 85 (1020 threads).
    let m16: Vec<usize> = qcd_solve::app::tuning::candidates(StencilVersion::V1_6, &base)
        .iter()
        .map(|o| o.multiple)
        .collect();
    assert!(m16.iter().all(|&m| m <= 27) && m16.contains(&16), "{m16:?}");
    let m161: Vec<usize> = qcd_solve::app::tuning::candidates(StencilVersion::V1_6_1, &base)
        .iter()
        .map(|o| o.multiple)
        .collect();
    assert_eq!(m161.last(), Some(&85));
    assert!(m161.iter().all(|&m| 12 * m <= 1024));
}
