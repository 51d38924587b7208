//! NCCL between processes, one GPU each: `NcclComms` implements `Comms` (host
//! slices, staged through device buffers) and `DeviceExchange` (device buffers, enqueued on
//! the caller's stream), plus `global_sum_on`, the deterministic global sum on the device.
//!
//! Set-up: rank 0 makes NCCL's unique id (`new_unique_id`) and hands it to the others
//! through the TCP rendezvous (`NcclComms::from_launch` does both); every rank then calls
//! `NcclComms::new` with its stream, rank, size and the id (ncclCommInitRank, collective).
//!
//! Streams: NCCL takes the stream per call, so nothing is tied to a "communicator's
//! stream". `exchange_on` and `global_sum_on` enqueue directly on the stream they are given
//! (no event/wait pair, no host synchronisation): work queued on it before sees its inputs,
//! work queued after sees its outputs, and the calls can be captured into a CUDA graph.
//! The host paths (`Comms::exchange`, `Comms::all_gather`) use the stream `new` was given
//! and synchronise it. Rules (NCCL's): every rank issues the collective and point-to-point
//! calls of a communicator in the same order; one communicator is not used from two
//! threads at once, nor on two streams whose work may overlap.
//!
//! Messages have no tags in NCCL: sends to a peer are matched with that peer's receives in
//! the order they are issued. Both sides here issue them sorted by tag (stable), so a send
//! and a receive pair up when they have the same tag, as with `ThreadComms`. A receive's
//! length must equal the sender's (NCCL cannot check; a mismatch is undefined behaviour,
//! in practice a hang or an error).
//!
//! Global sums: ncclAllGather of every rank's partials, then a kernel adds them in rank
//! order (rank 0 first), the same order as `comms::global_sum` on the host: the same bits
//! on every rank and in every run (ncclAllReduce's order depends on the topology).
//!
//! Libraries: cudarc loads libcuda, libnccl and libnvrtc when first used and panics when
//! one is missing, so every entry point checks first and returns `Error::Cuda`. cudarc
//! looks for NCCL under the names libnccl.so, libnccl.so.13, .12, .11, .10, .9, .1, not
//! libnccl.so.2 as NCCL installs itself: a link named libnccl.so to the real library must
//! be on the loader path.

use super::launch::Launch;
use super::rendezvous::Rendezvous;
use super::{Comms, CommsStats, DeviceExchange, DeviceMessage, Incoming, Outgoing};
use crate::{Error, Result};
use cudarc::driver::{
    sys as dsys, CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig,
    PushKernelArg,
};
use cudarc::nccl::{result as nres, sys as nsys};
use std::ffi::{c_char, CStr};
use std::sync::Arc;
use std::time::Instant;

/// The size of NCCL's unique id (ncclUniqueId).
pub const ID_BYTES: usize = 128;

/// The kernel of `global_sum_on`: out[i] = parts[i] + parts[n + i] + ... in rank order.
const SUM_KERNEL: &str = r#"
extern "C" __global__ void sum_in_rank_order(const double* __restrict__ parts,
                                             double* __restrict__ out,
                                             unsigned long long n, int size)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        double s = parts[i];
        for (int r = 1; r < size; ++r) s += parts[(unsigned long long)r * n + i];
        out[i] = s;
    }
}
"#;

/// NCCL settings qcd-solve's process sets when the environment has not:
/// `NCCL_GRAPH_MIXING_SUPPORT=0`. Its default (1) lets operations captured in CUDA graphs
/// run alongside NCCL calls outside graphs, at a cost to every captured operation. Here a
/// rank's NCCL work never overlaps: the graphs' exchanges and all-gathers, and the
/// uncaptured ones of the reliable updates and of the reductions' sums, follow each other
/// through the rank's streams and events, and each host read of a sum waits for them.
/// Measured on 2 and 4 H200s (validate/RESULTS.md): the fused CR's graphs
/// 1.2-2.8% faster.
/// Set it to 1 to restore NCCL's default. Call before any thread starts (main does), as it
/// writes the environment.
pub const NCCL_DEFAULTS: &[(&str, &str)] = &[("NCCL_GRAPH_MIXING_SUPPORT", "0")];

