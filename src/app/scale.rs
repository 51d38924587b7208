//! `qcd-solve scale CONFIG --threads 1,2,4`: CPU strong scaling of the whole CR solve
//! (seed 002's thread table): time, speed-up and parallel efficiency per thread count,
//! as a table, a CSV and a chart. The solve is bitwise the same for every count, so the
//! iteration count is too; only the time changes.

use crate::app::run::{build_problem, solve_on, thread_pool, SolvePlan};
use crate::backend::cpu::CpuBackend;
use crate::config::LoadedConfig;
use crate::error::{Error, Result};
use crate::report::charts::{self, Chart};
use serde::Serialize;
use std::path::Path;

#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    pub threads: usize,
    pub iterations: usize,
    /// Median solve time over the repeats.
    pub seconds: f64,
    /// Time of the first row over this row's time.
    pub speedup: f64,
    /// speedup / (threads / first row's threads).
    pub efficiency: f64,
}

pub fn measure(cfg: &LoadedConfig, threads: &[usize], repeat: usize) -> Result<Vec<ScaleRow>> {
    if threads.is_empty() || threads.contains(&0) {
        return Err(Error::invalid(
            "--threads",
            format!("needs one or more counts >= 1, got {threads:?}"),
        ));
    }
    let problem = build_problem(cfg)?;
    let params = SolvePlan::from_config(&cfg.config, false);
    let mut rows: Vec<ScaleRow> = Vec::new();
    for &n in threads {
        let pool = thread_pool(n as i64)?;
        let mut times = Vec::new();
        let mut iterations = 0;
        for _ in 0..repeat.max(1) {
            let r = pool.install(|| {
                let mut be = CpuBackend::new(&problem.gauge, problem.kappa);
                solve_on(&mut be, &problem, &params)
            })?;
            times.push(r.timings.solve);
            iterations = r.iterations;
        }
        times.sort_by(f64::total_cmp);
        let seconds = times[times.len() / 2];
        let (t0, n0) = rows
            .first()
            .map(|r| (r.seconds, r.threads))
            .unwrap_or((seconds, n));
        let speedup = t0 / seconds;
        rows.push(ScaleRow {
            threads: n,
            iterations,
            seconds,
            speedup,
            efficiency: speedup / (n as f64 / n0 as f64),
        });
        tracing::info!(threads = n, seconds, "scale point done");
    }
    Ok(rows)
}

pub fn table(rows: &[ScaleRow]) -> String {
    let mut s = format!(
        "{:>8} {:>10} {:>12} {:>9} {:>11}\n",
        "threads", "iterations", "solve (s)", "speed-up", "efficiency"
    );
    for r in rows {
        s.push_str(&format!(
            "{:>8} {:>10} {:>12.4} {:>9.2} {:>10.0}%\n",
            r.threads,
            r.iterations,
            r.seconds,
            r.speedup,
            100.0 * r.efficiency
        ));
    }
    s
}

pub fn csv(rows: &[ScaleRow]) -> String {
    let mut s = String::from("threads,iterations,seconds,speedup,efficiency\n");
    for r in rows {
        s.push_str(&format!(
            "{},{},{:.6},{:.4},{:.4}\n",
            r.threads, r.iterations, r.seconds, r.speedup, r.efficiency
        ));
    }
    s
}

/// Print the table and write `scale.csv`, `scale.json` and the `scale.svg/.png` chart.
pub fn run(cfg: &LoadedConfig, threads: &[usize], repeat: usize, out: &Path) -> Result<()> {
    crate::app::outputs::prepare_folders(&[&out.join("scale.csv")])?;
    let rows = measure(cfg, threads, repeat)?;
    // --quiet: nothing on stdout, the results are the files.
    let loud = !crate::report::progress::is_quiet();
    if loud {
        println!(
            "CPU scaling of the CR solve, {} ({} host cores)",
            cfg.source_name,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        print!("{}", table(&rows));
    }
    crate::io::write_atomic(&out.join("scale.csv"), csv(&rows).as_bytes())?;
    let json = serde_json::to_vec_pretty(&rows).expect("rows serialise");
    crate::io::write_atomic(&out.join("scale.json"), &json)?;
    let measured: Vec<(f64, f64)> = rows.iter().map(|r| (r.threads as f64, r.speedup)).collect();
    let n0 = rows[0].threads as f64;
    let ideal: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.threads as f64, r.threads as f64 / n0))
        .collect();
    let files = charts::draw(
        &out.join("scale"),
        &Chart::Lines {
            title: "CPU strong scaling of the CR solve",
            x_label: "threads",
            y_label: "speed-up",
            series: &[("measured".into(), measured), ("ideal".into(), ideal)],
            log_y: false,
        },
    )?;
    if loud {
        for f in files {
            println!("wrote {}", f.display());
        }
        println!("wrote {}", out.join("scale.csv").display());
    }
    Ok(())
}
