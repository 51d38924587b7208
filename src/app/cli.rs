//! Command-line interface: the main job (`qcd-solve CONFIG`) and the subcommands.

use crate::config::{Device, LoadedConfig, Overrides};
use crate::error::Result;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Conventions: site index x fastest; spinors [site][spin][colour]; DeGrand-Rossi gammas;
D = 1 - kappa * sum_mu [(1 - g_mu) U_mu(x) psi(x+mu) + (1 + g_mu) U_mu(x-mu)^+ psi(x-mu)];
fermions periodic in space, antiperiodic in time unless [lattice] boundary says otherwise.
Exit codes: 0 ok, 2 bad config or value, 3 file I/O, 4 bad file content (also NaN/inf
values and gauge links off SU(3) unless --reunitarise), 5 CUDA unavailable or failed,
6 out of device or host memory, 7 solver did not converge, 8 a check failed, 9 internal
error (a bug).";

/// The program in one line (also Cargo.toml's `description`).
pub const ABOUT: &str = "Lattice QCD Wilson-Dirac solver (Wilson, clover, twisted mass; CR, \
                         BiCGStab, GCR, CGNE, multigrid) for CPUs and NVIDIA GPUs";

#[derive(Parser, Debug)]
#[command(
    name = "qcd-solve",
    version,
    about = ABOUT,
    after_help = AFTER_HELP,
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Only errors: on stderr, with no summary on stdout and no progress display.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// More log lines on stderr: -v adds the timed steps, -vv every detail (debug),
    /// -vvv everything (trace). RUST_LOG, when set, chooses instead.
    #[arg(long, short, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Seconds between progress lines when stderr is not a terminal (a batch job's log);
    /// 0: every update.
    #[arg(long, global = true, value_name = "SECONDS", default_value = "5", allow_hyphen_values = true,
          value_parser = crate::report::progress::interval_of)]
    pub progress_secs: std::time::Duration,
}

