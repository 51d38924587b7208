//! What `floor`'s rows share to time an operator: the stream rows' warm-up, a timed batch
//! of calls, a kernel 3.0 backend, a field of a layout and the time of one application.

use crate::backend::cuda::V3_LINK_HINTS;
use crate::backend::cuda::{CudaBackend, CudaOptions, Reconstruct, StencilVersion};
use crate::backend::prelude::*;
use crate::backend::{Layout, Operator};
use crate::error::Result;
use crate::field::GaugeField;
use std::time::Instant;

/// The warm-up of the stream-launched rows (dslash, Schur): past the launch books'
/// `TIME_FIRST` launches of each kernel, which carry two timing events each (about 4 us
/// a launch, validate/RESULTS.md), so that the timed calls see the steady state
/// of a long solve (one timed launch in `TIME_EVERY`). With one warm-up call, 15 of a
/// dslash row's 200 timed launches carried them (0.5-0.7 us a launch at 16^3x32;
/// validate/RESULTS.md). The graph rows have no events and warm up once.
pub(super) const STREAM_WARM: usize = crate::backend::cuda::TIME_FIRST as usize + 1;

/// The directions whose links skip L1 under a geometry's link hint ("t", "none", "z,t";
/// the backend accepted the geometry, so the hint is in range).
pub(super) fn hint_name(g: crate::backend::cuda::Geometry) -> &'static str {
    V3_LINK_HINTS[g.link_hint].1
}

/// Seconds per call of `f`, over `repeat` calls after `warm` (at least one: compilation,
/// graph capture).
pub(super) fn time_batch(
    be: &mut CudaBackend,
    repeat: usize,
    warm: usize,
    f: &mut dyn FnMut(&mut CudaBackend) -> Result<()>,
) -> Result<f64> {
    for _ in 0..warm.max(1) {
        f(be)?;
    }
    be.synchronize()?;
    let t = Instant::now();
    for _ in 0..repeat {
        f(be)?;
    }
    be.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / repeat as f64)
}

/// Kernel 3.0 on `gauge` with these links (and block, if given).
pub(super) fn fast_backend(
    gauge: &GaugeField,
    kappa: f64,
    reconstruct: Reconstruct,
    block: Option<usize>,
) -> Result<CudaBackend> {
    let mut opts = CudaOptions {
        version: StencilVersion::V3_0,
        reconstruct,
        ..CudaOptions::default()
    };
    if let Some(b) = block {
        opts.coarse_block = b;
    }
    CudaBackend::new(gauge, kappa, &opts)
}

/// A field of `layout` holding `full`'s sites of that subset.
pub(super) fn field_of(
    be: &mut CudaBackend,
    full: &crate::backend::cuda::DeviceSpinor,
    layout: Layout,
) -> Result<crate::backend::cuda::DeviceSpinor> {
    let mut f = be.alloc_layout(layout)?;
    be.convert(&mut f, full)?;
    Ok(f)
}

/// Seconds per application of `op` to `input` (its layout), after the stream rows'
/// warm-up.
pub(super) fn time_apply(
    be: &mut CudaBackend,
    op: Operator,
    input: &crate::backend::cuda::DeviceSpinor,
    repeat: usize,
) -> Result<f64> {
    let mut out = be.alloc_layout(be.layout(input))?;
    time_batch(be, repeat, STREAM_WARM, &mut |be| {
        be.apply(op, &mut out, input)
    })
}
