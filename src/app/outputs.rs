//! The main job's outputs as a pair: claimed before the work (`output_set::claim`:
//! clashes with inputs refused, each output locked and probed, free space checked), every
//! output written to an exclusive temporary first (`io::staged`), then renamed into place
//! solution first and report last, the folders fsynced after the renames. The report
//! records each file it describes with its length and CRC-32 (`solution_file`,
//! `gauge_output_file`), so a report always names the bytes it belongs to: a report whose
//! `solution_file.crc32` differs from the `.npy` beside it was left by a run killed
//! between the two renames (the solution is then the newer one). A solve that did not
//! converge, or whose solution holds a NaN or infinity, writes no solution (an earlier
//! one stays), and its report says why (`solution_withheld`).
//!
//! The summary's last lines (`final_lines`) name every file written, with its absolute
//! path, the fermion boundary conditions in force and the rule relative paths followed
//! (stdout; `--quiet` prints nothing there).

pub use super::output_set::prepare_folders;
use super::output_set::{claim, Input, Output, OutputSet, REPORT_BYTES};
pub use super::output_set::{remove_stale_temporaries, resolve_entry};
use crate::config::LoadedConfig;
use crate::config::{GaugeConfig, SourceConfig};
use crate::error::Result;
use crate::io::staged::{folder_of, sync_folder, Staged};
use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::SolveReport;
use crate::solver::StopReason;
use std::path::{Path, PathBuf};

/// Claim the main job's report, solution and gauge outputs (module doc): the returned
/// set holds their locks until it is dropped, after the last rename.
pub fn prepare(cfg: &LoadedConfig) -> Result<OutputSet> {
    claim(&run_outputs(cfg), &run_inputs(cfg))
}

/// The run's inputs: the config file, the gauge file or heatbath cache, the source file.
pub fn run_inputs(cfg: &LoadedConfig) -> Vec<Input> {
    let c = &cfg.config;
    let mut v = Vec::new();
    if let Some(p) = &cfg.config_file {
        v.push(Input {
            what: "config",
            path: p.clone(),
        });
    }
    match &c.gauge.field {
        GaugeConfig::File { path, .. } => v.push(Input {
            what: "gauge file",
            path: cfg.input_path(path),
        }),
        GaugeConfig::Heatbath(params) => {
            if let Some(path) = cfg
                .lattice()
                .ok()
                .and_then(|l| crate::app::heatbath_cache::cache_path(&l, params).ok())
            {
                v.push(Input {
                    what: "heatbath cache",
                    path,
                });
            }
        }
        _ => {}
    }
    if let SourceConfig::File { path } = &c.source {
        v.push(Input {
            what: "source file",
            path: cfg.input_path(path),
        });
    }
    v
}

/// The run's outputs with the bytes each will take.
pub fn run_outputs(cfg: &LoadedConfig) -> Vec<Output> {
    let o = &cfg.config.output;
    let volume: u64 = cfg.dims().iter().map(|&d| d as u64).product();
    let mut v = Vec::new();
    if let Some(p) = &o.solution {
        v.push(Output {
            what: "solution",
            path: p.clone(),
            bytes: 128 + volume * 12 * 16,
        });
    }
    if let Some(p) = &o.gauge {
        v.push(Output {
            what: "gauge output",
            path: p.clone(),
            bytes: 4096 + volume * 4 * 18 * 8,
        });
    }
    if let Some(p) = &o.report {
        v.push(Output {
            what: "report",
            path: p.clone(),
            bytes: REPORT_BYTES,
        });
    }
    v
}

/// The side outputs of a command that reads a config (`ablate`, `scale`: tables, JSON,
/// charts), checked before the work: none may be one of the config's inputs (the config,
/// gauge file, heatbath cache or source; exit 2 naming both), and each folder must take
/// a file (exit 3).
pub fn prepare_side(cfg: &LoadedConfig, outputs: &[PathBuf]) -> Result<()> {
    let side: Vec<Output> = outputs
        .iter()
        .map(|p| Output {
            what: "output",
            path: p.clone(),
            bytes: 0,
        })
        .collect();
    super::output_set::check_clashes(&side, &run_inputs(cfg))?;
    let refs: Vec<&Path> = outputs.iter().map(PathBuf::as_path).collect();
    prepare_folders(&refs)
}

