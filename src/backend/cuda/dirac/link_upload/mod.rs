//! Version 3.0's links (r18 and r12) uploaded as whole sites of the canonical field and laid
//! out on the device. The host layout (`fast_layout::links_chunk_to_soa`
//! into the pinned staging buffers) bounded the upload at ~10-13 GB/s on a 16-core host
//! against 54 GB/s of pinned bandwidth; here the host only copies, and the permutation to
//! the parity-major rows is kernel `links_from_sites` (kernels/layout.cu), run on each
//! chunk in a device scratch buffer (`Purpose::GaugeUpload`, one chunk per lane, set-up
//! only).
//!
//! The path (`LinkUpload`): every worker thread of the pool takes the next chunk of whole
//! sites no worker has taken (r12: rows 0 and 1 of each link, the 12 of 18 reals kept),
//! copies it into its own pinned buffers (`StageShape::lane_values`, 3 MiB), small so that
//! they can stay in the caches, and sends it on its own stream into its own slot of the
//! scratch buffer, where the kernel lays it out (validate/RESULTS.md: 1.2-1.7x the rate of
//! one shared pipeline, 84-86% of the pinned rate). r8 keeps the host layout (`Host`: its
//! packing is host math).
//!
//! Every value is a copy: the array is the host layout's bit for bit (tests/gpu_fast.rs).

pub mod bench;
pub mod chunks;

use self::chunks::{chunk_source, site_chunks, SiteChunk};
use crate::backend::cuda::core::device::err;
use crate::backend::cuda::core::staging::chunk_sites;
pub use crate::backend::cuda::core::staging::LinkUpload;
use crate::backend::cuda::core::staging::{StageShape, StagingBuffers};
use crate::error::{Error, Result};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::threads::Stores;
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtrMut, LaunchConfig,
    PushKernelArg,
};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Where the device-side upload's wall time went, milliseconds, and what it moved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct DeviceUploadTimes {
    /// Taking the staging buffers from the pinned pool, pinning any it lacked.
    pub pin_ms: f64,
    /// The host's copies into the staging buffers.
    pub copy_ms: f64,
    /// Waiting for transfers and layout kernels the host's copies did not hide.
    pub wait_ms: f64,
    /// Giving the staging buffers back to the pool.
    pub unpin_ms: f64,
    /// The layout kernels, event-timed on the device (inside the waits or overlapped with
    /// the host's copies).
    pub kernel_ms: f64,
    /// Queuing the chunks' copies, layouts and events.
    pub queue_ms: f64,
    /// How much later than the mean the slowest worker finished.
    pub spread_ms: f64,
    /// Bytes copied host to device.
    pub transfer_bytes: u64,
}

/// The arguments of `links_from_sites` that do not change between chunks: the lattice,
/// the stored elements per link and the complex per link in the scratch buffer
/// (`LinkUpload::stride`).
pub(crate) struct LayoutKernel<'a> {
    pub func: &'a CudaFunction,
    pub lattice: &'a Lattice,
    pub elems: usize,
    pub stride: usize,
}

/// Lay chunk `c` (in `scratch`) out into `links`.
fn launch_layout(
    stream: &Arc<CudaStream>,
    k: &LayoutKernel<'_>,
    scratch: u64,
    c: &SiteChunk,
    links: u64,
) -> Result<()> {
    let l = k.lattice;
    let vh = (l.volume() / 2) as i64;
    let first_cb = (c.first / 2) as i64;
    let pairs = (c.sites / 2) as i32;
    let (elems, stride) = (k.elems as i32, k.stride as i32);
    let [lx, ly, lz, lt] = l.dims.map(|d| d as i32);
    let parity_offset = (l.offset.iter().sum::<usize>() % 2) as i32;
    let n = c.sites / 2 * NDIM * k.elems;
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(256).max(1) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(k.func);
    b.arg(&scratch)
        .arg(&links)
        .arg(&vh)
        .arg(&first_cb)
        .arg(&pairs)
        .arg(&elems)
        .arg(&stride)
        .arg(&lx)
        .arg(&ly)
        .arg(&lz)
        .arg(&lt)
        .arg(&parity_offset);
    // SAFETY: links_from_sites(const double2*, double2*, long long, long long, int, int,
    // int, int x4, int): `scratch` holds the chunk's sites at `stride` (the caller's
    // copy precedes on the stream), `links` points at the whole 3.0 array of `elems` per
    // link (checked by the caller, and alive until the stream has finished), and the
    // kernel guards its thread index.
    unsafe { b.launch(cfg) }.map_err(err("launching links_from_sites"))?;
    Ok(())
}

