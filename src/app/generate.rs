//! `qcd-solve generate`: thermalised quenched SU(3) fields (Wilson action) on the CPU or
//! the GPU. Saves every K-th configuration after M thermalisation sweeps as NERSC 3x3
//! IEEE64BIG (atomic writes), the plaquette history as JSON, CSV and a chart, and prints the
//! mean plaquette with an autocorrelation-aware error and the link-update rate. Also the
//! `[gauge] type = "heatbath"` source of configs: generated once, cached per user
//! (`heatbath_cache`).

use crate::config::Device;
use crate::error::{Error, Result};
use crate::field::GaugeField;
use crate::gauge_gen::{summarise, Generator, HeatbathParams, SweepRecord};
use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use crate::io::{write_nersc, NerscWrite};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A CPU or GPU generator behind one interface.
enum Sweeper {
    Cpu(Box<Generator>),
    Gpu(Box<crate::backend::cuda::heatbath::GpuGenerator>),
}

impl Sweeper {
    fn new(lattice: &Lattice, params: &HeatbathParams, device: Device) -> Result<(Self, String)> {
        match crate::app::device::choose_device(device)? {
            Device::Cuda => {
                let g = crate::backend::cuda::heatbath::GpuGenerator::new(lattice, params)?;
                let name = crate::backend::cuda::device_info()
                    .map(|i| i.name)
                    .unwrap_or_default();
                Ok((Sweeper::Gpu(Box::new(g)), format!("cuda {name}")))
            }
            _ => Ok((
                Sweeper::Cpu(Box::new(Generator::new(lattice, params)?)),
                format!(
                    "cpu (rayon, {})",
                    crate::threads::count(rayon::current_num_threads())
                ),
            )),
        }
    }

    fn sweep(&mut self) -> Result<SweepRecord> {
        match self {
            Sweeper::Cpu(g) => Ok(g.sweep()),
            Sweeper::Gpu(g) => g.sweep(),
        }
    }

