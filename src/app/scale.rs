//! `qcd-solve scale CONFIG --threads 1,2,4`: CPU strong scaling of the whole CR solve
//! (seed 002's thread table): time, speed-up and parallel efficiency per thread count,
//! as a table, a CSV and a chart. The solve is bitwise the same for every count, so the
//! iteration count is too; only the time changes.

use crate::app::run::{build_problem, solve_on, thread_pool, SolvePlan};
use crate::app::tuning::median_spread;
use crate::backend::cpu::CpuBackend;
use crate::config::LoadedConfig;
use crate::error::{Error, Result};
use crate::problem::Problem;
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
                let mut be = CpuBackend::with_action(&problem.gauge, &problem.action())?;
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

pub fn csv(rows: &[ScaleRow]) -> Result<String> {
    crate::report::csv::table(
        &["threads", "iterations", "seconds", "speedup", "efficiency"],
        rows.iter().map(|r| {
            vec![
                r.threads.to_string(),
                r.iterations.to_string(),
                format!("{:.6}", r.seconds),
                format!("{:.4}", r.speedup),
                format!("{:.4}", r.efficiency),
            ]
        }),
    )
}

/// Print the table and write `scale.csv`, `scale.json` and the `scale.svg/.png` chart.
pub fn run(cfg: &LoadedConfig, threads: &[usize], repeat: usize, out: &Path) -> Result<()> {
    let names = ["scale.csv", "scale.json", "scale.svg", "scale.png"];
    crate::app::outputs::prepare_side(cfg, &names.map(|n| out.join(n)))?;
    let rows = measure(cfg, threads, repeat)?;
    // --quiet: nothing on stdout, the results are the files.
    let loud = !crate::report::progress::is_quiet();
    if loud {
        println!(
            "CPU scaling of the {} solve, {}, {} ({} host cores)",
            cfg.config.solver.method,
            cfg.config.dirac.action().describe(),
            cfg.source_name,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        print!("{}", table(&rows));
    }
    crate::io::write_atomic(&out.join("scale.csv"), csv(&rows)?.as_bytes())?;
    let json = serde_json::to_vec_pretty(&rows).expect("rows serialise");
    crate::io::write_atomic(&out.join("scale.json"), &json)?;
    let ctx = crate::report::charts::Context {
        lattice: cfg.lattice()?.dims_string(),
        device: format!(
            "CPU ({} host cores)",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ),
        date: crate::report::charts::today(),
    };
    let points: Vec<(usize, f64)> = rows.iter().map(|r| (r.threads, r.speedup)).collect();
    let files = crate::app::chart::scale::thread_chart(&points, &ctx, out)?;
    if loud {
        for f in files {
            println!("wrote {}", f.display());
        }
        println!("wrote {}", out.join("scale.csv").display());
    }
    Ok(())
}

/// One point of `scale --gpus`: the solve split over `ranks` sub-lattices, or (the first
/// row of a series whose counts include 1) the undecomposed solve on one device.
#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    pub kind: &'static str,
    pub ranks: usize,
    /// The undecomposed solve (the main job's path on one device, no halo, no global
    /// sums): the reference of its series' speed-ups and efficiencies.
    pub undecomposed: bool,
    pub grid: [usize; 4],
    pub lattice: [usize; 4],
    pub iterations: usize,
    /// Median solve time over the repeats.
    pub seconds: f64,
    pub seconds_per_iteration: f64,
    /// Strong: t(first) / t(this); weak: the same per iteration.
    pub speedup: f64,
    /// Strong: speedup / (ranks / first ranks); weak: t_iter(first) / t_iter(this).
    pub efficiency: f64,
    /// Rank 0's halo times over the solve (s): pack, exchange, interior, exterior, wait.
    pub rank0_halo: [f64; 5],
    /// Rank 0's fused-CR graph time over the solve (s, median over the repeats): the
    /// iterations' share of `seconds` (the rest is the host-driven steps: restarts,
    /// checks, the start).
    pub rank0_graphs: f64,
    /// `efficiency` of the graph time alone (the iterations without the host-driven
    /// steps); NaN without graphs (the CPU, or paths that run none).
    pub graph_efficiency: f64,
    pub comms: String,
}

