//! Launch geometry for the CUDA stencils, tuned on the live backend: the stencil knows its
//! candidates (`CudaBackend::tune_candidates`), its tune-cache kernel name and its flop
//! and byte counts; the tuner sets each candidate on the backend that will solve
//! (`CudaBackend::set_geometry`: no new backend, no gauge re-upload), times the operator on
//! a field uploaded once, and keeps the fastest in the tune cache
//! (`crate::backend::cuda::core::tune`), keyed by device, compute capability, driver, kernel,
//! dims, precision, program version and kernel-source hash. The tuning's wall time is
//! logged next to the set-up's and kept in `SetupTimes::tune_ms`.

use crate::backend::cuda::core::tune::{self, TuneCache, TuneKey};
use crate::backend::cuda::{CudaBackend, CudaOptions, Geometry, StencilVersion};
use crate::backend::prelude::*;
use crate::backend::{Layout, Operator, Subset};
use crate::error::Result;
use crate::problem::Problem;
use std::time::Instant;

/// Whether to use and fill the tune cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TuneMode {
    /// Use cached launch geometry; sweep and store when missing.
    Tune,
    /// Use the config's `multiple` for every version.
    NoTune,
}

pub(crate) fn median_spread(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let m = v[v.len() / 2];
    (m, v[v.len() - 1] - v[0])
}

/// Timed blocks per candidate; the median block is kept.
const BLOCKS: usize = 3;
/// Applications per timed block at most (small lattices, where one application takes
/// microseconds and launch jitter matters).
const MAX_REPS: usize = 10;
// A timed block (after `reset_stats`) of kernels launched once an application (every
// version but 2.0; the Schur operator's two 3.0 launches are booked apart) stays within
// the launches the books always time (timing.rs samples the rest), so those candidates'
// times are measured, not estimated; 2.0's 16 product launches an application are
// estimated from their sample.
const _: () = assert!(MAX_REPS as u64 <= crate::backend::cuda::TIME_FIRST);
/// Event time a timed block aims at: far above the events' resolution (about 0.5 us) and
/// launch jitter; one application on a large lattice already exceeds it.
const BLOCK_MS: f64 = 1.0;

/// Applications per timed block for an operator that takes `one_ms` per application:
/// enough for `BLOCK_MS`, between 1 and `MAX_REPS` (the most when unknown).
pub(crate) fn reps_for(one_ms: f64) -> usize {
    if !(one_ms > 0.0 && one_ms.is_finite()) {
        return MAX_REPS;
    }
    ((BLOCK_MS / one_ms).ceil() as usize).clamp(1, MAX_REPS)
}

/// Time one stencil application with the backend's current geometry (event-timed, median
/// of `BLOCKS` blocks of `reps` applications after a warm-up).
fn time_apply(
    be: &mut CudaBackend,
    op: Operator,
    psi: &<CudaBackend as Space>::Field,
    out: &mut <CudaBackend as Space>::Field,
    reps: usize,
) -> Result<f64> {
    be.apply(op, out, psi)?;
    let mut t = Vec::new();
    for _ in 0..BLOCKS {
        be.reset_stats()?;
        for _ in 0..reps {
            be.apply(op, out, psi)?;
        }
        t.push(be.stencil_stats().millis / reps as f64);
    }
    Ok(median_spread(t).0)
}

/// The candidates of a version's free launch geometry around `base` (see
/// `tune::geometry_candidates`), as options.
pub fn candidates(version: StencilVersion, base: &CudaOptions) -> Vec<CudaOptions> {
    let g = Geometry {
        multiple: base.multiple,
        coarse_block: base.coarse_block,
        link_hint: 0,
    };
    tune::geometry_candidates(version, g)
        .into_iter()
        .map(|g| CudaOptions {
            version,
            multiple: g.multiple,
            coarse_block: g.coarse_block,
            device: base.device,
            reconstruct: version.reconstruct_or_18(base.reconstruct),
            tuning: base.tuning,
        })
        .collect()
}

