//! `qcd-solve bench`: the CPU backend's (vectorised) operator's time per site and its
//! bandwidth against the DRAM floor (960 bytes/site in double), the scalar operator's for
//! comparison, and a triad a = b + s c over the same number of bytes measured in the same
//! run, interleaved with the operators. The ratio is the figure of merit (target >= 0.5).

use crate::dirac::simd::layout::{LaneGauge, LaneSpinor};
use crate::dirac::simd::Isa;
use crate::dirac::{self, simd};
use crate::error::Result;
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use crate::linalg::Operator;
use crate::report::dslash_floor_bytes_per_site;
use rayon::prelude::*;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Arrays for a triad a = b + s c over `n` doubles, counting 3 * 8 * n bytes (two reads,
/// one write).
struct Triad {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Triad {
    fn new(n: usize) -> Triad {
        Triad {
            a: vec![0.0; n],
            b: vec![1.0; n],
            c: vec![2.0; n],
        }
    }

    /// Seconds of one pass.
    fn run(&mut self) -> f64 {
        let s = 0.5;
        let t = Instant::now();
        self.a
            .par_chunks_mut(8192)
            .zip(self.b.par_chunks(8192).zip(self.c.par_chunks(8192)))
            .for_each(|(a, (b, c))| {
                for i in 0..a.len() {
                    a[i] = b[i] + s * c[i];
                }
            });
        let dt = t.elapsed().as_secs_f64();
        std::hint::black_box(&self.a);
        dt
    }
}

/// Seconds of one triad pass over arrays of `n` doubles (median of `repeat`).
pub fn triad_seconds(n: usize, repeat: usize) -> f64 {
    let mut t = Triad::new(n);
    let mut times: Vec<f64> = (0..repeat + 1).map(|_| t.run()).collect();
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

/// Seconds of one call.
fn time(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// Time the fused Wilson operator on a random field: the blocked vectorised one the CPU
/// backend runs (layouts converted once, outside the timing), the scalar one, and a triad
/// over the same bytes. The three alternate within each of `repeat` rounds (after one
/// warm-up round) and each reports its median, so that load from other processes, which
/// comes and goes on a shared machine, falls on all three alike.
pub fn measure(dims: [usize; 4], repeat: usize) -> Result<CpuBenchResult> {
    let l = Lattice::new(dims, DEFAULT_BOUNDARY)?;
    let v = l.volume();
    let g = GaugeField::random(&l, 1);
    let psi = SpinorField::random(v, 2, 0);
    let mut out = SpinorField::zeros(v);
    let lg = LaneGauge::new(&g);
    let lpsi = LaneSpinor::from_canonical(&psi);
    let mut lout = LaneSpinor::zeros(v);
    let floor_bytes = (v as u64 * dslash_floor_bytes_per_site(18, 8)) as f64;
    let mut triad = Triad::new((floor_bytes / 24.0) as usize);
    let (mut dslash, mut scalar, mut tri) = (vec![], vec![], vec![]);
    for _ in 0..repeat + 1 {
        dslash.push(time(|| {
            simd::apply_lanes(Operator::D, &g, lg.as_ref(), 0.12, &lpsi, &mut lout);
        }));
        std::hint::black_box(&lout);
        scalar.push(time(|| dirac::apply(Operator::D, &g, 0.12, &psi, &mut out)));
        std::hint::black_box(&out);
        tri.push(triad.run());
    }
    let warm_median = |mut t: Vec<f64>| {
        t.remove(0);
        median(t)
    };
    Ok(CpuBenchResult {
        volume: v,
        dslash_seconds: warm_median(dslash),
        scalar_seconds: warm_median(scalar),
        triad_seconds: warm_median(tri),
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
    crate::threads::check(threads, "--threads")?;
    let lattice = Lattice::new(dims, DEFAULT_BOUNDARY)?;
    crate::app::memory::check_host(&crate::app::memory::bench_need(
        &lattice.dims_string(),
        lattice.volume() as u64,
    ))?;
    let pool = crate::app::run::thread_pool(threads)?;
    let r = pool.install(|| measure(dims, repeat.max(1)))?;
    let gb = |s: f64| r.floor_bytes / s / 1e9;
    let ns = |s: f64| 1e9 * s / r.volume as f64;
    let gflops = |s: f64| 1320.0 * r.volume as f64 / s / 1e9;
    println!(
        "CPU operator benchmark, {}x{}x{}x{} ({} sites), {}, median of {repeat}",
        dims[0],
        dims[1],
        dims[2],
        dims[3],
        r.volume,
        crate::threads::count(pool.current_num_threads())
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
