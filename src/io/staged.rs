//! Output files written the way SQLite and git replace a file: the bytes go to a
//! temporary created exclusively in the target's folder (`O_CREAT|O_EXCL|O_NOFOLLOW`: no
//! existing name is reused and no symlink is followed), with an unpredictable name of
//! fixed length (`.qcd-solve-<pid>-<16 hex>.tmp`, so the file-name limit is met or
//! missed by the target's own name, never by a suffix), fsynced, then renamed over the
//! target (rename replaces the folder entry: a link at the target is replaced, never
//! written through), and the folder is fsynced. On any error, or when a `Staged` is
//! dropped uncommitted, the temporary is removed and the target is left as it was.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The prefix of every temporary; `<prefix><pid>-<16 hex>.tmp`.
pub const TEMP_PREFIX: &str = ".qcd-solve-";

/// The pid in a temporary's name (`None` for any other name).
pub fn temp_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TEMP_PREFIX)?.strip_suffix(".tmp")?;
    let (pid, tag) = rest.split_once('-')?;
    if pid.is_empty()
        || !pid.bytes().all(|b| b.is_ascii_digit())
        || tag.len() != 16
        || !tag.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    pid.parse().ok()
}

/// The folder a path is written into ("." for a bare file name).
pub fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A new temporary in `folder`, created exclusively: its path and the open file.
pub fn create_temporary(folder: &Path) -> std::io::Result<(PathBuf, File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut last = None;
    // A clash of 64 random bits is all but impossible; a few tries cover a planted name.
    for _ in 0..8 {
        let tag = getrandom::u64().map_err(|e| std::io::Error::other(e.to_string()))?;
        let tmp = folder.join(format!(
            "{TEMP_PREFIX}{}-{tag:016x}.tmp",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary could be created")))
}

/// fsync a folder, so that renames into it survive a crash; best effort (some
/// filesystems refuse a directory fsync).
pub fn sync_folder(folder: &Path) {
    if let Ok(d) = File::open(folder) {
        let _ = d.sync_all();
    }
}

/// A file written to its temporary and fsynced, waiting for `commit`.
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl Staged {
    /// The temporary holding the bytes.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Rename the temporary over the target (the folder is not fsynced: `sync_folder`
    /// once after the last rename of a set).
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| Error::io(&self.dest, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `path`'s bytes to a fresh temporary beside it (`write` fills it), fsync it, and
/// return it staged. Parent folders are created.
pub fn stage(path: &Path, write: impl FnOnce(&File) -> std::io::Result<()>) -> Result<Staged> {
    if path.file_name().is_none() {
        return Err(Error::invalid(
            "output path",
            format!("{} does not name a file", path.display()),
        ));
    }
    let folder = folder_of(path);
    std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
    let (tmp, file) = create_temporary(&folder).map_err(|e| Error::io(path, e))?;
    let staged = Staged {
        tmp,
        dest: path.to_path_buf(),
        committed: false,
    };
    let written = (|| -> std::io::Result<()> {
        write(&file)?;
        crate::clock::timed("fsync", || file.sync_all())
    })();
    written.map_err(|e| Error::io(path, e))?;
    Ok(staged)
}

/// `stage` for output produced piece by piece through a buffered writer.
pub fn stage_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<Staged> {
    stage(path, |file| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        fill(&mut w)?;
        w.flush()
    })
}

/// Stage, rename and fsync the folder: one file replaced atomically.
pub fn commit_one(staged: Staged) -> Result<()> {
    let folder = folder_of(staged.dest());
    staged.commit()?;
    sync_folder(&folder);
    Ok(())
}

/// Length and CRC-32 (IEEE, as zlib and `crc32` compute it) of a file: blocks of
/// `io::BLOCK_BYTES` read and hashed in parallel, their CRCs combined in order.
pub fn file_crc32(path: &Path) -> Result<(u64, u32)> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let block = super::BLOCK_BYTES as u64;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporaries_have_fixed_length_names_that_give_their_pid() {
        let d = tempfile::tempdir().unwrap();
        let (a, _) = create_temporary(d.path()).unwrap();
        let (b, _) = create_temporary(d.path()).unwrap();
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert_eq!(temp_pid(name), Some(std::process::id()));
        // prefix (11) + pid (at most 7 digits) + '-' + 16 hex + ".tmp": at most 39 bytes.
        assert!(name.len() <= 39, "{name}");
        assert_eq!(temp_pid("x.npy.tmp-123"), None);
        assert_eq!(temp_pid(".qcd-solve-12-0123456789abcdef.tmp"), Some(12));
        assert_eq!(temp_pid(".qcd-solve-12-0123.tmp"), None);
    }

    #[test]
    fn a_dropped_stage_leaves_the_target_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("out.json");
        std::fs::write(&target, b"old").unwrap();
        let s = stage_with(&target, |w| w.write_all(b"new")).unwrap();
        assert!(s.temp_path().exists());
        drop(s);
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        commit_one(stage_with(&target, |w| w.write_all(b"new")).unwrap()).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_link_at_the_target_is_replaced_not_written_through() {
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let target = d.path().join("r.json");
        std::os::unix::fs::symlink(&outside, &target).unwrap();
        commit_one(stage_with(&target, |w| w.write_all(b"report")).unwrap()).unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&target).unwrap().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"report");
    }
}