pub fn set_process_defaults() {
    set_unset(NCCL_DEFAULTS);
}

/// Set each variable of `pairs` that the environment does not have.
fn set_unset(pairs: &[(&str, &str)]) {
    for (k, v) in pairs {
        if std::env::var_os(k).is_none() {
            std::env::set_var(k, v);
        }
    }
}

/// libcuda and libnccl must be loadable before cudarc touches them (it panics otherwise).
pub fn require_nccl() -> Result<()> {
    // SAFETY: only tries to dlopen the libraries by their usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::Cuda(
            "libcuda not found: no NVIDIA driver on this machine (libcuda.so must be on the \
             loader path); NCCL needs a GPU"
                .into(),
        ));
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Err(Error::Cuda(
            "libnccl not found: it is loaded as libnccl.so (or libnccl.so.13, .12, .11, .10, \
             .9, .1), but NCCL installs libnccl.so.2 (pip's nvidia-nccl-cu13 under \
             site-packages/nvidia/nccl/lib or nvidia/cu13/lib, apt's libnccl2): put a link \
             named libnccl.so to it in a directory on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    Ok(())
}

/// The loaded NCCL's version, "2.27.7".
pub fn nccl_version() -> Result<String> {
    let (major, minor, patch) = version_numbers()?;
    Ok(format!("{major}.{minor}.{patch}"))
}

fn version_numbers() -> Result<(i32, i32, i32)> {
    require_nccl()?;
    let code = nres::get_nccl_version().map_err(|e| nccl_err("ncclGetVersion", e))?;
    // NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before.
    Ok(if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    })
}

/// A fresh NCCL unique id (rank 0 makes it; it also starts NCCL's bootstrap listener).
pub fn new_unique_id() -> Result<[u8; ID_BYTES]> {
    require_nccl()?;
    let id = nres::get_uniqueid().map_err(|e| nccl_err("ncclGetUniqueId", e))?;
    Ok(id.internal.map(|c| c as u8))
}

/// An NCCL failure as `Error::Cuda`, with NCCL's name for it and its last message.
fn nccl_err(what: &str, e: nres::NcclError) -> Error {
    // SAFETY: ncclGetErrorString returns a static string for any result code.
    let name = unsafe { CStr::from_ptr(nsys::ncclGetErrorString(e.0)) }
        .to_string_lossy()
        .into_owned();
    // ncclGetLastError (NCCL >= 2.13) says why; with no communicator, this thread's last.
    // (Not version_numbers: that reports its own failure through here.)
    let last = match nres::get_nccl_version() {
        Ok(code) if code >= 21300 => {
            // SAFETY: a null communicator is allowed; the string is NCCL's, copied at once.
            let p = unsafe { nsys::ncclGetLastError(std::ptr::null_mut()) };
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: non-null, NUL-terminated, owned by NCCL.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        }
        _ => String::new(),
    };
    let last = if last.trim().is_empty() {
        " (NCCL_DEBUG=WARN prints NCCL's reason)".to_string()
    } else {
        format!(": {}", last.trim())
    };
    Error::Cuda(format!("{what}: {:?} {name}{last}", e.0))
}

fn driver_err(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| {
        if e.0 == dsys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::DeviceMemory(format!("{what}: {e}"))
        } else {
            Error::Cuda(format!("{what}: {e}"))
        }
    }
}

/// The device address of an allocation (kept while the allocation lives).
fn dptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// A grow-only device buffer of f64 and its address.
struct Buffer {
    slice: CudaSlice<f64>,
    ptr: u64,
}

/// One rank of an NCCL communicator.
pub struct NcclComms {
    comm: nsys::ncclComm_t,
    stream: Arc<CudaStream>,
    rank: usize,
    size: usize,
    version: String,
    stats: CommsStats,
    /// Host paths: what is sent, what is received (f64).
    send_buf: Option<Buffer>,
    recv_buf: Option<Buffer>,
    /// global_sum_on: every rank's partials (size * n).
    gather_buf: Option<Buffer>,
    sum_kernel: Option<CudaFunction>,
}

// SAFETY: an NCCL communicator may be used from any thread as long as no two threads use
// it at once; every use here goes through `&mut self` or is a plain read of rank/size.
// The device buffers and the stream are Send themselves.
unsafe impl Send for NcclComms {}

