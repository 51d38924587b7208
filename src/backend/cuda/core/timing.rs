//! The backend's stream and its books: every launch is counted with its kernel's flops and
//! bytes, and a sample of them is bracketed by two CUDA events (CU_EVENT_DEFAULT, so they
//! time) from a reusable pool: each kernel's first `TIME_FIRST` launches (since the books
//! were last reset) and then one in `TIME_EVERY`. A kernel's time is its timed launches'
//! time scaled by its bytes over theirs (`KernelStat::millis`). Two event records cost a
//! short kernel about 4 us (measured: the 16^3x32 dslash in single r18 27.7 us a launch
//! without them, 32.1 with them), so timing every launch would make every stream-launched
//! operator that much slower; `[tuning] launch_events = "all"` still does (and `none`
//! times none). The events are read only after the stream has been synchronised anyway (a
//! reduction returning its scalar), so timing adds no host synchronisation to the solver
//! loop.

use crate::backend::cuda::core::device::driver_err;
use crate::backend::cuda::core::kernels::Kernel;
use crate::backend::cuda::core::timeline::{Timeline, TimelineRow};
use crate::backend::TuningOptions;
use crate::error::Result;
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaStream, DriverError, LaunchConfig,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Time and work of one kernel over the backend's life.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelStat {
    pub name: String,
    pub launches: u64,
    /// Its launches' time: the event-timed launches' sum scaled by all launches' bytes
    /// over theirs (exact when every launch was timed; 0 when none was).
    pub millis: f64,
    /// Launches among them that were event-timed.
    pub timed: u64,
    /// Executed floating-point operations (the kernel's own count), summed over launches.
    pub flops: u64,
    /// Global-memory bytes read and written, summed over launches.
    pub bytes: u64,
}

impl KernelStat {
    pub fn gflops(&self) -> f64 {
        if self.millis > 0.0 {
            self.flops as f64 / (self.millis * 1e6)
        } else {
            0.0
        }
    }

    pub fn gbytes_per_s(&self) -> f64 {
        if self.millis > 0.0 {
            self.bytes as f64 / (self.millis * 1e6)
        } else {
            0.0
        }
    }
}

/// A launch begun on the books: its kernel's book (None under graph capture) and, where it
/// is timed, its recorded start event with the end event to record.
pub(crate) struct Pending {
    stat: Option<usize>,
    events: Option<Events>,
}

struct Events {
    start: CudaEvent,
    end: CudaEvent,
}

struct Booked {
    stat: usize,
    events: Events,
}

/// A kernel's raw books: its launches and work, and what its timed launches add up to.
#[derive(Clone, Debug, Default)]
struct Book {
    name: String,
    stencil: bool,
    launches: u64,
    flops: u64,
    bytes: u64,
    timed: u64,
    timed_bytes: u64,
    timed_millis: f64,
}

impl Book {
    /// The book as a `KernelStat`, with `unread` milliseconds of timed launches whose
    /// events are not yet collected.
    fn stat(&self, unread: f64) -> KernelStat {
        KernelStat {
            name: self.name.clone(),
            launches: self.launches,
            millis: estimate(
                self.timed_millis + unread,
                self.timed,
                self.timed_bytes,
                self.launches,
                self.bytes,
            ),
            timed: self.timed,
            flops: self.flops,
            bytes: self.bytes,
        }
    }
}

pub(crate) use crate::backend::tuning::LaunchEvents;

/// Each kernel's first launches that are timed (so that a tuner's blocks of a few
/// applications after a reset are timed whole), then one in `TIME_EVERY`.
pub(crate) const TIME_FIRST: u64 = 16;
pub(crate) const TIME_EVERY: u64 = 64;

/// Whether launch `k` (from 0, since the books were reset) of a kernel is event-timed.
pub(crate) fn timed_launch(mode: LaunchEvents, k: u64) -> bool {
    match mode {
        LaunchEvents::All => true,
        LaunchEvents::None => false,
        LaunchEvents::Sample => k < TIME_FIRST || k.is_multiple_of(TIME_EVERY),
    }
}

/// A kernel's time from its timed launches: their `ms` scaled by all its bytes over
/// theirs (by launches where it moves no bytes); exact when every launch was timed.
pub(crate) fn estimate(ms: f64, timed: u64, timed_bytes: u64, launches: u64, bytes: u64) -> f64 {
    if timed == 0 {
        0.0
    } else if timed == launches {
        ms
    } else if timed_bytes > 0 {
        ms * bytes as f64 / timed_bytes as f64
    } else {
        ms * launches as f64 / timed as f64
    }
}

