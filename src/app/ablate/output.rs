//! What the ablation prints and writes: the tables, the CSV files and the charts.

use super::report::AblateReport;
use crate::error::Result;
use std::path::Path;

fn fmt(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "-".into()
    }
}

pub fn table(r: &AblateReport) -> String {
    let mut s = format!(
        "ablation on {}: {}x{}x{}x{}, {} kappa {} tol {:.0e}; CPU {:.3} s ({}, {} iterations); triad {:.0} GB/s; upload pinned {:.1} GB/s, pageable {:.1} GB/s\n",
        r.device, r.lattice[0], r.lattice[1], r.lattice[2], r.lattice[3], r.operator, r.kappa,
        r.tolerance, r.cpu_seconds, crate::threads::count(r.cpu_threads), r.cpu_iterations, r.triad_gbytes_per_second,
        r.upload_pinned_gbytes_per_second, r.upload_pageable_gbytes_per_second
    );
    if let (Some(d), false) = (r.link_upload_lattice, r.link_uploads.is_empty()) {
        s.push_str(&format!(
            "link upload, {}x{}x{}x{} double 12-real links ({:.2} GB), median of {}:\n",
            d[0],
            d[1],
            d[2],
            d[3],
            r.link_uploads[0].bytes as f64 / 1e9,
            r.link_uploads[0].wall_ms.len()
        ));
        for u in &r.link_uploads {
            let rate = u.gbytes_per_second();
            s.push_str(&format!(
                "  {:<30} {:>6} GB/s {:>5}% of pinned (copy {} ms, wait {} ms, queue {} ms, spread {} ms, kernels {} ms, buffers {} + {} ms)\n",
                u.variant,
                fmt(rate, 1),
                fmt(100.0 * rate / r.upload_pinned_gbytes_per_second, 1),
                fmt(u.copy_ms, 1),
                fmt(u.wait_ms, 1),
                fmt(u.queue_ms, 1),
                fmt(u.spread_ms, 1),
                fmt(u.kernel_ms, 1),
                fmt(u.pin_ms, 1),
                fmt(u.unpin_ms, 1),
            ));
        }
    }
    s.push_str(&format!(
        "host paths (256 MiB): parallel memcpy {} GB/s ({} GB/s with streaming stores); registered in place {} ms, then upload {} GB/s, unregistered {} ms\n",
        fmt(r.host_memcpy_gbytes_per_second, 1),
        fmt(r.host_memcpy_streaming_gbytes_per_second, 1),
        fmt(r.upload_register_ms, 1),
        fmt(r.upload_registered_gbytes_per_second, 1),
        fmt(r.upload_unregister_ms, 1)
    ));
    s.push_str(&format!(
        "{:<24} {:>5} {:>4} {:>5} {:>14} {:>14} {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>8} {:>7} {:>7} {}\n",
        "ver", "block", "mult", "iter", "ms/iter (sprd)", "s total (sprd)", "speedup", "GF 1320",
        "GF own", "GB/s", "triad", "true res", "comp ms", "up ms", "lay ms", "status"
    ));
    for x in &r.rows {
        s.push_str(&format!(
            "{:<24} {:>5} {:>4} {:>5} {:>7} ({:>5}) {:>7} ({:>5}) {:>8} {:>8} {:>8} {:>7} {:>6} {:>9} {:>8} {:>7} {:>7} {}\n",
            x.version,
            x.block_threads,
            x.multiple,
            x.iterations,
            fmt(x.ms_per_iteration_median, 3),
            fmt(x.ms_per_iteration_spread, 3),
            fmt(x.seconds_to_solution_median, 4),
            fmt(x.seconds_to_solution_spread, 4),
            fmt(x.speedup_over_cpu, 1),
            fmt(x.gflops_model_1320, 0),
            fmt(x.gflops_own_count, 0),
            fmt(x.gbytes_per_second_model, 0),
            fmt(x.fraction_of_triad, 2),
            if x.true_residual.is_finite() { format!("{:.2e}", x.true_residual) } else { "-".into() },
            fmt(x.compile_ms, 1),
            fmt(x.upload_ms, 1),
            fmt(x.layout_ms, 1),
            match &x.error {
                None => format!("ok ({})", x.geometry),
                Some(e) => format!("FAILED: {e}"),
            }
        ));
    }
    s.push_str(&gains_table(r));
    s.push_str(&methods_table(r));
    s
}