/// The options a backend for `version` starts from: `base` for the version, with (when
/// tuning) a `multiple` the version cannot run with replaced by its first candidate, since
/// the tuner replaces it anyway.
pub fn start_options(version: StencilVersion, base: &CudaOptions, mode: TuneMode) -> CudaOptions {
    let fixed = CudaOptions {
        version,
        reconstruct: version.reconstruct_or_18(base.reconstruct),
        ..base.clone()
    };
    if mode == TuneMode::Tune && version.check_multiple(fixed.multiple).is_err() {
        if let Some(c) = candidates(version, &fixed).into_iter().next() {
            return c;
        }
    }
    fixed
}

/// The cache's name for the fields a solve iterates on: "double", "single", "double-eo",
/// "single-eo" (the geometry is tuned on that operator, since the best block of the full
/// double operator is not the best of the even-odd single one: validate/RESULTS.md).
pub fn layout_name(layout: Layout) -> String {
    let p = layout.precision.name();
    match layout.subset {
        Subset::Full => p.to_string(),
        _ => format!("{p}-eo"),
    }
}

/// The layout a plan iterates on.
pub fn plan_layout(plan: &crate::app::plan::SolvePlan) -> Layout {
    crate::app::footprint::plan_layout(plan)
}

/// The tune-cache key of this backend's stencil on `dims`, for solves on `layout`.
pub fn tune_key(be: &CudaBackend, dims: [usize; 4], layout: Layout) -> Result<TuneKey> {
    Ok(TuneKey {
        device: be.device_name().into(),
        cc: be.compute_capability()?,
        driver: crate::backend::cuda::driver_version()?,
        kernel: be.tune_kernel(),
        dims,
        precision: layout_name(layout),
        program_version: tune::PROGRAM_VERSION.into(),
        source_hash: tune::source_hash(&crate::backend::cuda::all_sources()),
    })
}

