//! The CUDA backend's device check, calling the library directly (no CLI needed):
//!
//!   cuda_check compile [ARCH]   compile every kernel program with NVRTC (no GPU; default sm_90)
//!   cuda_check validate         every version against the CPU on 16x16x16x32, 6x6x6x10
//!                               and 12x12x12x24 (operator, CR history, true residual)
//!   cuda_check bench            triad bandwidth, then one 16x16x16x32 CR solve per version
//!   cuda_check sizes            cold NVRTC/JIT timings, then every version on 24^3x48 and 32^3x64
//!   cuda_check all              validate, then bench; short tables last
//!
//! Bench figures per version (CR on g5 D, 143 iterations as in the seed): wall time per
//! CR iteration; for the operator's kernels
//! (event-timed), GFLOP/s by the 1320 flops/site model and by the version's own executed
//! count, effective GB/s by the conventions.md model (2880 bytes/site, double, 18 reals
//! per link) and by the version's own byte count, and the model bandwidth as a fraction
//! of the triad measured in the same run.

use qcd_solve::backend::{Backend, Operator};
use qcd_solve::cuda::{
    compile_all_kernels, device_info, format_table, triad_bandwidth, validate, CudaBackend,
    CudaOptions, KernelStat, StencilVersion, ValidateRow,
};
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::lattice::{Lattice, DEFAULT_BOUNDARY};
use qcd_solve::solver::{conjugate_residual, CrParams};
use qcd_solve::Result;
use std::process::ExitCode;
use std::time::Instant;

const KAPPA: f64 = 0.12;
const TOL: f64 = 1e-10;
const MAX_ITER: usize = 2000;
const SEED: u64 = 2024;
const MULTIPLE: usize = 16;
/// CR iterations of the bench solve (the seed's count on 16x16x16x32).
const BENCH_ITER: usize = 143;
/// QUDA-style model (conventions.md): hop term flops and effective bytes per site.
const MODEL_FLOPS: f64 = 1320.0;
const MODEL_BYTES: f64 = 2880.0;
const FLOOR_BYTES: f64 = 960.0;

fn lattice(dims: [usize; 4]) -> Lattice {
    Lattice::new(dims, DEFAULT_BOUNDARY).expect("lattice")
}

fn run_validate() -> Result<(Vec<ValidateRow>, String)> {
    let mut rows = Vec::new();
    let mut text = String::new();
    // CR needs the Hermitian g5 D: on D itself the seed's CR stagnates on random gauge
    // fields (CPU and GPU alike); the operator D is checked by tests/gpu.rs.
    let sets: [([usize; 4], Operator); 3] = [
        ([16, 16, 16, 32], Operator::G5D),
        ([6, 6, 6, 10], Operator::G5D),
        ([12, 12, 12, 24], Operator::G5D),
    ];
    for (dims, op) in sets {
        let l = lattice(dims);
        let t = Instant::now();
        let r = validate(
            &l,
            KAPPA,
            TOL,
            MAX_ITER,
            op,
            StencilVersion::all(),
            MULTIPLE,
            SEED,
        )?;
        let table = format_table(&r);
        let head = format!(
            "validate {} op {op} kappa {KAPPA} tol {TOL:e} multiple {MULTIPLE} ({:.1} s)\n",
            l.dims_string(),
            t.elapsed().as_secs_f64()
        );
        println!("{head}{table}");
        text.push_str(&head);
        text.push_str(&table);
        rows.extend(r);
    }
    Ok((rows, text))
}

struct BenchRow {
    version: StencilVersion,
    multiple: usize,
    iterations: usize,
    ms_per_iter: f64,
    stencil: KernelStat,
    applications: u64,
    stencil_share: f64,
    setup: String,
}

