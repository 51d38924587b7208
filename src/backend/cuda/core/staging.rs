//! Host-device transfers through small pinned staging buffers.
//! Uploads: the host lays chunk k out in one buffer (in parallel, in the device's order)
//! while the copy engine reads chunk k - 1 from another, so the layout and the transfer
//! overlap and no pinned buffer the size of the field is ever allocated (pinning gigabytes
//! costs more than copying them). Downloads are the mirror: the copies of chunk k + 1 run
//! into one buffer while the host scatters chunk k from the other. The buffers come from a
//! process-wide pool (`pool`), pinned ahead in the GPU warm-up (`prepin`) while the host
//! builds the problem: the gauge links take theirs for the one upload at construction
//! (`upload_staged`, `link_upload`), the spinor transfers keep two in `Core`
//! (`Core::upload_spinor`, `Core::download_spinor`). Their size and the link upload's
//! number of buffers are `StageShape`. The buffers are ordinary cached pinned memory: a
//! chunk is written (or read) as several interleaved rows, which write-combined memory
//! punishes.

use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::fast_layout::Segment;
use crate::backend::cuda::core::version::Reconstruct;
use crate::backend::TuningOptions;
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice,
};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Bytes of each staging buffer by default (fewer when the largest chunk is smaller);
/// `[tuning] stage_mib` replaces it (`StageShape`). (The tests' name for the default.)
/// How version 3.0's r18 and r12 links reach the device (r8 always takes `Host`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkUpload {
    /// Laid out on the host into the pinned staging buffers, copied in final order.
    Host,
    /// Whole sites copied by the host into pinned staging, laid out on the device, every
    /// worker thread with its own buffers, stream and scratch slot (the default).
    #[default]
    Workers,
}

impl LinkUpload {
    pub const ALL: [LinkUpload; 2] = [LinkUpload::Host, LinkUpload::Workers];

    /// "host", "workers" (as the report names them).
    pub fn name(self) -> &'static str {
        match self {
            LinkUpload::Host => "host",
            LinkUpload::Workers => "workers",
        }
    }

    /// The path taken for `reconstruct`: r8 keeps the host's (its packing is host math).
    pub fn for_reconstruct(self, reconstruct: Reconstruct) -> Self {
        if reconstruct == Reconstruct::R8 {
            LinkUpload::Host
        } else {
            self
        }
    }

    /// Chunks in flight side by side, each with its scratch slot: one, or for `Workers`
    /// one per worker thread of the pool (at most one per chunk of `per_chunk` sites).
    pub(crate) fn lanes(self, volume: usize, per_chunk: usize) -> usize {
        match self {
            LinkUpload::Workers => rayon::current_num_threads()
                .min(volume.div_ceil(per_chunk.max(1)))
                .max(1),
            LinkUpload::Host => 1,
        }
    }

    /// Complex numbers per link in the device scratch buffer (None: no scratch): the
    /// stored elements (the host drops row 2 for r12).
    pub(crate) fn stride(self, reconstruct: Reconstruct) -> Option<usize> {
        match self.for_reconstruct(reconstruct) {
            LinkUpload::Host => None,
            LinkUpload::Workers => Some(reconstruct.elems()),
        }
    }
}

/// Sites per chunk: as many as `max_values` f64 hold at `stride` complex per link, an even
/// number (each checkerboard index of the chunk then holds both its sites), at least 2
/// and at most the volume.
pub(crate) fn chunk_sites(volume: usize, stride: usize, max_values: usize) -> usize {
    let per_site = 2 * NDIM * stride;
    ((max_values / per_site) & !1).max(2).min(volume)
}

#[cfg(test)]
pub(crate) const STAGE_BYTES: usize = 64 << 20;
/// Bytes of each worker thread's staging buffers in the link upload by default, small so
/// that a worker's buffers can stay in the caches (`[tuning] lane_mib`; 3 MiB x2 was the
/// fastest shape once the workers took their chunks from a queue, validate/RESULTS.md).
#[cfg(test)]
pub(crate) const LANE_BYTES: usize = 3 << 20;

/// The staging buffers' shape: f64 values per shared buffer (the spinor transfers') and
/// how many there are; and each worker's buffers in the link upload (`[tuning]` stage_*
/// and lane_*). `ablate --upload-dims` times the workers' shapes against each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageShape {
    pub values: usize,
    pub buffers: usize,
    /// The link upload: f64 values of each worker thread's buffers, and how many each
    /// worker cycles through (its copies use cached stores: the buffers are small so that
    /// they can stay in the caches while the copy engine reads them).
    pub lane_values: usize,
    pub lane_buffers: usize,
}