pub use crate::io::staged::file_crc32;

fn file_record(dest: &Path, staged: &Path) -> Result<serde_json::Value> {
    let (bytes, crc) = file_crc32(staged)?;
    Ok(serde_json::json!({
        "path": dest.display().to_string(),
        "bytes": bytes,
        "crc32": format!("{crc:08x}"),
    }))
}

/// Why a solution is not written, when it is not: a solve that stopped without
/// converging, or a solution holding a non-finite value, never replaces an earlier one.
pub fn withheld(result: &SolveResult) -> Option<String> {
    if result.reason != StopReason::Converged {
        return Some(format!(
            "the solve did not converge ({})",
            result.reason.describe()
        ));
    }
    let bad = result
        .solution
        .data
        .iter()
        .filter(|z| !(z.re.is_finite() && z.im.is_finite()))
        .count();
    (bad > 0).then(|| format!("the solution holds {bad} non-finite values"))
}

/// What a run wrote: each file with what it is, in the order written, and why the
/// solution was withheld, if it was.
#[derive(Clone, Debug, Default)]
pub struct Written {
    pub files: Vec<(String, PathBuf)>,
    pub withheld: Option<String>,
}

/// The summary's last lines (module doc): the boundary conditions, every file written,
/// the solution withheld or nothing written, and where relative paths were taken from.
pub fn final_lines(cfg: &LoadedConfig, written: &Written) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:<22} {v}\n"));
    line("boundary", boundary_words(&cfg.config.lattice.boundary));
    for (what, path) in &written.files {
        line(
            &format!("wrote {what}"),
            resolve_entry(path).display().to_string(),
        );
    }
    if let Some(why) = &written.withheld {
        line("solution not written", why.clone());
    }
    if written.files.is_empty() && written.withheld.is_none() {
        line(
            "wrote nothing",
            "[output] report = false and solution = false".into(),
        );
    }
    line("relative paths", path_rule(cfg));
    s
}

/// The summary's last lines of a propagator run, whose own summary lists its files: the
/// boundary conditions and the path rule.
pub fn propagator_lines(cfg: &LoadedConfig) -> String {
    format!(
        "{:<22} {}\n{:<22} {}\n",
        "boundary",
        boundary_words(&cfg.config.lattice.boundary),
        "relative paths",
        path_rule(cfg)
    )
}

/// "periodic in x, y, z; antiperiodic in t (fermions; links periodic)".
pub fn boundary_words(b: &[crate::geometry::lattice::Boundary; 4]) -> String {
    use crate::geometry::lattice::Boundary;
    let dirs = ["x", "y", "z", "t"];
    let of = |want: Boundary| -> Vec<&str> {
        (0..4)
            .filter(|&mu| b[mu] == want)
            .map(|mu| dirs[mu])
            .collect()
    };
    let mut parts = Vec::new();
    for (want, word) in [
        (Boundary::Periodic, "periodic"),
        (Boundary::Antiperiodic, "antiperiodic"),
    ] {
        let d = of(want);
        if !d.is_empty() {
            parts.push(format!("{word} in {}", d.join(", ")));
        }
    }
    format!("{} (fermions; links periodic)", parts.join("; "))
}

/// Where the run's relative paths were taken from (docs/config.md, "Paths").
pub fn path_rule(cfg: &LoadedConfig) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    match &cfg.config_file {
        Some(_) => format!(
            "the config's against its folder {}, the command line's against {}",
            resolve_entry(&cfg.base_dir.join("x"))
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            cwd.display()
        ),
        None => format!("against the current directory {}", cwd.display()),
    }
}