/// How `scale --gpus` splits the lattice over n ranks (`--split`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    /// Along t only: grid 1,1,1,n.
    T,
    /// Along z and t: grid 1,1,gz,gt with gz the largest divisor of n not above its
    /// square root (4 ranks: 1,1,2,2; 8: 1,1,2,4; 2: 1,1,1,2).
    Zt,
}

impl Split {
    pub fn grid(self, n: usize) -> [usize; 4] {
        match self {
            Split::T => [1, 1, 1, n],
            Split::Zt => {
                let gz = (1..=n)
                    .filter(|d| n.is_multiple_of(*d) && d * d <= n)
                    .max()
                    .unwrap_or(1);
                [1, 1, gz, n / gz]
            }
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Split::T => "t",
            Split::Zt => "z and t",
        }
    }
}

/// One point of a scaling series: its median solve and graph times, iterations, ranks.
#[derive(Clone, Copy, Debug)]
struct Point {
    seconds: f64,
    graphs: f64,
    iterations: usize,
    ranks: usize,
}

impl Point {
    fn timed(self) -> (f64, usize, usize) {
        (self.seconds, self.iterations, self.ranks)
    }
    fn graphs_timed(self) -> (f64, usize, usize) {
        (self.graphs, self.iterations, self.ranks)
    }
}

/// Speed-up and efficiency of `this` (seconds, iterations, ranks) against `first`.
/// Strong scaling (the same lattice): speed-up t_first / t, efficiency the speed-up over
/// the rank ratio. Weak (the same local lattice): efficiency the first's time per
/// iteration over this one's, speed-up that times the rank ratio.
fn scaling(kind: &str, first: (f64, usize, usize), this: (f64, usize, usize)) -> (f64, f64) {
    let (t0, it0, n0) = first;
    let (t, it, n) = this;
    let ranks = n as f64 / n0 as f64;
    if kind == "strong" {
        let sp = t0 / t;
        (sp, sp / ranks)
    } else {
        let e = (t0 / it0.max(1) as f64) / (t / it.max(1) as f64);
        (e * ranks, e)
    }
}

/// The undecomposed solve of `problem` on the config's device, as the main job makes it
/// (GPU: its backend, tuned unless the config says not; CPU: the rayon backend): (solve
/// seconds, iterations, fused-CR graph seconds, what ran).
fn undecomposed_solve(c: &LoadedConfig, problem: &Problem) -> Result<(f64, usize, f64, String)> {
    use crate::app::device::choose_device;
    use crate::config::Device;
    match choose_device(c.config.backend.device)? {
        Device::Cuda => {
            use crate::app::tuning::{plan_layout, tune_backend};
            let opts = crate::app::run::cuda_options(c);
            let plan = SolvePlan::from_config(&c.config, opts.version.is_fast_path());
            let opts = crate::app::solve::backend_options(c, opts, &plan)?;
            let mut be =
                crate::backend::cuda::CudaBackend::new(&problem.gauge, problem.kappa, &opts)?;
            // The clover term and twist (none for Wilson), before tuning, as the main job.
            be.set_action(&problem.gauge, &problem.action())?;
            if c.config.backend.tune {
                tune_backend(&mut be, problem, plan_layout(&plan))?;
            }
            let r = solve_on(&mut be, problem, &plan)?;
            let graphs = be
                .kernel_stats()
                .into_iter()
                .find(|k| k.name == crate::backend::cuda::GRAPH_STAT)
                .map_or(0.0, |g| g.millis / 1e3);
            Ok((
                r.timings.solve,
                r.iterations,
                graphs,
                be.device_name().to_string(),
            ))
        }
        _ => {
            let plan = SolvePlan::from_config(&c.config, false);
            let mut be = CpuBackend::with_action(&problem.gauge, &problem.action())?;
            let r = solve_on(&mut be, problem, &plan)?;
            Ok((r.timings.solve, r.iterations, 0.0, "cpu".to_string()))
        }
    }
}

