//! Deterministic parallel sums: the input is cut into fixed-size chunks whatever the
//! thread count, each chunk is summed in order, and the chunk sums are added in order.
//! The result is therefore bitwise the same for 1, 2 or 64 threads.

use rayon::prelude::*;

/// Elements per chunk; fixed so that the summation tree never depends on the thread count.
pub const CHUNK: usize = 4096;

pub fn det_sum<T: Sync, F: Fn(&T) -> f64 + Sync>(items: &[T], f: F) -> f64 {
    let partial: Vec<f64> = items
        .par_chunks(CHUNK)
        .map(|c| c.iter().map(&f).sum::<f64>())
        .collect();
    partial.iter().sum()
}

/// Sum of f(a_k, b_k) over paired slices, same chunking.
pub fn det_sum2<A: Sync, B: Sync, R, F>(a: &[A], b: &[B], zero: R, f: F) -> R
where
    R: Send + Sync + Copy + std::ops::Add<Output = R>,
    F: Fn(&A, &B) -> R + Sync,
{
    assert_eq!(a.len(), b.len());
    let partial: Vec<R> = a
        .par_chunks(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .map(|(ca, cb)| ca.iter().zip(cb).fold(zero, |s, (x, y)| s + f(x, y)))
        .collect();
    partial.iter().fold(zero, |s, &p| s + p)
}
