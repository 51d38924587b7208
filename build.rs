//! Build script: records the git commit the program is built from and whether the work
//! tree differed from it, for the report's `build` (docs/report.md). Without git or a
//! `.git` (a crates tarball, an exported tree) both read "unknown".
//!
//! Sets `QCD_SOLVE_GIT_COMMIT` (`git rev-parse --short HEAD`) and `QCD_SOLVE_GIT_DIRTY`
//! ("true", "false" or "unknown": tracked files changed against HEAD).

use std::path::{Path, PathBuf};
use std::process::Command;

/// One git command's trimmed stdout, `None` when git is absent or fails.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The files whose change moves HEAD or the tree's state: HEAD, the branch's ref (loose or
/// packed) and the index, in the repository's own git folder (a worktree has its own
/// HEAD and index and shares the refs).
fn watched_git_files() -> Vec<PathBuf> {
    let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) else {
        return Vec::new();
    };
    let (git_dir, common) = (PathBuf::from(git_dir), PathBuf::from(common));
    let mut files = vec![git_dir.join("HEAD"), git_dir.join("index")];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        files.push(common.join(r));
    }
    files.push(common.join("packed-refs"));
    files
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let in_repo = root.join(".git").exists();
    let commit = in_repo
        .then(|| git(&["rev-parse", "--short", "HEAD"]))
        .flatten()
        .filter(|c| !c.is_empty());
    let dirty = commit
        .as_ref()
        .and_then(|_| git(&["status", "--porcelain", "--untracked-files=no"]))
        .map(|s| (!s.is_empty()).to_string());
    println!(
        "cargo:rustc-env=QCD_SOLVE_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!(
        "cargo:rustc-env=QCD_SOLVE_GIT_DIRTY={}",
        dirty.as_deref().unwrap_or("unknown")
    );
    // Rerun when HEAD or its ref moves, when the index changes, and when a tracked
    // source changes (the tree becomes dirty); cargo watches a folder's files.
    if in_repo {
        for f in watched_git_files() {
            if f.exists() || f.ends_with("HEAD") {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
    }
    for p in ["src", "kernels", "configs", "Cargo.toml", "build.rs"] {
        if Path::new(&root.join(p)).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