#[derive(Args, Debug, Default, Clone)]
pub struct RunArgs {
    /// The TOML config; without one, the embedded configs/16x16x16x32.toml runs.
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write a commented config to start from (with --gauge, the file's extents and
    /// format filled in); never replaces an existing file.
    Init {
        /// A gauge file whose extents and format the config takes (format detected).
        #[arg(long, value_name = "FILE")]
        gauge: Option<PathBuf>,
        /// The config to write (must not exist).
        #[arg(long, value_name = "PATH", default_value = "run.toml")]
        out: PathBuf,
    },
    /// Read a gauge file, verify it and print format, dims, plaquette, link trace, checksums.
    Info {
        file: PathBuf,
        /// auto, nersc, ildg, scidac, milc or openqcd.
        #[arg(long, default_value = "auto")]
        format: String,
        /// Project links off SU(3) beyond the file's precision onto SU(3) and report the
        /// result, instead of refusing the file (exit 4).
        #[arg(long)]
        reunitarise: bool,
        /// Read a LIME file without its checksum record or with inconsistent record flags
        /// (refused otherwise, exit 4).
        #[arg(long)]
        accept_unchecked: bool,
    },
    /// Benchmark the fast CPU operator against a triad over the same bytes.
    Bench {
        /// Lattice dims LX,LY,LZ,LT.
        #[arg(long, default_value = "16,16,16,32", value_delimiter = ',')]
        dims: Vec<usize>,
        /// Operator applications to time (median reported), at least 1.
        #[arg(long, default_value_t = 10, value_parser = at_least_one)]
        repeat: usize,
        /// CPU threads, 0 = all (at most 4 x the cores).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        threads: i64,
    },
    /// Kernel 3.0 against its DRAM floors (dslash, Schur operator, fused CR and BiCGStab
    /// iterations, in double, single and half, 18, 12 and 8 reals per link; then the
    /// clover and twisted-clover rows, 18 and 12), as ratios to the triad of the same run.
    Floor {
        /// Lattice dims LX,LY,LZ,LT.
        #[arg(long, default_value = "16,16,16,32", value_delimiter = ',')]
        dims: Vec<usize>,
        /// Calls timed per row (after one warm-up), at least 1; the fused CR rows time at
        /// most 200 iterations of one recurrence.
        #[arg(long, default_value_t = 200, value_parser = at_least_one)]
        repeat: usize,
        /// Threads per block of the 3.0 stencil (default: the backend's; the full-mode
        /// dslash takes at most 128, its entry point's bound).
        #[arg(long)]
        block: Option<usize>,
        /// Also the decomposition's cost on this GPU: D split in 2 along t (two ranks as
        /// threads, faces by device copies) against the undecomposed D, target <= 1.10.
        #[arg(long)]
        halo: bool,
        /// Only the Wilson rows (no clover or twisted-clover rows).
        #[arg(long)]
        wilson: bool,
        /// Also the batched operator's rows: one launch over 1, 4 and 12 right-hand sides
        /// against one right-hand side at a time (target: the Wilson dslash at 12 in <= 0.6
        /// of one right-hand side's time per right-hand side).
        #[arg(long)]
        batch: bool,
        /// Only the batched operator's rows (no other row).
        #[arg(long)]
        batch_only: bool,
    },
    /// Prove GPU stencil versions against the CPU reference: operator, CR history, true
    /// residual (random gauge and source on the config's lattice, kappa, tolerance).
    Validate {
        config: PathBuf,
        /// "all" or a list of versions, e.g. 1.3,1.6.1.
        #[arg(long, default_value = "all")]
        kernel: String,
        /// Seed of the random gauge field and sources.
        #[arg(long, default_value_t = 2013)]
        seed: u64,
    },
    /// The seed's study: every GPU stencil version against the CPU and the triad, with
    /// tuned launch geometry; a table, CSV, JSON and charts.
    Ablate {
        config: PathBuf,
        /// "all" or a list of versions, e.g. 1.2,1.3,1.6.1.
        #[arg(long, default_value = "all")]
        kernels: String,
        /// Timed solves per version after a warm-up (median and spread reported), at
        /// least 1.
        #[arg(long, default_value_t = 3, value_parser = at_least_one)]
        repeat: usize,
        /// Folder for ablation.csv, ablation.json and the charts.
        #[arg(long, default_value = "out/ablation")]
        out: PathBuf,
        /// Sweep launch geometry where the cache has none (the default; `--no-tune`: the
        /// config's multiple for every version, no cache).
        #[arg(long, overrides_with = "no_tune")]
        tune: bool,
        /// Tune cache file (default $QCD_SOLVE_TUNE_CACHE or ~/.cache/qcd-solve/tune.tsv).
        #[arg(long)]
        tune_cache: Option<PathBuf>,
        /// Also time the upload of 3.0's double 12-real links of a random field of these
        /// extents (e.g. 48,48,48,96) with each staging shape, against the pinned
        /// bandwidth of the same run.
        #[arg(long, value_delimiter = ',')]
        upload_dims: Option<Vec<usize>>,
        #[command(flatten)]
        overrides: Box<Overrides>,
    },
    /// Compile every GPU kernel with NVRTC (no GPU needed; CI runs this).
    Kernels {
        /// Compile all kernels and report their PTX sizes.
        #[arg(long)]
        check: bool,
        #[arg(long, default_value = "sm_90")]
        arch: String,
    },
    /// Generate thermalised quenched SU(3) fields (Cabibbo-Marinari heatbath plus
    /// overrelaxation, Wilson action), saved as NERSC every K sweeps.
    Generate {
        /// Gauge coupling, >= 0.
        #[arg(long, allow_negative_numbers = true)]
        beta: f64,
        /// LX,LY,LZ,LT (all even).
        #[arg(long, value_delimiter = ',')]
        dims: Vec<usize>,
        /// Measured sweeps after thermalisation, at least 1 (the last one is always saved).
        #[arg(long, value_parser = at_least_one)]
        sweeps: usize,
        /// Thermalisation sweeps.
        #[arg(long, default_value_t = 100)]
        therm: usize,
        /// Save every K-th measured configuration (and the last), at least 1.
        #[arg(long, default_value_t = 10, value_parser = at_least_one)]
        every: usize,
        /// Overrelaxation steps per sweep.
        #[arg(long, default_value_t = 4)]
        overrelax: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Start from a random field (default: cold, the unit field).
        #[arg(long)]
        hot: bool,
        #[arg(long, default_value = "auto")]
        device: Device,
        /// CPU threads, 0 = all (at most 4 x the cores).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        threads: i64,
        /// Output stem: configurations OUT.<sweep>, OUT.history.json, OUT.plaquette.svg/png.
        #[arg(long)]
        out: PathBuf,
    },
    /// The propagator: every spin and colour of the config's point, wall or Gaussian
    /// source (or every piece of its noise) solved on one backend built once, written as
    /// <stem>.propagator.npy/.h5/.lime ([t, z, y, x, spin, colour, spin', colour'],
    /// complex128), the correlators as <stem>.correlators.csv/.h5 ([measure]), the pion's
    /// effective mass as <stem>.pion-meff.svg/.png and a report <stem>.propagator.json.
    Propagator {
        config: PathBuf,
        /// auto, cpu or cuda (overrides [backend] device).
        #[arg(long)]
        device: Option<Device>,
        /// Folder for the files.
        #[arg(long, default_value = "out")]
        out: PathBuf,
    },
    /// The config's solve at several kappas with several methods (iterations and time to
    /// solution against kappa: a table, CSV, JSON and two charts)
    KappaScan {
        config: PathBuf,
        /// Hopping parameters, e.g. 0.12,0.13,0.135.
        #[arg(long, value_delimiter = ',', required = true)]
        kappas: Vec<f64>,
        /// Methods, e.g. cr,bicgstab,mg.
        #[arg(long, value_delimiter = ',', default_value = "cr,bicgstab,mg")]
        methods: Vec<crate::solver::Method>,
        /// auto, cpu or cuda (overrides [backend] device).
        #[arg(long)]
        device: Option<Device>,
        /// Folder for kappa-scan.csv, .json and the kappa-scan-iterations/-time charts.
        #[arg(long, default_value = "out/kappa-scan")]
        out: PathBuf,
    },
    /// CPU strong scaling of the solve: time, speed-up and efficiency per thread count.
    Scale {
        config: PathBuf,
        /// Thread counts, e.g. 1,2,4.
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        threads: Vec<usize>,
        /// Rank (GPU) counts, e.g. 1,2: strong and weak scaling of the split solve (t
        /// split) in place of the thread scaling. On one visible GPU the ranks share it.
        #[arg(long, value_delimiter = ',')]
        gpus: Option<Vec<usize>>,
        /// With --gpus: split along t (grid 1,1,1,n) or along z and t (zt: 1,1,2,2 on
        /// 4 ranks, 1,1,2,4 on 8); weak scaling grows the split extents.
        #[arg(long, value_enum, default_value = "t")]
        split: crate::app::scale::Split,
        /// auto, cpu or cuda for --gpus (overrides [backend] device).
        #[arg(long)]
        device: Option<Device>,
        /// Solves per count (median reported), at least 1.
        #[arg(long, default_value_t = 1, value_parser = at_least_one)]
        repeat: usize,
        /// Folder for scale.csv, scale.json and the scale.svg/.png chart.
        #[arg(long, default_value = "out/scale")]
        out: PathBuf,
    },
    /// Draw a command's charts again from the CSV it saved (no GPU, no solve): ablate's
    /// ablation.csv or residuals.csv, scale's scale-ranks.csv or scale.csv, kappa-scan's
    /// CSV, generate's <stem>.plaquette.csv. Titles name the lattice, device and date: from
    /// the CSV's columns when it has them, else from the flags.
    Chart {
        /// ablate, residuals, scale-ranks, scale, kappa-scan or plaquette.
        #[arg(value_enum)]
        kind: crate::app::chart::Kind,
        /// The CSV a command wrote.
        csv: PathBuf,
        /// Folder for the charts (default: the CSV's folder).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The device that measured the numbers, e.g. "NVIDIA H100 80GB HBM3".
        #[arg(long)]
        device: Option<String>,
        /// The day they were measured, YYYY-MM-DD.
        #[arg(long)]
        date: Option<String>,
        /// The lattice, e.g. 16x16x16x32 (scale-ranks: read from the CSV).
        #[arg(long)]
        lattice: Option<String>,
        /// scale-ranks: the split the numbers were measured with, t or zt.
        #[arg(long)]
        split: Option<String>,
        /// ablate: what the speed-ups are against, e.g. "16 threads".
        #[arg(long)]
        cpu: Option<String>,
    },
}

/// A count of at least 1 (`--repeat`, `--sweeps`, `--every`).
fn at_least_one(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1, got 0".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("must be a whole number >= 1 ({e})")),
    }
}

