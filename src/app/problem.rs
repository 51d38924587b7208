//! The problem a config describes: the lattice, the gauge field (read, generated or
//! gathered), its plaquette and the source; and the host's thread pool.

use crate::config::{GaugeConfig, LoadedConfig, SourceConfig};
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField, C64};
use crate::problem::Problem;
use std::time::Instant;

pub fn build_problem(cfg: &LoadedConfig) -> Result<Problem> {
    let t0 = Instant::now();
    let c = &cfg.config;
    let lattice = cfg.lattice()?;
    let mut gauge_reunitarised = None;
    let t_gauge = crate::report::timeline::process_seconds();
    let (gauge, gauge_description) = match &c.gauge.field {
        GaugeConfig::Unit => (GaugeField::unit(&lattice), "unit (free field)".to_string()),
        GaugeConfig::Random { seed } => (
            GaugeField::random(&lattice, *seed),
            format!("random SU(3), seed {seed}"),
        ),
        GaugeConfig::Heatbath(params) => (
            crate::app::heatbath_cache::cached_field(&lattice, params, c.backend.device)?,
            format!(
                "quenched heatbath, beta {}, {} + {} sweeps, seed {}",
                params.beta, params.therm, params.sweeps, params.seed
            ),
        ),
        GaugeConfig::File { .. } => {
            let (path, fmt, opts, unchecked) = gauge_file(cfg)?;
            let (g, info) = crate::io::read_gauge_checked(
                &path,
                fmt,
                Some(lattice.dims),
                lattice.boundary,
                opts,
                unchecked,
            )?;
            if info.reunitarised {
                gauge_reunitarised = Some(reunitarisation_note(&info));
            }
            (g, format!("file {}", path.display()))
        }
    };
    crate::report::timeline::record(
        "gauge field (read or generated)",
        t_gauge,
        t0.elapsed().as_secs_f64(),
    );
    tracing::info!("gauge field ready: {gauge_description}");
    let (gauge, gauge_description, fixing) = fix_gauge(cfg, gauge, gauge_description)?;
    let mut problem = problem_with(
        cfg,
        lattice,
        gauge,
        gauge_description,
        gauge_reunitarised,
        t0,
    )?;
    problem.gauge_fixing = fixing;
    Ok(problem)
}

/// The field fixed to the gauge `[gauge] fix` names (none: as it is), its description
/// and the fixing's report. A fixing that does not converge stops the run (exit 7).
fn fix_gauge(
    cfg: &LoadedConfig,
    gauge: GaugeField,
    description: String,
) -> Result<(GaugeField, String, Option<serde_json::Value>)> {
    use crate::config::GaugeFixKind;
    use crate::gauge_fix::{FixOptions, GaugeKind};
    let g = &cfg.config.gauge;
    let kind = match g.fixing() {
        None => return Ok((gauge, description, None)),
        Some(GaugeFixKind::Coulomb) => GaugeKind::Coulomb,
        Some(_) => GaugeKind::Landau,
    };
    let opts = FixOptions {
        kind,
        omega: g.fix_omega,
        theta_tolerance: g.fix_tolerance,
        functional_tolerance: g.fix_tolerance,
        max_iterations: g.fix_max_iterations as usize,
    };
    let t = crate::report::timeline::process_seconds();
    let (fixed, r, device) = fix_on_device(cfg, &gauge, &opts)?;
    crate::report::timeline::record("gauge fixing", t, r.seconds);
    let name = format!("{kind:?}").to_lowercase();
    tracing::info!(
        gauge = name,
        device,
        iterations = r.iterations,
        theta = r.theta,
        functional = r.functional,
        seconds = r.seconds,
        "gauge fixed"
    );
    if !r.converged {
        return Err(Error::NotConverged(format!(
            "{name} gauge fixing did not reach gauge.fix_tolerance = {:e} in {} iterations \
             (theta {:e}, functional {}): raise gauge.fix_max_iterations",
            g.fix_tolerance, r.iterations, r.theta, r.functional
        )));
    }
    let report = serde_json::json!({
        "gauge": name,
        "device": device,
        "omega": g.fix_omega,
        "tolerance": g.fix_tolerance,
        "iterations": r.iterations,
        "functional": r.functional,
        "theta": r.theta,
        "seconds": r.seconds,
    });
    let description = format!(
        "{description}, {name} gauge ({} iterations, theta {:.1e})",
        r.iterations, r.theta
    );
    Ok((fixed, description, Some(report)))
}

/// Fix `gauge` where the run's backend runs (`[backend] device`, `auto` resolved as for
/// the solve: the GPU when one is usable, else the CPU): the fixed field, the report and
/// "gpu" or "cpu".
fn fix_on_device(
    cfg: &LoadedConfig,
    gauge: &GaugeField,
    opts: &crate::gauge_fix::FixOptions,
) -> Result<(GaugeField, crate::gauge_fix::FixReport, &'static str)> {
    match crate::app::device::choose_device(cfg.config.backend.device)? {
        crate::config::Device::Cuda => {
            let (fixed, _, r) = crate::backend::cuda::gauge_fix::fix_on_gpu(gauge, opts)?;
            Ok((fixed, r, "gpu"))
        }
        _ => {
            let (fixed, _, r) = crate::gauge_fix::fix(gauge, opts)?;
            Ok((fixed, r, "cpu"))
        }
    }
}