/// Set the launch geometry of the live backend `be`: the cache's entry, or a sweep of the
/// stencil's candidates timed on `be` itself (stored in `cache`). Returns where the
/// geometry came from; the books are reset afterwards, so the solve's start clean.
///
/// On a decomposed lattice (`p` the rank's local problem) the tuning is collective: every
/// rank calls it, rank 0's cache decides for all, and a sweep times each candidate on every
/// rank (its exchanges keep the ranks in step) and keeps the one whose slowest rank is
/// fastest, so that every rank runs the same geometry. The key names the local dims and
/// the split directions (an interior kernel skips the split hops). Only rank 0 stores.
pub fn tune_live(
    be: &mut CudaBackend,
    p: &Problem,
    layout: Layout,
    cache: &mut TuneCache,
    mode: TuneMode,
) -> Result<String> {
    let start = Instant::now();
    let full_operator = layout.subset == Subset::Full;
    let cands = tune::distinct_launches(be.version(), be.tune_candidates(), full_operator);
    if cands.len() == 1 {
        return Ok("fixed by the version".into());
    }
    if mode == TuneMode::NoTune {
        return Ok("config (--no-tune)".into());
    }
    let version = be.version();
    let base = be.geometry();
    let split = be.partition().map(|q| (q.rank(), split_name(&q.grid)));
    let mut key = tune_key(be, p.lattice.dims, layout)?;
    if let Some((_, name)) = &split {
        key.precision = format!("{}-{name}", key.precision);
    }
    let cached = cache.get(&key).map(|l| tune::geometry_of(version, l, base));
    let cached = match &split {
        None => cached,
        Some(_) => {
            // Rank 0's cache decides: [hit, multiple, coarse_block, link_hint] from every
            // rank.
            let mine = match cached {
                Some(g) => [
                    1.0,
                    g.multiple as f64,
                    g.coarse_block as f64,
                    g.link_hint as f64,
                ],
                None => [0.0; 4],
            };
            let all = be.all_gather(&mine)?;
            (all[0] == 1.0).then(|| Geometry {
                multiple: all[1] as usize,
                coarse_block: all[2] as usize,
                link_hint: all[3] as usize,
            })
        }
    };
    if let Some(g) = cached {
        be.set_geometry(g)?;
        be.set_tune_ms(1e3 * start.elapsed().as_secs_f64());
        return Ok("tune cache".into());
    }
    // The operator the solve applies, on fields of its layout. The input is the problem's
    // source (the kernels' work does not depend on the values), not a random field of
    // the lattice's size, which took the host longer to draw than the sweep took.
    let full = be.upload(&p.source)?;
    let (psi, op) = if layout == Layout::FULL {
        (full, p.operator)
    } else {
        let mut f = be.alloc_layout(layout)?;
        be.convert(&mut f, &full)?;
        let op = if layout.subset == Subset::Full {
            p.operator
        } else {
            p.operator.schur()
        };
        (f, op)
    };
    let mut out = be.alloc_layout(layout)?;
    // The first application loads what the solve's first would (the single-precision
    // kernels and links, the Schur temporary): timed apart. Then one application sizes
    // the timed blocks: on a large lattice one application per block (4 per candidate
    // with the warm-up, where 31 took 5 s at 48^3x96), on a small one up to 10. Every
    // rank uses the largest count (a rank that applied more would leave the others
    // waiting in an exchange).
    let first = Instant::now();
    be.apply(op, &mut out, &psi)?;
    be.synchronize()?;
    let first_ms = 1e3 * first.elapsed().as_secs_f64();
    be.reset_stats()?;
    be.apply(op, &mut out, &psi)?;
    let one_ms = be.stencil_stats().millis;
    let reps = match &split {
        None => reps_for(one_ms),
        Some(_) => be
            .all_gather(&[reps_for(one_ms) as f64])?
            .into_iter()
            .fold(1.0, f64::max) as usize,
    };
    let mut tried = Vec::new();
    let on_split = split.is_some();
    let mut sweep = |be: &mut CudaBackend, cands: &[Geometry], tried: &mut Vec<tune::Launch>| {
        time_candidates(be, cands, op, &psi, &mut out, reps, on_split, tried)
    };
    sweep(be, &cands, &mut tried)?;
    // Then 3.0's link hints for the full operator, at the best block only (tune::
    // link_hint_candidates: two candidates more, not every block with every hint; the
    // pair is not searched jointly).
    let at = tune::geometry_of(version, tune::best(&tried)?, base);
    let hints = tune::link_hint_candidates(version, at, full_operator);
    sweep(be, &hints, &mut tried)?;
    drop((psi, out));
    let best = tune::best(&tried)?;
    be.set_geometry(tune::geometry_of(version, best, base))?;
    be.reset_stats()?;
    let tune_ms = 1e3 * start.elapsed().as_secs_f64();
    be.set_tune_ms(tune_ms);
    let s = be.setup_times();
    let setup_ms = s.compile_ms + s.alloc_ms + s.upload_ms + s.layout_ms;
    tracing::info!(
        %version,
        block = best.block,
        multiple = best.multiple,
        link_hint = best.link_hint,
        ms = best.millis,
        tune_ms,
        setup_ms,
        ratio = tune_ms / setup_ms,
        first_ms,
        one_ms,
        reps,
        "tuned on the live backend"
    );
    if split.as_ref().is_none_or(|(rank, _)| *rank == 0) {
        cache.insert(key, best);
    }
    Ok(format!(
        "swept {} candidates in {tune_ms:.0} ms ({BLOCKS} blocks of {reps} applications each; \
         the first application, loading the solve's kernels, {first_ms:.0} ms){}",
        tried.len(),
        if split.is_some() {
            " (every rank, the slowest rank's time)"
        } else {
            ""
        }
    ))
}

/// Time each of `cands` on the live backend (`time_apply`), pushing the cache entries to
/// `tried`. `split` (a decomposed lattice): every rank sets the candidate, then all time
/// it or none does (a rank that skipped the applications would leave the others waiting
/// in an exchange), and the slowest rank's time counts; a failure inside the timing is
/// then an error of the run. Undecomposed, a candidate that fails is reported and skipped.
#[allow(clippy::too_many_arguments)]
fn time_candidates(
    be: &mut CudaBackend,
    cands: &[Geometry],
    op: Operator,
    psi: &<CudaBackend as Space>::Field,
    out: &mut <CudaBackend as Space>::Field,
    reps: usize,
    split: bool,
    tried: &mut Vec<tune::Launch>,
) -> Result<()> {
    let version = be.version();
    for &g in cands {
        if split {
            let set = be.set_geometry(g);
            let all_set = be.all_gather(&[if set.is_ok() { 1.0 } else { 0.0 }])?;
            if let Err(e) = set {
                tracing::warn!(%version, ?g, "candidate failed: {e}");
            }
            if all_set.iter().any(|&ok| ok != 1.0) {
                continue;
            }
            let ms = time_apply(be, op, psi, out, reps)?;
            let slowest = be.all_gather(&[ms])?.into_iter().fold(0.0, f64::max);
            tried.push(tune::launch_of(version, g, slowest));
            continue;
        }
        let timed = be
            .set_geometry(g)
            .and_then(|_| time_apply(be, op, psi, out, reps));
        match timed {
            Ok(ms) => tried.push(tune::launch_of(version, g, ms)),
            Err(e) => tracing::warn!(%version, ?g, "candidate failed: {e}"),
        }
    }
    Ok(())
}