impl Default for StageShape {
    fn default() -> Self {
        Self::of(&TuningOptions::default())
    }
}

impl StageShape {
    /// The shape `tuning` asks for (its bounds checked by `TuningOptions::validate`).
    pub fn of(tuning: &TuningOptions) -> Self {
        StageShape {
            values: (tuning.stage_mib << 20) / 8,
            buffers: tuning.stage_buffers,
            lane_values: (tuning.lane_mib << 20) / 8,
            lane_buffers: tuning.lane_buffers,
        }
    }

    /// f64 values of each buffer pinned ahead for a (local) lattice of `volume` sites: the
    /// shape's, or fewer when a whole field of links (72 f64 a site, the most any link
    /// upload stages) is smaller.
    pub fn values_for(&self, volume: usize) -> usize {
        capped(self.values, volume)
    }

    /// f64 values of each staged chunk of the link upload with `mode`: each worker's
    /// buffer for `Workers`, the shared buffers' otherwise.
    pub fn link_chunk_values(&self, mode: crate::backend::cuda::LinkUpload) -> usize {
        match mode {
            crate::backend::cuda::LinkUpload::Workers => self.lane_values,
            _ => self.values,
        }
    }

    /// What to pin ahead for a link upload with `mode` and the spinor transfers on a
    /// (local) lattice of `volume` sites, as (f64 per buffer, buffers), the smaller
    /// buffers first (`prepin_all`): `buffers` of `values` (the spinors take two), and for
    /// `Workers` `lane_buffers` of `lane_values` for each worker thread.
    pub fn pins(
        &self,
        mode: crate::backend::cuda::LinkUpload,
        volume: usize,
    ) -> Vec<(usize, usize)> {
        let mut pins = vec![(self.values_for(volume), self.buffers)];
        if mode == crate::backend::cuda::LinkUpload::Workers {
            let values = capped(self.lane_values, volume);
            // Lanes as for r12 chunks (6 complex a link): an r18 upload's chunks hold fewer
            // sites, so it never has fewer lanes; on a lattice of fewer chunks than threads
            // it may take more, and pins those it lacks.
            let per_chunk = crate::backend::cuda::core::staging::chunk_sites(volume, 6, values);
            pins.push((values, self.lane_buffers * mode.lanes(volume, per_chunk)));
        }
        pins.sort();
        pins
    }
}

/// `values` f64, or fewer when a whole field of links on `volume` sites (72 f64 a site, the
/// most any link upload stages) is smaller; at least 1.
fn capped(values: usize, volume: usize) -> usize {
    values.min(72 * volume).max(1)
}

/// Where a staged upload's wall time went, milliseconds, and what it moved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct StagedTimes {
    /// Taking the staging buffers (pinning those the pool lacked).
    pub pin_ms: f64,
    /// Laying the chunks out in the staging buffers (host, in parallel).
    pub fill_ms: f64,
    /// Waiting for copies the layout did not hide.
    pub wait_ms: f64,
    pub bytes: u64,
}

/// Pinned host buffers kept for the rest of the process once made, so that staging pays
/// the pinning (about 2 GB/s of fresh memory on the H100 host, validate/RESULTS.md)
/// once, ahead of time (`prepin`, in the GPU warm-up), and not per transfer. A
/// `StagingBuffers` takes its buffers from here and gives them back when dropped.
fn pool() -> &'static Mutex<Vec<PinnedHostSlice<f64>>> {
    static POOL: Mutex<Vec<PinnedHostSlice<f64>>> = Mutex::new(Vec::new());
    &POOL
}

/// `prepin` for each (values, count) of `pins`, in order (smallest first, `StageShape::pins`:
/// a pool buffer counts for any request it is large enough for).
pub(crate) fn prepin_all(ctx: &Arc<CudaContext>, pins: &[(usize, usize)]) -> Result<()> {
    pins.iter()
        .try_for_each(|&(values, count)| prepin(ctx, values, count))
}

