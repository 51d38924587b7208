//! CPU thread counts: the cap on what may be asked for, and how counts are printed.
//!
//! A count above `MAX_PER_CORE` times the cores this process may use
//! (`std::thread::available_parallelism`) is refused: more threads than that only spin
//! and compete (a request of 100000 once started 1,400 spinning threads for two minutes
//! before failing).

use crate::error::{Error, Result};

/// The most threads asked for per available core.
pub const MAX_PER_CORE: usize = 4;

/// Cores this process may use (1 when unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The largest thread count accepted: `MAX_PER_CORE` x cores.
pub fn max_threads() -> usize {
    MAX_PER_CORE * cores()
}

/// Check a requested count (0 = all cores) named by `name` (a config key or a flag);
/// returns it as a count for rayon.
pub fn check(requested: i64, name: &str) -> Result<usize> {
    let max = max_threads();
    if requested < 0 {
        return Err(Error::invalid(
            name,
            format!("must be 0 (all cores) or more, got {requested}"),
        ));
    }
    if requested as u64 > max as u64 {
        return Err(Error::invalid(
            name,
            format!(
                "{} is more than {MAX_PER_CORE} x the {} this process may use: at most {max}",
                count(requested as usize),
                plural(cores(), "core", "cores")
            ),
        ));
    }
    Ok(requested as usize)
}

/// "1 thread", "4 threads".
pub fn count(n: usize) -> String {
    plural(n, "thread", "threads")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Elements per task of `par_copy` (512 KiB of f64).
pub const COPY_BLOCK: usize = 1 << 16;

/// `dst.copy_from_slice(src)` in parallel blocks of `COPY_BLOCK` elements: large host
/// copies (field clones, staging buffers) are not left to one thread.
pub fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    use rayon::prelude::*;
    assert_eq!(dst.len(), src.len(), "par_copy lengths");
    dst.par_chunks_mut(COPY_BLOCK)
        .zip(src.par_chunks(COPY_BLOCK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(count(1), "1 thread");
        assert_eq!(count(2), "2 threads");
        assert_eq!(count(0), "0 threads");
    }

    #[test]
    fn the_cap_is_four_times_the_cores() {
        let max = max_threads();
        assert_eq!(max, 4 * cores());
        assert_eq!(check(max as i64, "t").unwrap(), max);
        assert_eq!(check(0, "t").unwrap(), 0);
        match check(max as i64 + 1, "--threads") {
            Err(Error::InvalidValue { key, message }) => {
                assert_eq!(key, "--threads");
                assert!(message.contains(&format!("at most {max}")), "{message}");
            }
            other => panic!("expected InvalidValue, got {other:?}"),
        }
        assert!(check(-1, "t").is_err());
    }
}