impl NcclComms {
    /// This process's rank of a communicator of `size` ranks whose unique id is `id`
    /// (`ID_BYTES` bytes from rank 0's `new_unique_id`), on `stream`'s GPU. Collective:
    /// returns once every rank has called it.
    pub fn new(stream: Arc<CudaStream>, rank: usize, size: usize, id: &[u8]) -> Result<NcclComms> {
        if size == 0 || rank >= size || size > i32::MAX as usize {
            return Err(Error::internal(format!(
                "NCCL: rank {rank} of {size} ranks"
            )));
        }
        let id: [u8; ID_BYTES] = id.try_into().map_err(|_| {
            Error::internal(format!(
                "NCCL: a unique id of {} bytes (expected {ID_BYTES})",
                id.len()
            ))
        })?;
        require_nccl()?;
        let version = nccl_version()?;
        stream
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the CUDA context"))?;
        let unique = nsys::ncclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: nsys::ncclComm_t = std::ptr::null_mut();
        let start = Instant::now();
        // SAFETY: `comm` is a valid place for the handle; the id is NCCL's 128 bytes.
        unsafe { nres::comm_init_rank(&mut comm, size as i32, unique, rank as i32) }.map_err(
            |e| {
                nccl_err(
                    &format!("ncclCommInitRank (rank {rank} of {size}, NCCL {version})"),
                    e,
                )
            },
        )?;
        tracing::debug!(
            "NCCL {version}: rank {rank} of {size} on GPU {} in {:.3} s",
            stream.context().ordinal(),
            start.elapsed().as_secs_f64()
        );
        Ok(NcclComms {
            comm,
            stream,
            rank,
            size,
            version,
            stats: CommsStats::default(),
            send_buf: None,
            recv_buf: None,
            gather_buf: None,
            sum_kernel: None,
        })
    }

    /// The communicator of a launch (`Launch::from_env`; None: a single process): rank 0
    /// makes the id and serves it at `QCD_SOLVE_MASTER`, the others fetch it there, then
    /// all call `new`. One rank needs no rendezvous and no `QCD_SOLVE_MASTER`. `stream`
    /// should be on GPU `launch.local_rank` (as CUDA numbers this process's GPUs).
    pub fn from_launch(stream: Arc<CudaStream>, launch: Option<&Launch>) -> Result<NcclComms> {
        let Some(l) = launch.filter(|l| l.size > 1) else {
            let id = new_unique_id()?;
            return NcclComms::new(stream, 0, 1, &id);
        };
        require_nccl()?;
        let master = l.master.as_deref().ok_or_else(|| {
            Error::invalid(
                super::launch::MASTER_VAR,
                format!("not set, but there are {} ranks", l.size),
            )
        })?;
        let rendezvous = if l.rank == 0 {
            let id = new_unique_id()?;
            Rendezvous::root(master, l.size, &id, l.timeout)?
        } else {
            Rendezvous::join(master, l.rank, l.size, l.timeout)?
        };
        NcclComms::new(stream, l.rank, l.size, rendezvous.payload())
    }

    /// The loaded NCCL's version, "2.27.7".
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The stream of the host paths.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Make `global_sum_on` ready for up to `max_n` doubles: compile its kernel (NVRTC)
    /// and size its scratch buffer. Needed before a CUDA graph capture that contains a
    /// `global_sum_on` (neither can happen while a stream is being captured); outside a
    /// capture `global_sum_on` does it itself. Not to be called during a capture: growing
    /// the scratch waits for the whole GPU (work queued on any stream may still read the
    /// old one).
    pub fn prepare_global_sum(&mut self, max_n: usize) -> Result<()> {
        self.bind()?;
        if self.sum_kernel.is_none() {
            self.sum_kernel = Some(compile_sum_kernel(&self.stream)?);
        }
        let need = max_n
            .checked_mul(self.size)
            .ok_or_else(|| Error::internal(format!("global_sum_on: {max_n} values")))?;
        if self
            .gather_buf
            .as_ref()
            .is_some_and(|b| b.slice.len() >= need)
        {
            return Ok(());
        }
        self.stream
            .context()
            .synchronize()
            .map_err(driver_err("synchronising before growing the scratch"))?;
        ensure(
            &mut self.gather_buf,
            need,
            &self.stream,
            "global sum scratch",
        )?;
        self.stream
            .synchronize()
            .map_err(driver_err("synchronising after allocating"))
    }

