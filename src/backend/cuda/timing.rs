//! The backend's stream and its books: every launch is bracketed by two CUDA events
//! (CU_EVENT_DEFAULT, so they time) from a reusable pool, and counted with its kernel's
//! flops and bytes. The events are read only after the stream has been synchronised
//! anyway (a reduction returning its scalar), so timing adds no host synchronisation to
//! the solver loop.

use super::device::driver_err;
use super::kernels::Kernel;
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
    /// Sum of the event-timed durations of its launches.
    pub millis: f64,
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

/// A launch whose start event has been recorded (or, under graph capture, none).
pub(crate) struct Pending {
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
    stats: Vec<KernelStat>,
    stencil: Vec<bool>,
    index: HashMap<String, usize>,
    /// Some while the stream is being captured into a graph: launches are only counted
    /// here (events cannot be recorded and read inside a graph).
    capture: Option<CaptureTally>,
}

impl GpuStream {
    pub fn new(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Self {
        GpuStream {
            ctx,
            stream,
            pool: Vec::new(),
            pending: Vec::new(),
            stats: Vec::new(),
            stencil: Vec::new(),
            index: HashMap::new(),
            capture: None,
        }
    }

    /// Start counting launches instead of timing them (the stream is being captured).
    pub fn begin_capture(&mut self) {
        self.capture = Some(CaptureTally::default());
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

    /// Record the start of a launch (nothing with `QCD_SOLVE_LAUNCH_EVENTS=0`: the launch
    /// is then booked with its work but no time).
    pub fn begin(&mut self) -> Result<Pending> {
        if self.capture.is_some() || !launch_events() {
            return Ok(Pending { events: None });
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
            events: Some(Events { start, end }),
        })
    }

    /// Record the end of a launch and book it (under capture: count it).
    pub fn end(&mut self, p: Pending, kernel: Kernel, n: usize) -> Result<()> {
        if let Some(t) = &mut self.capture {
            t.launches += 1;
            t.flops += kernel.flops(n);
            t.bytes += kernel.bytes(n);
            return Ok(());
        }
        self.end_named(
            p,
            &kernel.name(),
            kernel.is_stencil(),
            kernel.flops(n),
            kernel.bytes(n),
        )
    }

    /// Record the end of a launch (or of a graph launch) and book it under `name` with
    /// the given work.
    pub fn end_named(
        &mut self,
        p: Pending,
        name: &str,
        stencil: bool,
        flops: u64,
        bytes: u64,
    ) -> Result<()> {
        let Some(events) = p.events else {
            if !launch_events() {
                self.book_untimed(name, stencil, flops, bytes);
            }
            return Ok(());
        };
        events
            .end
            .record(&self.stream)
            .map_err(|e| driver_err("recording a timing event", e))?;
        let stat = self.stat_index(name, stencil);
        let s = &mut self.stats[stat];
        s.launches += 1;
        s.flops += flops;
        s.bytes += bytes;
        self.pending.push(Booked { stat, events });
        Ok(())
    }

    fn stat_index(&mut self, name: &str, stencil: bool) -> usize {
        match self.index.get(name) {
            Some(&k) => k,
            None => {
                self.stats.push(KernelStat {
                    name: name.to_string(),
                    launches: 0,
                    millis: 0.0,
                    flops: 0,
                    bytes: 0,
                });
                self.stencil.push(stencil);
                self.index.insert(name.to_string(), self.stats.len() - 1);
                self.stats.len() - 1
            }
        }
    }

    fn book_untimed(&mut self, name: &str, stencil: bool, flops: u64, bytes: u64) {
        let k = self.stat_index(name, stencil);
        let s = &mut self.stats[k];
        s.launches += 1;
        s.flops += flops;
        s.bytes += bytes;
    }

    /// Launch `f` with its parameters given as pointers to their values, in the kernel's
    /// order (`launch_values!`), with the programmatic-serialisation attribute when
    /// `QCD_SOLVE_PDL=1` (the kernel must begin with common.cuh's `qcd_pdl_enter`).
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
        if !pdl() {
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
            self.stats[b.stat].millis += ms as f64;
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
        let mut out = self.stats.clone();
        for b in &self.pending {
            let ms = b
                .events
                .start
                .elapsed_ms(&b.events.end)
                .map_err(|e| driver_err("reading a timing event", e))?;
            out[b.stat].millis += ms as f64;
        }
        Ok(out)
    }

    /// Whether book `k` belongs to the operator application.
    pub fn is_stencil_stat(&self, k: usize) -> bool {
        self.stencil[k]
    }

    pub fn reset(&mut self) -> Result<()> {
        self.sync()?;
        self.stats.clear();
        self.stencil.clear();
        self.index.clear();
        Ok(())
    }
}

/// `QCD_SOLVE_LAUNCH_EVENTS=0`: no timing events around launches (the books keep their
/// launches and work, not their time); read once per process. An ablation of what the
/// two event records a launch cost a stream of short kernels.
pub(crate) fn launch_events() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("QCD_SOLVE_LAUNCH_EVENTS").map_or(true, |v| v.trim() != "0"))
}

/// `QCD_SOLVE_PDL=1`: `launch_values!` launches with programmatic dependent launch (common.cuh
/// `qcd_pdl_enter`); read once per process.
pub(crate) fn pdl() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("QCD_SOLVE_PDL").is_ok_and(|v| v.trim() == "1"))
}

/// As `launch!`, for kernels whose arguments are all plain values (device addresses as
/// u64, scalars) and that begin with `qcd_pdl_enter`: launched through
/// `GpuStream::launch_values`, with programmatic dependent launch where it is on.
macro_rules! launch_values {
    ($gpu:expr, $kernel:expr, $n:expr, $func:expr, $cfg:expr, [$($arg:expr),* $(,)?]) => {{
        let kernel = $kernel;
        let pending = $gpu.begin()?;
        let mut params: Vec<*mut std::ffi::c_void> =
            vec![$( $arg as *const _ as *mut std::ffi::c_void ),*];
        // SAFETY: the argument list matches the kernel's signature (see the call site's
        // kernel source), every address is a live device allocation of this context sized
        // for the launch, and the kernels guard their indices and call qcd_pdl_enter first.
        let launched = unsafe { $gpu.launch_values($func, $cfg, &mut params) };
        launched.map_err(|e| $crate::backend::cuda::device::driver_err(&format!("launching {}", kernel.name()), e))?;
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
        let pending = $gpu.begin()?;
        let mut builder = $gpu.stream.launch_builder($func);
        $( builder.arg($arg); )*
        // SAFETY: the argument list matches the kernel's signature (see the call site's
        // kernel source), every buffer is a live device allocation of this context sized
        // for the launch, and the kernels guard their indices.
        let launched = unsafe { builder.launch($cfg) };
        launched.map_err(|e| $crate::backend::cuda::device::driver_err(&format!("launching {}", kernel.name()), e))?;
        $gpu.end(pending, kernel, $n)?;
    }};
}
pub(crate) use launch;