/// Pin `count` buffers of `values` f64 on `ctx`'s GPU and keep them in the pool (fewer when
/// the pool already holds such buffers). The pool stays locked meanwhile, so that a
/// transfer that needs buffers waits for these rather than pinning its own beside them.
pub(crate) fn prepin(ctx: &Arc<CudaContext>, values: usize, count: usize) -> Result<()> {
    let mut kept = pool()
        .lock()
        .map_err(|_| Error::internal("the pinned pool's lock is poisoned"))?;
    let ordinal = ctx.ordinal();
    let have = kept
        .iter()
        .filter(|p| p.context().ordinal() == ordinal && p.len() >= values)
        .count();
    for _ in have..count {
        kept.push(pin(ctx, values)?);
    }
    Ok(())
}

fn pin(ctx: &Arc<CudaContext>, values: usize) -> Result<PinnedHostSlice<f64>> {
    // SAFETY: each buffer's values are written (by the host, or by a copy from the device)
    // before they are read. Flags 0: cached (see the module documentation).
    unsafe { ctx.alloc_pinned_with_flags::<f64>(values, 0) }
        .map_err(err("allocating the pinned staging buffers"))
}

/// The pinned staging buffers of staged transfers, each of at least `values` f64 (the
/// transfers use the first `values`): taken from the process's pool (`pool`), pinned when
/// the pool has none to give, and given back to the pool when dropped. Held per transfer
/// (`upload_staged`, the link upload) or kept for reuse (`Core::staging`, the spinor
/// transfers).
pub(crate) struct StagingBuffers {
    buffers: Vec<PinnedHostSlice<f64>>,
    values: usize,
    /// Milliseconds spent taking them: pinning those the pool did not have, or waiting
    /// for a pinning under way (`prepin`).
    pub pin_ms: f64,
}

impl StagingBuffers {
    /// `count` (at least 1) buffers of `values` f64 each.
    pub fn new(ctx: &Arc<CudaContext>, values: usize, count: usize) -> Result<Self> {
        let t = Instant::now();
        let ordinal = ctx.ordinal();
        let mut buffers = Vec::new();
        {
            let mut kept = pool()
                .lock()
                .map_err(|_| Error::internal("the pinned pool's lock is poisoned"))?;
            while buffers.len() < count.max(1) {
                // The smallest that fits.
                let best = kept
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.context().ordinal() == ordinal && p.len() >= values)
                    .min_by_key(|(_, p)| p.len())
                    .map(|(i, _)| i);
                match best {
                    Some(i) => buffers.push(kept.swap_remove(i)),
                    None => break,
                }
            }
        }
        while buffers.len() < count.max(1) {
            buffers.push(pin(ctx, values)?);
        }
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

    /// The buffers (their first `values`) as host slices. Only raw asynchronous copies
    /// touch them, so the synchronisation `as_mut_slice` does on their (never recorded)
    /// events costs nothing; the transfers order the host's accesses against the copies by
    /// stream or event synchronisation.
    pub(crate) fn slices(&mut self) -> Result<Vec<&mut [f64]>> {
        let values = self.values;
        self.buffers
            .iter_mut()
            .map(|p| p.as_mut_slice().map(|s| &mut s[..values]))
            .collect::<std::result::Result<_, _>>()
            .map_err(err("pinned memory"))
    }

    /// Refuse chunks larger than a buffer, or segments outside a device array of `len`.
    fn check(&self, chunks: &[Vec<Segment>], len: usize) -> Result<Vec<usize>> {
        check_chunks(self.values, chunks, len)
    }
}

impl Drop for StagingBuffers {
    /// Back to the pool once the context has finished its work (a transfer that failed
    /// half way may have left copies queued), or freed when that or the pool's lock fails.
    fn drop(&mut self) {
        let idle = self
            .buffers
            .first()
            .is_some_and(|p| p.context().synchronize().is_ok());
        if let (true, Ok(mut kept)) = (idle, pool().lock()) {
            kept.append(&mut self.buffers);
        }
    }
}