/// Strong scaling (the config's lattice) and weak scaling (the split extents times the
/// ranks in them) of the split solve over `counts` ranks, split by `split`, on the
/// config's device (ranks as threads: rank r on GPU r with NCCL, or every rank on GPU 0
/// when one GPU is visible; threads of the CPU). Where `counts` holds 1, each series
/// starts with the undecomposed solve on one device, and every speed-up and efficiency of
/// the series is against it: the split code on one rank carries its machinery (a halo,
/// the global sums' all-gathers and their kernels) and ran 1.1-2.5% slower than the
/// undecomposed solve on one H200 (validate/RESULTS.md), so a series
/// against it read high by that much.
pub fn measure_ranks(
    cfg: &LoadedConfig,
    counts: &[usize],
    repeat: usize,
    split: Split,
) -> Result<Vec<RankRow>> {
    if counts.is_empty() || counts.contains(&0) {
        return Err(Error::invalid(
            "--gpus",
            format!("needs one or more counts >= 1, got {counts:?}"),
        ));
    }
    // The reference: n = 1's lattice (the same for strong and weak), undecomposed,
    // measured once for both series.
    let reference = if counts.contains(&1) {
        let mut c = cfg.clone();
        c.config.parallel.grid = [1, 1, 1, 1];
        c.config.parallel.gpus = None;
        let problem = build_problem(&c)?;
        let (seconds, graphs, (iterations, what)) = medians(repeat, || {
            let (secs, iterations, graphs, what) = undecomposed_solve(&c, &problem)?;
            Ok((secs, graphs, (iterations, what)))
        })?;
        tracing::info!(seconds, "scale reference (undecomposed) done");
        let point = Point {
            seconds,
            graphs,
            iterations,
            ranks: 1,
        };
        Some((point, problem.lattice.dims, what))
    } else {
        None
    };
    let mut rows = Vec::new();
    for kind in ["strong", "weak"] {
        let mut first: Option<Point> = None;
        if let Some((point, lattice, what)) = &reference {
            first = Some(*point);
            let comms = format!("undecomposed ({what})");
            rows.push(row(kind, *point, *point, *lattice, [0.0; 5], None, comms));
        }
        for &n in counts {
            let mut c = cfg.clone();
            let grid = split.grid(n);
            if kind == "weak" {
                c.config.lattice.lz *= grid[2] as i64;
                c.config.lattice.lt *= grid[3] as i64;
            }
            c.config.parallel.grid = grid.map(|g| g as i64);
            c.config.parallel.gpus = None;
            let problem = build_problem(&c)?;
            let parts = crate::app::parallel::shares::partitions(problem.lattice.dims, grid)
                .map_err(|e| {
                    Error::invalid("--gpus", format!("{kind} scaling on {n} ranks: {e}"))
                })?;
            let (seconds, graphs, s) = medians(repeat, || {
                let s = crate::app::parallel::solve_split(&c, &problem, &parts)?;
                Ok((s.result.timings.solve, s.parallel.ranks[0].graph_seconds, s))
            })?;
            let this = Point {
                seconds,
                graphs,
                iterations: s.result.iterations,
                ranks: n,
            };
            let first = *first.get_or_insert(this);
            let r0 = &s.parallel.ranks[0];
            let halo = [r0.pack, r0.exchange, r0.interior, r0.exterior, r0.wait];
            let comms = s.parallel.comms.clone();
            rows.push(row(
                kind,
                first,
                this,
                problem.lattice.dims,
                halo,
                Some(grid),
                comms,
            ));
            tracing::info!(kind, ranks = n, seconds, "scale point done");
        }
    }
    Ok(rows)
}

/// The median solve and graph seconds of `repeat` runs of `run` (at least one), with the
/// last run's outcome.
fn medians<T>(
    repeat: usize,
    mut run: impl FnMut() -> Result<(f64, f64, T)>,
) -> Result<(f64, f64, T)> {
    let mut times = Vec::new();
    let mut graph_times = Vec::new();
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let (secs, graphs, outcome) = run()?;
        times.push(secs);
        graph_times.push(graphs);
        last = Some(outcome);
    }
    let outcome = last.expect("at least one run");
    Ok((
        median_spread(times).0,
        median_spread(graph_times).0,
        outcome,
    ))
}