    /// `dst[0..n] = sum over ranks r, in rank order, of src[0..n] on rank r`, enqueued on
    /// `stream` (ncclAllGather into a scratch buffer, then a kernel): the same bits on
    /// every rank. `src` and `dst` are device addresses of `n` doubles on this GPU; they
    /// may be the same. No host synchronisation: may be captured into a CUDA graph once
    /// `prepare_global_sum(n)` (or an earlier call outside a capture with at least `n`)
    /// has run. Successive calls on different streams must not overlap (one scratch).
    pub fn global_sum_on(
        &mut self,
        stream: &Arc<CudaStream>,
        src: u64,
        dst: u64,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if src == 0 || dst == 0 {
            return Err(Error::internal("global_sum_on: a null device address"));
        }
        self.check_stream(stream)?;
        let need = n
            .checked_mul(self.size)
            .ok_or_else(|| Error::internal(format!("global_sum_on: {n} values")))?;
        let ready = self.sum_kernel.is_some()
            && self
                .gather_buf
                .as_ref()
                .is_some_and(|b| b.slice.len() >= need);
        if !ready {
            if capturing(stream)? {
                return Err(Error::internal(format!(
                    "global_sum_on of {n} values inside a CUDA graph capture: call \
                     prepare_global_sum({n}) before capturing (allocating and compiling \
                     cannot be captured)"
                )));
            }
            self.prepare_global_sum(n)?;
        }
        self.bind()?;
        let gather = self.gather_buf.as_ref().expect("prepared").ptr;
        // SAFETY: src holds n doubles and gather size * n (the caller's promise and
        // `prepare_global_sum`); both on this communicator's GPU.
        unsafe {
            nres::all_gather(
                src as *const _,
                gather as *mut _,
                n,
                nsys::ncclDataType_t::ncclFloat64,
                self.comm,
                stream.cu_stream() as nsys::cudaStream_t,
            )
        }
        .map_err(|e| nccl_err(&format!("ncclAllGather of {n} doubles"), e))?;
        let f = self.sum_kernel.as_ref().expect("prepared");
        let threads = 256u32;
        let blocks = n.div_ceil(threads as usize).clamp(1, 1024) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n64, size32) = (n as u64, self.size as i32);
        // SAFETY: the argument list is the kernel's (parts, out, n, size); gather holds
        // size * n doubles and dst n.
        unsafe {
            stream
                .launch_builder(f)
                .arg(&gather)
                .arg(&dst)
                .arg(&n64)
                .arg(&size32)
                .launch(cfg)
        }
        .map_err(driver_err("launching the rank-order sum"))?;
        self.stats.gathers += 1;
        self.stats.bytes_sent += 8 * n as u64;
        Ok(())
    }

    /// End the communicator cleanly (ncclCommFinalize, then ncclCommDestroy) once the
    /// GPU's queued work is done. Every rank calls it. Dropping without it aborts the
    /// communicator instead (ncclCommAbort: local, never waits for the other ranks).
    pub fn finish(mut self) -> Result<()> {
        let comm = std::mem::replace(&mut self.comm, std::ptr::null_mut());
        self.bind()?;
        self.stream
            .context()
            .synchronize()
            .map_err(driver_err("synchronising before ending NCCL"))?;
        // SAFETY: comm is this communicator's live handle, used no more after this.
        unsafe { nres::comm_finalize(comm) }.map_err(|e| nccl_err("ncclCommFinalize", e))?;
        // SAFETY: as above.
        unsafe { nres::comm_destroy(comm) }.map_err(|e| nccl_err("ncclCommDestroy", e))?;
        Ok(())
    }

    fn bind(&self) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the CUDA context"))
    }

    /// A stream of another context (another GPU) cannot carry this communicator's work.
    fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.stream.context().cu_ctx() {
            return Err(Error::internal(format!(
                "NCCL rank {}: a stream of GPU {} given to a communicator on GPU {}",
                self.rank,
                stream.context().ordinal(),
                self.stream.context().ordinal()
            )));
        }
        Ok(())
    }

    /// Check peers, then issue every send and receive (each list sorted by (peer, tag),
    /// stable) in one NCCL group on `stream`. `ptr_of` gives a message's device address,
    /// `count_of` its element count in `dtype`.
    fn grouped_p2p(
        &self,
        stream: &CudaStream,
        sends: &[(usize, u32, u64, usize)],
        recvs: &[(usize, u32, u64, usize)],
        dtype: nsys::ncclDataType_t,
    ) -> Result<()> {
        for &(peer, tag, ptr, count) in sends.iter().chain(recvs) {
            if peer >= self.size {
                return Err(Error::internal(format!(
                    "NCCL rank {}: a message (tag {tag}) for rank {peer} of {}",
                    self.rank, self.size
                )));
            }
            if ptr == 0 && count > 0 {
                return Err(Error::internal(format!(
                    "NCCL rank {}: a null device address (tag {tag}, rank {peer})",
                    self.rank
                )));
            }
        }
        let order = |list: &[(usize, u32, u64, usize)]| {
            let mut v: Vec<_> = list.iter().copied().filter(|m| m.3 > 0).collect();
            v.sort_by_key(|m| (m.0, m.1));
            v
        };
        let (sends, recvs) = (order(sends), order(recvs));
        if sends.is_empty() && recvs.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let s = stream.cu_stream() as nsys::cudaStream_t;
        nres::group_start().map_err(|e| nccl_err("ncclGroupStart", e))?;
        let mut first_err = None;
        for &(peer, tag, ptr, count) in &sends {
            // SAFETY: ptr holds count elements of dtype on this GPU (the caller's promise).
            let r = unsafe { nres::send(ptr as *const _, count, dtype, peer as i32, self.comm, s) };
            if let Err(e) = r {
                first_err = Some(nccl_err(&format!("ncclSend (tag {tag}) to rank {peer}"), e));
                break;
            }
        }
        if first_err.is_none() {
            for &(peer, tag, ptr, count) in &recvs {
                // SAFETY: as for the sends.
                let r =
                    unsafe { nres::recv(ptr as *mut _, count, dtype, peer as i32, self.comm, s) };
                if let Err(e) = r {
                    first_err = Some(nccl_err(
                        &format!("ncclRecv (tag {tag}) from rank {peer}"),
                        e,
                    ));
                    break;
                }
            }
        }
        // The group is always closed, also after a failed call inside it.
        let end = nres::group_end().map_err(|e| nccl_err("ncclGroupEnd of an exchange", e));
        match first_err {
            Some(e) => Err(e),
            None => end.map(|_| ()),
        }
    }
}

