//! Opening the GPU and asking it about itself: library and device checks that turn every
//! absence into a clear `Error::Cuda` (cudarc would panic), driver-error mapping (out of
//! memory becomes `Error::DeviceMemory`), the free-memory check made before allocating,
//! `device_info`, and the streaming triad whose bandwidth a solve is compared against.

use crate::backend::cuda::core::compile::{self, Program};
use crate::error::{Error, Result};
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaModule, CudaStream, DriverError, LaunchConfig,
    PushKernelArg,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// What `device_info` reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    pub name: String,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    pub total_mem: usize,
    pub free_mem: usize,
    pub sm_count: i32,
}

/// Map a driver error; out-of-memory is its own error (exit 6).
pub(crate) fn driver_err(what: &str, e: DriverError) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::DeviceMemory(format!("{what}: {e}"))
    } else {
        Error::Cuda(format!("{what}: {e}"))
    }
}

/// libcuda must be loadable before cudarc touches it.
pub(crate) fn require_driver() -> Result<()> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Cuda(
            "libcuda not found: no NVIDIA driver on this machine (libcuda.so must be on the loader path); use the CPU backend or run on a machine with an NVIDIA GPU".into(),
        ))
    }
}

/// GPUs visible to this process (an error without a driver).
pub fn device_count() -> Result<usize> {
    require_driver()?;
    cudarc::driver::result::init().map_err(|e| driver_err("initialising the CUDA driver", e))?;
    let count = CudaContext::device_count().map_err(|e| driver_err("counting GPUs", e))?;
    Ok(count.max(0) as usize)
}

/// A new stream on GPU `ordinal`'s primary context (the context its backends use).
pub fn stream_on(ordinal: usize) -> Result<Arc<cudarc::driver::CudaStream>> {
    open_context(ordinal)?
        .new_stream()
        .map_err(|e| driver_err(&format!("creating a stream on GPU {ordinal}"), e))
}

/// The primary context of GPU `ordinal`, with a clear error when there is none.
pub(crate) fn open_context(ordinal: usize) -> Result<Arc<CudaContext>> {
    require_driver()?;
    cudarc::driver::result::init().map_err(|e| driver_err("initialising the CUDA driver", e))?;
    let count = CudaContext::device_count().map_err(|e| driver_err("counting GPUs", e))?;
    if count <= 0 {
        return Err(Error::Cuda("no CUDA-capable GPU found".into()));
    }
    if ordinal >= count as usize {
        return Err(Error::Cuda(format!(
            "GPU {ordinal} requested but only {count} found (devices 0..{count})"
        )));
    }
    let ctx =
        CudaContext::new(ordinal).map_err(|e| driver_err(&format!("opening GPU {ordinal}"), e))?;
    retain(ordinal)?;
    Ok(ctx)
}

pub(crate) fn default_pool(ctx: &CudaContext) -> Result<sys::CUmemoryPool> {
    ctx.bind_to_thread()
        .map_err(|e| driver_err("binding the GPU context", e))?;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer and the device handle is the context's own.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
        .result()
        .map_err(|e| driver_err("reading the default memory pool", e))?;
    Ok(pool)
}

/// Set the default pool's release threshold to `bytes` (`TuningOptions::pool_keep_mib`;
/// each backend sets its own options' value when it opens the device, and the first
/// opening in the process keeps everything).
///
/// The pool (cudarc allocates from it, stream-ordered) keeps of freed memory across synchronisations: everything by default (`[tuning]
/// pool_keep_mib`, `TuningOptions::pool_keep_mib`; 0: CUDA's default, everything goes
/// back at each synchronisation). Kept memory makes a later allocation a suballocation
/// instead of a new mapping: a solve's fields are freed and allocated again between its
/// phases (the mixed solver's restarts, the even-odd reconstruction) and from one solve to
/// the next (validate/RESULTS.md). What goes back at a synchronisation is unmapped there,
/// and with ranks as threads on several GPUs those unmappings queue behind each other
/// (our reading, not traced; the times are measured): with 1 GiB kept (the former
/// default) the 32^3x64-per-GPU solve took 55.2 ms on one GPU, 61.8 on two and 71.4 on
/// four, keeping everything 48.7, 54.8 and 55.7. The free-memory checks trim the pool
/// first (`trim_pool`), so what it keeps is never counted as taken.
pub(crate) fn keep_pool(ctx: &CudaContext, bytes: u64) -> Result<()> {
    let pool = default_pool(ctx)?;
    let mut bytes = bytes;
    // SAFETY: the attribute takes a cuuint64_t, which `bytes` is.
    unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut bytes as *mut u64 as *mut std::ffi::c_void,
        )
    }
    .result()
    .map_err(|e| driver_err("setting the memory pool's release threshold", e))
}

