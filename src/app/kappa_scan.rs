//! `qcd-solve kappa-scan CONFIG --kappas 0.12,0.13 --methods cr,bicgstab,mg`: the config's
//! solve at each kappa with each method, on the config's device, one backend per point:
//! iterations, set-up and solve time, as a table, a CSV, JSON and two charts (iterations
//! and time to solution against kappa). Krylov iterations grow like 1 / (kappa_c - kappa);
//! multigrid's should not. CR and BiCGStab run with the config's [solver] options; mg
//! runs plain in double with its [multigrid] table (the options it refuses are reset).

use crate::app::chart::kappa::{kappa_charts, KappaPoint};
use crate::app::parallel::one;
use crate::app::run::build_problem;
use crate::config::{LoadedConfig, Preconditioning, SolverPrecision};
use crate::error::{Error, Result};
use crate::solver::{Method, StopReason};
use serde::Serialize;
use std::path::Path;

/// One solve of the scan.
#[derive(Clone, Debug, Serialize)]
pub struct ScanPoint {
    pub method: String,
    /// The method with its engine and options as the report names them.
    pub solver: String,
    pub kappa: f64,
    pub converged: bool,
    /// Why the solve stopped ("converged", "stagnated", ...).
    pub stop_reason: String,
    pub iterations: usize,
    /// Multigrid's set-up (0 for the Krylov methods).
    pub setup_seconds: f64,
    pub solve_seconds: f64,
    pub true_residual: f64,
    /// The device that solved it ("cuda NVIDIA H200", "cpu ..."): the charts' titles.
    pub device: String,
}

/// The config for one point: `kappa`, `method`, and for mg the [solver] keys it takes.
fn point_config(cfg: &LoadedConfig, kappa: f64, method: Method) -> Result<LoadedConfig> {
    let mut c = cfg.clone();
    c.config.dirac.kappa = kappa;
    c.config.solver.method = method;
    if method == Method::Mg {
        c.config.solver.preconditioning = Preconditioning::None;
        c.config.solver.precision = SolverPrecision::Double;
        c.config.solver.operator = None;
        c.config.solver.iteration = crate::config::Iteration::Auto;
    } else {
        c.config.multigrid = None;
        if method != Method::Cr {
            c.config.solver.operator = None;
        }
    }
    c.revalidate()?;
    Ok(c)
}

pub fn measure(cfg: &LoadedConfig, kappas: &[f64], methods: &[Method]) -> Result<Vec<ScanPoint>> {
    if kappas.is_empty() || methods.is_empty() {
        return Err(Error::invalid(
            "--kappas",
            "the scan needs at least one kappa and one method",
        ));
    }
    if let Some(k) = kappas.iter().find(|k| !(k.is_finite() && **k > 0.0)) {
        return Err(Error::invalid(
            "--kappas",
            format!("every kappa must be positive, got {k}"),
        ));
    }
    // Every point's config is checked before the first solve.
    let configs = methods
        .iter()
        .flat_map(|&m| kappas.iter().map(move |&k| (m, k)))
        .map(|(m, k)| Ok((m, k, point_config(cfg, k, m)?)))
        .collect::<Result<Vec<_>>>()?;
    let mut problem = build_problem(cfg)?;
    let mut points = Vec::with_capacity(configs.len());
    for (method, kappa, c) in configs {
        problem.kappa = kappa;
        problem.operator = c.config.solver.operator();
        let mut device = one::open(&c, &problem, one::warm_up(&c))?;
        let r = device.solve(&problem, &problem.source)?;
        let described = device.described();
        let device_name = described
            .split(" (")
            .next()
            .unwrap_or(described)
            .to_string();
        let setup = r.multigrid.as_ref().map_or(0.0, |m| m.setup_seconds);
        tracing::info!(%method, kappa, iterations = r.iterations, setup, solve = r.timings.solve, "kappa-scan point done");
        if let Some(m) = &r.multigrid {
            tracing::debug!(kappa, "multigrid: {}", m.describe());
        }
        points.push(ScanPoint {
            method: method.to_string(),
            solver: r.plan.clone(),
            kappa,
            converged: r.reason == StopReason::Converged,
            stop_reason: format!("{:?}", r.reason).to_lowercase(),
            iterations: r.iterations,
            setup_seconds: setup,
            solve_seconds: r.timings.solve,
            true_residual: r.true_residual,
            device: device_name,
        });
    }
    Ok(points)
}

pub fn table(points: &[ScanPoint]) -> String {
    let mut s = format!(
        "{:>8} {:>9} {:>14} {:>10} {:>10} {:>11} {:>10}\n",
        "method", "kappa", "stopped", "iterations", "set-up (s)", "solve (s)", "true res"
    );
    for p in points {
        s.push_str(&format!(
            "{:>8} {:>9} {:>14} {:>10} {:>10.3} {:>11.4} {:>10.2e}\n",
            p.method,
            p.kappa,
            p.stop_reason,
            p.iterations,
            p.setup_seconds,
            p.solve_seconds,
            p.true_residual
        ));
    }
    s
}

pub fn csv(points: &[ScanPoint]) -> Result<String> {
    crate::report::csv::table(
        &[
            "method",
            "solver",
            "kappa",
            "converged",
            "iterations",
            "setup_seconds",
            "solve_seconds",
            "true_residual",
            "stop_reason",
            "device",
        ],
        points.iter().map(|p| {
            vec![
                p.method.clone(),
                p.solver.clone(),
                p.kappa.to_string(),
                p.converged.to_string(),
                p.iterations.to_string(),
                format!("{:.6}", p.setup_seconds),
                format!("{:.6}", p.solve_seconds),
                format!("{:.3e}", p.true_residual),
                p.stop_reason.clone(),
                p.device.clone(),
            ]
        }),
    )
}

const FILES: [&str; 6] = [
    "kappa-scan.csv",
    "kappa-scan.json",
    "kappa-scan-iterations.svg",
    "kappa-scan-iterations.png",
    "kappa-scan-time.svg",
    "kappa-scan-time.png",
];

/// Print the table and write the CSV, JSON and the two charts into `out`.
pub fn run(cfg: &LoadedConfig, kappas: &[f64], methods: &[Method], out: &Path) -> Result<()> {
    crate::app::outputs::prepare_side(cfg, &FILES.map(|n| out.join(n)))?;
    let points = measure(cfg, kappas, methods)?;
    if !crate::report::progress::is_quiet() {
        println!(
            "kappa scan of {}, {} ({})",
            cfg.source_name,
            cfg.config.dirac.action().describe(),
            methods
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        print!("{}", table(&points));
    }
    crate::io::write_atomic(&out.join(FILES[0]), csv(&points)?.as_bytes())?;
    let json = serde_json::to_vec_pretty(&points).expect("points serialise");
    crate::io::write_atomic(&out.join(FILES[1]), &json)?;
    let ctx = crate::report::charts::Context {
        lattice: cfg.lattice()?.dims_string(),
        device: points.first().map(|p| p.device.clone()).unwrap_or_default(),
        date: crate::report::charts::today(),
    };
    let chart_points: Vec<KappaPoint> = points
        .iter()
        .map(|p| KappaPoint {
            method: p.method.clone(),
            kappa: p.kappa,
            converged: p.converged,
            iterations: p.iterations as f64,
            seconds: p.setup_seconds + p.solve_seconds,
        })
        .collect();
    kappa_charts(&chart_points, &ctx, &out.join("kappa-scan"))?;
    if points.iter().any(|p| !p.converged) {
        return Err(Error::NotConverged(
            "a scan point did not converge (its row says which); the files were written".into(),
        ));
    }
    Ok(())
}
