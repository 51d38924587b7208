//! `qcd-solve bench`: the CPU backend's (vectorised) operator's time per site and its
//! bandwidth against the DRAM floor (960 bytes/site in double), the scalar operator's for
//! comparison, and a triad a = b + s c over the same number of bytes measured in the same
//! run. The ratio is the figure of merit (target >= 0.5).

use crate::backend::Operator;
use crate::dirac::simd::{Isa, LaneGauge, LaneSpinor};
use crate::dirac::{self, simd};
use crate::error::Result;
use crate::field::{GaugeField, SpinorField};
use crate::lattice::{Lattice, DEFAULT_BOUNDARY};
use crate::report::dslash_floor_bytes_per_site;
use rayon::prelude::*;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds of one triad pass over arrays of `n` doubles (median of `repeat`), counting
/// 3 * 8 * n bytes (two reads, one write).
pub fn triad_seconds(n: usize, repeat: usize) -> f64 {
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let mut a = vec![0.0f64; n];
    let s = 0.5;
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat + 1 {
        let t = Instant::now();
        a.par_chunks_mut(8192)
            .zip(b.par_chunks(8192).zip(c.par_chunks(8192)))
            .for_each(|(a, (b, c))| {
                for i in 0..a.len() {
                    a[i] = b[i] + s * c[i];
                }
            });
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&a);
    }
    times.remove(0);
    median(times)
}

pub struct CpuBenchResult {
    pub volume: usize,
    /// The CPU backend's operator (vectorised when LX % 4 == 0, see `isa`).
    pub dslash_seconds: f64,
    /// The scalar AoS operator (`dirac::fast`) on the same fields.
    pub scalar_seconds: f64,
    pub triad_seconds: f64,
    pub floor_bytes: f64,
    /// The instruction set of the vectorised kernel, None when it falls back to scalar.
    pub isa: Option<Isa>,
}

impl CpuBenchResult {
    pub fn ratio(&self) -> f64 {
        self.triad_seconds / self.dslash_seconds
    }
}

/// Median of `repeat` timed calls after one warm-up call.
fn time_median(repeat: usize, mut f: impl FnMut()) -> f64 {
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat + 1 {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
    }
    times.remove(0);
    median(times)
}

/// Time the fused Wilson operator on a random field (median of `repeat`): the blocked
/// vectorised one the CPU backend runs (layouts converted once, outside the timing) and
/// the scalar one, then a triad over the same bytes.
pub fn measure(dims: [usize; 4], repeat: usize) -> Result<CpuBenchResult> {
    let l = Lattice::new(dims, DEFAULT_BOUNDARY)?;
    let v = l.volume();
    let g = GaugeField::random(&l, 1);
    let psi = SpinorField::random(v, 2, 0);
    let mut out = SpinorField::zeros(v);
    let lg = LaneGauge::new(&g);
    let lpsi = LaneSpinor::from_canonical(&psi);
    let mut lout = LaneSpinor::zeros(v);
    let dslash = time_median(repeat, || {
        simd::apply_lanes(Operator::D, &g, lg.as_ref(), 0.12, &lpsi, &mut lout);
        std::hint::black_box(&lout);
    });
    let scalar = time_median(repeat, || {
        dirac::apply(Operator::D, &g, 0.12, &psi, &mut out);
        std::hint::black_box(&out);
    });
    let floor_bytes = (v as u64 * dslash_floor_bytes_per_site(18, 8)) as f64;
    let triad = triad_seconds((floor_bytes / 24.0) as usize, repeat);
    Ok(CpuBenchResult {
        volume: v,
        dslash_seconds: dslash,
        scalar_seconds: scalar,
        triad_seconds: triad,
        floor_bytes,
        isa: lg.map(|_| Isa::detect()),
    })
}

pub fn cpu_bench(dims: &[usize], repeat: usize, threads: i64) -> Result<()> {
    let dims: [usize; 4] = dims.try_into().map_err(|_| {
        crate::Error::invalid(
            "--dims",
            format!("needs 4 values LX,LY,LZ,LT, got {dims:?}"),
        )
    })?;
    let pool = crate::run::thread_pool(threads)?;
    let r = pool.install(|| measure(dims, repeat.max(1)))?;
    let gb = |s: f64| r.floor_bytes / s / 1e9;
    let ns = |s: f64| 1e9 * s / r.volume as f64;
    let gflops = |s: f64| 1320.0 * r.volume as f64 / s / 1e9;
    println!(
        "CPU operator benchmark, {}x{}x{}x{} ({} sites), {} threads, median of {repeat}",
        dims[0],
        dims[1],
        dims[2],
        dims[3],
        r.volume,
        pool.current_num_threads()
    );
    let kernel = match r.isa {
        Some(isa) => format!("blocked {}", isa.name()),
        None => "scalar fallback, LX % 4 != 0".to_string(),
    };
    println!(
        "  dslash (fused D, double, {kernel}): {:8.2} ns/site  {:7.2} GB/s at the 960 B/site floor  {:6.2} GFLOP/s (1320 model)",
        ns(r.dslash_seconds),
        gb(r.dslash_seconds),
        gflops(r.dslash_seconds)
    );
    println!(
        "  scalar dslash (AoS, dirac::fast):  {:8.2} ns/site  {:7.2} GB/s at the 960 B/site floor  {:6.2} GFLOP/s (1320 model)",
        ns(r.scalar_seconds),
        gb(r.scalar_seconds),
        gflops(r.scalar_seconds)
    );
    println!(
        "  triad over the same bytes: {:7.2} GB/s",
        gb(r.triad_seconds)
    );
    println!(
        "  dslash / triad bandwidth: {:.2} (target >= 0.5)",
        r.ratio()
    );
    Ok(())
}