/// The gauge file a config names (resolved against the config's folder), its format
/// (`None`: detect), the read options and `accept_unchecked`; an error when `[gauge]`
/// is not a file.
pub(crate) fn gauge_file(
    cfg: &LoadedConfig,
) -> Result<(
    std::path::PathBuf,
    Option<crate::io::GaugeFormat>,
    crate::io::ReadOptions,
    bool,
)> {
    let GaugeConfig::File {
        path,
        format,
        reunitarise,
        accept_unchecked,
    } = &cfg.config.gauge.field
    else {
        return Err(Error::invalid("gauge", "the gauge field is not a file"));
    };
    let fmt = crate::io::parse_format(format).map_err(|e| match e {
        Error::Format { message, .. } => Error::invalid("gauge.format", message),
        other => other,
    })?;
    Ok((
        cfg.input_path(path),
        fmt,
        crate::io::ReadOptions {
            reunitarise: *reunitarise,
        },
        *accept_unchecked,
    ))
}

/// The problem around a gauge field at hand (read, generated, or gathered from the
/// ranks' slabs): its plaquette and link trace, the config's source and kappa.
pub(crate) fn problem_with(
    cfg: &LoadedConfig,
    lattice: crate::geometry::lattice::Lattice,
    gauge: GaugeField,
    gauge_description: String,
    gauge_reunitarised: Option<String>,
    t0: Instant,
) -> Result<Problem> {
    let c = &cfg.config;
    let (plaquette, link_trace) =
        crate::report::timeline::timed("plaquette and link trace", || {
            (gauge.plaquette(), gauge.link_trace())
        });
    let t_source = crate::report::timeline::process_seconds();
    let t = Instant::now();
    let rhs = super::rhs::RightHandSides::of(cfg, &gauge, || single_source(cfg, &lattice))?;
    let source = rhs.make(&lattice, 0);
    let source_description = rhs.description.clone();
    if source.norm2() == 0.0 {
        return Err(Error::invalid("source", "the source is zero everywhere"));
    }
    crate::report::timeline::record("source", t_source, t.elapsed().as_secs_f64());
    Ok(Problem {
        lattice,
        gauge,
        gauge_description,
        gauge_reunitarised,
        plaquette,
        link_trace,
        kappa: c.dirac.kappa,
        csw: c.dirac.csw,
        mu: c.dirac.mu,
        operator: c.solver.operator(),
        source,
        source_description,
        gauge_fixing: None,
        setup_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// What the report says when a gauge file's links were reunitarised.
pub(crate) fn reunitarisation_note(info: &crate::io::GaugeFileInfo) -> String {
    let after = info.unitarity_reunitarised.unwrap_or(f64::NAN);
    if info.links_forced_onto_su3 > 0 {
        format!(
            "{} links off SU(3) beyond {:.0e} (worst {:.3e}) projected onto SU(3) as asked \
             (reunitarise); every link reunitarised in double, now SU(3) to {after:.1e}",
            info.links_forced_onto_su3, info.unitarity_tolerance, info.unitarity_as_stored
        )
    } else {
        format!(
            "{}-bit links reunitarised in double (SU(3) to {:.1e} as stored, {after:.1e} after)",
            info.precision_bits, info.unitarity_as_stored
        )
    }
}

/// Build a rayon pool of `threads` (0 = all cores).
pub fn thread_pool(threads: i64) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(crate::threads::check(threads, "threads")?)
        .build()
        .map_err(|e| Error::invalid("backend.threads", e.to_string()))
}

/// The sources of one form only (random, plane wave, file) and their descriptions.
fn single_source(
    cfg: &LoadedConfig,
    lattice: &crate::geometry::lattice::Lattice,
) -> Result<(SpinorField, String)> {
    Ok(match &cfg.config.source {
        SourceConfig::Random { seed } => (
            SpinorField::random(lattice.volume(), *seed, 1 << 40),
            format!("random Gaussian, seed {seed}"),
        ),
        SourceConfig::PlaneWave {
            momentum,
            spin,
            colour,
        } => {
            let mut u = [C64::new(0.0, 0.0); 12];
            u[*spin as usize * 3 + *colour as usize] = C64::new(1.0, 0.0);
            (
                SpinorField::plane_wave(lattice, *momentum, &u),
                format!("plane wave n = {momentum:?}, spin {spin}, colour {colour}"),
            )
        }
        SourceConfig::File { path } => {
            let path = cfg.input_path(path);
            (
                crate::io::npy::read_spinor_npy(&path, lattice)?,
                format!("file {}", path.display()),
            )
        }
        other => {
            return Err(Error::invalid(
                "source.type",
                format!("{other:?} has more than one form"),
            ))
        }
    })
}