/// Logs to stderr: what runs and where the outputs go at info (the default); with
/// `verbose` 1 the timed steps too (`clock`'s debug lines), 2 every debug line, 3 and
/// more everything (trace);
/// `RUST_LOG`, when set, in place of both; with `--quiet` errors only, whatever
/// `RUST_LOG` says. Colour codes only when stderr is a terminal.
pub fn init_logging(quiet: bool, verbose: u8) {
    use std::io::IsTerminal;
    crate::report::progress::set_quiet(quiet);
    let filter = if quiet {
        tracing_subscriber::EnvFilter::new("error")
    } else {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_level(verbose)))
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// The log filter of `-v` repeated `verbose` times, without `RUST_LOG`.
pub fn log_level(verbose: u8) -> &'static str {
    match verbose {
        0 => "info",
        1 => "info,qcd_solve::clock=debug",
        2 => "debug",
        _ => "trace",
    }
}

/// A propagator run into `out` and its summary.
fn run_propagator(cfg: &LoadedConfig, out: &std::path::Path) -> Result<()> {
    let r = crate::app::run::thread_pool(cfg.config.backend.threads)?
        .install(|| crate::app::propagator::run(cfg, out))?;
    if !crate::report::progress::is_quiet() {
        print!("{}", crate::app::propagator::summary(&r));
        print!("{}", crate::app::outputs::propagator_lines(cfg));
    }
    Ok(())
}

