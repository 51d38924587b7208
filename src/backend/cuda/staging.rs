//! Host-to-device uploads through two small pinned staging buffers (issue 13, item 4):
//! the host lays chunk k out in one buffer (in parallel, in the device's order) while the
//! copy engine reads chunk k - 1 from the other, so the layout and the transfer overlap
//! and no pinned buffer the size of the field is ever allocated (pinning gigabytes costs
//! more than copying them). The buffers are ordinary cached pinned memory: a chunk is
//! written as several interleaved rows, which write-combined memory punishes.

use super::device::err;
use super::fast_layout::Segment;
use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut};
use std::sync::Arc;
use std::time::Instant;

/// Bytes of each of the two staging buffers (fewer when the largest chunk is smaller).
pub(crate) const STAGE_BYTES: usize = 64 << 20;

/// Where a staged upload's wall time went, milliseconds, and what it moved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct StagedTimes {
    /// Pinning the two staging buffers.
    pub pin_ms: f64,
    /// Laying the chunks out in the staging buffers (host, in parallel).
    pub fill_ms: f64,
    /// Waiting for copies the layout did not hide.
    pub wait_ms: f64,
    pub bytes: u64,
}

/// Upload `chunks` into `dst`: chunk k is `fill(k, buffer)` written into the first
/// `sum(len)` values of a staging buffer, then copied segment by segment (back to back in
/// the buffer) to offsets `dst` of the device array. Every segment must lie inside `dst`.
pub(crate) fn upload_staged(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    dst: &mut CudaSlice<f64>,
    chunks: &[Vec<Segment>],
    mut fill: impl FnMut(usize, &mut [f64]),
) -> Result<StagedTimes> {
    let mut times = StagedTimes::default();
    let sizes: Vec<usize> = chunks
        .iter()
        .map(|c| c.iter().map(|s| s.len).sum())
        .collect();
    let largest = sizes.iter().copied().max().unwrap_or(0);
    if largest == 0 {
        return Ok(times);
    }
    if let Some(s) = chunks.iter().flatten().find(|s| s.dst + s.len > dst.len()) {
        return Err(Error::internal(format!(
            "a staged segment ({} values at {}) runs past its device array of {}",
            s.len,
            s.dst,
            dst.len()
        )));
    }
    let t = Instant::now();
    let buffers = if chunks.len() > 1 { 2 } else { 1 };
    let mut pinned = (0..buffers)
        // SAFETY: each buffer's values are written by `fill` before a copy reads them.
        // Flags 0: cached (see the module documentation).
        .map(|_| unsafe { ctx.alloc_pinned_with_flags::<f64>(largest, 0) })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(err("allocating the pinned staging buffers"))?;
    let mut host: Vec<&mut [f64]> = pinned
        .iter_mut()
        .map(|p| p.as_mut_slice())
        .collect::<std::result::Result<_, _>>()
        .map_err(err("pinned memory"))?;
    times.pin_ms = 1e3 * t.elapsed().as_secs_f64();
    let (base, _sync) = dst.device_ptr_mut(stream);
    for (k, (segments, &size)) in chunks.iter().zip(&sizes).enumerate() {
        let buf = &mut host[k % buffers][..size];
        let t = Instant::now();
        fill(k, buf);
        times.fill_ms += 1e3 * t.elapsed().as_secs_f64();
        // The copies of chunk k - 1 may still run (from the other buffer); those of chunk
        // k - 2, which read this buffer, were waited for before chunk k - 1 was queued.
        let t = Instant::now();
        stream
            .synchronize()
            .map_err(err("waiting for a staged copy"))?;
        times.wait_ms += 1e3 * t.elapsed().as_secs_f64();
        let mut at = 0;
        for s in segments {
            let src = &buf[at..at + s.len];
            // SAFETY: the destination range lies inside `dst` (checked above); the source
            // is pinned and not written again until the stream has been synchronised.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(
                    base + (s.dst * 8) as u64,
                    src,
                    stream.cu_stream(),
                )
            }
            .map_err(err("uploading a staged chunk"))?;
            at += s.len;
            times.bytes += (s.len * 8) as u64;
        }
    }
    let t = Instant::now();
    stream
        .synchronize()
        .map_err(err("waiting for a staged copy"))?;
    times.wait_ms += 1e3 * t.elapsed().as_secs_f64();
    Ok(times)
}