impl Drop for NcclComms {
    fn drop(&mut self) {
        if self.comm.is_null() {
            return;
        }
        // The scratch buffers are freed after this; work on any stream may still use them.
        let _ = self.stream.context().bind_to_thread();
        let _ = self.stream.context().synchronize();
        // SAFETY: comm is this communicator's live handle, used no more after this.
        if let Err(e) = unsafe { nres::comm_abort(self.comm) } {
            tracing::warn!("ncclCommAbort: {e:?}");
        }
        self.comm = std::ptr::null_mut();
    }
}

/// Grow `buf` to at least `n` doubles (allocated on `stream`).
fn ensure(buf: &mut Option<Buffer>, n: usize, stream: &Arc<CudaStream>, what: &str) -> Result<u64> {
    if let Some(b) = buf.as_ref().filter(|b| b.slice.len() >= n) {
        return Ok(b.ptr);
    }
    *buf = None;
    let slice = stream
        .alloc_zeros::<f64>(n.max(1))
        .map_err(driver_err(&format!("allocating the {what} ({n} doubles)")))?;
    let ptr = dptr(&slice, stream);
    *buf = Some(Buffer { slice, ptr });
    Ok(ptr)
}

/// Whether `stream` is being captured into a CUDA graph.
fn capturing(stream: &CudaStream) -> Result<bool> {
    let status = stream
        .capture_status()
        .map_err(driver_err("asking whether the stream is being captured"))?;
    Ok(status != dsys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Compile `SUM_KERNEL` with NVRTC for `stream`'s GPU and load it.
fn compile_sum_kernel(stream: &Arc<CudaStream>) -> Result<CudaFunction> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Cuda(
            "libnvrtc not found: NVRTC (libnvrtc.so.13, from the CUDA toolkit or `pip install \
             nvidia-cuda-nvrtc`) must be on the loader path (LD_LIBRARY_PATH) to compile \
             global_sum_on's kernel"
                .into(),
        ));
    }
    let ctx = stream.context();
    let (major, minor) = ctx
        .compute_capability()
        .map_err(driver_err("reading the compute capability"))?;
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![
            format!("--gpu-architecture=sm_{major}{minor}"),
            "--fmad=false".into(),
        ],
        name: Some("nccl_sum.cu".into()),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(SUM_KERNEL, opts)
        .map_err(|e| Error::Cuda(format!("NVRTC could not compile the rank-order sum: {e:?}")))?;
    let module = ctx
        .load_module(ptx)
        .map_err(driver_err("loading the rank-order sum"))?;
    module
        .load_function("sum_in_rank_order")
        .map_err(driver_err("finding sum_in_rank_order"))
}