/// The row of point `this` of a `kind` series whose reference is `first`: split over
/// `grid`, or (None) the undecomposed reference itself.
fn row(
    kind: &'static str,
    first: Point,
    this: Point,
    lattice: [usize; 4],
    rank0_halo: [f64; 5],
    grid: Option<[usize; 4]>,
    comms: String,
) -> RankRow {
    let (speedup, efficiency) = scaling(kind, first.timed(), this.timed());
    let graph_efficiency = if first.graphs > 0.0 && this.graphs > 0.0 {
        scaling(kind, first.graphs_timed(), this.graphs_timed()).1
    } else {
        f64::NAN
    };
    RankRow {
        kind,
        ranks: this.ranks,
        undecomposed: grid.is_none(),
        grid: grid.unwrap_or([1, 1, 1, 1]),
        lattice,
        iterations: this.iterations,
        seconds: this.seconds,
        seconds_per_iteration: this.seconds / this.iterations.max(1) as f64,
        speedup,
        efficiency,
        rank0_halo,
        rank0_graphs: this.graphs,
        graph_efficiency,
        comms,
    }
}

pub fn rank_table(rows: &[RankRow]) -> String {
    let mut s = format!(
        "{:>6} {:>5} {:>8} {:>14} {:>6} {:>10} {:>12} {:>8} {:>10} {:>11} {:>10}  rank 0 pack/exchange/interior/exterior/wait (ms)\n",
        "kind", "ranks", "grid", "lattice", "iter", "solve (s)", "ms/iter", "speed-up", "efficiency", "graphs (ms)", "graph eff."
    );
    for r in rows {
        let l = r.lattice;
        let g = if r.undecomposed {
            "none".to_string()
        } else {
            r.grid.map(|v| v.to_string()).join(",")
        };
        let h = if r.undecomposed {
            "-".to_string()
        } else {
            r.rank0_halo.map(|v| format!("{:.1}", 1e3 * v)).join("/")
        };
        s.push_str(&format!(
            "{:>6} {:>5} {:>8} {:>14} {:>6} {:>10.4} {:>12.3} {:>8.2} {:>9.0}% {:>11.2} {:>10}  {h}\n",
            r.kind,
            r.ranks,
            g,
            format!("{}x{}x{}x{}", l[0], l[1], l[2], l[3]),
            r.iterations,
            r.seconds,
            1e3 * r.seconds_per_iteration,
            r.speedup,
            100.0 * r.efficiency,
            1e3 * r.rank0_graphs,
            if r.graph_efficiency.is_finite() {
                format!("{:.0}%", 100.0 * r.graph_efficiency)
            } else {
                "-".into()
            }
        ));
    }
    s
}

/// The device of a rank series for the charts' titles: the GPU the undecomposed
/// reference ran on, else the config's device.
fn rank_device(cfg: &LoadedConfig, rows: &[RankRow]) -> String {
    rows.iter()
        .find(|r| r.undecomposed)
        .and_then(|r| r.comms.strip_prefix("undecomposed ("))
        .and_then(|c| c.strip_suffix(')'))
        .map_or_else(
            || format!("{:?}", cfg.config.backend.device),
            str::to_string,
        )
}

