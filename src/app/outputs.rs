//! The main job's outputs as a pair: writable folders checked before the work, every
//! output written to a temporary first, then renamed into place solution first and
//! report last. The report records each file it describes with its length and CRC-32
//! (`solution_file`, `gauge_file`), so a report always names the bytes it belongs to: a
//! report whose `solution_file.crc32` differs from the `.npy` beside it was left by a run
//! killed between the two renames (the solution is then the newer one).
//!
//! Temporaries are named `<file>.tmp-<pid>`; one whose process is gone (no
//! `/proc/<pid>`) is removed from the output folders before the work and after a
//! successful write.

use crate::config::LoadedConfig;
use crate::error::{Error, Result};
use crate::problem::{Problem, SolveResult};
use crate::report::timeline::timed;
use crate::report::SolveReport;
use std::path::{Path, PathBuf};

/// The folder a path is written into ("." for a bare file name).
fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

use crate::io::staging_path;

/// The pid of a `*.tmp-<pid>` name.
fn temp_pid(name: &str) -> Option<u32> {
    let (_, pid) = name.rsplit_once(".tmp-")?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Remove `*.tmp-<pid>` files of processes that no longer exist from `folder`. Returns
/// the files removed. Does nothing where /proc is absent (liveness unknown).
pub fn remove_stale_temporaries(folder: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    if !Path::new("/proc/self").exists() {
        return removed;
    }
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(temp_pid) else {
            continue;
        };
        if pid == own || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && std::fs::remove_file(e.path()).is_ok() {
            tracing::info!(path = %e.path().display(), "removed a stale temporary of process {pid}");
            removed.push(e.path());
        }
    }
    removed
}

/// Make sure each output's folder exists and takes a file (create it, write a probe,
/// remove the probe), then clear stale temporaries there. An unwritable folder is an I/O
/// error (exit 3) naming it, before any work is done.
pub fn prepare_folders(outputs: &[&Path]) -> Result<()> {
    let mut folders: Vec<PathBuf> = outputs.iter().map(|p| folder_of(p)).collect();
    folders.sort();
    folders.dedup();
    for dir in folders {
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::io(
                &dir,
                std::io::Error::new(
                    e.kind(),
                    format!("the output folder cannot be created ({e})"),
                ),
            )
        })?;
        let probe = dir.join(format!(".qcd-solve-probe.tmp-{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"probe"));
        let _ = std::fs::remove_file(&probe);
        written.map_err(|e| {
            Error::io(
                &dir,
                std::io::Error::new(e.kind(), format!("the output folder is not writable ({e})")),
            )
        })?;
        remove_stale_temporaries(&dir);
    }
    Ok(())
}

/// The main job's output paths.
fn run_outputs(cfg: &LoadedConfig) -> Vec<&Path> {
    let o = &cfg.config.output;
    [&o.report, &o.solution, &o.gauge]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .collect()
}

/// `prepare_folders` for the main job's report, solution and gauge outputs.
pub fn prepare(cfg: &LoadedConfig) -> Result<()> {
    prepare_folders(&run_outputs(cfg))
}

/// Length and CRC-32 (IEEE, as zlib and `crc32` compute it) of a file: blocks of
/// `io::BLOCK_BYTES` read and hashed in parallel, their CRCs combined in order.
pub fn file_crc32(path: &Path) -> Result<(u64, u32)> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let block = crate::io::BLOCK_BYTES as u64;
    let parts: Vec<crc32fast::Hasher> = (0..len.div_ceil(block))
        .into_par_iter()
        .map(|b| {
            let at = b * block;
            let mut buf = vec![0u8; (len - at).min(block) as usize];
            f.read_exact_at(&mut buf, at)?;
            let mut h = crc32fast::Hasher::new();
            h.update(&buf);
            Ok(h)
        })
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io(path, e))?;
    let mut h = crc32fast::Hasher::new();
    for p in &parts {
        h.combine(p);
    }
    Ok((len, h.finalize()))
}