fn bench_one(
    gauge: &GaugeField,
    b: &SpinorField,
    version: StencilVersion,
    multiple: usize,
) -> Result<(BenchRow, Vec<KernelStat>)> {
    let opts = CudaOptions {
        version,
        multiple,
        device: 0,
    };
    let mut gpu = CudaBackend::new(gauge, KAPPA, &opts)?;
    let s = gpu.setup_times().clone();
    let setup = format!(
        "{:.0}/{:.1}/{:.1}/{:.1}",
        s.compile_ms, s.alloc_ms, s.upload_ms, s.layout_ms
    );
    let db = gpu.upload(b)?;
    let mut tmp = gpu.alloc()?;
    for _ in 0..3 {
        gpu.apply(Operator::G5D, &mut tmp, &db)?; // warm-up
    }
    gpu.synchronize()?;
    gpu.reset_stats()?;
    let t = Instant::now();
    // The seed's 143 iterations, whatever the residual (tol 0).
    let out = conjugate_residual(
        &mut gpu,
        Operator::G5D,
        &db,
        &CrParams::new(0.0, BENCH_ITER),
    )?;
    gpu.synchronize()?;
    let wall = t.elapsed().as_secs_f64() * 1e3;
    let stats = gpu.kernel_stats();
    let total_ms: f64 = stats.iter().map(|k| k.millis).sum();
    let stencil = gpu.stencil_stats();
    Ok((
        BenchRow {
            version,
            multiple,
            iterations: out.iterations,
            ms_per_iter: wall / out.iterations.max(1) as f64,
            stencil_share: stencil.millis / total_ms,
            applications: gpu.applications(),
            stencil,
            setup,
        },
        stats,
    ))
}

fn bench_table(rows: &[BenchRow], volume: f64, triad: f64) -> String {
    let mut s = format!(
        "{:<6} {:>4} {:>5} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6}  {}\n",
        "ver",
        "mult",
        "iters",
        "ms/iter",
        "us/apply",
        "GF(1320)",
        "GF(own)",
        "GB(2880)",
        "GB(own)",
        "GB(960)",
        "triad%",
        "sten%",
        "setup ms compile/alloc/upload/layout"
    );
    for r in rows {
        let apps = r.applications as f64;
        let sec = r.stencil.millis * 1e-3;
        let model_gb = MODEL_BYTES * volume * apps / sec / 1e9;
        s.push_str(&format!(
            "{:<6} {:>4} {:>5} {:>8.3} {:>9.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>6.1} {:>6.1}  {}\n",
            r.version.to_string(),
            r.multiple,
            r.iterations,
            r.ms_per_iter,
            r.stencil.millis * 1e3 / apps,
            MODEL_FLOPS * volume * apps / sec / 1e9,
            r.stencil.gflops(),
            model_gb,
            r.stencil.gbytes_per_s(),
            FLOOR_BYTES * volume * apps / sec / 1e9,
            100.0 * model_gb / triad,
            100.0 * r.stencil_share,
            r.setup
        ));
    }
    s
}

fn kernel_table(title: &str, stats: &[KernelStat]) -> String {
    let total: f64 = stats.iter().map(|k| k.millis).sum();
    let mut s = format!(
        "{title}\n{:<22} {:>8} {:>10} {:>6} {:>9} {:>9}\n",
        "kernel", "launches", "ms", "%", "GFLOP/s", "GB/s"
    );
    for k in stats {
        s.push_str(&format!(
            "{:<22} {:>8} {:>10.3} {:>6.1} {:>9.1} {:>9.1}\n",
            k.name,
            k.launches,
            k.millis,
            100.0 * k.millis / total,
            k.gflops(),
            k.gbytes_per_s()
        ));
    }
    s
}

/// The bench of call 1: every version at multiple 16 on 16x16x16x32, a multiple sweep,
/// and the kernel breakdown of 1.2 and 2.0.
fn run_bench() -> Result<String> {
    let mut runs: Vec<(StencilVersion, usize)> = StencilVersion::all()
        .iter()
        .map(|&v| (v, MULTIPLE))
        .collect();
    for v in [
        StencilVersion::V1_2,
        StencilVersion::V1_5,
        StencilVersion::V1_6_1,
        StencilVersion::V2_0,
    ] {
        for m in [8, 32, 64] {
            runs.push((v, m));
        }
    }
    runs.push((StencilVersion::V1_6, 24));
    bench_lattice([16, 16, 16, 32], &runs, true)
}

/// Every version at multiple 16 on larger lattices (the seed's 24^3x48, and 32^3x64).
fn run_sizes() -> Result<String> {
    let runs: Vec<(StencilVersion, usize)> = StencilVersion::all()
        .iter()
        .map(|&v| (v, MULTIPLE))
        .collect();
    let mut s = bench_lattice([24, 24, 24, 48], &runs, false)?;
    s.push_str(&bench_lattice([32, 32, 32, 64], &runs, false)?);
    Ok(s)
}

