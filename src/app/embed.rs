//! The program's jobs for a host language (the Python package `python/`): the same
//! config checks, gauge reads, solves and propagators as the command line, with the
//! fields in memory and nothing written to disk.
//!
//! A call names its options as a table of config sections (`[dirac]`, `[solver]`,
//! `[backend]`, `[source]`, ...; the lattice's extents are taken from the gauge field),
//! checked exactly as a config file is (`LoadedConfig`, then `plan::check`); the gauge
//! field is a file (read and verified as `qcd-solve info` does) or links at hand (checked
//! finite and on SU(3)); the source is the `[source]` table or a field at hand.

use crate::app::parallel::one;
use crate::app::propagator::{self, PropagatorReport};
use crate::app::rhs::RightHandSides;
use crate::config::LoadedConfig;
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY, NDIM};
use crate::io::{GaugeFileInfo, GaugeFormat, ReadOptions};
use crate::measure::Correlator;
use crate::problem::{Problem, SolveResult};
use crate::report::SolveReport;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Where a call's gauge field comes from.
pub enum GaugeInput {
    /// A gauge file, its format (`None`: detected), read as the program reads one.
    File {
        path: PathBuf,
        format: Option<GaugeFormat>,
        options: ReadOptions,
        accept_unchecked: bool,
    },
    /// Links at hand (`[site][mu]`, site index x fastest), checked by `links_field`.
    Links(GaugeField),
}

/// What a propagator call produced: the 12 columns, the report, and the correlators
/// (`None` when the source gives none).
pub struct PropagatorOutput {
    pub columns: Vec<SpinorField>,
    pub report: PropagatorReport,
    /// Per sink ("point", "smeared"): the mesons and the nucleons.
    pub correlators: Vec<(String, Vec<Correlator>, Vec<Correlator>)>,
}

/// A gauge file read and verified (format from `format`: "auto" detects), with the fermion
/// boundary conditions of the default (the links are periodic whatever they are).
pub fn read_gauge(
    path: &Path,
    format: &str,
    options: ReadOptions,
    accept_unchecked: bool,
) -> Result<(GaugeField, GaugeFileInfo)> {
    let fmt = crate::io::parse_format(format)?;
    crate::io::read_gauge_checked(path, fmt, None, DEFAULT_BOUNDARY, options, accept_unchecked)
}

/// Links at hand as a gauge field of extents `dims` (x, y, z, t): refused (exit 2, key
/// `gauge`) when their number is not 4 V, a value is not finite, or a link is off SU(3)
/// beyond the tolerance of 64-bit files (`io::unitarity_tolerance`) unless `reunitarise`
/// projects them.
pub fn links_field(
    links: Vec<crate::field::su3::Su3>,
    dims: [usize; NDIM],
    reunitarise: bool,
) -> Result<GaugeField> {
    let lattice = Lattice::new(dims, DEFAULT_BOUNDARY)?;
    if links.len() != lattice.volume() * NDIM {
        return Err(Error::invalid(
            "gauge",
            format!(
                "{} links for a lattice of {} sites: expected 4 a site",
                links.len(),
                lattice.volume()
            ),
        ));
    }
    let mut field = GaugeField { lattice, links };
    if let Some((bad, _)) = field.first_non_finite() {
        return Err(Error::invalid(
            "gauge",
            format!(
                "link {} (site {}, mu {}) holds {} at row {}, column {}",
                bad.link,
                bad.link / NDIM,
                bad.link % NDIM,
                bad.value,
                bad.row,
                bad.col
            ),
        ));
    }
    let tol = crate::io::unitarity_tolerance(64);
    if let Some((link, dev)) = field.worst_link().filter(|&(_, d)| d > tol) {
        if !reunitarise {
            return Err(Error::invalid(
                "gauge",
                format!(
                    "link {link} (site {}, mu {}) is off SU(3) by {dev:.3e}, beyond {tol:.0e}: \
                     pass reunitarise=True to project the links onto SU(3)",
                    link / NDIM,
                    link % NDIM
                ),
            ));
        }
        field.reunitarise();
    }
    Ok(field)
}