/// Event-times the layout kernels of a chunk; read after the stream has been waited for.
struct KernelTimer {
    start: cudarc::driver::CudaEvent,
    end: cudarc::driver::CudaEvent,
    pending: bool,
    ms: f64,
}

impl KernelTimer {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let ev = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(err("creating an event"))
        };
        Ok(KernelTimer {
            start: ev()?,
            end: ev()?,
            pending: false,
            ms: 0.0,
        })
    }

    /// Wait for the last recorded end event (none recorded: at once), then book the pair.
    fn wait(&mut self) -> Result<()> {
        if self.pending {
            self.end
                .synchronize()
                .map_err(err("waiting for a link chunk"))?;
        }
        self.collect()
    }

    /// Book the last recorded pair (the stream has been synchronised since).
    fn collect(&mut self) -> Result<()> {
        if self.pending {
            self.ms += self
                .start
                .elapsed_ms(&self.end)
                .map_err(err("timing the link layout"))? as f64;
            self.pending = false;
        }
        Ok(())
    }
}

/// Queue the copy of chunk `c` (`src`, pinned or registered host memory that stays
/// unwritten until the stream has been synchronised) into the scratch buffer at `sptr`
/// and its layout into `links`, the layout between `timer`'s events. Returns the bytes
/// copied. The caller has checked that the chunk fits the scratch buffer.
fn copy_and_lay_out(
    stream: &Arc<CudaStream>,
    sptr: u64,
    src: &[f64],
    kernel: &LayoutKernel<'_>,
    c: &SiteChunk,
    links: u64,
    timer: &mut KernelTimer,
) -> Result<u64> {
    // SAFETY: `src` fits the scratch buffer (the caller's check) and is page-locked and
    // left unwritten until the stream has been synchronised (the caller's contract).
    unsafe { cudarc::driver::result::memcpy_htod_async(sptr, src, stream.cu_stream()) }
        .map_err(err("uploading a link chunk"))?;
    timer
        .start
        .record(stream)
        .map_err(err("recording an event"))?;
    launch_layout(stream, kernel, sptr, c, links)?;
    timer
        .end
        .record(stream)
        .map_err(err("recording an event"))?;
    timer.pending = true;
    Ok((src.len() * 8) as u64)
}

/// Check the destination before any copy.
fn check_links(links: &CudaSlice<f64>, lattice: &Lattice, elems: usize) -> Result<()> {
    let need = 2 * NDIM * elems * lattice.volume();
    if links.len() != need || !lattice.volume().is_multiple_of(2) {
        return Err(Error::internal(format!(
            "the device link layout needs an even volume and an array of {need} values, got {} on {} sites",
            links.len(),
            lattice.volume()
        )));
    }
    Ok(())
}

/// The chunks of `per_chunk` sites of an upload at the kernel's stride, after checking,
/// before any copy, the destination (`check_links`), the host field's length and that
/// `lanes` chunks fit the scratch buffer.
fn checked_chunks(
    links_host: &[f64],
    kernel: &LayoutKernel<'_>,
    per_chunk: usize,
    lanes: usize,
    scratch: &CudaSlice<f64>,
    links: &CudaSlice<f64>,
) -> Result<Vec<SiteChunk>> {
    let volume = kernel.lattice.volume();
    check_links(links, kernel.lattice, kernel.elems)?;
    let largest = lanes * per_chunk.min(volume) * 2 * NDIM * kernel.stride;
    if largest > scratch.len() || links_host.len() != 18 * NDIM * volume {
        return Err(Error::internal(format!(
            "a chunk of {largest} values (stride {}) does not fit the scratch buffer of {}, or the field ({} values) is not the lattice's",
            kernel.stride,
            scratch.len(),
            links_host.len()
        )));
    }
    Ok(site_chunks(volume, per_chunk))
}