/// What the launches captured into a graph add up to (booked per graph launch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CaptureTally {
    pub launches: u64,
    pub flops: u64,
    pub bytes: u64,
}

/// Above this many unread event pairs (only outside reduction-driven loops), the stream is
/// synchronised and the events read, to bound the pool.
const MAX_PENDING: usize = 4096;

pub(crate) struct GpuStream {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pool: Vec<CudaEvent>,
    pending: Vec<Booked>,
    books: Vec<Book>,
    index: HashMap<String, usize>,
    /// Some while the stream is being captured into a graph: launches are only counted
    /// here (events cannot be recorded and read inside a graph).
    capture: Option<CaptureTally>,
    /// The graphs' time line (`TuningOptions::timeline`; empty otherwise).
    timeline: Timeline,
    /// The performance switches the launches follow (PDL, timing events, time line).
    pub(crate) tuning: TuningOptions,
}

impl GpuStream {
    pub fn new(ctx: Arc<CudaContext>, stream: Arc<CudaStream>, tuning: TuningOptions) -> Self {
        GpuStream {
            ctx,
            stream,
            pool: Vec::new(),
            pending: Vec::new(),
            books: Vec::new(),
            index: HashMap::new(),
            capture: None,
            timeline: Timeline::default(),
            tuning,
        }
    }

    /// Start counting launches instead of timing them (the stream is being captured).
    pub fn begin_capture(&mut self) {
        self.capture = Some(CaptureTally::default());
        if self.tuning.timeline {
            self.timeline.begin(&self.stream);
        }
    }

    /// Under capture with the time line on, an event record node labelled `label` on
    /// `stream` (this stream or one joined to its capture); otherwise nothing.
    pub fn mark_on(&mut self, stream: &CudaStream, label: &str) -> Result<()> {
        if self.capture.is_some() && self.tuning.timeline {
            self.timeline.mark(&self.ctx, stream, label)?;
        }
        Ok(())
    }

    /// `mark_on` this stream.
    pub fn mark(&mut self, label: &str) -> Result<()> {
        let stream = self.stream.clone();
        self.mark_on(&stream, label)
    }

    /// The time line's number of the graph captured last (0: none, or the time line off).
    pub fn timeline_graph(&self) -> u32 {
        self.timeline.current()
    }