/// `load_config` of `path` with only the device overridden (`--device`).
fn load_on_device(path: &PathBuf, device: Option<Device>) -> Result<LoadedConfig> {
    let o = Overrides {
        device,
        ..Overrides::default()
    };
    load_config(Some(path), &o)
}

pub fn load_config(path: Option<&PathBuf>, o: &Overrides) -> Result<LoadedConfig> {
    let mut cfg = match path {
        Some(p) => LoadedConfig::from_file(p)?,
        None => {
            if o.gauge.is_some() {
                tracing::info!(
                    "no config given: the embedded configs/16x16x16x32.toml's settings for the \
                     keys the command line leaves"
                );
            } else {
                tracing::info!("no config given: running the embedded configs/16x16x16x32.toml");
            }
            LoadedConfig::embedded_default()
        }
    };
    cfg.apply(o)?;
    crate::app::plan::check(&cfg)?;
    Ok(cfg)
}

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        None => {
            let cfg = load_config(cli.run.config.as_ref(), &cli.run.overrides)?;
            if crate::app::propagator::is_propagator_job(&cfg) {
                return run_propagator(&cfg, &crate::app::propagator::main_job_folder(&cfg));
            }
            crate::app::run::run(&cfg).map(|_| ())
        }
        Some(Command::Init { gauge, out }) => {
            crate::app::init::run(gauge.as_deref(), &out)?;
            println!(
                "wrote {}: edit it, then run qcd-solve {}",
                out.display(),
                out.display()
            );
            Ok(())
        }
        Some(Command::Info {
            file,
            format,
            reunitarise,
            accept_unchecked,
        }) => {
            let fmt = crate::io::parse_format(&format)?;
            let (_, info) = crate::io::read_gauge_checked(
                &file,
                fmt,
                None,
                crate::geometry::lattice::DEFAULT_BOUNDARY,
                crate::io::ReadOptions { reunitarise },
                accept_unchecked,
            )?;
            println!("{info}");
            Ok(())
        }
        Some(Command::Bench {
            dims,
            repeat,
            threads,
        }) => crate::app::bench::cpu_bench(&dims, repeat, threads),
        Some(Command::Validate {
            config,
            kernel,
            seed,
        }) => validate(&config, &kernel, seed),
        Some(Command::Floor {
            dims,
            repeat,
            block,
            halo,
            wilson,
            batch,
            batch_only,
        }) => {
            if !batch_only {
                let (triad, rows) = crate::app::floor::measure(&dims, repeat, block, !wilson)?;
                print!("{}", crate::app::floor::table(&dims, triad, &rows));
            }
            if batch || batch_only {
                let (triad, rows) =
                    crate::app::floor::measure_batch(&dims, repeat, block, !wilson)?;
                print!("{}", crate::app::floor::batch_table(&dims, triad, &rows));
            }
            if halo {
                let halo_rows = crate::app::floor::halo_rows(&dims, repeat)?;
                print!("{}", crate::app::floor::halo_table(&dims, &halo_rows));
            }
            Ok(())
        }
        Some(Command::Ablate {
            config,
            kernels,
            repeat,
            out,
            tune: _,
            tune_cache,
            upload_dims,
            overrides,
        }) => {
            let upload_dims = match upload_dims {
                Some(d) => Some(<[usize; 4]>::try_from(&d[..]).map_err(|_| {
                    crate::Error::invalid(
                        "--upload-dims",
                        format!("needs 4 values LX,LY,LZ,LT, got {d:?}"),
                    )
                })?),
                None => None,
            };
            let cfg = load_config(Some(&config), &overrides)?;
            let versions = crate::app::plan::study_versions(
                &cfg,
                "ablate",
                &kernels,
                parse_versions(&kernels)?,
                false,
            )?;
            crate::app::outputs::prepare_side(&cfg, &crate::app::ablate::side_outputs(&out))?;
            if cfg.config.backend.device == Device::Cpu {
                return Err(crate::Error::Cuda(
                    "nothing to ablate with device = cpu: the study compares GPU stencil versions against the CPU; use --device cuda or auto on a machine with an NVIDIA GPU".into(),
                ));
            }
            let mode = if overrides.no_tune {
                crate::app::ablate::TuneMode::NoTune
            } else {
                crate::app::ablate::TuneMode::Tune
            };
            let cache = tune_cache.unwrap_or_else(crate::backend::cuda::core::tune::default_path);
            crate::app::ablate::run(&cfg, &versions, repeat, mode, &cache, &out, upload_dims)
        }
        Some(Command::Kernels { check, arch }) => {
            let compiled = crate::backend::cuda::compile_all_kernels(&arch)?;
            for (name, ptx) in &compiled {
                println!("{name:<40} {ptx:>8} bytes of PTX");
            }
            println!(
                "{} kernel programs compiled for {arch}{}",
                compiled.len(),
                if check { " (check passed)" } else { "" }
            );
            Ok(())
        }
        Some(Command::Generate {
            beta,
            dims,
            sweeps,
            therm,
            every,
            overrelax,
            seed,
            hot,
            device,
            threads,
            out,
        }) => {
            let params = crate::gauge_gen::HeatbathParams {
                beta,
                sweeps,
                therm,
                every,
                overrelax,
                seed,
                hot_start: hot,
            };
            let dims = crate::app::generate::parse_dims(&dims)?;
            crate::threads::check(threads, "--threads")?;
            // Errors about the parameters name their flags.
            params.validate().map_err(|e| match e {
                crate::Error::InvalidValue { key, message } => crate::Error::InvalidValue {
                    key: format!("--{key}"),
                    message,
                },
                other => other,
            })?;
            crate::app::run::thread_pool(threads)?
                .install(|| crate::app::generate::run(dims, &params, device, &out))
        }
        Some(Command::Propagator {
            config,
            device,
            out,
        }) => {
            let mut cfg = load_on_device(&config, device)?;
            crate::app::propagator::all_spins_and_colours(&mut cfg);
            run_propagator(&cfg, &out)
        }
        Some(Command::KappaScan {
            config,
            kappas,
            methods,
            device,
            out,
        }) => {
            let cfg = load_on_device(&config, device)?;
            crate::app::kappa_scan::run(&cfg, &kappas, &methods, &out)
        }
        Some(Command::Scale {
            config,
            threads,
            gpus,
            split,
            device,
            repeat,
            out,
        }) => {
            let cfg = load_on_device(&config, device)?;
            if let Some(gpus) = gpus {
                return crate::app::scale::run_ranks(&cfg, &gpus, repeat, split, &out);
            }
            for &n in &threads {
                crate::threads::check(n.min(i64::MAX as usize) as i64, "--threads")?;
            }
            crate::app::scale::run(&cfg, &threads, repeat, &out)
        }
        Some(Command::Chart {
            kind,
            csv,
            out,
            device,
            date,
            lattice,
            split,
            cpu,
        }) => {
            let given = crate::app::chart::Given {
                device,
                date,
                lattice,
                split,
                cpu,
            };
            for f in crate::app::chart::run(kind, &csv, out.as_deref(), &given)? {
                if !crate::report::progress::is_quiet() {
                    println!("wrote {}", f.display());
                }
            }
            Ok(())
        }
    }
}

