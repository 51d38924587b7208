//! `NcclComms::global_sum_on`, the deterministic global sum on the device: an all-gather
//! of every rank's partials, then a kernel (compiled with NVRTC) adds them in rank order.

use super::communicator::{ensure, NcclComms};
use super::library::{driver_err, nccl_err};
use crate::{Error, Result};
use cudarc::driver::{sys as dsys, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nccl::{result as nres, sys as nsys};
use std::sync::Arc;

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

impl NcclComms {
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