/// `scale --gpus`: print the strong and weak tables and write `scale-ranks.csv`,
/// `scale-ranks.json` and the charts `scale-strong` and `scale-weak` (.svg/.png).
pub fn run_ranks(
    cfg: &LoadedConfig,
    counts: &[usize],
    repeat: usize,
    split: Split,
    out: &Path,
) -> Result<()> {
    let names = [
        "scale-ranks.csv",
        "scale-ranks.json",
        "scale-strong.svg",
        "scale-strong.png",
        "scale-weak.svg",
        "scale-weak.png",
    ];
    crate::app::outputs::prepare_side(cfg, &names.map(|n| out.join(n)))?;
    let rows = measure_ranks(cfg, counts, repeat, split)?;
    let loud = !crate::report::progress::is_quiet();
    if loud {
        println!(
            "Scaling of the split solve over ranks ({} split), {}, {}: {}",
            split.label(),
            cfg.config.dirac.action().describe(),
            cfg.source_name,
            rows.iter()
                .find(|r| !r.undecomposed)
                .map(|r| r.comms.as_str())
                .unwrap_or("")
        );
        print!("{}", rank_table(&rows));
    }
    let csv = crate::report::csv::table(
        &[
            "kind",
            "ranks",
            "undecomposed",
            "lattice",
            "iterations",
            "seconds",
            "seconds_per_iteration",
            "speedup",
            "efficiency",
            "pack",
            "exchange",
            "interior",
            "exterior",
            "wait",
            "graphs",
            "graph_efficiency",
        ],
        rows.iter().map(|r| {
            let l = r.lattice;
            let mut row = vec![
                r.kind.to_string(),
                r.ranks.to_string(),
                r.undecomposed.to_string(),
                format!("{}x{}x{}x{}", l[0], l[1], l[2], l[3]),
                r.iterations.to_string(),
                format!("{:.6}", r.seconds),
                format!("{:.6e}", r.seconds_per_iteration),
                format!("{:.4}", r.speedup),
                format!("{:.4}", r.efficiency),
            ];
            row.extend(r.rank0_halo.map(|v| format!("{v:.6}")));
            row.push(format!("{:.6}", r.rank0_graphs));
            row.push(format!("{:.4}", r.graph_efficiency));
            row
        }),
    )?;
    crate::io::write_atomic(&out.join("scale-ranks.csv"), csv.as_bytes())?;
    let json = serde_json::to_vec_pretty(&rows).expect("rows serialise");
    crate::io::write_atomic(&out.join("scale-ranks.json"), &json)?;
    // Every row is a measured point, the undecomposed one-GPU reference included.
    let points: Vec<crate::app::chart::scale::RankPoint> = rows
        .iter()
        .map(|r| crate::app::chart::scale::RankPoint {
            kind: r.kind.to_string(),
            ranks: r.ranks,
            lattice: r.lattice.map(|d| d.to_string()).join("x"),
            speedup: r.speedup,
            efficiency: r.efficiency,
        })
        .collect();
    let files = crate::app::chart::scale::rank_charts(
        &points,
        split.label(),
        &rank_device(cfg, &rows),
        &crate::report::charts::today(),
        out,
    )?;
    if loud {
        for f in files {
            println!("wrote {}", f.display());
        }
        println!("wrote {}", out.join("scale-ranks.csv").display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strong_compares_times_and_weak_times_per_iteration() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // Strong: half the time on twice the ranks is a speed-up of 2, 100%.
        let (sp, e) = scaling("strong", (1.0, 49, 1), (0.5, 49, 2));
        assert!(close(sp, 2.0) && close(e, 1.0), "{sp} {e}");
        // Strong, 4 ranks at 0.4 of the time: 2.5x, 62.5%.
        let (sp, e) = scaling("strong", (1.0, 49, 1), (0.4, 49, 4));
        assert!(close(sp, 2.5) && close(e, 0.625), "{sp} {e}");
        // Weak: per iteration, so 49 iterations in 49 ms against 48 in 52.8 ms is
        // 1 ms against 1.1 ms: 1/1.1 efficient, times 2 ranks as a speed-up.
        let (sp, e) = scaling("weak", (0.049, 49, 1), (0.0528, 48, 2));
        assert!(close(e, 1.0 / 1.1) && close(sp, 2.0 / 1.1), "{sp} {e}");
        // The median of the repeats, whatever their order (odd and even counts: the
        // upper middle).
        assert_eq!(median_spread(vec![3.0, 1.0, 2.0]).0, 2.0);
        assert_eq!(median_spread(vec![4.0, 1.0, 3.0, 2.0]).0, 3.0);
    }

    #[test]
    fn splits_put_ranks_along_t_or_along_z_and_t() {
        for n in [1, 2, 3, 4, 8] {
            assert_eq!(Split::T.grid(n), [1, 1, 1, n]);
        }
        // z and t: the largest divisor not above the square root goes to z.
        assert_eq!(Split::Zt.grid(1), [1, 1, 1, 1]);
        assert_eq!(Split::Zt.grid(2), [1, 1, 1, 2]);
        assert_eq!(Split::Zt.grid(3), [1, 1, 1, 3]);
        assert_eq!(Split::Zt.grid(4), [1, 1, 2, 2]);
        assert_eq!(Split::Zt.grid(8), [1, 1, 2, 4]);
        assert_eq!(Split::Zt.grid(16), [1, 1, 4, 4]);
        for n in 1..=64 {
            assert_eq!(Split::Zt.grid(n).iter().product::<usize>(), n);
        }
    }
}