/// The Krylov methods on kernel 3.0 (median of the timed solves), plain and even-odd +
/// single-double; "x CR" is each row's time against CR's with the same options.
pub fn methods_table(r: &AblateReport) -> String {
    if r.methods.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\nmethods on kernel 3.0 (median of {} solves):\n{:<9} {:<10} {:<5} {:>5} {:>6} {:>9} {:>9} {:>6} {:>9} {}\n",
        r.repeat, "method", "options", "op", "iter", "A apps", "ms", "spread", "x CR", "true res", "solver"
    );
    for x in &r.methods {
        let cr = r
            .methods
            .iter()
            .find(|y| y.method == "cr" && y.options == x.options && y.valid);
        s.push_str(&format!(
            "{:<9} {:<10} {:<5} {:>5} {:>6} {:>9} {:>9} {:>6} {:>9} {}\n",
            x.method,
            x.options,
            x.operator,
            x.iterations,
            x.operator_applications,
            fmt(1e3 * x.seconds_to_solution_median, 3),
            fmt(1e3 * x.seconds_to_solution_spread, 3),
            cr.map(|c| fmt(
                c.seconds_to_solution_median / x.seconds_to_solution_median,
                2
            ))
            .unwrap_or_else(|| "-".into()),
            if x.true_residual.is_finite() {
                format!("{:.2e}", x.true_residual)
            } else {
                "-".into()
            },
            match &x.error {
                None => x.solver.clone(),
                Some(e) => format!("FAILED: {e}"),
            }
        ));
    }
    s
}

/// The per-method table as CSV (ablation-methods.csv).
pub fn methods_csv(r: &AblateReport) -> Result<String> {
    crate::report::csv::table(
        &[
            "method",
            "options",
            "solver",
            "operator",
            "iterations",
            "operator_applications",
            "seconds_to_solution_median",
            "seconds_to_solution_spread",
            "true_residual",
            "valid",
            "error",
        ],
        r.methods.iter().map(|x| {
            vec![
                x.method.to_string(),
                x.options.to_string(),
                x.solver.clone(),
                x.operator.to_string(),
                x.iterations.to_string(),
                x.operator_applications.to_string(),
                x.seconds_to_solution_median.to_string(),
                x.seconds_to_solution_spread.to_string(),
                format!("{:e}", x.true_residual),
                x.valid.to_string(),
                x.error.clone().unwrap_or_default(),
            ]
        }),
    )
}

/// Time to solution of every row against the fastest seed version (1.0 to 2.0) and
/// against 3.0 with the seed's CR: what each step and each option buys.
pub fn gains_table(r: &AblateReport) -> String {
    let seed_best = r
        .rows
        .iter()
        .filter(|x| x.valid && !x.version.starts_with("3.0"))
        .min_by(|a, b| {
            a.seconds_to_solution_median
                .total_cmp(&b.seconds_to_solution_median)
        });
    let v3 = r.rows.iter().find(|x| x.valid && x.version == "3.0");
    let Some(best) = seed_best else {
        return String::new();
    };
    let mut s = format!(
        "\ntime to solution against the fastest seed version ({}, {:.2} ms, {} iterations):\n{:<24} {:>5} {:>9} {:>9} {:>11} {}\n",
        best.version,
        1e3 * best.seconds_to_solution_median,
        best.iterations,
        "variant",
        "iter",
        "ms",
        "x seed",
        "x 3.0 seed",
        "solver"
    );
    for x in r.rows.iter().filter(|x| x.version.starts_with("3.0")) {
        let t = x.seconds_to_solution_median;
        s.push_str(&format!(
            "{:<24} {:>5} {:>9} {:>9} {:>11} {}\n",
            x.version,
            x.iterations,
            fmt(1e3 * t, 3),
            fmt(best.seconds_to_solution_median / t, 2),
            v3.map(|v| fmt(v.seconds_to_solution_median / t, 2))
                .unwrap_or_else(|| "-".into()),
            if x.valid {
                x.solver.clone()
            } else {
                format!("FAILED: {}", x.error.clone().unwrap_or_default())
            }
        ));
    }
    s
}

