//! Host-device transfers through two small pinned staging buffers (issue 13, item 4).
//! Uploads: the host lays chunk k out in one buffer (in parallel, in the device's order)
//! while the copy engine reads chunk k - 1 from the other, so the layout and the transfer
//! overlap and no pinned buffer the size of the field is ever allocated (pinning gigabytes
//! costs more than copying them). Downloads are the mirror: the copies of chunk k + 1 run
//! into one buffer while the host scatters chunk k from the other. The gauge links pin
//! their buffers for the one upload at construction (`upload_staged`); the spinor
//! transfers keep theirs in `Core` (`Core::upload_spinor`, `Core::download_spinor`). The
//! buffers are ordinary cached pinned memory: a chunk is written (or read) as several
//! interleaved rows, which write-combined memory punishes.

use super::device::err;
use super::fast_layout::Segment;
use crate::error::{Error, Result};
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
};
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

/// The pinned staging buffers of staged transfers (two, or one when a single chunk is
/// ever staged), each of `values` f64: made per call by `upload_staged`, or kept for reuse
/// (`Core::staging`, the spinor transfers).
pub(crate) struct StagingBuffers {
    buffers: Vec<PinnedHostSlice<f64>>,
    values: usize,
    /// Milliseconds spent pinning them.
    pub pin_ms: f64,
}

impl StagingBuffers {
    /// `count` (1 or 2) buffers of `values` f64 each.
    pub fn new(ctx: &Arc<CudaContext>, values: usize, count: usize) -> Result<Self> {
        let t = Instant::now();
        let buffers = (0..count.clamp(1, 2))
            // SAFETY: each buffer's values are written (by the host, or by a copy from the
            // device) before they are read. Flags 0: cached (see the module documentation).
            .map(|_| unsafe { ctx.alloc_pinned_with_flags::<f64>(values, 0) })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(err("allocating the pinned staging buffers"))?;
        Ok(StagingBuffers {
            buffers,
            values,
            pin_ms: 1e3 * t.elapsed().as_secs_f64(),
        })
    }

    /// f64 values of each buffer.
    pub fn values(&self) -> usize {
        self.values
    }

    /// The buffers as host slices. Only raw asynchronous copies touch them, so the
    /// synchronisation `as_mut_slice` does on their (never recorded) events costs nothing;
    /// the transfers order the host's accesses against the copies by stream
    /// synchronisation.
    fn slices(&mut self) -> Result<Vec<&mut [f64]>> {
        self.buffers
            .iter_mut()
            .map(|p| p.as_mut_slice())
            .collect::<std::result::Result<_, _>>()
            .map_err(err("pinned memory"))
    }

    /// Refuse chunks larger than a buffer, or segments outside a device array of `len`.
    fn check(&self, chunks: &[Vec<Segment>], len: usize) -> Result<Vec<usize>> {
        let sizes: Vec<usize> = chunks
            .iter()
            .map(|c| c.iter().map(|s| s.len).sum())
            .collect();
        if let Some(&big) = sizes.iter().find(|&&n| n > self.values) {
            return Err(Error::internal(format!(
                "a staged chunk of {big} values does not fit staging buffers of {}",
                self.values
            )));
        }
        if let Some(s) = chunks.iter().flatten().find(|s| s.dst + s.len > len) {
            return Err(Error::internal(format!(
                "a staged segment ({} values at {}) runs past its device array of {len}",
                s.len, s.dst
            )));
        }
        Ok(sizes)
    }
}

/// Upload `chunks` into `dst` through two pinned buffers pinned for this call (sized for
/// the largest chunk, one when there is a single chunk): see `upload_through`. The pinning
/// is `pin_ms`.
pub(crate) fn upload_staged(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    dst: &mut CudaSlice<f64>,
    chunks: &[Vec<Segment>],
    fill: impl FnMut(usize, &mut [f64]),
) -> Result<StagedTimes> {
    let largest = chunks
        .iter()
        .map(|c| c.iter().map(|s| s.len).sum::<usize>())
        .max()
        .unwrap_or(0);
    if largest == 0 {
        return Ok(StagedTimes::default());
    }
    let count = if chunks.len() > 1 { 2 } else { 1 };
    let mut buffers = StagingBuffers::new(ctx, largest, count)?;
    let mut times = upload_through(&mut buffers, stream, dst, chunks, fill)?;
    times.pin_ms = buffers.pin_ms;
    Ok(times)
}

