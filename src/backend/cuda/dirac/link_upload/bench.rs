//! The link upload bench: each way of uploading 3.0's links timed alone on GPU 0
//! (`bench`), one `UploadBenchRow` per variant.

use super::chunks::{links_as_f64, scratch_values};
use super::{upload, DeviceUploadTimes, LayoutKernel};
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::staging::{LinkUpload, StageShape};
use crate::backend::cuda::core::version::Reconstruct;
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use std::time::Instant;

/// One way of uploading 3.0's links, timed by `bench`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UploadBenchRow {
    /// "workers 3 MiB x2 each".
    pub variant: String,
    /// Bytes of the device link array.
    pub bytes: u64,
    /// Wall time of each repetition (taking the buffers to the last layout), ms.
    pub wall_ms: Vec<f64>,
    /// The median repetition's breakdown, ms: taking the buffers, the host's copies, the
    /// waits, giving them back (or registering and unregistering), the layout kernels.
    pub pin_ms: f64,
    pub copy_ms: f64,
    pub wait_ms: f64,
    pub unpin_ms: f64,
    pub kernel_ms: f64,
    pub queue_ms: f64,
    pub spread_ms: f64,
}

impl UploadBenchRow {
    /// The median wall time's rate, GB/s (1e9 B/s) of device link bytes.
    pub fn gbytes_per_second(&self) -> f64 {
        let mut w = self.wall_ms.clone();
        w.sort_by(f64::total_cmp);
        match w.get(w.len() / 2) {
            Some(&ms) => self.bytes as f64 / ms / 1e6,
            None => f64::NAN,
        }
    }
}

/// Upload the double links of `gauge` (3.0's layout, `reconstruct` 18 or 12) with each of
/// `variants` on GPU 0, `repeat` times each after a warm-up, the variants interleaved (so
/// that a change of the host's load meets them all alike), into one device array. The
/// staging buffers come from the pinned pool, pinned before the first timing (as the main
/// job's warm-up does). What the main job's construction does for its links, alone.
pub fn bench(
    gauge: &crate::field::GaugeField,
    reconstruct: Reconstruct,
    variants: &[(LinkUpload, StageShape)],
    repeat: usize,
) -> Result<Vec<UploadBenchRow>> {
    let lattice = &gauge.lattice;
    let volume = lattice.volume();
    if reconstruct == Reconstruct::R8 || !volume.is_multiple_of(2) {
        return Err(Error::invalid(
            "link upload bench",
            "needs 18- or 12-real links and an even volume",
        ));
    }
    let ctx = crate::backend::cuda::core::device::open_context(0)?;
    let stream = ctx.default_stream();
    let (module, _) = crate::backend::cuda::core::device::load_module(
        &ctx,
        &crate::backend::cuda::core::compile::Program::plain(
            &crate::backend::cuda::core::compile::LAYOUT,
        ),
    )?;
    let func = crate::backend::cuda::core::device::function(&module, "links_from_sites")?;
    let elems = reconstruct.elems();
    let n_links = 2 * NDIM * elems * volume;
    let scratch_n = variants
        .iter()
        .map(|&(m, st)| scratch_values(volume, reconstruct, m, st.link_chunk_values(m)))
        .max()
        .unwrap_or(0);
    crate::backend::cuda::core::device::ensure_fits(
        &ctx,
        8 * (n_links + scratch_n),
        "the link upload bench",
    )?;
    // SAFETY: both are written (by the uploads' copies and layouts) before they are read,
    // and only the uploads touch them.
    let mut links =
        unsafe { stream.alloc::<f64>(n_links) }.map_err(err("allocating the bench's links"))?;
    // SAFETY: as above.
    let mut scratch = unsafe { stream.alloc::<f64>(scratch_n.max(1)) }
        .map_err(err("allocating the bench's scratch buffer"))?;
    for &(mode, st) in variants {
        crate::backend::cuda::core::staging::prepin_all(&ctx, &st.pins(mode, volume))?;
    }
    let host = links_as_f64(&gauge.links);
    let mut runs: Vec<Vec<(f64, DeviceUploadTimes)>> = vec![Vec::new(); variants.len()];
    for rep in 0..=repeat.max(1) {
        for (i, &(mode, stage)) in variants.iter().enumerate() {
            let stride = mode.stride(reconstruct).ok_or_else(|| {
                Error::invalid("link upload bench", "the host upload is not benched")
            })?;
            let kernel = LayoutKernel {
                func: &func,
                lattice,
                elems,
                stride,
            };
            let t = Instant::now();
            let times = upload(
                mode,
                &ctx,
                &stream,
                host,
                &kernel,
                stage,
                &mut scratch,
                &mut links,
            )?;
            stream
                .synchronize()
                .map_err(err("waiting for the bench's upload"))?;
            let wall = 1e3 * t.elapsed().as_secs_f64();
            if rep > 0 {
                runs[i].push((wall, times));
            }
        }
    }
    let names = variants.iter().map(|&(mode, st)| variant_name(mode, st));
    Ok(names
        .zip(runs)
        .map(|(variant, mut r)| {
            let wall_ms: Vec<f64> = r.iter().map(|x| x.0).collect();
            r.sort_by(|a, b| a.0.total_cmp(&b.0));
            let m = r.get(r.len() / 2).map(|x| x.1).unwrap_or_default();
            UploadBenchRow {
                variant,
                bytes: (n_links * 8) as u64,
                wall_ms,
                pin_ms: m.pin_ms,
                copy_ms: m.copy_ms,
                wait_ms: m.wait_ms,
                unpin_ms: m.unpin_ms,
                kernel_ms: m.kernel_ms,
                queue_ms: m.queue_ms,
                spread_ms: m.spread_ms,
            }
        })
        .collect())
}

/// "workers 3 MiB x2 each", or "host".
pub fn variant_name(mode: LinkUpload, st: StageShape) -> String {
    match mode {
        LinkUpload::Workers => format!(
            "{} {} MiB x{} each",
            mode.name(),
            st.lane_values * 8 / (1 << 20),
            st.lane_buffers
        ),
        LinkUpload::Host => mode.name().to_string(),
    }
}