/// The per-version table as CSV (ablation.csv).
pub fn csv(r: &AblateReport) -> Result<String> {
    crate::report::csv::table(
        &[
            "version",
            "solver",
            "block_threads",
            "multiple",
            "geometry",
            "valid",
            "operator_rel_diff",
            "iterations",
            "ms_per_iteration_median",
            "ms_per_iteration_spread",
            "seconds_to_solution_median",
            "seconds_to_solution_spread",
            "speedup_over_cpu",
            "gflops_model_1320",
            "gflops_own_count",
            "gbytes_per_second_model",
            "fraction_of_triad",
            "true_residual",
            "compile_ms",
            "alloc_ms",
            "upload_ms",
            "layout_ms",
            "tune_ms",
            "download_ms",
            "stencil_share_of_solve",
            "error",
        ],
        r.rows.iter().map(|x| {
            vec![
                x.version.clone(),
                x.solver.clone(),
                x.block_threads.to_string(),
                x.multiple.to_string(),
                x.geometry.to_string(),
                x.valid.to_string(),
                format!("{:e}", x.operator_rel_diff),
                x.iterations.to_string(),
                x.ms_per_iteration_median.to_string(),
                x.ms_per_iteration_spread.to_string(),
                x.seconds_to_solution_median.to_string(),
                x.seconds_to_solution_spread.to_string(),
                x.speedup_over_cpu.to_string(),
                x.gflops_model_1320.to_string(),
                x.gflops_own_count.to_string(),
                x.gbytes_per_second_model.to_string(),
                x.fraction_of_triad.to_string(),
                format!("{:e}", x.true_residual),
                x.compile_ms.to_string(),
                x.alloc_ms.to_string(),
                x.upload_ms.to_string(),
                x.layout_ms.to_string(),
                x.tune_ms.to_string(),
                x.download_ms.to_string(),
                x.stencil_share_of_solve.to_string(),
                x.error.clone().unwrap_or_default(),
            ]
        }),
    )
}

/// The residual histories of the study: the CPU's, then each valid version's.
pub fn histories(r: &AblateReport, cpu_history: &[f64]) -> Vec<(String, Vec<f64>)> {
    std::iter::once(("CPU".to_string(), cpu_history.to_vec()))
        .filter(|(_, h)| !h.is_empty())
        .chain(
            r.rows
                .iter()
                .filter(|x| x.valid)
                .map(|x| (x.version.clone(), x.history.clone())),
        )
        .collect()
}

/// Draw the charts of the study into `out` (speed-up, GFLOP/s twice, residual
/// histories) and write residuals.csv, from which `qcd-solve chart residuals` draws the
/// last again.
pub fn draw_charts(
    r: &AblateReport,
    cpu_history: &[f64],
    out: &Path,
) -> Result<Vec<std::path::PathBuf>> {
    use crate::app::chart::ablate::{residual_chart, residuals_csv, version_charts, VersionBars};
    let ctx = crate::report::charts::Context {
        lattice: r.lattice.map(|d| d.to_string()).join("x"),
        device: r.device.clone(),
        date: crate::report::charts::today(),
    };
    let rows: Vec<VersionBars> = r
        .rows
        .iter()
        .map(|x| VersionBars {
            version: x.version.clone(),
            valid: x.valid,
            speedup: x.speedup_over_cpu,
            gflops_1320: x.gflops_model_1320,
            gflops_own: x.gflops_own_count,
        })
        .collect();
    let cpu = crate::threads::count(r.cpu_threads);
    let mut files = version_charts(&rows, Some(&cpu), &ctx, out)?;
    let histories = histories(r, cpu_history);
    let csv = out.join("residuals.csv");
    crate::io::write_atomic(&csv, residuals_csv(&histories)?.as_bytes())?;
    files.extend(residual_chart(&histories, &ctx, out)?);
    files.push(csv);
    Ok(files)
}
