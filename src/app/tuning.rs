//! Launch geometry for the CUDA stencils: candidates per version, timed on the GPU, kept
//! in the tune cache (`crate::backend::cuda::tune`).

use crate::backend::cuda::tune::{self, Launch, TuneCache, TuneKey};
use crate::backend::cuda::{CudaBackend, CudaOptions, StencilVersion};
use crate::backend::prelude::*;
use crate::error::Result;
use crate::field::SpinorField;
use crate::problem::Problem;

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

/// Time one stencil application with these options (event-timed, median of 3 blocks of
/// 10 applications after a warm-up).
fn time_apply(p: &Problem, opts: &CudaOptions) -> Result<f64> {
    let mut be = CudaBackend::new(&p.gauge, p.kappa, opts)?;
    let psi = be.upload(&SpinorField::random(p.lattice.volume(), 5, 0))?;
    let mut out = be.alloc()?;
    be.apply(p.operator, &mut out, &psi)?;
    let mut t = Vec::new();
    for _ in 0..3 {
        be.reset_stats()?;
        for _ in 0..10 {
            be.apply(p.operator, &mut out, &psi)?;
        }
        t.push(be.stencil_stats().millis / 10.0);
    }
    Ok(median_spread(t).0)
}

/// The candidates of a version's free launch geometry: for 1.0 and 3.0 (one thread per
/// site) its block size, for 1.2 and
/// later every `multiple` (sites per block, 12 threads each) the version accepts, up to
/// 1024 threads per block; 1.1 has none (one site per 16-thread block, by definition).
pub fn candidates(version: StencilVersion, base: &CudaOptions) -> Vec<CudaOptions> {
    let with = |multiple, coarse_block| CudaOptions {
        version,
        multiple,
        coarse_block,
        device: base.device,
        reconstruct_12: base.reconstruct_12 && version.supports_reconstruct_12(),
    };
    if version.uses_coarse_block() {
        // 1.0: powers of two 64..=1024; 3.0: warp multiples 32..=512 (its launch bound).
        let blocks: &[usize] = if version == StencilVersion::V3_0 {
            &[32, 64, 96, 128, 192, 256, 384, 512]
        } else {
            &[64, 128, 256, 512, 1024]
        };
        return blocks
            .iter()
            .filter(|&&b| b <= version.max_coarse_block())
            .map(|&b| with(base.multiple, b))
            .collect();
    }
    if !version.uses_multiple() {
        return vec![with(base.multiple, base.coarse_block)];
    }
    [1, 2, 4, 8, 12, 16, 21, 24, 32, 42, 48, 64, 85]
        .into_iter()
        .filter(|&m| version.check_multiple(m).is_ok())
        .map(|m| with(m, base.coarse_block))
        .collect()
}

/// The launch geometry the main job uses (src/run.rs): the tune cache's entry for this
/// device, version and lattice, or a sweep now (stored for next time). Returns the
/// options and where the geometry came from.
pub fn tuned_options(p: &Problem, base: &CudaOptions) -> Result<(CudaOptions, String)> {
    let info = crate::backend::cuda::device_info()?;
    let cc = format!("{}.{}", info.cc.0, info.cc.1);
    let path = tune::default_path();
    let mut cache = TuneCache::load(&path, env!("CARGO_PKG_VERSION"));
    for w in &cache.warnings {
        tracing::warn!("{w}");
    }
    let before = cache.len();
    let r = geometry(
        p,
        base.version,
        &info.name,
        &cc,
        &mut cache,
        TuneMode::Tune,
        base,
    )?;
    if cache.len() != before {
        if let Err(e) = cache.save() {
            tracing::warn!("the tune cache {} was not saved: {e}", path.display());
        }
    }
    Ok(r)
}

/// The launch geometry for `version`: cached, or swept now and stored.
pub(crate) fn geometry(
    p: &Problem,
    version: StencilVersion,
    device: &str,
    cc: &str,
    cache: &mut TuneCache,
    mode: TuneMode,
    base: &CudaOptions,
) -> Result<(CudaOptions, String)> {
    let cands = candidates(version, base);
    let fixed = CudaOptions {
        version,
        reconstruct_12: base.reconstruct_12 && version.supports_reconstruct_12(),
        ..base.clone()
    };
    if cands.len() == 1 {
        return Ok((fixed, "fixed by the version".into()));
    }
    if mode == TuneMode::NoTune {
        return Ok((fixed, "config (--no-tune)".into()));
    }
    let key = TuneKey {
        device: device.into(),
        cc: cc.into(),
        kernel: if base.reconstruct_12 && version.supports_reconstruct_12() {
            format!("stencil-{version}-r12")
        } else {
            format!("stencil-{version}")
        },
        dims: p.lattice.dims,
        precision: "double".into(),
        program_version: env!("CARGO_PKG_VERSION").into(),
        source_hash: tune::source_hash(&crate::backend::cuda::all_sources()),
    };
    let from = |l: Launch| CudaOptions {
        version,
        multiple: if version.uses_multiple() {
            l.multiple as usize
        } else {
            base.multiple
        },
        coarse_block: if version.uses_coarse_block() {
            l.block as usize
        } else {
            base.coarse_block
        },
        device: base.device,
        reconstruct_12: base.reconstruct_12 && version.supports_reconstruct_12(),
    };
    if let Some(l) = cache.get(&key) {
        return Ok((from(l), "tune cache".into()));
    }
    let mut tried = Vec::new();
    for c in &cands {
        match time_apply(p, c) {
            Ok(ms) => tried.push(Launch {
                block: if version.uses_coarse_block() {
                    c.coarse_block as u32
                } else {
                    version.block_threads(c.multiple) as u32
                },
                multiple: c.multiple as u32,
                millis: ms,
            }),
            Err(e) => tracing::warn!(%version, ?c, "candidate failed: {e}"),
        }
    }
    let best = tune::best(&tried)?;
    tracing::info!(%version, block = best.block, multiple = best.multiple, ms = best.millis, "tuned");
    cache.insert(key, best);
    Ok((from(best), format!("swept {} candidates", tried.len())))
}