/// The values of each chunk, or an internal error when one exceeds `values` (a staging
/// buffer) or a segment runs past a device array of `len`.
fn check_chunks(values: usize, chunks: &[Vec<Segment>], len: usize) -> Result<Vec<usize>> {
    let sizes: Vec<usize> = chunks
        .iter()
        .map(|c| c.iter().map(|s| s.len).sum())
        .collect();
    if let Some(&big) = sizes.iter().find(|&&n| n > values) {
        return Err(Error::internal(format!(
            "a staged chunk of {big} values does not fit staging buffers of {values}"
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

/// Upload `chunks` into `dst` through two staging buffers taken for this call from the
/// pinned pool (at least the largest chunk each; one when there is a single chunk): see
/// `upload_through`. Taking them (pinning any the pool lacked) is `pin_ms`.
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
    dst: &mut impl DevicePtrMut<f64>,
    chunks: &[Vec<Segment>],
    fill: impl FnMut(usize, &mut [f64]),
) -> Result<StagedTimes> {
    let len = dst.len();
    let (base, _sync) = dst.device_ptr_mut(stream);
    let (mut engine, sizes) = StreamCopies::new(buffers, stream, chunks, len, base, true)?;
    upload_pipeline(&mut engine, chunks, &sizes, fill)?;
    Ok(engine.times)
}

/// The mirror of `upload_through`: chunk k's segments of `src` (offsets `dst` of the device
/// array, read back to back into a staging buffer) are handed to `scatter(k, buffer)`
/// while the copies of chunk k + 1 run into the other buffer. Returns when every chunk has
/// been scattered (`fill_ms` is the scattering, `pin_ms` 0).
pub(crate) fn download_through(
    buffers: &mut StagingBuffers,
    stream: &Arc<CudaStream>,
    src: &impl DevicePtr<f64>,
    chunks: &[Vec<Segment>],
    scatter: impl FnMut(usize, &[f64]),
) -> Result<StagedTimes> {
    let (base, _sync) = src.device_ptr(stream);
    let (mut engine, sizes) = StreamCopies::new(buffers, stream, chunks, src.len(), base, false)?;
    download_pipeline(&mut engine, chunks, &sizes, scatter)?;
    Ok(engine.times)
}

/// What the pipelines drive: one or two staging buffers and asynchronous copies between
/// them and a device array, in one queue. A CUDA stream (`StreamCopies`), or in the tests
/// a simulation that runs the queued copies only at `wait`, so that a host access the
/// ordering does not protect reads or writes the wrong values.
trait CopyEngine {
    /// Staging buffers: 1 or 2.
    fn count(&self) -> usize;
    fn buffer(&mut self, i: usize) -> &mut [f64];
    /// Queue the copies of `segments`, back to back from the start of buffer `i`.
    fn queue(&mut self, i: usize, segments: &[Segment]) -> Result<()>;
    /// Wait for every queued copy.
    fn wait(&mut self) -> Result<()>;
    /// Time spent laying out or scattering on the host, milliseconds.
    fn add_host_ms(&mut self, ms: f64);
}

/// Chunk k filled into buffer k % count while chunk k - 1's copies run from the other.
fn upload_pipeline(
    e: &mut impl CopyEngine,
    chunks: &[Vec<Segment>],
    sizes: &[usize],
    mut fill: impl FnMut(usize, &mut [f64]),
) -> Result<()> {
    let count = e.count();
    for (k, (segments, &size)) in chunks.iter().zip(sizes).enumerate() {
        if count == 1 {
            // One buffer: the previous chunk's copies must have read it.
            e.wait()?;
        }
        let t = Instant::now();
        fill(k, &mut e.buffer(k % count)[..size]);
        e.add_host_ms(1e3 * t.elapsed().as_secs_f64());
        // The copies of chunk k - 1 may still run (from the other buffer); those of chunk
        // k - 2, which read this buffer, were waited for before chunk k - 1 was queued.
        e.wait()?;
        e.queue(k % count, segments)?;
    }
    e.wait()
}

/// Chunk k scattered from buffer k % count while chunk k + 1's copies run into the other.
fn download_pipeline(
    e: &mut impl CopyEngine,
    chunks: &[Vec<Segment>],
    sizes: &[usize],
    mut scatter: impl FnMut(usize, &[f64]),
) -> Result<()> {
    let count = e.count();
    if let Some(first) = chunks.first() {
        e.queue(0, first)?;
    }
    for k in 0..chunks.len() {
        // Only chunk k's copies are queued: after this its buffer is complete.
        e.wait()?;
        let next = chunks.get(k + 1);
        if let (Some(next), 2) = (next, count) {
            // Into the other buffer, scattered (and so free) in iteration k - 1.
            e.queue((k + 1) % 2, next)?;
        }
        let t = Instant::now();
        scatter(k, &e.buffer(k % count)[..sizes[k]]);
        e.add_host_ms(1e3 * t.elapsed().as_secs_f64());
        if let (Some(next), 1) = (next, count) {
            e.queue(0, next)?;
        }
    }
    Ok(())
}

/// The pipelines' copies on a CUDA stream between pinned buffers and the device array at
/// `base`, host to device (`upload`) or back.
struct StreamCopies<'a> {
    host: Vec<&'a mut [f64]>,
    stream: &'a CudaStream,
    base: cudarc::driver::sys::CUdeviceptr,
    upload: bool,
    times: StagedTimes,
}

impl<'a> StreamCopies<'a> {
    /// The copies between `buffers` and the device array of `len` values at `base`, after
    /// checking that `chunks` fit both; with the values of each chunk.
    fn new(
        buffers: &'a mut StagingBuffers,
        stream: &'a CudaStream,
        chunks: &[Vec<Segment>],
        len: usize,
        base: cudarc::driver::sys::CUdeviceptr,
        upload: bool,
    ) -> Result<(Self, Vec<usize>)> {
        let sizes = buffers.check(chunks, len)?;
        let host = buffers.slices()?;
        let engine = StreamCopies {
            host,
            stream,
            base,
            upload,
            times: StagedTimes::default(),
        };
        Ok((engine, sizes))
    }
}

impl CopyEngine for StreamCopies<'_> {
    fn count(&self) -> usize {
        self.host.len()
    }

    fn buffer(&mut self, i: usize) -> &mut [f64] {
        self.host[i]
    }

    fn queue(&mut self, i: usize, segments: &[Segment]) -> Result<()> {
        let mut at = 0;
        for s in segments {
            let host = &mut self.host[i][at..at + s.len];
            let device = self.base + (s.dst * 8) as u64;
            // SAFETY: the device range lies inside the array (`StagingBuffers::check`);
            // the host range is pinned, and the pipelines touch it again only after a
            // `wait` has seen this copy finish.
            let r = unsafe {
                if self.upload {
                    cudarc::driver::result::memcpy_htod_async(device, host, self.stream.cu_stream())
                } else {
                    cudarc::driver::result::memcpy_dtoh_async(host, device, self.stream.cu_stream())
                }
            };
            r.map_err(err(if self.upload {
                "uploading a staged chunk"
            } else {
                "downloading a staged chunk"
            }))?;
            at += s.len;
            self.times.bytes += (s.len * 8) as u64;
        }
        Ok(())
    }

    fn wait(&mut self) -> Result<()> {
        let t = Instant::now();
        self.stream
            .synchronize()
            .map_err(err("waiting for a staged copy"))?;
        self.times.wait_ms += 1e3 * t.elapsed().as_secs_f64();
        Ok(())
    }

    fn add_host_ms(&mut self, ms: f64) {
        self.times.fill_ms += ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_shape_follows_the_tuning_options() {
        // The defaults: 64 MiB (8 Mi f64), two buffers; 3 MiB (384 Ki f64) x2 for each
        // worker.
        let want = StageShape {
            values: 1 << 23,
            buffers: 2,
            lane_values: 3 << 17,
            lane_buffers: 2,
        };
        assert_eq!(StageShape::default(), want);
        assert_eq!(
            (want.values, want.lane_values),
            (STAGE_BYTES / 8, LANE_BYTES / 8)
        );
        let t = TuningOptions {
            stage_mib: 16,
            stage_buffers: 4,
            lane_mib: 4,
            lane_buffers: 3,
            ..TuningOptions::default()
        };
        let want = StageShape {
            values: 2 << 20,
            buffers: 4,
            lane_values: 1 << 19,
            lane_buffers: 3,
        };
        assert_eq!(StageShape::of(&t), want);
    }

    /// Copies run at the two extremes a stream allows. Deferred: only at `wait`, reading
    /// the host buffer then, so that a fill overwriting a buffer whose copies are still
    /// queued, or a scatter reading one before its copies were waited for, gives wrong
    /// values. Eager: at once, so that copies queued into a buffer the host has yet to
    /// scatter overwrite it.
    struct Simulated {
        buffers: Vec<Vec<f64>>,
        device: Vec<f64>,
        upload: bool,
        eager: bool,
        queued: Vec<(usize, Vec<Segment>)>,
        copies: usize,
    }

    impl Simulated {
        fn run(&mut self) {
            for (i, segments) in std::mem::take(&mut self.queued) {
                let mut at = 0;
                for s in segments {
                    let (host, device) = (
                        &mut self.buffers[i][at..at + s.len],
                        &mut self.device[s.dst..s.dst + s.len],
                    );
                    if self.upload {
                        device.copy_from_slice(host);
                    } else {
                        host.copy_from_slice(device);
                    }
                    at += s.len;
                }
                self.copies += 1;
            }
        }
    }

    impl CopyEngine for Simulated {
        fn count(&self) -> usize {
            self.buffers.len()
        }

        fn buffer(&mut self, i: usize) -> &mut [f64] {
            &mut self.buffers[i]
        }

        fn queue(&mut self, i: usize, segments: &[Segment]) -> Result<()> {
            self.queued.push((i, segments.to_vec()));
            if self.eager {
                self.run();
            }
            Ok(())
        }

        fn wait(&mut self) -> Result<()> {
            self.run();
            Ok(())
        }

        fn add_host_ms(&mut self, _: f64) {}
    }

    /// Chunks of `sizes` values, each split into two segments placed in reverse order in
    /// a device array of their total.
    fn chunks(sizes: &[usize]) -> Vec<Vec<Segment>> {
        let total: usize = sizes.iter().sum();
        let mut end = total;
        sizes
            .iter()
            .map(|&n| {
                let h = n / 2;
                end -= n;
                vec![
                    Segment {
                        dst: end + h,
                        len: n - h,
                    },
                    Segment { dst: end, len: h },
                ]
            })
            .collect()
    }

    /// The value at device offset i of the expected array of `chunks`: the chunk's own
    /// index and position, so that a value of another chunk shows.
    fn values(chunks: &[Vec<Segment>]) -> Vec<f64> {
        let total: usize = chunks.iter().flatten().map(|s| s.len).sum();
        let mut v = vec![f64::NAN; total];
        for (k, c) in chunks.iter().enumerate() {
            let mut at = 0;
            for s in c {
                for j in 0..s.len {
                    v[s.dst + j] = (1000 * k + at + j) as f64;
                }
                at += s.len;
            }
        }
        v
    }

    #[test]
    fn the_pipelines_never_touch_a_buffer_whose_copies_are_queued() {
        for sizes in [vec![], vec![7], vec![5, 5, 5, 3], vec![4, 6, 2, 6, 1]] {
            let chunks = chunks(&sizes);
            let expect = values(&chunks);
            let largest = sizes.iter().copied().max().unwrap_or(0);
            for (count, eager) in [(1, false), (2, false), (1, true), (2, true)] {
                let mut e = Simulated {
                    buffers: vec![vec![f64::NAN; largest]; count],
                    device: vec![f64::NAN; expect.len()],
                    upload: true,
                    eager,
                    queued: Vec::new(),
                    copies: 0,
                };
                upload_pipeline(&mut e, &chunks, &sizes, |k, buf| {
                    for (j, x) in buf.iter_mut().enumerate() {
                        *x = (1000 * k + j) as f64;
                    }
                })
                .unwrap();
                assert!(e.queued.is_empty(), "every copy waited for");
                assert_eq!(e.copies, sizes.len());
                assert!(
                    e.device
                        .iter()
                        .zip(&expect)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "upload {sizes:?} through {count}, eager {eager}"
                );
                // Back: every chunk scattered once, in order, with its own values.
                e.upload = false;
                e.copies = 0;
                e.buffers.iter_mut().for_each(|b| b.fill(f64::NAN));
                let mut seen = Vec::new();
                download_pipeline(&mut e, &chunks, &sizes, |k, buf| {
                    assert_eq!(buf.len(), sizes[k]);
                    for (j, &x) in buf.iter().enumerate() {
                        assert_eq!(
                            x,
                            (1000 * k + j) as f64,
                            "download {sizes:?} through {count}, eager {eager}"
                        );
                    }
                    seen.push(k);
                })
                .unwrap();
                assert!(e.queued.is_empty(), "nothing queued after the last scatter");
                assert_eq!(seen, (0..sizes.len()).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn oversized_chunks_and_stray_segments_are_refused() {
        assert_eq!(check_chunks(8, &chunks(&[8, 3]), 11).unwrap(), vec![8, 3]);
        assert!(check_chunks(8, &chunks(&[9]), 9).is_err());
        assert!(check_chunks(8, &chunks(&[4, 4]), 7).is_err());
    }
}