/// Parse "all" or a comma list of stencil versions.
pub fn parse_versions(s: &str) -> Result<Vec<crate::backend::cuda::StencilVersion>> {
    if s.trim() == "all" {
        return Ok(crate::backend::cuda::StencilVersion::all().to_vec());
    }
    s.split(',').map(|v| v.trim().parse()).collect()
}

fn validate(config: &std::path::Path, kernel: &str, seed: u64) -> Result<()> {
    let cfg = load_config(Some(&config.to_path_buf()), &Overrides::default())?;
    let c = &cfg.config;
    let action = c.dirac.action();
    let versions =
        crate::app::plan::study_versions(&cfg, "validate", kernel, parse_versions(kernel)?, true)?;
    let lattice = cfg.lattice()?;
    println!(
        "validate {} on {}: operator {}, kappa {}{}, tol {:.1e}, random gauge and source (seed {seed})",
        cfg.source_name,
        lattice.dims_string(),
        c.solver.operator(),
        c.dirac.kappa,
        if action.has_site_term() {
            format!(", {}", action.describe())
        } else {
            String::new()
        },
        c.solver.tolerance
    );
    let rows = crate::app::validate::validate(
        &lattice,
        &action,
        c.solver.tolerance,
        c.solver.max_iterations as usize,
        c.solver.operator(),
        &versions,
        c.backend.multiple as usize,
        seed,
    )?;
    print!("{}", crate::app::validate::format_table(&rows));
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.pass)
        .map(|r| r.version.to_string())
        .collect();
    if failed.is_empty() {
        println!("all {} versions pass", rows.len());
        Ok(())
    } else {
        Err(crate::Error::CheckFailed(format!(
            "versions failing validation: {}",
            failed.join(", ")
        )))
    }
}
