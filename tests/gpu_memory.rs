//! GPU tests of the device-memory accounting (issue 13, item 3): the backend's books
//! (`backend::ledger`, every allocation by purpose) against the estimate made from the
//! plan before allocating (`app::footprint`), and against the device's own free-memory
//! figure (cuMemGetInfo). Built only with `--features gpu-tests` (Cargo.toml); every test
//! opens the GPU first and fails loudly when there is none (`require_gpu`).
//!
//! Expected values and tolerances:
//! - books vs estimate: equal to the byte, peak and parts (both count the bytes asked of
//!   the allocator, the estimate from the plan, the books from the allocations made);
//! - books vs the free-memory drop: the drop is the books' held bytes, give or take the
//!   allocator's granularity (the stream-ordered pool maps whole 2 MiB pages, and rounds
//!   small allocations up to them) and what the driver adds beside the books (CUDA graphs
//!   of the fused CR, kernel local memory: a warm-up run of the same plan on a small
//!   lattice grows the latter first, and loads every module, so neither appears in the
//!   measured drop). Slack: 64 MiB + 2 MiB per allocation held, about 4% of the 2.8 GB
//!   that 32^3x64 holds at its peak with every option;
//! - the even-odd single-double r12 plan: at most 1500 B/site at the peak, by the estimate
//!   and by the books, and the main job's summary prints it.

use cudarc::driver::CudaContext;
use qcd_solve::app::footprint::{estimate, DevicePlan};
use qcd_solve::app::run::{build_problem, solve_on, Problem, SolvePlan};
use qcd_solve::backend::cuda::{
    device_info, CudaBackend, CudaOptions, Reconstruct, StencilVersion,
};
use qcd_solve::backend::ledger::describe_lines;
use qcd_solve::config::{LoadedConfig, Preconditioning, SolverPrecision};
use qcd_solve::linalg::Precision;
use qcd_solve::solver::{Method, StopReason};
use std::path::PathBuf;

const MIB: u64 = 1 << 20;
/// What the driver may take beside the books' bytes (see the module documentation).
const FIXED_SLACK: u64 = 64 * MIB;
const PER_ALLOCATION_SLACK: u64 = 2 * MIB;

fn require_gpu() {
    match device_info() {
        Ok(info) => eprintln!("GPU: {} (sm_{}{})", info.name, info.cc.0, info.cc.1),
        Err(e) => panic!("the gpu tests need an NVIDIA GPU with its driver and libnvrtc: {e}"),
    }
}

/// A random problem on `dims` for kernel 3.0 (untuned), with extra [solver], [backend]
/// and [output] lines.
fn config_with(dims: [usize; 4], solver: &str, backend: &str, output: &str) -> LoadedConfig {
    let text = format!(
        "[lattice]\nLX = {}\nLY = {}\nLZ = {}\nLT = {}\n[gauge]\ntype = \"random\"\nseed = 5\n\
         [dirac]\nkappa = 0.12\n[source]\ntype = \"random\"\nseed = 6\n\
         [solver]\ntolerance = 1e-10\nmax_iterations = 3000\n{solver}\n\
         [backend]\ndevice = \"cuda\"\nkernel = \"3.0\"\ntune = false\n{backend}\n[output]\n{output}",
        dims[0], dims[1], dims[2], dims[3]
    );
    LoadedConfig::from_str(&text, "test", PathBuf::from(".")).unwrap()
}

fn config(dims: [usize; 4]) -> LoadedConfig {
    config_with(dims, "", "", "")
}

/// (version, r12, method, even-odd, precision) of a plan.
type Case = (StencilVersion, bool, Method, bool, Precision);

fn plan(cfg: &LoadedConfig, case: Case) -> (CudaOptions, SolvePlan) {
    let (version, r12, method, eo, prec) = case;
    let mut c = cfg.config.clone();
    c.solver.method = method;
    c.solver.preconditioning = if eo {
        Preconditioning::EvenOdd
    } else {
        Preconditioning::None
    };
    c.solver.precision = SolverPrecision::of_inner(prec);
    let opts = CudaOptions {
        version,
        reconstruct: if r12 {
            Reconstruct::R12
        } else {
            Reconstruct::R18
        },
        ..CudaOptions::default()
    };
    (opts, SolvePlan::from_config(&c, version.is_fast_path()))
}

/// The config's problem with the method's default operator (as the main job picks it).
fn problem(cfg: &LoadedConfig, plan: &SolvePlan) -> Problem {
    let mut p = build_problem(cfg).unwrap();
    p.operator = plan.method.default_operator();
    p
}

/// Build the backend and solve as the main job does (no tuning).
fn solve(problem: &Problem, opts: &CudaOptions, plan: &SolvePlan) -> CudaBackend {
    let mut be = CudaBackend::new(&problem.gauge, problem.kappa, opts).unwrap();
    let r = solve_on(&mut be, problem, plan).unwrap();
    assert_eq!(r.reason, StopReason::Converged, "{}", plan.describe());
    be
}