/// Upload the links with `mode` (`Workers`; `Host` is the backend's own path and refused
/// here) in chunks of `stage`'s size for the mode (`StageShape::link_chunk_values`, as
/// `scratch_values` sizes the scratch buffer): `upload_by_workers`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn upload(
    mode: LinkUpload,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    links_host: &[f64],
    kernel: &LayoutKernel<'_>,
    stage: StageShape,
    scratch: &mut CudaSlice<f64>,
    links: &mut CudaSlice<f64>,
) -> Result<DeviceUploadTimes> {
    let volume = kernel.lattice.volume();
    let job = Job {
        ctx,
        stream,
        links_host,
        kernel,
        per_chunk: chunk_sites(volume, kernel.stride, stage.link_chunk_values(mode)),
        stage,
        scratch,
        links,
    };
    match mode {
        LinkUpload::Workers => upload_by_workers(job),
        LinkUpload::Host => Err(Error::internal(
            "the host link layout is not a device upload",
        )),
    }
}

/// One upload's arguments, as `upload` derives them for every path: the host field
/// (`links_as_f64`), the layout kernel, the chunk size in sites, the stage shape, the
/// device scratch buffer and the destination.
struct Job<'a> {
    ctx: &'a Arc<CudaContext>,
    stream: &'a Arc<CudaStream>,
    links_host: &'a [f64],
    kernel: &'a LayoutKernel<'a>,
    per_chunk: usize,
    stage: StageShape,
    scratch: &'a mut CudaSlice<f64>,
    links: &'a mut CudaSlice<f64>,
}

impl Job<'_> {
    /// `checked_chunks` for `lanes` chunks in flight side by side.
    fn chunks(&self, lanes: usize) -> Result<Vec<SiteChunk>> {
        checked_chunks(
            self.links_host,
            self.kernel,
            self.per_chunk,
            lanes,
            self.scratch,
            self.links,
        )
    }
}

/// What one lane of a staged link upload did: milliseconds summed over its chunks, and
/// the bytes it copied host to device.
#[derive(Default)]
struct LaneTimes {
    copy_ms: f64,
    wait_ms: f64,
    /// Queuing each chunk's copy, layout and events (driver calls).
    queue_ms: f64,
    kernel_ms: f64,
    /// From the lane's start to its stream's end.
    total_ms: f64,
    bytes: u64,
}

/// One lane of a staged link upload (one per worker
/// thread): its stream, its slot of the scratch buffer and the layout's destination.
struct Lane<'a> {
    stream: &'a Arc<CudaStream>,
    slot: u64,
    kernel: &'a LayoutKernel<'a>,
    links: u64,
    per_site: usize,
}

