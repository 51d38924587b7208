//! The main job's outputs checked before any work (docs/reliability.md, "Outputs"): every
//! output path resolved and compared with every input (config, gauge file, source file,
//! heatbath cache) and with the other outputs (a clash is a bad value, exit 2, naming
//! both); an advisory lock on each output, held from the first probe to the last rename
//! (a second run on the same outputs fails at once, exit 3, naming the holder's pid); and
//! each target probed exactly: a directory or other non-file in its place, a name the
//! filesystem refuses, a folder that takes no temporary, or too little free space for the
//! bytes to be written is an I/O error (exit 3) before the solve.

use crate::error::{Error, Result};
use crate::io::staged::{create_temporary, folder_of, temp_pid};
use std::fs::File;
use std::path::{Component, Path, PathBuf};

/// One output of a run: what it is, where it goes, and how many bytes it will take.
#[derive(Clone, Debug)]
pub struct Output {
    pub what: &'static str,
    pub path: PathBuf,
    pub bytes: u64,
}

/// One input of a run (read before the outputs are written).
#[derive(Clone, Debug)]
pub struct Input {
    pub what: &'static str,
    pub path: PathBuf,
}

/// The bytes a report may take: the config, the description and a residual history of a
/// few 10^4 entries fit in 4 MiB.
pub const REPORT_BYTES: u64 = 4 << 20;

/// `path` made absolute without following a link at its last component: the deepest
/// existing ancestor canonicalised, the rest appended with `.` and `..` applied.
pub fn resolve_entry(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let name = abs.file_name().map(|n| n.to_os_string());
    let parent = abs.parent().map(Path::to_path_buf).unwrap_or_default();
    // Component by component: each existing prefix canonicalised (links resolved), so a
    // `..` after it pops the real parent; the missing rest is appended as written.
    let mut out = PathBuf::from("/");
    for c in parent.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => {
                out.push(n);
                if let Ok(canon) = out.canonicalize() {
                    out = canon;
                }
            }
            _ => {}
        }
    }
    if let Some(n) = name {
        out.push(n);
    }
    out
}

/// Every path a name reaches: its entry, and where a link there leads.
fn reaches(path: &Path) -> Vec<PathBuf> {
    let mut v = vec![resolve_entry(path)];
    if let Ok(c) = path.canonicalize() {
        if c != v[0] {
            v.push(c);
        }
    }
    v
}

/// Make sure each output's folder exists and takes a file, then clear stale temporaries
/// there (the side outputs of `scale`, `generate`, ...). An unwritable folder is an I/O
/// error (exit 3) naming it, before any work is done.
pub fn prepare_folders(outputs: &[&Path]) -> Result<()> {
    for p in outputs {
        probe(&Output {
            what: "output",
            path: p.to_path_buf(),
            bytes: 0,
        })?;
    }
    let mut folders: Vec<PathBuf> = outputs.iter().map(|p| folder_of(p)).collect();
    folders.sort();
    folders.dedup();
    for dir in folders {
        remove_stale_temporaries(&dir);
    }
    Ok(())
}