/// Cold NVRTC compilation of every program for the device, then the module load (PTX
/// JIT) of each version's kernels, as a first CudaBackend::new sees them.
fn run_compile_timing() -> Result<String> {
    let info = device_info()?;
    let arch = format!("sm_{}{}", info.cc.0, info.cc.1);
    let t = Instant::now();
    let programs = compile_all_kernels(&arch)?;
    let mut s = format!(
        "NVRTC, cold: {} programs for {arch} in {:.0} ms\nmodule load (JIT) + set-up on 4x4x4x4, ms compile/alloc/upload/layout:",
        programs.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let l = lattice([4, 4, 4, 4]);
    let gauge = GaugeField::random(&l, 1);
    for &version in StencilVersion::all() {
        let opts = CudaOptions {
            version,
            multiple: MULTIPLE,
            device: 0,
        };
        let gpu = CudaBackend::new(&gauge, KAPPA, &opts)?;
        let t = gpu.setup_times();
        s.push_str(&format!(
            " {version}: {:.0}/{:.1}/{:.1}/{:.1};",
            t.compile_ms, t.alloc_ms, t.upload_ms, t.layout_ms
        ));
    }
    s.push('\n');
    Ok(s)
}

fn bench_lattice(
    dims: [usize; 4],
    runs: &[(StencilVersion, usize)],
    traces: bool,
) -> Result<String> {
    let triad = triad_bandwidth(3 << 29)?;
    let l = lattice(dims);
    let volume = l.volume() as f64;
    let gauge = GaugeField::random(&l, SEED);
    let b = SpinorField::random(l.volume(), SEED, 2 << 40);
    let mut rows = Vec::new();
    let mut trace_text = String::new();
    for &(v, m) in runs {
        match bench_one(&gauge, &b, v, m) {
            Ok((row, stats)) => {
                if traces
                    && m == MULTIPLE
                    && matches!(v, StencilVersion::V1_2 | StencilVersion::V2_0)
                {
                    trace_text.push_str(&kernel_table(
                        &format!("kernels of one CR solve, version {v} (cf. the seed's traces, figures 9 and 10)"),
                        &stats,
                    ));
                }
                rows.push(row);
            }
            Err(e) => println!("bench {} {v} multiple {m}: {e}", l.dims_string()),
        }
    }
    let head = format!(
        "bench {} g5D kappa {KAPPA}, {BENCH_ITER} CR iterations: triad {triad:.1} GB/s (a = b + s c, 1.5 GiB, read+write)\n",
        l.dims_string()
    );
    Ok(format!(
        "{trace_text}{head}{}",
        bench_table(&rows, volume, triad)
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let cmd = args.get(1).map(String::as_str).unwrap_or("all");
    let result = (|| -> Result<bool> {
        match cmd {
            "compile" => {
                let arch = args.get(2).map(String::as_str).unwrap_or("sm_90");
                for (name, bytes) in compile_all_kernels(arch)? {
                    println!("{arch} {name}: {bytes} bytes of PTX");
                }
                Ok(true)
            }
            "validate" | "bench" | "sizes" | "all" => {
                let info = device_info()?;
                println!(
                    "device: {} sm_{}{} {} SMs, {:.1} GiB ({:.1} free)",
                    info.name,
                    info.cc.0,
                    info.cc.1,
                    info.sm_count,
                    info.total_mem as f64 / (1u64 << 30) as f64,
                    info.free_mem as f64 / (1u64 << 30) as f64
                );
                let mut ok = true;
                let mut summary = String::new();
                if cmd == "sizes" {
                    summary.push_str(&run_compile_timing()?);
                    summary.push_str(&run_sizes()?);
                }
                if cmd == "validate" || cmd == "all" {
                    let (rows, text) = run_validate()?;
                    let passed = rows.iter().filter(|r| r.pass).count();
                    ok &= passed == rows.len();
                    summary.push_str(&text);
                    summary.push_str(&format!("validate: {passed}/{} rows pass\n", rows.len()));
                }
                if cmd == "bench" || cmd == "all" {
                    summary.push_str(&run_bench()?);
                }
                println!("==== summary ====\n{summary}");
                Ok(ok)
            }
            _ => {
                eprintln!("usage: cuda_check compile [ARCH] | validate | bench | sizes | all");
                Ok(false)
            }
        }
    })();
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