/// Write the main job's outputs as described in the module doc; what was written.
pub fn write_run(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    rep: &mut SolveReport,
) -> Result<Written> {
    let mut written = Written::default();
    let o = &cfg.config.output;
    let t = std::time::Instant::now();
    // In rename order: the report last. Dropping an uncommitted one removes its temporary.
    let mut staged: Vec<(Staged, &str)> = Vec::new();
    let mut records = serde_json::Map::new();
    if let Some(p) = &o.solution {
        match withheld(result) {
            Some(why) => {
                tracing::warn!(path = %p.display(), "no solution written: {why}");
                written.withheld = Some(why.clone());
                records.insert("solution_file".into(), serde_json::Value::Null);
                records.insert("solution_withheld".into(), why.into());
            }
            None => {
                let s = timed("write the solution", || {
                    crate::io::npy::stage_spinor_npy(p, &problem.lattice, &result.solution)
                })?;
                records.insert(
                    "solution_file".into(),
                    timed("CRC of the solution file", || file_record(p, s.temp_path()))?,
                );
                staged.push((s, "solution"));
            }
        }
    }
    if let Some(p) = &o.gauge {
        let s = timed("write the gauge field", || {
            crate::io::nersc::stage_nersc(
                p,
                &problem.gauge,
                crate::io::nersc::NerscWrite {
                    two_row: false,
                    double: true,
                    big_endian: true,
                },
            )
        })?;
        records.insert("gauge_output_file".into(), file_record(p, s.temp_path())?);
        staged.push((s, "gauge field"));
    }
    records.insert(
        "input_checks".into(),
        serde_json::to_value(crate::io::checks::recorded()).expect("checks serialise"),
    );
    // The time line closes here: the report's own bytes are the only ones after it.
    rep.time.write = t.elapsed().as_secs_f64();
    rep.time.finish(crate::report::timeline::process_seconds());
    if let Some(p) = &o.report {
        let mut v = serde_json::to_value(&*rep).expect("report serialises");
        if let Some(obj) = v.as_object_mut() {
            obj.extend(records);
        }
        let json = serde_json::to_vec_pretty(&v).expect("report serialises");
        let s = crate::io::staged::stage_with(p, |w| std::io::Write::write_all(w, &json))?;
        staged.push((s, "report"));
    }
    let mut folders: Vec<PathBuf> = staged.iter().map(|(s, _)| folder_of(s.dest())).collect();
    folders.sort();
    folders.dedup();
    for (s, what) in staged {
        let dest = s.dest().to_path_buf();
        s.commit()?;
        tracing::info!(path = %dest.display(), "{what} written");
        written.files.push((what.to_string(), dest));
    }
    for dir in folders {
        sync_folder(&dir);
        remove_stale_temporaries(&dir);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_words_name_each_direction() {
        use crate::geometry::lattice::{Boundary, DEFAULT_BOUNDARY};
        assert_eq!(
            boundary_words(&DEFAULT_BOUNDARY),
            "periodic in x, y, z; antiperiodic in t (fermions; links periodic)"
        );
        assert_eq!(
            boundary_words(&[Boundary::Periodic; 4]),
            "periodic in x, y, z, t (fermions; links periodic)"
        );
    }

    #[test]
    fn crc32_is_zlibs() {
        // zlib.crc32(b"123456789") = 0xcbf43926, the CRC-32 check value.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"123456789").unwrap();
        assert_eq!(file_crc32(&p).unwrap(), (9, 0xcbf4_3926));
        // Several blocks (2.5 of io::BLOCK_BYTES), hashed in parallel and combined: the
        // CRC of the whole, computed here in one pass.
        let bytes: Vec<u8> = (0..crate::io::BLOCK_BYTES * 5 / 2)
            .map(|k| (k * 7 + k / 251) as u8)
            .collect();
        std::fs::write(&p, &bytes).unwrap();
        let mut h = crc32fast::Hasher::new();
        h.update(&bytes);
        for threads in [1, 4] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let got = pool.install(|| file_crc32(&p).unwrap());
            assert_eq!(got, (bytes.len() as u64, h.clone().finalize()));
        }
    }
}