/// Refuse an output that names an input or another output (exit 2, naming both).
pub fn check_clashes(outputs: &[Output], inputs: &[Input]) -> Result<()> {
    for (i, o) in outputs.iter().enumerate() {
        let entry = resolve_entry(&o.path);
        for other in &outputs[..i] {
            if resolve_entry(&other.path) == entry {
                return Err(Error::invalid(
                    "output",
                    format!(
                        "the {} and the {} are one file ({} and {}): each output needs its own \
                         path",
                        other.what,
                        o.what,
                        other.path.display(),
                        o.path.display()
                    ),
                ));
            }
        }
        for inp in inputs {
            if reaches(&inp.path).contains(&entry) {
                return Err(Error::invalid(
                    "output",
                    format!(
                        "the {} {} would replace the {} {}: an output may not overwrite an input",
                        o.what,
                        o.path.display(),
                        inp.what,
                        inp.path.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// An advisory lock (flock) on one output, released when dropped or when the process
/// ends. The lock file sits beside the output as `.qcd-solve-<crc32 of the name>.lock`
/// and holds the holder's pid; the holder removes it before it lets go, and a run that
/// locked a file no longer at that name (removed by the holder meanwhile) tries again, so
/// the lock is never held twice and no lock file outlives its run.
#[derive(Debug)]
pub struct OutputLock {
    file: File,
    path: PathBuf,
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Still locked here: a run that opens the name now makes a new file, and one that
        // opened this one finds it gone after locking and tries again.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// The lock file of an output.
pub fn lock_path(output: &Path) -> PathBuf {
    let name = output.file_name().unwrap_or_default();
    let crc = crc32fast::hash(name.as_encoded_bytes());
    folder_of(output).join(format!(".qcd-solve-{crc:08x}.lock"))
}

/// Whether `file` is still the file at `path` (same device and inode).
fn still_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Take the lock of `output` at once or fail (exit 3) naming the holder.
pub fn lock_output(output: &Path, what: &str) -> Result<OutputLock> {
    use std::io::{Read, Seek};
    use std::os::unix::fs::OpenOptionsExt;
    let path = lock_path(output);
    for _ in 0..100 {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                // The holder writes its pid right after locking: give it a moment.
                let mut holder = String::new();
                for _ in 0..50 {
                    holder.clear();
                    let _ = file.rewind();
                    let _ = file.read_to_string(&mut holder);
                    if !holder.trim().is_empty() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "a process that has not written its pid".to_string()
                } else {
                    format!("process {holder}")
                };
                return Err(Error::io(
                    output,
                    std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        format!(
                            "the {what} is being written by another run ({holder}, lock {}); \
                             two runs may not share an output",
                            path.display()
                        ),
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        if !still_at(&file, &path) {
            continue; // the holder removed it between our open and our lock
        }
        // One fixed-width write at offset 0: a reader sees the old pid or the new one whole.
        let _ = std::os::unix::fs::FileExt::write_all_at(
            &file,
            format!("{:>10}\n", std::process::id()).as_bytes(),
            0,
        );
        return Ok(OutputLock { file, path });
    }
    Err(Error::io(
        &path,
        std::io::Error::other("the lock file keeps being replaced; another run is churning it"),
    ))
}

/// Free bytes for an unprivileged writer in the filesystem of `folder`.
pub fn free_bytes(folder: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(folder).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Probe one output's target exactly: its folder exists (created) and takes an exclusive
/// temporary; the target, when present, is a regular file or a link (not a directory, a
/// FIFO or a device); an absent target's exact name is created and removed, so a name
/// the filesystem refuses fails here.
pub fn probe(o: &Output) -> Result<()> {
    let io_err = |p: &Path, e: std::io::Error, why: String| {
        Error::io(p, std::io::Error::new(e.kind(), format!("{why} ({e})")))
    };
    if o.path.file_name().is_none() {
        return Err(Error::invalid(
            "output",
            format!("the {} {} does not name a file", o.what, o.path.display()),
        ));
    }
    let dir = folder_of(&o.path);
    std::fs::create_dir_all(&dir).map_err(|e| {
        io_err(
            &dir,
            e,
            format!("the {}'s folder cannot be created", o.what),
        )
    })?;
    let (tmp, _f) = create_temporary(&dir)
        .map_err(|e| io_err(&dir, e, format!("the {}'s folder is not writable", o.what)))?;
    let _ = std::fs::remove_file(&tmp);
    match std::fs::symlink_metadata(&o.path) {
        Ok(m) => {
            let t = m.file_type();
            if !(t.is_file() || t.is_symlink()) {
                let kind = if t.is_dir() {
                    "a directory"
                } else {
                    "not a regular file"
                };
                return Err(Error::io(
                    &o.path,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!(
                            "the {} target is {kind}; it cannot be replaced by a file",
                            o.what
                        ),
                    ),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(&o.path)
                .map_err(|e| io_err(&o.path, e, format!("the {} cannot be created", o.what)))?;
            let _ = std::fs::remove_file(&o.path);
        }
        Err(e) => {
            return Err(io_err(
                &o.path,
                e,
                format!("the {} cannot be examined", o.what),
            ))
        }
    }
    Ok(())
}

/// Refuse a set of outputs whose bytes do not fit the free space of their filesystems
/// (a replaced file's space comes back only after its rename, so every byte counts).
pub fn check_space(outputs: &[Output]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut by_dev: Vec<(u64, PathBuf, u64, Vec<&str>)> = Vec::new();
    for o in outputs {
        let dir = folder_of(&o.path);
        let Ok(m) = std::fs::metadata(&dir) else {
            continue;
        };
        match by_dev.iter_mut().find(|(d, ..)| *d == m.dev()) {
            Some(e) => {
                e.2 += o.bytes;
                e.3.push(o.what);
            }
            None => by_dev.push((m.dev(), dir, o.bytes, vec![o.what])),
        }
    }
    for (_, dir, need, whats) in by_dev {
        if let Some(free) = free_bytes(&dir) {
            if free < need {
                return Err(Error::io(
                    &dir,
                    std::io::Error::new(
                        std::io::ErrorKind::StorageFull,
                        format!(
                            "{need} bytes are needed for the {} and {free} are free",
                            whats.join(" and ")
                        ),
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Remove temporaries of processes that no longer exist from `folder`. Returns the files
/// removed. Does nothing where /proc is absent (liveness unknown).
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

/// The checked and locked outputs of a run: dropping it releases the locks.
#[derive(Debug)]
pub struct OutputSet {
    _locks: Vec<OutputLock>,
}

/// Everything above for a list of outputs and inputs, in order: clashes, locks (sorted by
/// lock file, so two runs cannot each hold half), probes, free space, stale temporaries.
pub fn claim(outputs: &[Output], inputs: &[Input]) -> Result<OutputSet> {
    check_clashes(outputs, inputs)?;
    let mut order: Vec<&Output> = outputs.iter().collect();
    for o in &order {
        let dir = folder_of(&o.path);
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::io(
                &dir,
                std::io::Error::new(
                    e.kind(),
                    format!("the output folder cannot be created ({e})"),
                ),
            )
        })?;
    }
    order.sort_by_key(|o| resolve_entry(&lock_path(&o.path)));
    let mut locks = Vec::new();
    for o in order {
        locks.push(lock_output(&o.path, o.what)?);
    }
    for o in outputs {
        probe(o)?;
    }
    check_space(outputs)?;
    let mut folders: Vec<PathBuf> = outputs.iter().map(|o| folder_of(&o.path)).collect();
    folders.sort();
    folders.dedup();
    for f in folders {
        remove_stale_temporaries(&f);
    }
    Ok(OutputSet { _locks: locks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_resolve_through_missing_folders_and_dots() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().canonicalize().unwrap();
        assert_eq!(
            resolve_entry(&d.path().join("a/../b/./x.npy")),
            base.join("b/x.npy")
        );
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert_eq!(
            resolve_entry(&d.path().join("sub/../x.npy")),
            base.join("x.npy")
        );
    }

    #[test]
    fn a_second_lock_on_one_output_fails_naming_the_holder() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("x.npy");
        let _held = lock_output(&out, "solution").unwrap();
        let e = lock_output(&out, "solution").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string()
                .contains(&format!("process {}", std::process::id())),
            "{e}"
        );
    }

    #[test]
    fn outputs_larger_than_the_free_space_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let o = |bytes| Output {
            what: "solution",
            path: d.path().join("x.npy"),
            bytes,
        };
        assert!(check_space(&[o(1)]).is_ok());
        // No filesystem here has 2^62 bytes (4 EiB) free.
        let e = check_space(&[o(1 << 62)]).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string().contains("bytes are needed for the solution"),
            "{e}"
        );
    }

    #[test]
    fn stale_temporaries_of_dead_processes_go_and_live_ones_stay() {
        let d = tempfile::tempdir().unwrap();
        // A pid above the kernel's pid_max (4194304 at most) belongs to no process.
        let dead = d.path().join(".qcd-solve-4194305-0123456789abcdef.tmp");
        let own = d.path().join(format!(
            ".qcd-solve-{}-0123456789abcdef.tmp",
            std::process::id()
        ));
        let other = d.path().join("r.json");
        for p in [&dead, &own, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        let removed = remove_stale_temporaries(d.path());
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists() && own.exists() && other.exists());
    }
}