impl Comms for NcclComms {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn describe(&self) -> String {
        format!("nccl {} ({} ranks)", self.version, self.size)
    }

    /// Staged: the sends are copied into one device buffer, exchanged with grouped
    /// ncclSend/ncclRecv on the host stream, and the receives copied back (synchronous).
    fn exchange(&mut self, sends: &[Outgoing<'_>], recvs: &mut [Incoming<'_>]) -> Result<()> {
        let start = Instant::now();
        let send_total: usize = sends.iter().map(|s| s.data.len()).sum();
        let recv_total: usize = recvs.iter().map(|r| r.data.len()).sum();
        let stream = self.stream.clone();
        self.bind()?;
        let send_base = ensure(
            &mut self.send_buf,
            send_total,
            &stream,
            "exchange send buffer",
        )?;
        let recv_base = ensure(
            &mut self.recv_buf,
            recv_total,
            &stream,
            "exchange receive buffer",
        )?;
        let mut host = Vec::with_capacity(send_total);
        let mut send_list = Vec::with_capacity(sends.len());
        for s in sends {
            send_list.push((s.to, s.tag, send_base + 8 * host.len() as u64, s.data.len()));
            host.extend_from_slice(s.data);
        }
        let mut recv_list = Vec::with_capacity(recvs.len());
        let mut offset = 0usize;
        for r in recvs.iter() {
            recv_list.push((r.from, r.tag, recv_base + 8 * offset as u64, r.data.len()));
            offset += r.data.len();
        }
        if send_total > 0 {
            let buf = &mut self.send_buf.as_mut().expect("allocated").slice;
            stream
                .memcpy_htod(&host, &mut buf.slice_mut(..send_total))
                .map_err(driver_err("copying the exchange's sends to the GPU"))?;
        }
        self.grouped_p2p(
            &stream,
            &send_list,
            &recv_list,
            nsys::ncclDataType_t::ncclFloat64,
        )?;
        if recv_total > 0 {
            let mut back = vec![0.0; recv_total];
            let buf = &self.recv_buf.as_ref().expect("allocated").slice;
            stream
                .memcpy_dtoh(&buf.slice(..recv_total), &mut back)
                .map_err(driver_err("copying the exchange's receives to the host"))?;
            stream
                .synchronize()
                .map_err(driver_err("waiting for the exchange"))?;
            let mut at = 0;
            for r in recvs.iter_mut() {
                let n = r.data.len();
                r.data.copy_from_slice(&back[at..at + n]);
                at += n;
            }
        } else {
            stream
                .synchronize()
                .map_err(driver_err("waiting for the exchange"))?;
        }
        self.stats.exchanges += 1;
        self.stats.bytes_sent += 8 * send_total as u64;
        self.stats.seconds += start.elapsed().as_secs_f64();
        Ok(())
    }