fn file_record(dest: &Path, staged: &Path) -> Result<serde_json::Value> {
    let (bytes, crc) = file_crc32(staged)?;
    Ok(serde_json::json!({
        "path": dest.display().to_string(),
        "bytes": bytes,
        "crc32": format!("{crc:08x}"),
    }))
}

/// Write the main job's outputs as described in the module doc.
pub fn write_run(
    cfg: &LoadedConfig,
    problem: &Problem,
    result: &SolveResult,
    rep: &mut SolveReport,
) -> Result<()> {
    let o = &cfg.config.output;
    let t = std::time::Instant::now();
    // (temporary, destination, what), in rename order: the report last.
    let mut staged: Vec<(PathBuf, PathBuf, &str)> = Vec::new();
    let written = (|| -> Result<()> {
        let mut records = serde_json::Map::new();
        if let Some(p) = &o.solution {
            let tmp = staging_path(p);
            staged.push((tmp.clone(), p.clone(), "solution"));
            timed("write the solution", || {
                crate::io::npy::write_spinor_npy(&tmp, &problem.lattice, &result.solution)
            })?;
            records.insert(
                "solution_file".into(),
                timed("CRC of the solution file", || file_record(p, &tmp))?,
            );
        }
        if let Some(p) = &o.gauge {
            let tmp = staging_path(p);
            staged.push((tmp.clone(), p.clone(), "gauge field (NERSC 3x3 IEEE64BIG)"));
            timed("write the gauge field", || {
                crate::io::nersc::write_nersc(
                    &tmp,
                    &problem.gauge,
                    crate::io::nersc::NerscWrite {
                        two_row: false,
                        double: true,
                        big_endian: true,
                    },
                )
            })?;
            records.insert("gauge_file".into(), file_record(p, &tmp)?);
        }
        // The time line closes here: the report's own bytes are the only ones after it.
        rep.time.write = t.elapsed().as_secs_f64();
        rep.time.finish(crate::report::timeline::process_seconds());
        if let Some(p) = &o.report {
            let tmp = staging_path(p);
            staged.push((tmp.clone(), p.clone(), "report"));
            let mut v = serde_json::to_value(rep).expect("report serialises");
            if let Some(obj) = v.as_object_mut() {
                obj.extend(records);
            }
            let json = serde_json::to_vec_pretty(&v).expect("report serialises");
            crate::io::write_atomic(&tmp, &json)?;
        }
        let mut done = 0;
        for (tmp, dest, what) in &staged {
            std::fs::rename(tmp, dest).map_err(|e| Error::io(dest, e))?;
            done += 1;
            tracing::info!(path = %dest.display(), "{what} written");
        }
        staged.drain(..done);
        Ok(())
    })();
    for (tmp, _, _) in &staged {
        let _ = std::fs::remove_file(tmp);
    }
    written?;
    let mut folders: Vec<PathBuf> = run_outputs(cfg).iter().map(|p| folder_of(p)).collect();
    folders.sort();
    folders.dedup();
    for dir in folders {
        // Make the renames durable; best effort, some filesystems refuse directory fsync.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        remove_stale_temporaries(&dir);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_give_their_pid() {
        assert_eq!(temp_pid("x.npy.tmp-123"), Some(123));
        assert_eq!(temp_pid("x.npy.tmp-123.tmp-123"), Some(123));
        assert_eq!(temp_pid("x.npy"), None);
        assert_eq!(temp_pid("x.tmp-12a"), None);
        assert_eq!(temp_pid("x.tmp-"), None);
    }

    #[test]
    fn stale_temporaries_of_dead_processes_go_and_live_ones_stay() {
        let d = tempfile::tempdir().unwrap();
        // A pid above the kernel's pid_max (4194304 at most) belongs to no process.
        let dead = d.path().join("r.json.tmp-4194305");
        let own = d.path().join(format!("r.json.tmp-{}", std::process::id()));
        let other = d.path().join("r.json");
        for p in [&dead, &own, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        let removed = remove_stale_temporaries(d.path());
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists() && own.exists() && other.exists());
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