/// The config a call's `table` of sections describes on a lattice of extents `dims`
/// (written into `[lattice]`), checked as a config file is; `name` is what its errors
/// call it, relative input paths resolve against `base_dir`.
pub fn config(
    table: &serde_json::Value,
    dims: [usize; NDIM],
    name: &str,
    base_dir: PathBuf,
) -> Result<LoadedConfig> {
    let mut table = table.clone();
    let sections = table
        .as_object_mut()
        .ok_or_else(|| Error::invalid("options", "expected a table of config sections"))?;
    let lattice = sections
        .entry("lattice")
        .or_insert_with(|| serde_json::json!({}));
    let lattice = lattice
        .as_object_mut()
        .ok_or_else(|| Error::invalid("lattice", "expected a table"))?;
    for (key, extent) in ["LX", "LY", "LZ", "LT"].into_iter().zip(dims) {
        lattice.insert(key.into(), extent.into());
    }
    sections
        .entry("gauge")
        .or_insert_with(|| serde_json::json!({ "type": "unit" }));
    let value: toml::Value = serde_json::from_value(table.clone())
        .map_err(|e| Error::invalid("options", format!("not a config table: {e}")))?;
    let text = toml::to_string(&value)
        .map_err(|e| Error::invalid("options", format!("not a config table: {e}")))?;
    let cfg = LoadedConfig::from_str(&text, name, base_dir)?;
    crate::app::plan::check(&cfg)?;
    Ok(cfg)
}

/// The boundary conditions `[lattice] boundary` of `table` (the default when absent).
fn boundary_of(table: &serde_json::Value) -> Result<[Boundary; NDIM]> {
    match table.pointer("/lattice/boundary") {
        None => Ok(DEFAULT_BOUNDARY),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            Error::invalid(
                "lattice.boundary",
                format!("expected four of \"periodic\", \"antiperiodic\" (x, y, z, t): {e}"),
            )
        }),
    }
}

/// The config and the problem of a call: the gauge field read or taken, the lattice's
/// extents from it, the source from `[source]` or `source` (checked: its volume, finite,
/// not zero).
pub fn prepare(
    table: &serde_json::Value,
    gauge: GaugeInput,
    source: Option<SpinorField>,
    name: &str,
) -> Result<(LoadedConfig, Problem)> {
    let t0 = Instant::now();
    let boundary = boundary_of(table)?;
    let table = with_gauge_section(table, &gauge);
    let (mut field, description, reunitarised) = gauge_of(gauge, boundary)?;
    let cfg = config(&table, field.lattice.dims, name, PathBuf::from("."))?;
    let lattice = cfg.lattice()?;
    field.lattice = lattice.clone();
    let mut problem =
        crate::app::problem::problem_with(&cfg, lattice, field, description, reunitarised, t0)?;
    if let Some(source) = source {
        check_source(&source, problem.lattice.volume())?;
        problem.source = source;
        problem.source_description = "an array given by the caller".into();
    }
    Ok((cfg, problem))
}

/// `table` with the `[gauge]` section of a gauge file, so that the report's config names
/// it (links at hand keep the placeholder `type = "unit"`; the report's `gauge` says what
/// they are).
fn with_gauge_section(table: &serde_json::Value, gauge: &GaugeInput) -> serde_json::Value {
    let mut table = table.clone();
    if let (
        GaugeInput::File {
            path,
            format,
            options,
            accept_unchecked,
        },
        Some(sections),
    ) = (gauge, table.as_object_mut())
    {
        sections.insert(
            "gauge".into(),
            serde_json::json!({
                "type": "file",
                "path": path.display().to_string(),
                "format": format.map_or("auto", GaugeFormat::name),
                "reunitarise": options.reunitarise,
                "accept_unchecked": accept_unchecked,
            }),
        );
    }
    table
}