    /// ncclAllGather on the host stream (synchronous). With more than one rank the
    /// lengths are gathered and compared first (a mismatch would be undefined in NCCL).
    fn all_gather(&mut self, local: &[f64]) -> Result<Vec<f64>> {
        let start = Instant::now();
        let n = local.len();
        if self.size > 1 {
            let lengths = self.gather_host(&[n as f64])?;
            if let Some((r, &m)) = lengths.iter().enumerate().find(|(_, &m)| m != n as f64) {
                return Err(Error::internal(format!(
                    "all_gather: rank {r} gave {m} values, rank {} {n}",
                    self.rank
                )));
            }
        }
        let all = self.gather_host(local)?;
        self.stats.gathers += 1;
        self.stats.seconds += start.elapsed().as_secs_f64();
        Ok(all)
    }

    fn stats(&self) -> CommsStats {
        self.stats
    }
}

impl NcclComms {
    fn gather_host(&mut self, local: &[f64]) -> Result<Vec<f64>> {
        let n = local.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let stream = self.stream.clone();
        self.bind()?;
        let total = n * self.size;
        let src = ensure(&mut self.send_buf, n, &stream, "all_gather send buffer")?;
        let dst = ensure(
            &mut self.recv_buf,
            total,
            &stream,
            "all_gather receive buffer",
        )?;
        let buf = &mut self.send_buf.as_mut().expect("allocated").slice;
        stream
            .memcpy_htod(local, &mut buf.slice_mut(..n))
            .map_err(driver_err("copying all_gather's values to the GPU"))?;
        // SAFETY: src holds n doubles, dst size * n, both on this GPU.
        unsafe {
            nres::all_gather(
                src as *const _,
                dst as *mut _,
                n,
                nsys::ncclDataType_t::ncclFloat64,
                self.comm,
                stream.cu_stream() as nsys::cudaStream_t,
            )
        }
        .map_err(|e| nccl_err(&format!("ncclAllGather of {n} doubles"), e))?;
        let mut all = vec![0.0; total];
        let buf = &self.recv_buf.as_ref().expect("allocated").slice;
        stream
            .memcpy_dtoh(&buf.slice(..total), &mut all)
            .map_err(driver_err("copying all_gather's result to the host"))?;
        stream
            .synchronize()
            .map_err(driver_err("waiting for all_gather"))?;
        Ok(all)
    }
}

impl DeviceExchange for NcclComms {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn describe(&self) -> String {
        Comms::describe(self)
    }

    /// Grouped ncclSend/ncclRecv of the raw buffers (bytes, ncclUint8) enqueued directly
    /// on `stream` (no event, no host synchronisation: capturable). Sends to and receives
    /// from the own rank go through NCCL too.
    fn exchange_on(
        &mut self,
        stream: &Arc<CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()> {
        self.check_stream(stream)?;
        let list = |m: &[DeviceMessage]| -> Vec<_> {
            m.iter().map(|m| (m.peer, m.tag, m.ptr, m.bytes)).collect()
        };
        self.grouped_p2p(
            stream,
            &list(sends),
            &list(recvs),
            nsys::ncclDataType_t::ncclUint8,
        )?;
        self.stats.exchanges += 1;
        self.stats.bytes_sent += sends.iter().map(|m| m.bytes as u64).sum::<u64>();
        Ok(())
    }

    /// ncclAllGather of the raw bytes on `stream` (capturable).
    fn all_gather_on(
        &mut self,
        stream: &Arc<CudaStream>,
        src: u64,
        dst: u64,
        bytes: usize,
    ) -> Result<()> {
        if src == 0 || dst == 0 {
            return Err(Error::internal("all_gather_on: a null device address"));
        }
        self.check_stream(stream)?;
        self.bind()?;
        // SAFETY: src holds `bytes` and dst size * bytes on this communicator's GPU (the
        // caller's promise).
        unsafe {
            nres::all_gather(
                src as *const _,
                dst as *mut _,
                bytes,
                nsys::ncclDataType_t::ncclUint8,
                self.comm,
                stream.cu_stream() as nsys::cudaStream_t,
            )
        }
        .map_err(|e| nccl_err(&format!("ncclAllGather of {bytes} bytes"), e))?;
        self.stats.gathers += 1;
        self.stats.bytes_sent += bytes as u64;
        Ok(())
    }

    fn capturable(&self) -> bool {
        true
    }
}

/// One NCCL communicator serving a rank as both its host `Comms` (global sums) and its
/// `DeviceExchange` (faces): the two handles share it, one call at a time.
#[derive(Clone)]
pub struct SharedNccl {
    comms: Arc<std::sync::Mutex<NcclComms>>,
    /// `DeviceExchange::peer_memory` (set by `in_one_process`).
    peer_memory: bool,
}

impl SharedNccl {
    pub fn new(comms: NcclComms) -> SharedNccl {
        SharedNccl {
            comms: Arc::new(std::sync::Mutex::new(comms)),
            peer_memory: false,
        }
    }