    fn field(&mut self) -> Result<GaugeField> {
        match self {
            Sweeper::Cpu(g) => Ok(g.field().clone()),
            Sweeper::Gpu(g) => g.field(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct GenerateReport {
    pub params: HeatbathParams,
    pub lattice: [usize; 4],
    pub device: String,
    pub link_updates_per_second: f64,
    pub median_sweep_seconds: f64,
    pub mean_plaquette: Option<f64>,
    pub plaquette_error: Option<f64>,
    pub tau_int: Option<f64>,
    pub mean_spatial: Option<f64>,
    pub mean_temporal: Option<f64>,
    pub saved: Vec<PathBuf>,
    pub history: Vec<SweepRecord>,
}

/// Run the generator; `save(record, field)` is called for every saved configuration.
pub fn generate_with(
    lattice: &Lattice,
    params: &HeatbathParams,
    device: Device,
    mut save: impl FnMut(&SweepRecord, &GaugeField) -> Result<Option<PathBuf>>,
) -> Result<(GaugeField, GenerateReport)> {
    params.validate()?;
    let (mut g, device_name) = Sweeper::new(lattice, params, device)?;
    let total = params.therm + params.sweeps;
    let bar = crate::report::progress::counter("sweeps", total as u64);
    let ticker = crate::report::progress::Ticker::new();
    let mut history = Vec::with_capacity(total);
    let mut saved = Vec::new();
    for _ in 0..total {
        let r = g.sweep()?;
        if let Some(b) = &bar {
            b.inc(1);
            b.set_message(format!("plaquette {:.6}", r.plaquette.total));
        }
        tracing::debug!(sweep = r.sweep, plaquette = r.plaquette.total, "sweep");
        if let Some(t) = ticker.as_ref().and_then(|t| t.due()) {
            tracing::info!(
                "sweeps progress: sweep {} of {total}, plaquette {:.6}, {:.2} sweeps/s, {t:.1} s",
                r.sweep + 1,
                r.plaquette.total,
                (r.sweep + 1) as f64 / t.max(1e-9)
            );
        }
        if r.measured && (r.sweep + 1 - params.therm).is_multiple_of(params.every) {
            let f = g.field()?;
            if let Some(p) = save(&r, &f)? {
                saved.push(p);
            }
        }
        history.push(r);
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let mut times: Vec<f64> = history.iter().map(|r| r.update_seconds).collect();
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let updates_per_sweep = (lattice.volume() * 4 * (1 + params.overrelax)) as f64;
    let summary = summarise(&history);
    let field = g.field()?;
    let report = GenerateReport {
        params: params.clone(),
        lattice: lattice.dims,
        device: device_name,
        link_updates_per_second: updates_per_sweep / median,
        median_sweep_seconds: median,
        mean_plaquette: summary.map(|s| s.total.mean),
        plaquette_error: summary.map(|s| s.total.error),
        tau_int: summary.map(|s| s.total.tau_int),
        mean_spatial: summary.map(|s| s.spatial.mean),
        mean_temporal: summary.map(|s| s.temporal.mean),
        saved,
        history,
    };
    Ok((field, report))
}

/// The `generate` command: configurations `OUT.<sweep>`, `OUT.history.json`, and the
/// chart `OUT.plaquette.svg/.png`.
///
/// The final configuration is always saved, also when the number of measured sweeps is
/// not a multiple of `every`; `sweeps` must be at least 1 (the command line refuses 0).
pub fn run(dims: [usize; 4], params: &HeatbathParams, device: Device, out: &Path) -> Result<()> {
    let lattice = Lattice::new(dims, DEFAULT_BOUNDARY)?;
    if params.sweeps == 0 {
        return Err(Error::invalid(
            "--sweeps",
            "must be at least 1: generate saves measured configurations, and with no measured sweep there is none",
        ));
    }
    crate::app::memory::check_host(&crate::app::memory::generate_need(
        &lattice.dims_string(),
        lattice.volume() as u64,
    ))?;
    // A stem, not a folder: "dir/" would make dotfiles "dir/.100".
    let stem_name = out.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if out.as_os_str().as_encoded_bytes().ends_with(b"/") || stem_name.is_empty() || out.is_dir() {
        return Err(Error::invalid(
            "--out",
            format!(
                "{} is a folder; --out takes a file stem (dir/name writes dir/name.<sweep>)",
                out.display()
            ),
        ));
    }
    let config_path = |sweep: usize| PathBuf::from(format!("{}.{}", out.display(), sweep));
    let last = config_path(params.therm + params.sweeps);
    crate::app::output_set::prepare_folders(&[&last])?;
    let (final_field, mut rep) = generate_with(&lattice, params, device, |r, f| {
        let p = config_path(r.sweep + 1);
        write_nersc(&p, f, NerscWrite::default())?;
        Ok(Some(p))
    })?;
    if rep.saved.last() != Some(&last) {
        // The last measured sweep is not a multiple of `every`: save it too.
        write_nersc(&last, &final_field, NerscWrite::default())?;
        rep.saved.push(last);
    }
    let stem = out.display().to_string();
    let json = serde_json::to_vec_pretty(&rep).expect("report serialises");
    crate::io::write_atomic(Path::new(&format!("{stem}.history.json")), &json)?;
    let files = plaquette_outputs(&rep, params, &lattice, &stem)?;
    if crate::report::progress::is_quiet() {
        // --quiet: the results are the files.
        return Ok(());
    }
    println!(
        "generated {} on {}: beta {}, {} thermalisation + {} measured sweeps ({} overrelaxation per sweep), seed {}",
        lattice.dims_string(),
        rep.device,
        params.beta,
        params.therm,
        params.sweeps,
        params.overrelax,
        params.seed
    );
    println!(
        "speed: {:.3e} link updates/s ({:.2} ms per sweep, median)",
        rep.link_updates_per_second,
        1e3 * rep.median_sweep_seconds
    );
    match (rep.mean_plaquette, rep.plaquette_error, rep.tau_int) {
        (Some(m), Some(e), Some(t)) => println!(
            "plaquette: {m:.7} +- {e:.7} (tau_int {t:.2}; spatial {:.7}, temporal {:.7})",
            rep.mean_spatial.unwrap_or(f64::NAN),
            rep.mean_temporal.unwrap_or(f64::NAN)
        ),
        _ => println!("plaquette: too few measured sweeps for an error estimate"),
    }
    for p in rep.saved.iter().chain(files.iter()) {
        println!("wrote {}", p.display());
    }
    println!("wrote {stem}.history.json");
    Ok(())
}

/// The plaquette chart `<stem>.plaquette.svg/.png` and its CSV `<stem>.plaquette.csv`
/// (`qcd-solve chart plaquette` draws the chart again from it); returns the files.
fn plaquette_outputs(
    rep: &GenerateReport,
    params: &HeatbathParams,
    lattice: &Lattice,
    stem: &str,
) -> Result<Vec<PathBuf>> {
    use crate::app::chart::plaquette::{plaquette_chart, plaquette_csv, SweepPlaquette};
    let sweeps: Vec<SweepPlaquette> = rep
        .history
        .iter()
        .map(|r| SweepPlaquette {
            sweep: r.sweep,
            total: r.plaquette.total,
            spatial: r.plaquette.spatial,
            temporal: r.plaquette.temporal,
        })
        .collect();
    let run = format!(
        "beta {}, {} start",
        params.beta,
        if params.hot_start { "hot" } else { "cold" }
    );
    let ctx = crate::report::charts::Context {
        lattice: lattice.dims_string(),
        device: rep.device.clone(),
        date: crate::report::charts::today(),
    };
    let csv = PathBuf::from(format!("{stem}.plaquette.csv"));
    crate::io::write_atomic(&csv, plaquette_csv(&sweeps, &run)?.as_bytes())?;
    let mut files = plaquette_chart(&sweeps, &run, &ctx, Path::new(&format!("{stem}.plaquette")))?;
    files.push(csv);
    Ok(files)
}

/// Parse "LX,LY,LZ,LT".
pub fn parse_dims(d: &[usize]) -> Result<[usize; 4]> {
    d.try_into()
        .map_err(|_| Error::invalid("--dims", format!("needs 4 values LX,LY,LZ,LT, got {d:?}")))
}