/// Give the memory the default pool keeps (freed, unused) back to the device, after
/// the work queued so far: cuMemGetInfo then counts only live allocations.
pub fn trim_pool(ctx: &CudaContext) -> Result<()> {
    ctx.synchronize()
        .map_err(|e| driver_err("synchronising before trimming the memory pool", e))?;
    let pool = default_pool(ctx)?;
    // SAFETY: a pool handle of this device.
    unsafe { sys::cuMemPoolTrimTo(pool, 0) }
        .result()
        .map_err(|e| driver_err("trimming the memory pool", e))
}

/// Keep GPU `ordinal`'s primary context alive for the rest of the process. The driver
/// destroys a primary context when its last user releases it, and building one costs a
/// few hundred milliseconds: without this, every short-lived user (the device query, the
/// memory checks, the triad) would build and destroy it again. A separate handle is kept
/// (not the caller's), so that what a caller sets on its handle (event tracking) stays
/// its own.
fn retain(ordinal: usize) -> Result<()> {
    static RETAINED: Mutex<Vec<Arc<CudaContext>>> = Mutex::new(Vec::new());
    let mut kept = RETAINED
        .lock()
        .map_err(|_| Error::internal("the retained GPU contexts' lock is poisoned"))?;
    if !kept.iter().any(|c| c.ordinal() == ordinal) {
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| driver_err(&format!("opening GPU {ordinal}"), e))?;
        // The first opening in this process: the pool's policy (an old driver without
        // memory pools keeps CUDA's default, noted only).
        if let Err(e) = keep_pool(&ctx, crate::backend::tuning::PoolKeep::All.bytes()) {
            tracing::warn!("GPU {ordinal}: {e}");
        }
        kept.push(ctx);
    }
    Ok(())
}

/// "sm_90" for compute capability 9.0.
pub(crate) fn arch_of(ctx: &CudaContext) -> Result<String> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| driver_err("reading the compute capability", e))?;
    Ok(format!("sm_{major}{minor}"))
}

/// Refuse, before allocating, a need larger than the device's free memory.
/// Free and total memory of GPU `device` in bytes (opens its context).
pub fn device_free_memory(device: usize) -> Result<(u64, u64)> {
    let ctx = open_context(device)?;
    trim_pool(&ctx)?;
    let (free, total) = ctx
        .mem_get_info()
        .map_err(|e| driver_err("reading free device memory", e))?;
    Ok((free as u64, total as u64))
}