impl Lane<'_> {
    /// Each chunk in turn: `copy` into the next of `bufs`, once the layout of the
    /// buffer's last chunk is done (one timer per buffer: its end event, after that
    /// layout, which follows the chunk's copy on the stream, says the buffer is free
    /// again), then its copy to the slot and its layout queued on the stream (the slot is
    /// reused in stream order). Returns when the stream has finished.
    fn run<'c>(
        &self,
        ctx: &Arc<CudaContext>,
        chunks: impl Iterator<Item = &'c SiteChunk>,
        bufs: &mut [&mut [f64]],
        mut copy: impl FnMut(&SiteChunk, &mut [f64]),
    ) -> Result<LaneTimes> {
        let mut timers = (0..bufs.len())
            .map(|_| KernelTimer::new(ctx))
            .collect::<Result<Vec<_>>>()?;
        let mut lt = LaneTimes::default();
        let start = Instant::now();
        for (j, c) in chunks.enumerate() {
            let i = j % bufs.len();
            let t = Instant::now();
            timers[i].wait()?;
            lt.wait_ms += 1e3 * t.elapsed().as_secs_f64();
            let buf = &mut bufs[i][..c.sites * self.per_site];
            let t = Instant::now();
            copy(c, buf);
            lt.copy_ms += 1e3 * t.elapsed().as_secs_f64();
            // The buffer is pinned and not written again until `timers[i]` has been
            // waited for.
            let t = Instant::now();
            lt.bytes += copy_and_lay_out(
                self.stream,
                self.slot,
                buf,
                self.kernel,
                c,
                self.links,
                &mut timers[i],
            )?;
            lt.queue_ms += 1e3 * t.elapsed().as_secs_f64();
        }
        let t = Instant::now();
        self.stream
            .synchronize()
            .map_err(err("waiting for a link chunk"))?;
        lt.wait_ms += 1e3 * t.elapsed().as_secs_f64();
        lt.total_ms = 1e3 * start.elapsed().as_secs_f64();
        for timer in &mut timers {
            timer.collect()?;
        }
        lt.kernel_ms = timers.iter().map(|t| t.ms).sum();
        Ok(lt)
    }
}