#[test]
fn every_plan_books_exactly_what_its_estimate_says() {
    require_gpu();
    let cfg = config([8, 8, 8, 16]);
    use Precision::{Double, Half, Single};
    use StencilVersion::{V1_5, V1_6_1, V2_0, V3_0};
    let cases: Vec<Case> = vec![
        (V3_0, false, Method::Cr, false, Double),
        (V3_0, false, Method::Cr, false, Single),
        (V3_0, false, Method::Cr, true, Double),
        (V3_0, true, Method::Cr, true, Single),
        (V3_0, true, Method::Bicgstab, true, Single),
        (V3_0, true, Method::Bicgstab, false, Double),
        (V3_0, true, Method::Gcr, true, Single),
        (V3_0, true, Method::Cgne, true, Single),
        // Half-double: the generic CR and BiCGStab on half fields (52 B a site) with the
        // single links and the Schur temporary's norms.
        (V3_0, true, Method::Cr, true, Half),
        (V3_0, false, Method::Bicgstab, false, Half),
        (V1_5, false, Method::Cr, false, Double),
        (V1_6_1, false, Method::Cr, false, Double),
        (V2_0, false, Method::Bicgstab, false, Double),
    ];
    let mut failures = Vec::new();
    for case in cases {
        let (opts, plan) = plan(&cfg, case);
        let p = problem(&cfg, &plan);
        let be = solve(&p, &opts, &plan);
        let e = estimate(&DevicePlan::of_run(p.lattice.volume(), &opts, &plan, false));
        let books = be.memory_books();
        let name = format!(
            "{} {}: {}",
            opts.version,
            opts.reconstruct.label(),
            plan.describe()
        );
        eprintln!(
            "{name}: books {} B at the peak ({}), estimate {} B ({})",
            books.peak_bytes,
            describe_lines(&books.at_peak),
            e.peak_bytes(),
            e.peak().name
        );
        if books.peak_bytes != e.peak_bytes() || books.at_peak != e.peak().lines {
            failures.push(format!(
                "{name}: books {:?} vs estimate {:?}",
                books.at_peak,
                e.peak().lines
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_books_match_the_device_free_memory_drop() {
    require_gpu();
    // One context held for the whole test: every backend shares it (the primary context),
    // so cuMemGetInfo before and after measures what they allocate.
    let ctx = CudaContext::new(0).unwrap();
    // The pool keeps freed memory for reuse (`[tuning] pool_keep_mib`): trimmed before each
    // reading, so that the reading counts live allocations only.
    let free = || {
        qcd_solve::backend::cuda::trim_pool(&ctx).unwrap();
        ctx.mem_get_info().unwrap().0 as u64
    };
    let case = (
        StencilVersion::V3_0,
        true,
        Method::Cr,
        true,
        Precision::Single,
    );
    // Warm-up on a small lattice: modules loaded (the process keeps them), local memory
    // of every kernel reserved.
    {
        let cfg = config([8, 8, 8, 8]);
        let (opts, plan) = plan(&cfg, case);
        drop(solve(&problem(&cfg, &plan), &opts, &plan));
    }
    let cfg = config([32, 32, 32, 64]);
    let (opts, plan) = plan(&cfg, case);
    let problem = problem(&cfg, &plan);
    let check = |what: &str, before: u64, after: u64, held: u64, allocations: usize| {
        let drop = before.saturating_sub(after);
        let slack = FIXED_SLACK + PER_ALLOCATION_SLACK * allocations as u64;
        eprintln!(
            "{what}: free memory dropped by {drop} B, the books hold {held} B in {allocations} allocations (slack {slack} B)"
        );
        // Within the slack either way: the pool may also hand back pages it kept from
        // the warm-up (a drop below the books).
        assert!(
            drop + slack >= held && drop <= held + slack,
            "{what}: drop {drop} B, books {held} B, slack {slack} B"
        );
    };
    let before = free();
    let mut be = CudaBackend::new(&problem.gauge, problem.kappa, &opts).unwrap();
    use qcd_solve::backend::prelude::*;
    be.prepare(qcd_solve::app::tuning::plan_layout(&plan), plan.fused)
        .unwrap();
    let books = be.memory_books();
    let count = books.held.iter().map(|l| l.count).sum();
    check(
        "backend and preparation",
        before,
        free(),
        books.held_bytes,
        count,
    );
    let r = solve_on(&mut be, &problem, &plan).unwrap();
    assert_eq!(r.reason, StopReason::Converged);
    let books = be.memory_books();
    let count = books.held.iter().map(|l| l.count).sum();
    check("after the solve", before, free(), books.held_bytes, count);
    // The peak, by the books and by the estimate, per site.
    let e = estimate(&DevicePlan::of_run(
        problem.lattice.volume(),
        &opts,
        &plan,
        false,
    ));
    let v = problem.lattice.volume() as f64;
    eprintln!(
        "32x32x32x64 even-odd single-double r12 CR: books {:.1} B/site at the peak, estimate {:.1} B/site",
        books.peak_bytes as f64 / v,
        e.bytes_per_site()
    );
    assert_eq!(books.peak_bytes, e.peak_bytes());
    assert!(books.peak_bytes as f64 / v <= 1500.0);
    drop(be);
    let after = free();
    assert!(
        before.saturating_sub(after) <= FIXED_SLACK,
        "the backend's memory came back: {} B still missing",
        before.saturating_sub(after)
    );
}

#[test]
fn the_main_job_prints_bytes_per_site_of_even_odd_single_double_r12() {
    require_gpu();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display();
    let cfg = config_with(
        [16, 16, 16, 32],
        "preconditioning = \"even-odd\"\nprecision = \"single-double\"",
        "reconstruct = 12",
        &format!("report = \"{out}/r.json\"\nsolution = \"{out}/x.npy\"\n"),
    );
    let rep = qcd_solve::app::run::run(&cfg).unwrap();
    let summary = qcd_solve::report::summary(&rep);
    eprintln!("{summary}");
    let m = rep.gpu.as_ref().unwrap().memory.as_ref().unwrap();
    assert!(m.estimate_bytes_per_site <= 1500.0, "{m:?}");
    assert_eq!(m.peak_bytes, m.estimate_bytes, "{m:?}");
    assert!(summary.contains("device memory"), "{summary}");
    assert!(summary.contains("B/site"), "{summary}");
}
