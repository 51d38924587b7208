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

/// The variable through which rayon takes a thread count when none is given.
pub const RAYON_ENV: &str = "RAYON_NUM_THREADS";

/// Check `RAYON_NUM_THREADS` (when set) against the same bound as `--threads`: rayon
/// reads it for every pool built without a count, so it would bypass the cap. A value
/// that is not a number is refused too (rayon would ignore it silently).
pub fn check_env() -> Result<()> {
    match std::env::var(RAYON_ENV) {
        Ok(v) => {
            let n: i64 = v.trim().parse().map_err(|_| {
                Error::invalid(RAYON_ENV, format!("must be a thread count, got \"{v}\""))
            })?;
            check(n, RAYON_ENV).map(|_| ())
        }
        Err(std::env::VarError::NotPresent) => Ok(()),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid(
            RAYON_ENV,
            "must be a thread count, got bytes that are not text",
        )),
    }
}

/// "1 thread", "4 threads".
pub fn count(n: usize) -> String {
    plural(n, "thread", "threads")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Elements per task of `par_copy` at least (512 KiB of f64).
pub const COPY_BLOCK: usize = 1 << 16;

/// Items per task when `n` items are shared among the pool's threads: two tasks per thread
/// of equal size (so that no thread is left with a short last wave), but at least
/// `min_task` items a task.
pub fn task_size(n: usize, min_task: usize) -> usize {
    let tasks = 2 * rayon::current_num_threads().max(1);
    n.div_ceil(tasks).max(min_task).max(1)
}

/// `dst.copy_from_slice(src)` in parallel, two equal tasks per thread of at least
/// `COPY_BLOCK` elements (`task_size`): large host copies (field clones, staging buffers)
/// are not left to one thread.
pub fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    use rayon::prelude::*;
    assert_eq!(dst.len(), src.len(), "par_copy lengths");
    let task = task_size(dst.len(), COPY_BLOCK);
    dst.par_chunks_mut(task)
        .zip(src.par_chunks(task))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// How a host copy into a staging buffer stores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stores {
    /// Stores that bypass the caches (x86-64: SSE2 non-temporal stores, where the
    /// destination's rows are 16-byte aligned; elsewhere cached). A cached store first
    /// reads the line it writes (read for ownership), so a staged byte crosses the host's
    /// memory bus four times (source read, line read, write, the copy engine's read)
    /// instead of three: the buffers the GPU's copy engine reads next need no cached copy.
    #[default]
    Streaming,
    /// Ordinary stores.
    Cached,
}

/// Rows of `width` f64 taken every `pitch` f64 of `src` (`pitch >= width`), written back
/// to back into `dst` (a whole number of rows), with `stores`. Streaming stores are fenced
/// before return, so a transfer queued after this call (after a join, for the parallel
/// callers) reads them.
pub fn copy_rows(dst: &mut [f64], src: &[f64], width: usize, pitch: usize, stores: Stores) {
    assert!(width > 0 && pitch >= width, "copy_rows shape");
    let rows = dst.len() / width;
    assert_eq!(rows * width, dst.len(), "copy_rows: whole rows");
    assert!(
        rows == 0 || src.len() >= (rows - 1) * pitch + width,
        "copy_rows: source too short"
    );
    #[cfg(target_arch = "x86_64")]
    if stores == Stores::Streaming
        && width.is_multiple_of(2)
        && (dst.as_ptr() as usize).is_multiple_of(16)
    {
        use std::arch::x86_64::{_mm_loadu_pd, _mm_sfence, _mm_stream_pd};
        let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
        // SAFETY: SSE2 is part of x86-64. Row r writes d[r width .. (r + 1) width] (inside
        // dst: rows * width = len) and reads s[r pitch .. r pitch + width] (inside src: the
        // assertion above); the stores are 16-byte aligned (d is, and every store starts
        // an even number of f64 after it, width being even); the loads need no alignment.
        unsafe {
            for r in 0..rows {
                let (dr, sr) = (d.add(r * width), s.add(r * pitch));
                for j in (0..width).step_by(2) {
                    _mm_stream_pd(dr.add(j), _mm_loadu_pd(sr.add(j)));
                }
            }
            _mm_sfence();
        }
        return;
    }
    if width == pitch {
        dst.copy_from_slice(&src[..dst.len()]);
        return;
    }
    for (d, s) in dst.chunks_exact_mut(width).zip(src.chunks(pitch)) {
        d.copy_from_slice(&s[..width]);
    }
}

/// `copy_rows` in parallel: two equal tasks per thread of at least `min_rows` rows
/// (`task_size`).
pub fn par_copy_rows(
    dst: &mut [f64],
    src: &[f64],
    width: usize,
    pitch: usize,
    stores: Stores,
    min_rows: usize,
) {
    use rayon::prelude::*;
    let rows = dst.len() / width.max(1);
    let task = task_size(rows, min_rows);
    dst.par_chunks_mut(width * task)
        .zip(src.par_chunks(pitch * task))
        .for_each(|(d, s)| copy_rows(d, s, width, pitch, stores));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_even_shares_of_at_least_the_minimum() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        pool.install(|| {
            // 8 tasks on 4 threads: 1000 items in 8 tasks of 125.
            assert_eq!(task_size(1000, 1), 125);
            assert_eq!(task_size(1001, 1), 126);
            assert_eq!(task_size(1000, 300), 300);
            assert_eq!(task_size(0, 0), 1);
            let src: Vec<u32> = (0..100_003).collect();
            let mut dst = vec![0; src.len()];
            par_copy(&mut dst, &src);
            assert_eq!(dst, src);
        });
    }

    #[test]
    fn row_copies_are_copies_with_either_stores_at_any_alignment() {
        // Rows of 12 of every 18 (r12's rows 0 and 1 of a link), and whole rows; the
        // destination at an odd f64 offset (not 16-byte aligned: the cached fallback).
        let src: Vec<f64> = (0..18 * 101).map(|i| i as f64 * 0.5 - 7.0).collect();
        for stores in [Stores::Streaming, Stores::Cached] {
            for (width, pitch) in [(12, 18), (18, 18), (3, 18)] {
                for offset in 0..2 {
                    for rows in [0, 1, 2, 101] {
                        let want: Vec<f64> = (0..rows)
                            .flat_map(|r| src[r * pitch..r * pitch + width].iter().copied())
                            .collect();
                        let mut dst = vec![f64::NAN; 18 * 101 + 2];
                        let d = &mut dst[offset..offset + rows * width];
                        copy_rows(d, &src, width, pitch, stores);
                        assert_eq!(d, &want[..], "{stores:?} {width}/{pitch} {offset} {rows}");
                        let mut p = vec![0.0; rows * width];
                        par_copy_rows(&mut p, &src, width, pitch, stores, 1);
                        assert_eq!(p, want);
                    }
                }
            }
        }
        assert!(dst_untouched_after_rows());
    }

    /// Nothing past the rows is written.
    fn dst_untouched_after_rows() -> bool {
        let src = vec![1.0; 36];
        let mut dst = vec![f64::NAN; 30];
        copy_rows(&mut dst[..24], &src, 12, 18, Stores::Streaming);
        dst[24..].iter().all(|v| v.is_nan())
    }

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