/// `Workers`: chunks of `per_chunk` sites of `links_host` dealt out to the pool's
/// worker threads (`LinkUpload::lanes` of them). Each worker has `stage.lane_buffers`
/// pinned buffers of its own (from the pool), its own stream and its own slot of
/// `scratch`: it copies its next chunk alone (cached stores) into its next buffer, once the
/// buffer's last chunk has been laid out (an event), and queues the chunk's copy to its
/// slot and the layout into `links` on its stream (`Lane::run`). The buffers are small so
/// that they can stay in the caches while the copy engine reads them. Returns when every
/// stream has finished; `copy_ms`, `wait_ms` and `kernel_ms` are summed over the workers
/// and divided by their number.
fn upload_by_workers(job: Job<'_>) -> Result<DeviceUploadTimes> {
    use rayon::prelude::*;
    let volume = job.kernel.lattice.volume();
    let lanes = LinkUpload::Workers.lanes(volume, job.per_chunk);
    let chunks = job.chunks(lanes)?;
    let Job {
        ctx,
        stream,
        links_host,
        kernel,
        per_chunk,
        stage,
        scratch,
        links,
    } = job;
    let mut times = DeviceUploadTimes::default();
    if chunks.is_empty() {
        return Ok(times);
    }
    let stride = kernel.stride;
    let per_site = 2 * NDIM * stride;
    let slot = per_chunk.min(volume) * per_site;
    let count = stage.lane_buffers.max(1);
    let mut pinned = StagingBuffers::new(ctx, slot, lanes * count)?;
    times.pin_ms = pinned.pin_ms;
    let mut host = pinned.slices()?;
    let streams = (0..lanes)
        .map(|_| ctx.new_stream().map_err(err("creating a stream")))
        .collect::<Result<Vec<_>>>()?;
    // The destination and the scratch buffer were allocated (and maybe written) on
    // `stream`: the workers' streams start after it.
    stream
        .synchronize()
        .map_err(err("waiting before the link upload"))?;
    let (sptr, _sync) = scratch.device_ptr_mut(stream);
    let (lptr, _lsync) = links.device_ptr_mut(stream);
    let mut lane_buffers: Vec<Vec<&mut [f64]>> = (0..lanes).map(|_| Vec::new()).collect();
    for (i, b) in host.drain(..).enumerate() {
        lane_buffers[i % lanes].push(b);
    }
    // Each worker takes the next chunk no worker has taken.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = lane_buffers
        .into_par_iter()
        .enumerate()
        .map(|(w, mut bufs)| -> Result<LaneTimes> {
            ctx.bind_to_thread()
                .map_err(err("binding the GPU context"))?;
            let lane = Lane {
                stream: &streams[w],
                slot: sptr + (w * slot * 8) as u64,
                kernel,
                links: lptr,
                per_site,
            };
            let copy = |c: &SiteChunk, buf: &mut [f64]| {
                let src = chunk_source(links_host, c);
                crate::threads::copy_rows(buf, src, 2 * stride, 18, Stores::Cached)
            };
            let mine = std::iter::from_fn(|| chunks.get(next.fetch_add(1, Relaxed)));
            lane.run(ctx, mine, &mut bufs, copy)
        })
        .collect::<Vec<Result<LaneTimes>>>();
    // An error is returned once every worker has stopped; a worker that failed may leave
    // copies queued, but the buffers go back to the pool only after the context has
    // finished (`StagingBuffers`'s drop), so no copy reads a buffer given away.
    let mut sums = LaneTimes::default();
    let mut slowest = 0.0f64;
    for d in done {
        let d = d?;
        sums.copy_ms += d.copy_ms;
        sums.wait_ms += d.wait_ms;
        sums.queue_ms += d.queue_ms;
        sums.kernel_ms += d.kernel_ms;
        sums.total_ms += d.total_ms;
        sums.bytes += d.bytes;
        slowest = slowest.max(d.total_ms);
    }
    let n = lanes as f64;
    times.copy_ms = sums.copy_ms / n;
    times.wait_ms = sums.wait_ms / n;
    times.queue_ms = sums.queue_ms / n;
    times.kernel_ms = sums.kernel_ms / n;
    times.spread_ms = slowest - sums.total_ms / n;
    times.transfer_bytes = sums.bytes;
    let t = Instant::now();
    drop(pinned);
    times.unpin_ms = 1e3 * t.elapsed().as_secs_f64();
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::chunks::{links_as_f64, scratch_values};
    use super::*;
    use crate::backend::cuda::core::fast_layout::links_to_soa;
    use crate::backend::cuda::core::version::Reconstruct;
    use crate::field::GaugeField;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    /// links_from_sites (kernels/layout.cu) transcribed thread by thread: its reads of the
    /// chunk in `scratch` and its writes into `soa`.
    fn kernel_emulation(
        l: &Lattice,
        c: &SiteChunk,
        elems: usize,
        stride: usize,
        scratch: &[f64],
        soa: &mut [f64],
    ) {
        let vh = l.volume() / 2;
        let first_cb = c.first / 2;
        let pairs = c.sites / 2;
        let parity_offset = l.offset.iter().sum::<usize>() % 2;
        for t in 0..pairs * 4 * elems {
            let row = t / pairs;
            let j = t % pairs;
            let (mu, e) = (row / elems, row % elems);
            let cb = first_cb + j;
            let co = l.coords(2 * cb);
            let q = (co[0] + co[1] + co[2] + co[3] + parity_offset) & 1;
            for p in 0..2 {
                let local = 2 * j + ((q + p) & 1);
                let from = (local * 4 + mu) * stride + e;
                let to = p * 4 * elems * vh + row * vh + cb;
                soa[2 * to] = scratch[2 * from];
                soa[2 * to + 1] = scratch[2 * from + 1];
            }
        }
    }

    #[test]
    fn r8_keeps_the_host_layout() {
        assert_eq!(LinkUpload::default(), LinkUpload::Workers);
        for m in LinkUpload::ALL {
            assert_eq!(m.for_reconstruct(Reconstruct::R8), LinkUpload::Host);
            assert_eq!(m.stride(Reconstruct::R8), None);
            assert_eq!(m.for_reconstruct(Reconstruct::R12), m);
        }
        assert_eq!(LinkUpload::Workers.stride(Reconstruct::R12), Some(6));
        assert_eq!(LinkUpload::Workers.stride(Reconstruct::R18), Some(9));
        assert_eq!(LinkUpload::Host.stride(Reconstruct::R18), None);
        // One lane but for the workers: one per pool thread, at most one per chunk.
        let threads = rayon::current_num_threads();
        assert_eq!(LinkUpload::Host.lanes(1000, 10), 1);
        assert_eq!(LinkUpload::Workers.lanes(1000, 10), threads.min(100));
        assert_eq!(LinkUpload::Workers.lanes(1000, 999), threads.min(2));
        assert_eq!(LinkUpload::Workers.lanes(1000, 1000), 1);
    }

    #[test]
    fn chunks_are_even_cover_the_volume_once_and_fit_the_scratch() {
        // 64 MiB of f64 at r18 (72 per site): 116508 sites; r12 compact (48): 174762.
        let max = (64 << 20) / 8;
        assert_eq!(chunk_sites(usize::MAX / 4, 9, max), 116508);
        assert_eq!(chunk_sites(usize::MAX / 4, 6, max), 174762);
        // Never odd, never below 2, never above the volume.
        assert_eq!(chunk_sites(1000, 9, 72 * 3), 2);
        assert_eq!(chunk_sites(1000, 9, 1), 2);
        assert_eq!(chunk_sites(100, 9, max), 100);
        let v = 48 * 48 * 48 * 96;
        let lanes = |per| LinkUpload::Workers.lanes(v, per);
        assert_eq!(
            scratch_values(v, Reconstruct::R12, LinkUpload::Workers, max),
            174762 * 48 * lanes(174762)
        );
        assert_eq!(
            scratch_values(v, Reconstruct::R18, LinkUpload::Workers, max),
            116508 * 72 * lanes(116508)
        );
        assert_eq!(
            scratch_values(v, Reconstruct::R12, LinkUpload::Host, max),
            0
        );
        assert_eq!(
            scratch_values(v, Reconstruct::R8, LinkUpload::Workers, max),
            0
        );
        assert_eq!(
            scratch_values(16, Reconstruct::R18, LinkUpload::Workers, max),
            16 * 72
        );
        for (v, per) in [(768, 50), (768, 768), (768, 1000), (512, 2), (96, 94)] {
            let cs = site_chunks(v, per);
            let mut next = 0;
            for c in &cs {
                assert_eq!(c.first, next);
                assert!(c.first.is_multiple_of(2) && c.sites.is_multiple_of(2));
                assert!(c.sites >= 1 && c.sites <= per);
                next += c.sites;
            }
            assert_eq!(next, v);
        }
    }

    #[test]
    fn device_layout_of_copied_chunks_is_the_host_layout_bit_for_bit() {
        // The GPU test's lattices and one with a block split (8x8x8x36: more than one
        // COPY_LINKS block per chunk); chunks of several sizes, the last partial.
        for d in [[6, 4, 8, 4], [4, 4, 4, 8], [8, 8, 8, 36]] {
            let l = Lattice::new(d, DEFAULT_BOUNDARY).unwrap();
            let v = l.volume();
            let g = GaugeField::random(&l, 5);
            let canonical = links_as_f64(&g.links);
            assert_eq!(canonical.len(), 72 * v);
            assert_eq!(canonical[18 * 5 + 2], g.links[5].0[0][1].re);
            for r in [Reconstruct::R18, Reconstruct::R12] {
                let elems = r.elems();
                let mut host = vec![f64::NAN; 2 * 4 * elems * v];
                links_to_soa(&g, elems, &mut host);
                for mode in [LinkUpload::Workers] {
                    let stride = mode.stride(r).unwrap();
                    for max_values in [2 * 4 * stride * 50, 2 * 4 * stride * 75, 1 << 30] {
                        let per = chunk_sites(v, stride, max_values);
                        let scratch_len = scratch_values(v, r, mode, max_values);
                        let mut device = vec![f64::NAN; host.len()];
                        for c in site_chunks(v, per) {
                            let mut scratch = vec![f64::NAN; scratch_len];
                            let n = c.sites * 2 * 4 * stride;
                            // As a worker copies its chunk (`upload_by_workers`).
                            let src = chunk_source(canonical, &c);
                            let buf = &mut scratch[..n];
                            crate::threads::copy_rows(buf, src, 2 * stride, 18, Stores::Cached);
                            kernel_emulation(&l, &c, elems, stride, &scratch, &mut device);
                        }
                        assert!(
                            device
                                .iter()
                                .zip(&host)
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{d:?} {r:?} {mode:?} {max_values}"
                        );
                    }
                }
            }
        }
    }
}