/// The field of `gauge` with `boundary`, its description and the reunitarisation note.
fn gauge_of(
    gauge: GaugeInput,
    boundary: [Boundary; NDIM],
) -> Result<(GaugeField, String, Option<String>)> {
    match gauge {
        GaugeInput::Links(g) => Ok((g, "links given by the caller".into(), None)),
        GaugeInput::File {
            path,
            format,
            options,
            accept_unchecked,
        } => {
            let (g, info) = crate::io::read_gauge_checked(
                &path,
                format,
                None,
                boundary,
                options,
                accept_unchecked,
            )?;
            let note = info
                .reunitarised
                .then(|| crate::app::problem::reunitarisation_note(&info));
            Ok((g, format!("file {}", path.display()), note))
        }
    }
}

/// A source at hand: `volume` sites, finite, not zero (exit 2, key `source`).
fn check_source(source: &SpinorField, volume: usize) -> Result<()> {
    if source.volume() != volume || source.data.len() != volume * 12 {
        return Err(Error::invalid(
            "source",
            format!(
                "{} complex numbers for a lattice of {volume} sites: expected 12 a site",
                source.data.len()
            ),
        ));
    }
    if let Some(k) = source
        .data
        .iter()
        .position(|z| !(z.re.is_finite() && z.im.is_finite()))
    {
        return Err(Error::invalid(
            "source",
            format!("site {}, spin-colour {} is not finite", k / 12, k % 12),
        ));
    }
    if source.norm2() == 0.0 {
        return Err(Error::invalid("source", "the source is zero everywhere"));
    }
    Ok(())
}

/// One solve of `problem` on the config's device and its report (the CPU check of
/// D x = b included), nothing written. A solve that stopped without converging is
/// returned as it is: the caller decides (the program exits 7).
pub fn solve(cfg: &LoadedConfig, problem: &Problem) -> Result<(SolveResult, SolveReport)> {
    let mut device = one::open(cfg, problem, one::warm_up(cfg))?;
    let result = device.solve(problem, &problem.source)?;
    let (described, gpu, wall) = device.close(problem)?;
    let d_residual = crate::app::solve::cpu_residual_of_d(problem, &result.solution);
    let mut report = crate::report::build(cfg, problem, &result, &described, d_residual, gpu);
    let r = &result.timings;
    report.time = crate::report::TimeLine {
        read_generate: r.setup,
        upload: wall.construct + r.upload + r.download,
        tune: wall.tune,
        setup: result.multigrid.as_ref().map_or(0.0, |m| m.setup_seconds),
        solve: r.solve,
        verify: r.true_residual,
        ..Default::default()
    };
    Ok((result, report))
}

/// The 12 columns of the config's point (wall, Gaussian) source with every spin and
/// colour, solved on one backend opened once, and their correlators (`[measure]`, its
/// defaults when absent); nothing written. A column that does not converge is an error
/// (exit 7), as in `qcd-solve propagator`.
pub fn propagator(cfg: &LoadedConfig, problem: &Problem) -> Result<PropagatorOutput> {
    let mut cfg = cfg.clone();
    propagator::all_spins_and_colours(&mut cfg);
    cfg.revalidate()?;
    let rhs = RightHandSides::of(&cfg, &problem.gauge, || {
        Ok((problem.source.clone(), problem.source_description.clone()))
    })?;
    if !rhs.is_propagator() {
        return Err(Error::invalid(
            "source",
            "a propagator needs a point, wall or Gaussian source (its 12 spin-colour columns)",
        ));
    }
    let (columns, records, backend) = propagator::solve_columns(&cfg, problem, &rhs)?;
    let measured = propagator::measure::contract(&cfg, &problem.lattice, &rhs, &columns);
    let pion = measured.as_ref().map_or_else(Vec::new, |m| m.pion());
    let report = propagator::report_of(&cfg, problem, &rhs, records, backend, pion, &measured);
    let correlators = measured.map_or_else(Vec::new, |m| {
        m.sinks
            .into_iter()
            .map(|s| {
                let sink = match s.sink {
                    crate::config::Sink::Point => "point",
                    crate::config::Sink::Smeared => "smeared",
                };
                (sink.to_string(), s.mesons, s.nucleons)
            })
            .collect()
    });
    Ok(PropagatorOutput {
        columns,
        report,
        correlators,
    })
}