/// Upload `chunks` into `dst` through `buffers`: chunk k is `fill(k, buffer)` written into
/// the first `sum(len)` values of a staging buffer, then copied segment by segment (back to
/// back in the buffer) to offsets `dst` of the device array, while the host fills chunk k +
/// 1 into the other buffer. Every segment must lie inside `dst` and every chunk fit a
/// buffer. Returns when every copy is done (`pin_ms` 0).
pub(crate) fn upload_through(
    buffers: &mut StagingBuffers,
    stream: &Arc<CudaStream>,
    dst: &mut CudaSlice<f64>,
    chunks: &[Vec<Segment>],
    mut fill: impl FnMut(usize, &mut [f64]),
) -> Result<StagedTimes> {
    let mut times = StagedTimes::default();
    let sizes = buffers.check(chunks, dst.len())?;
    let mut host = buffers.slices()?;
    let count = host.len();
    let (base, _sync) = dst.device_ptr_mut(stream);
    for (k, (segments, &size)) in chunks.iter().zip(&sizes).enumerate() {
        if count == 1 {
            // One buffer: the previous chunk's copies must have read it.
            wait(stream, &mut times)?;
        }
        let buf = &mut host[k % count][..size];
        let t = Instant::now();
        fill(k, buf);
        times.fill_ms += 1e3 * t.elapsed().as_secs_f64();
        // The copies of chunk k - 1 may still run (from the other buffer); those of chunk
        // k - 2, which read this buffer, were waited for before chunk k - 1 was queued.
        wait(stream, &mut times)?;
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
    wait(stream, &mut times)?;
    Ok(times)
}

/// The mirror of `upload_through`: chunk k's segments of `src` (offsets `dst` of the device
/// array, read back to back into a staging buffer) are handed to `scatter(k, buffer)`
/// while the copies of chunk k + 1 run into the other buffer. Returns when every chunk has
/// been scattered (`fill_ms` is the scattering, `pin_ms` 0).
pub(crate) fn download_through(
    buffers: &mut StagingBuffers,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<f64>,
    chunks: &[Vec<Segment>],
    mut scatter: impl FnMut(usize, &[f64]),
) -> Result<StagedTimes> {
    let mut times = StagedTimes::default();
    let sizes = buffers.check(chunks, src.len())?;
    let mut host = buffers.slices()?;
    let count = host.len();
    let (base, _sync) = src.device_ptr(stream);
    let queue = |k: usize, buf: &mut [f64], times: &mut StagedTimes| -> Result<()> {
        let mut at = 0;
        for s in &chunks[k] {
            let dst = &mut buf[at..at + s.len];
            // SAFETY: the source range lies inside `src` (checked above); the destination
            // is pinned and not read until the stream has been synchronised, nor written
            // by the host while the copy may run.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(
                    dst,
                    base + (s.dst * 8) as u64,
                    stream.cu_stream(),
                )
            }
            .map_err(err("downloading a staged chunk"))?;
            at += s.len;
            times.bytes += (s.len * 8) as u64;
        }
        Ok(())
    };
    if let Some(&size) = sizes.first() {
        queue(0, &mut host[0][..size], &mut times)?;
    }
    for k in 0..chunks.len() {
        // Only chunk k's copies are queued: after this, its buffer is complete.
        wait(stream, &mut times)?;
        let next = k + 1 < chunks.len();
        let (this, other) = split_pair(&mut host, k % count);
        if next && count > 1 {
            // Into the other buffer, scattered (and so free) in iteration k - 1.
            queue(
                k + 1,
                &mut other.expect("two buffers")[..sizes[k + 1]],
                &mut times,
            )?;
        }
        let t = Instant::now();
        scatter(k, &this[..sizes[k]]);
        times.fill_ms += 1e3 * t.elapsed().as_secs_f64();
        if next && count == 1 {
            queue(k + 1, &mut this[..sizes[k + 1]], &mut times)?;
        }
    }
    Ok(times)
}

/// Buffer `i` of one or two, and the other one if there are two.
fn split_pair<'a>(host: &'a mut [&mut [f64]], i: usize) -> (&'a mut [f64], Option<&'a mut [f64]>) {
    let (a, b) = host.split_at_mut(1);
    let (a, b) = (&mut *a[0], b.first_mut().map(|b| &mut **b));
    match (i, b) {
        (0, b) => (a, b),
        (_, Some(b)) => (b, Some(a)),
        (_, None) => unreachable!("buffer {i} of one"),
    }
}

/// Synchronise the stream, the wait added to `times.wait_ms`.
fn wait(stream: &CudaStream, times: &mut StagedTimes) -> Result<()> {
    let t = Instant::now();
    stream
        .synchronize()
        .map_err(err("waiting for a staged copy"))?;
    times.wait_ms += 1e3 * t.elapsed().as_secs_f64();
    Ok(())
}