    /// Keep the marks of time-line graph `g` as of now (synchronises).
    pub fn timeline_snapshot(&mut self, g: u32) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising the stream", e))?;
        self.timeline.snapshot(g);
        Ok(())
    }

    /// The captured graphs' marks as of their kept or last replays (synchronises; empty
    /// unless `TuningOptions::timeline`).
    pub fn timeline(&self) -> Result<Vec<TimelineRow>> {
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising the stream", e))?;
        Ok(self.timeline.rows())
    }

    /// Stop counting; what the captured launches add up to.
    pub fn end_capture(&mut self) -> CaptureTally {
        self.capture.take().unwrap_or_default()
    }

    pub fn capturing(&self) -> bool {
        self.capture.is_some()
    }

    fn event(&mut self) -> Result<CudaEvent> {
        match self.pool.pop() {
            Some(e) => Ok(e),
            None => self
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| driver_err("creating a timing event", e)),
        }
    }

    fn book_of(&mut self, name: &str, stencil: bool) -> usize {
        match self.index.get(name) {
            Some(&k) => k,
            None => {
                self.books.push(Book {
                    name: name.to_string(),
                    stencil,
                    ..Book::default()
                });
                self.index.insert(name.to_string(), self.books.len() - 1);
                self.books.len() - 1
            }
        }
    }

    /// Begin a launch of `kernel` (record its start event if it is one of the timed).
    pub fn begin(&mut self, kernel: &Kernel) -> Result<Pending> {
        if self.capture.is_some() {
            return Ok(Pending {
                stat: None,
                events: None,
            });
        }
        self.begin_named(&kernel.name(), kernel.is_stencil())
    }

    /// Begin a launch (or a graph launch) booked under `name`.
    pub fn begin_named(&mut self, name: &str, stencil: bool) -> Result<Pending> {
        let stat = self.book_of(name, stencil);
        if !timed_launch(self.tuning.launch_events, self.books[stat].launches) {
            return Ok(Pending {
                stat: Some(stat),
                events: None,
            });
        }
        if self.pending.len() >= MAX_PENDING {
            self.sync()?;
        }
        let start = self.event()?;
        let end = self.event()?;
        start
            .record(&self.stream)
            .map_err(|e| driver_err("recording a timing event", e))?;
        Ok(Pending {
            stat: Some(stat),
            events: Some(Events { start, end }),
        })
    }

    /// End a launch of `kernel` over `n` items and book it (under capture: count it).
    pub fn end(&mut self, p: Pending, kernel: Kernel, n: usize) -> Result<()> {
        if let Some(t) = &mut self.capture {
            t.launches += 1;
            t.flops += kernel.flops(n);
            t.bytes += kernel.bytes(n);
            if self.tuning.timeline {
                self.mark(&kernel.name())?;
            }
            return Ok(());
        }
        self.end_work(p, kernel.flops(n), kernel.bytes(n))
    }

    /// End a launch begun with `begin_named` (or `begin`) and book the given work.
    pub fn end_work(&mut self, p: Pending, flops: u64, bytes: u64) -> Result<()> {
        let Some(stat) = p.stat else {
            return Ok(());
        };
        let b = &mut self.books[stat];
        b.launches += 1;
        b.flops += flops;
        b.bytes += bytes;
        let Some(events) = p.events else {
            return Ok(());
        };
        b.timed += 1;
        b.timed_bytes += bytes;
        events
            .end
            .record(&self.stream)
            .map_err(|e| driver_err("recording a timing event", e))?;
        self.pending.push(Booked { stat, events });
        Ok(())
    }

    /// Launch `f` with its parameters given as pointers to their values, in the kernel's
    /// order (`launch_values!`), with the programmatic-serialisation attribute unless
    /// `TuningOptions::pdl` is off (the kernel must call common.cuh's `qcd_pdl_wait` before it
    /// touches memory).
    ///
    /// # Safety
    /// `params` must match the kernel's signature, and every address in them must be a
    /// live device allocation of this context sized for the launch.
    pub unsafe fn launch_values(
        &self,
        f: &CudaFunction,
        cfg: LaunchConfig,
        params: &mut [*mut std::ffi::c_void],
    ) -> std::result::Result<(), DriverError> {
        self.ctx.bind_to_thread()?;
        if !self.tuning.pdl_on() {
            return cudarc::driver::result::launch_kernel(
                f.cu_function(),
                cfg.grid_dim,
                cfg.block_dim,
                cfg.shared_mem_bytes,
                self.stream.cu_stream(),
                params,
            );
        }
        // SAFETY: a plain C struct and union, all zeros valid; the one field set below.
        let mut attr: sys::CUlaunchAttribute = std::mem::zeroed();
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        sys::cuLaunchKernelEx(
            &config,
            f.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
        .result()
    }

    /// Read the events of completed launches (call after the stream has been synchronised).
    pub fn collect(&mut self) -> Result<()> {
        for b in std::mem::take(&mut self.pending) {
            let ms = b
                .events
                .start
                .elapsed_ms(&b.events.end)
                .map_err(|e| driver_err("reading a timing event", e))?;
            self.books[b.stat].timed_millis += ms as f64;
            self.pool.push(b.events.start);
            self.pool.push(b.events.end);
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising the stream", e))?;
        self.collect()
    }

    /// The books so far (synchronises the stream to read the last launches).
    pub fn stats(&self) -> Result<Vec<KernelStat>> {
        self.stream
            .synchronize()
            .map_err(|e| driver_err("synchronising the stream", e))?;
        let mut unread = vec![0.0; self.books.len()];
        for b in &self.pending {
            unread[b.stat] +=
                b.events
                    .start
                    .elapsed_ms(&b.events.end)
                    .map_err(|e| driver_err("reading a timing event", e))? as f64;
        }
        Ok(self
            .books
            .iter()
            .zip(unread)
            .map(|(b, ms)| b.stat(ms))
            .collect())
    }

    /// Whether book `k` belongs to the operator application.
    pub fn is_stencil_stat(&self, k: usize) -> bool {
        self.books[k].stencil
    }

    pub fn reset(&mut self) -> Result<()> {
        self.sync()?;
        self.books.clear();
        self.index.clear();
        Ok(())
    }
}

/// As `launch!`, for kernels whose arguments are all plain values (device addresses as
/// u64, scalars) and that call `qcd_pdl_wait` before touching memory: launched through
/// `GpuStream::launch_values`, with programmatic dependent launch where it is on.
macro_rules! launch_values {
    ($gpu:expr, $kernel:expr, $n:expr, $func:expr, $cfg:expr, [$($arg:expr),* $(,)?]) => {{
        let mut params: [*mut std::ffi::c_void; _] =
            [$( $arg as *const _ as *mut std::ffi::c_void ),*];
        $crate::backend::cuda::core::timing::launch_values!(
            @params $gpu, $kernel, $n, $func, $cfg, &mut params[..]
        );
    }};
    // The argument addresses already in a slice (`*mut c_void`, one per parameter).
    (@params $gpu:expr, $kernel:expr, $n:expr, $func:expr, $cfg:expr, $params:expr) => {{
        let kernel = $kernel;
        let pending = $gpu.begin(&kernel)?;
        // SAFETY: the argument list matches the kernel's signature (see the call site's
        // kernel source), every address is a live device allocation of this context sized
        // for the launch, and the kernels guard their indices and call qcd_pdl_wait first.
        let launched = unsafe { $gpu.launch_values($func, $cfg, $params) };
        launched.map_err(|e| $crate::backend::cuda::core::device::driver_err(&format!("launching {}", kernel.name()), e))?;
        $gpu.end(pending, kernel, $n)?;
    }};
}
pub(crate) use launch_values;

/// Launch a kernel on a `GpuStream` and book it: `launch!(gpu, kernel, n, func, cfg, [args])`.
/// The arguments must match the kernel's extern "C" signature in kernels/*.cu.
macro_rules! launch {
    ($gpu:expr, $kernel:expr, $n:expr, $func:expr, $cfg:expr, [$($arg:expr),* $(,)?]) => {{
        #[allow(unused_imports)]
        use cudarc::driver::PushKernelArg as _;
        let kernel = $kernel;
        let pending = $gpu.begin(&kernel)?;
        let mut builder = $gpu.stream.launch_builder($func);
        $( builder.arg($arg); )*
        // SAFETY: the argument list matches the kernel's signature (see the call site's
        // kernel source), every buffer is a live device allocation of this context sized
        // for the launch, and the kernels guard their indices.
        let launched = unsafe { builder.launch($cfg) };
        launched.map_err(|e| $crate::backend::cuda::core::device::driver_err(&format!("launching {}", kernel.name()), e))?;
        $gpu.end(pending, kernel, $n)?;
    }};
}
pub(crate) use launch;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_times_the_first_launches_then_one_in_time_every() {
        let timed = |mode, n: u64| (0..n).filter(|&k| timed_launch(mode, k)).count();
        // floor's 200 launches of a row: 0..16, then 64, 128 and 192.
        assert_eq!(timed(LaunchEvents::Sample, 200), 19);
        assert_eq!(timed(LaunchEvents::Sample, TIME_FIRST), TIME_FIRST as usize);
        assert_eq!(timed(LaunchEvents::All, 200), 200);
        assert_eq!(timed(LaunchEvents::None, 200), 0);
        assert!(!timed_launch(LaunchEvents::Sample, TIME_FIRST));
        assert!(timed_launch(LaunchEvents::Sample, TIME_EVERY));
    }

    #[test]
    fn the_estimate_scales_the_timed_launches_by_bytes() {
        // Every launch timed: their sum exactly.
        assert_eq!(estimate(3.0, 3, 300, 3, 300), 3.0);
        // None timed: nothing to scale.
        assert_eq!(estimate(0.0, 0, 0, 5, 500), 0.0);
        // 2 of 10 equal launches timed at 1 ms each: 10 ms (to rounding).
        assert!((estimate(2.0, 2, 200, 10, 1000) - 10.0).abs() < 1e-12);
        // Launches of different sizes: by bytes, not by count (one large one timed of a
        // large and three small ones moving a third of its bytes each: 2x its time).
        assert!((estimate(1.5, 1, 300, 4, 600) - 3.0).abs() < 1e-12);
        // No bytes booked: by launches.
        assert!((estimate(1.0, 1, 0, 4, 0) - 4.0).abs() < 1e-12);
    }
}