pub(crate) fn ensure_fits(ctx: &CudaContext, need: usize, what: &str) -> Result<()> {
    trim_pool(ctx)?;
    let (free, total) = ctx
        .mem_get_info()
        .map_err(|e| driver_err("reading free device memory", e))?;
    if need > free {
        return Err(Error::DeviceMemory(format!(
            "{what} needs {need} bytes ({:.2} GiB) but the device has {free} bytes ({:.2} GiB) free of {total}",
            need as f64 / GIB,
            free as f64 / GIB
        )));
    }
    Ok(())
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

type ModuleKey = (usize, Program, String);

fn module_cache() -> &'static Mutex<HashMap<ModuleKey, Arc<CudaModule>>> {
    static CACHE: OnceLock<Mutex<HashMap<ModuleKey, Arc<CudaModule>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Load (once per process and device) the module of a program, compiling it if needed.
/// Returns the module and whether it was loaded by this call (so that constant memory can
/// be initialised once).
pub(crate) fn load_module(
    ctx: &Arc<CudaContext>,
    program: &Program,
) -> Result<(Arc<CudaModule>, bool)> {
    let arch = arch_of(ctx)?;
    let key = (ctx.ordinal(), program.clone(), arch.clone());
    if let Some(m) = module_cache().lock().unwrap().get(&key) {
        return Ok((m.clone(), false));
    }
    let ptx = compile::compile(program, &arch)?;
    let module = ctx
        .load_module(ptx)
        .map_err(|e| driver_err(&format!("loading {}", program.label()), e))?;
    module_cache().lock().unwrap().insert(key, module.clone());
    Ok((module, true))
}

pub(crate) fn function(module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction> {
    module
        .load_function(name)
        .map_err(|e| driver_err(&format!("finding kernel {name}"), e))
}

pub(crate) fn err(what: &'static str) -> impl Fn(DriverError) -> Error {
    move |e| driver_err(what, e)
}

/// The CUDA driver's version as "major.minor" (cuDriverGetVersion: the highest CUDA
/// version the installed driver supports), for the tune cache's key.
pub fn driver_version() -> Result<String> {
    require_driver()?;
    let mut v: std::ffi::c_int = 0;
    // SAFETY: writes one int; the driver library is loaded (checked above).
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(err("reading the driver version"))?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// Name, compute capability, memory and multiprocessors of GPU 0.
pub fn device_info() -> Result<DeviceInfo> {
    device_info_of(0)
}

pub fn device_info_of(ordinal: usize) -> Result<DeviceInfo> {
    let ctx = open_context(ordinal)?;
    let name = ctx
        .name()
        .map_err(|e| driver_err("reading the device name", e))?;
    let cc = ctx
        .compute_capability()
        .map_err(|e| driver_err("reading the compute capability", e))?;
    let (free_mem, total_mem) = ctx
        .mem_get_info()
        .map_err(|e| driver_err("reading device memory", e))?;
    let sm_count = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| driver_err("reading the multiprocessor count", e))?;
    Ok(DeviceInfo {
        name,
        cc,
        total_mem,
        free_mem,
        sm_count,
    })
}

/// Streaming bandwidth of GPU 0 in GB/s (1e9 bytes/s): a = b + s c over three f64 arrays
/// of `bytes` bytes in all, counted as 2 reads and 1 write per element; the median of 9
/// event-timed runs after 2 warm-ups.
pub fn triad_bandwidth(bytes: usize) -> Result<f64> {
    let ctx = open_context(0)?;
    triad_on(&ctx, bytes)
}

pub(crate) fn triad_on(ctx: &Arc<CudaContext>, bytes: usize) -> Result<f64> {
    let n = bytes / 24;
    if n == 0 {
        return Err(Error::invalid("triad bytes", "need at least 24 bytes"));
    }
    ensure_fits(ctx, 3 * n * 8, "the triad")?;
    let stream: Arc<CudaStream> = ctx.default_stream();
    let (module, _) = load_module(ctx, &Program::plain(&compile::BLAS1))?;
    let f = function(&module, "triad")?;
    let fill = function(&module, "fill")?;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(err("reading the multiprocessor count"))? as u32;
    let blocks = ((n as u64).div_ceil(256)).min(sms as u64 * 32) as u32;
    let cfg = LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let s = 3.0f64;
    let nn = n as i64;
    // SAFETY: the memory is written by the fills below before the triad reads it.
    let mut a = unsafe { stream.alloc::<f64>(n) }.map_err(err("triad allocation"))?;
    let mut b = unsafe { stream.alloc::<f64>(n) }.map_err(err("triad allocation"))?;
    let mut c = unsafe { stream.alloc::<f64>(n) }.map_err(err("triad allocation"))?;
    for (x, v) in [(&mut a, 0.0f64), (&mut b, 1.0), (&mut c, 2.0)] {
        // SAFETY: fill(double* a, double v, long long n) over a device array of n doubles.
        unsafe {
            stream
                .launch_builder(&fill)
                .arg(x)
                .arg(&v)
                .arg(&nn)
                .launch(cfg)
        }
        .map_err(err("filling the triad's arrays"))?;
    }
    let mut times = Vec::new();
    for run in 0..11 {
        let start = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(err("creating an event"))?;
        let end = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(err("creating an event"))?;
        start.record(&stream).map_err(err("recording an event"))?;
        // SAFETY: triad(double* a, const double* b, const double* c, double s, long long n)
        // with three device arrays of n doubles.
        unsafe {
            stream
                .launch_builder(&f)
                .arg(&mut a)
                .arg(&b)
                .arg(&c)
                .arg(&s)
                .arg(&nn)
                .launch(cfg)
        }
        .map_err(err("launching the triad"))?;
        end.record(&stream).map_err(err("recording an event"))?;
        let ms = start.elapsed_ms(&end).map_err(err("timing the triad"))? as f64;
        if run >= 2 {
            times.push(ms);
        }
    }
    let check = stream
        .clone_dtoh(&a.slice(0..1))
        .map_err(err("triad check"))?;
    if check[0] != 7.0 {
        return Err(Error::Cuda(format!(
            "triad computed {} instead of 7",
            check[0]
        )));
    }
    times.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let median = times[times.len() / 2];
    Ok((24 * n) as f64 / (median * 1e-3) / 1e9)
}

/// Host-to-device copy bandwidth in GB/s from pinned and from pageable host memory
/// (seed 001's comparison): `bytes` per copy, median of 5 after a warm-up, wall clock
/// around a synchronised copy.
pub fn upload_bandwidth(bytes: usize) -> Result<(f64, f64)> {
    let ctx = open_context(0)?;
    let n = (bytes / 8).max(1);
    ensure_fits(&ctx, n * 8, "the upload measurement")?;
    let stream: Arc<CudaStream> = ctx.default_stream();
    let mut dst = stream
        .alloc_zeros::<f64>(n)
        .map_err(err("upload measurement allocation"))?;
    let pageable = vec![1.5f64; n];
    // SAFETY: every element is written before the copy reads it.
    let mut pinned =
        unsafe { ctx.alloc_pinned::<f64>(n) }.map_err(err("allocating pinned memory"))?;
    pinned
        .as_mut_slice()
        .map_err(err("pinned memory"))?
        .fill(1.5);
    let mut time = |from_pinned: bool| -> Result<f64> {
        let mut t = Vec::new();
        for run in 0..6 {
            let start = std::time::Instant::now();
            if from_pinned {
                stream.memcpy_htod(&pinned, &mut dst)
            } else {
                stream.memcpy_htod(&pageable, &mut dst)
            }
            .map_err(err("host-to-device copy"))?;
            stream.synchronize().map_err(err("synchronising"))?;
            if run > 0 {
                t.push(start.elapsed().as_secs_f64());
            }
        }
        t.sort_by(f64::total_cmp);
        Ok((n * 8) as f64 / t[t.len() / 2] / 1e9)
    };
    let p = time(true)?;
    let q = time(false)?;
    Ok((p, q))
}

/// What the host offers an upload beside the pinned copy of `upload_bandwidth`:
/// how fast it copies memory itself, and what registering pageable memory in
/// place costs and then gives. Benchmark figures, not checks.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct HostUploadPaths {
    /// Parallel memcpy (rayon, two equal tasks per thread), pageable to pageable, GB/s
    /// (1e9 B/s).
    pub memcpy_gbytes_per_second: f64,
    /// The same with streaming (non-temporal) stores (`threads::Stores`), GB/s.
    pub memcpy_streaming_gbytes_per_second: f64,
    /// Registering a pageable buffer of the same size in place (cuMemHostRegister, flags
    /// 0), milliseconds (once: a second registration would find it registered).
    pub register_ms: f64,
    /// Host-to-device copies from the registered buffer, GB/s.
    pub registered_gbytes_per_second: f64,
    /// Unregistering it (cuMemHostUnregister), milliseconds.
    pub unregister_ms: f64,
}

impl HostUploadPaths {
    /// No figures (a measurement that failed).
    pub fn unknown() -> Self {
        HostUploadPaths {
            memcpy_gbytes_per_second: f64::NAN,
            memcpy_streaming_gbytes_per_second: f64::NAN,
            register_ms: f64::NAN,
            registered_gbytes_per_second: f64::NAN,
            unregister_ms: f64::NAN,
        }
    }
}

/// The median of `runs` timings of `f` after one warm-up, seconds.
fn median_seconds(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut t = Vec::new();
    for run in 0..=runs {
        let start = std::time::Instant::now();
        f()?;
        if run > 0 {
            t.push(start.elapsed().as_secs_f64());
        }
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// `HostUploadPaths` for `bytes` (as `upload_bandwidth`'s: the same byte count, each rate
/// the median of 5 after a warm-up) on GPU 0, in the current rayon pool.
pub fn host_upload_paths(bytes: usize) -> Result<HostUploadPaths> {
    let n = (bytes / 8).max(1);
    let gb = (n * 8) as f64 / 1e9;
    let src: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut dst = vec![0.0f64; n];
    let memcpy = median_seconds(5, || {
        crate::threads::par_copy(&mut dst, &src);
        Ok(())
    })?;
    let streaming = median_seconds(5, || {
        let pairs = 2 * (n / 2);
        crate::threads::par_copy_rows(
            &mut dst[..pairs],
            &src[..pairs],
            2,
            2,
            crate::threads::Stores::Streaming,
            crate::threads::COPY_BLOCK / 2,
        );
        Ok(())
    })?;
    if dst[n - 1] != src[n - 1] || dst[0] != src[0] {
        return Err(Error::internal(
            "the parallel memcpy measurement copied wrongly",
        ));
    }
    drop(dst);

    let ctx = open_context(0)?;
    ensure_fits(&ctx, n * 8, "the registered upload measurement")?;
    let stream: Arc<CudaStream> = ctx.default_stream();
    let mut dev = stream
        .alloc_zeros::<f64>(n)
        .map_err(err("upload measurement allocation"))?;
    ctx.bind_to_thread()
        .map_err(err("binding the context to register host memory"))?;
    let ptr = src.as_ptr() as *mut std::ffi::c_void;
    let t = std::time::Instant::now();
    // SAFETY: `src` is a live allocation of n f64, unregistered below before it is freed;
    // the copies only read it.
    unsafe { sys::cuMemHostRegister_v2(ptr, n * 8, 0) }
        .result()
        .map_err(err("registering host memory (cuMemHostRegister)"))?;
    let register_ms = 1e3 * t.elapsed().as_secs_f64();
    let copies = median_seconds(5, || {
        stream
            .memcpy_htod(&src, &mut dev)
            .map_err(err("host-to-device copy from registered memory"))?;
        stream.synchronize().map_err(err("synchronising"))
    });
    let t = std::time::Instant::now();
    // Every copy has finished (or failed: wait for the stream all the same).
    let _ = stream.synchronize();
    // SAFETY: registered above; no copy reads it any more.
    let unregistered = unsafe { sys::cuMemHostUnregister(ptr) }
        .result()
        .map_err(err("unregistering host memory"));
    let unregister_ms = 1e3 * t.elapsed().as_secs_f64();
    let copies = copies?;
    unregistered?;
    Ok(HostUploadPaths {
        memcpy_gbytes_per_second: gb / memcpy,
        memcpy_streaming_gbytes_per_second: gb / streaming,
        register_ms,
        registered_gbytes_per_second: gb / copies,
        unregister_ms,
    })
}