    /// `new` for a rank that is a thread of this process on its own GPU, where the caller
    /// has given every GPU of the communicator access to the others' memory
    /// (`DeviceExchange::peer_memory`).
    pub fn in_one_process(comms: NcclComms) -> SharedNccl {
        SharedNccl {
            peer_memory: true,
            ..SharedNccl::new(comms)
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, NcclComms>> {
        self.comms
            .lock()
            .map_err(|_| Error::internal("the NCCL communicator's lock was poisoned"))
    }

    /// The two handles a decomposed backend takes.
    pub fn handles(self) -> (Box<dyn Comms>, Box<dyn DeviceExchange>) {
        (Box::new(self.clone()), Box::new(self))
    }
}

impl Comms for SharedNccl {
    fn rank(&self) -> usize {
        self.lock().map(|c| Comms::rank(&*c)).unwrap_or(0)
    }
    fn size(&self) -> usize {
        self.lock().map(|c| Comms::size(&*c)).unwrap_or(0)
    }
    fn describe(&self) -> String {
        self.lock()
            .map(|c| Comms::describe(&*c))
            .unwrap_or_else(|e| e.to_string())
    }
    fn exchange(&mut self, sends: &[Outgoing<'_>], recvs: &mut [Incoming<'_>]) -> Result<()> {
        self.lock()?.exchange(sends, recvs)
    }
    fn all_gather(&mut self, local: &[f64]) -> Result<Vec<f64>> {
        self.lock()?.all_gather(local)
    }
    fn stats(&self) -> CommsStats {
        self.lock().map(|c| c.stats()).unwrap_or_default()
    }
}

impl DeviceExchange for SharedNccl {
    fn rank(&self) -> usize {
        Comms::rank(self)
    }
    fn size(&self) -> usize {
        Comms::size(self)
    }
    fn describe(&self) -> String {
        Comms::describe(self)
    }
    fn exchange_on(
        &mut self,
        stream: &Arc<CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()> {
        self.lock()?.exchange_on(stream, sends, recvs)
    }
    fn all_gather_on(
        &mut self,
        stream: &Arc<CudaStream>,
        src: u64,
        dst: u64,
        bytes: usize,
    ) -> Result<()> {
        self.lock()?.all_gather_on(stream, src, dst, bytes)
    }
    fn capturable(&self) -> bool {
        true
    }
    fn peer_memory(&self) -> bool {
        self.peer_memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_what_the_environment_leaves_unset() {
        // Names of this test's own, so that no other test reads them.
        let (set, unset) = ("NCCL_DEFAULTS_TEST_SET", "NCCL_DEFAULTS_TEST_UNSET");
        std::env::set_var(set, "1");
        std::env::remove_var(unset);
        set_unset(&[(set, "0"), (unset, "0")]);
        assert_eq!(
            std::env::var(set).unwrap(),
            "1",
            "a value the user set is kept"
        );
        assert_eq!(
            std::env::var(unset).unwrap(),
            "0",
            "an unset one gets the default"
        );
    }

    #[test]
    fn the_process_defaults_turn_graph_mixing_off_unless_set() {
        // What main calls before any thread starts. Only this test touches the variable
        // in this test binary (the NCCL tests are GPU targets of their own).
        let name = "NCCL_GRAPH_MIXING_SUPPORT";
        let before = std::env::var_os(name);
        std::env::remove_var(name);
        set_process_defaults();
        let unset = std::env::var(name);
        std::env::set_var(name, "1");
        set_process_defaults();
        let set = std::env::var(name);
        match before {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        }
        assert_eq!(unset.as_deref(), Ok("0"), "unset: graph mixing off");
        assert_eq!(set.as_deref(), Ok("1"), "the user's value is kept");
    }
}