/// "split-t", "split-xt": the split directions of a grid, for the tune key of a decomposed
/// lattice's interior kernel.
pub fn split_name(grid: &[usize; 4]) -> String {
    let dirs: String = ["x", "y", "z", "t"]
        .iter()
        .zip(grid)
        .filter(|(_, &g)| g > 1)
        .map(|(d, _)| *d)
        .collect();
    if dirs.is_empty() {
        "split-none".into()
    } else {
        format!("split-{dirs}")
    }
}

/// The main job's tuning (src/app/run.rs): the default tune cache, `tune_live`, and the
/// cache saved when it changed.
pub fn tune_backend(be: &mut CudaBackend, p: &Problem, layout: Layout) -> Result<String> {
    let path = tune::default_path();
    let mut cache = TuneCache::load(&path, tune::PROGRAM_VERSION);
    for w in &cache.warnings {
        tracing::warn!("{w}");
    }
    let before = cache.len();
    let how = tune_live(be, p, layout, &mut cache, TuneMode::Tune)?;
    // On a decomposed lattice only rank 0 writes the file.
    let writer = be.partition().is_none_or(|q| q.rank() == 0);
    if writer && (cache.len() != before || how.starts_with("swept")) {
        if let Err(e) = cache.save() {
            tracing::warn!("the tune cache {} was not saved: {e}", path.display());
        }
    }
    Ok(how)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Precision;

    #[test]
    fn timed_blocks_hold_about_a_millisecond_of_applications() {
        // BLOCK_MS = 1 ms: 0.25 ms per application -> 4; 3 ms (48^3x96) -> 1; 2 us (a
        // small lattice) -> clamped to 10; an unknown time -> 10, as before the budget.
        assert_eq!(reps_for(0.25), 4);
        assert_eq!(reps_for(0.3), 4);
        assert_eq!(reps_for(3.0), 1);
        assert_eq!(reps_for(0.002), 10);
        assert_eq!(reps_for(0.0), 10);
        assert_eq!(reps_for(f64::NAN), 10);
    }

    #[test]
    fn each_solve_layout_has_its_own_cache_name() {
        // Six layouts, six names: an even-odd single solve never reuses the full double
        // operator's block (measured: 384 from the full double sweep cost the
        // even-odd single r12 graphs 2.9 -> 3.8 ms).
        let names: Vec<String> = [Subset::Full, Subset::Even]
            .into_iter()
            .flat_map(|s| {
                [Precision::Double, Precision::Single, Precision::Half]
                    .map(move |p| layout_name(Layout::new(s, p)))
            })
            .collect();
        assert_eq!(
            names,
            [
                "double",
                "single",
                "half",
                "double-eo",
                "single-eo",
                "half-eo"
            ]
        );
        // A decomposed lattice's key names its split directions.
        assert_eq!(split_name(&[1, 1, 1, 2]), "split-t");
        assert_eq!(split_name(&[2, 1, 2, 4]), "split-xzt");
        assert_eq!(split_name(&[1, 1, 1, 1]), "split-none");
        let cfg = crate::config::LoadedConfig::embedded_default();
        let mut plan = crate::app::plan::SolvePlan::from_config(&cfg.config, true);
        assert_eq!(plan_layout(&plan), Layout::FULL);
        plan.preconditioning = crate::config::Preconditioning::EvenOdd;
        plan.precision = Precision::Single;
        assert_eq!(
            plan_layout(&plan),
            Layout::new(Subset::Even, Precision::Single)
        );
    }
}
