//! `NcclComms`, one rank of an NCCL communicator: its set-up (from an id, or from a
//! launch through the rendezvous), the grouped point-to-point calls, and its end.

use super::library::{driver_err, nccl_err, nccl_version, new_unique_id, require_nccl, ID_BYTES};
use crate::comms::launch::Launch;
use crate::comms::rendezvous::Rendezvous;
use crate::comms::CommsStats;
use crate::{Error, Result};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::{result as nres, sys as nsys};
use std::ffi::c_char;
use std::sync::Arc;
use std::time::Instant;

/// The device address of an allocation (kept while the allocation lives).
fn dptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// A grow-only device buffer of f64 and its address.
pub(super) struct Buffer {
    pub(super) slice: CudaSlice<f64>,
    pub(super) ptr: u64,
}

/// One rank of an NCCL communicator.
pub struct NcclComms {
    pub(super) comm: nsys::ncclComm_t,
    pub(super) stream: Arc<CudaStream>,
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) version: String,
    pub(super) stats: CommsStats,
    /// Host paths: what is sent, what is received (f64).
    pub(super) send_buf: Option<Buffer>,
    pub(super) recv_buf: Option<Buffer>,
    /// global_sum_on: every rank's partials (size * n).
    pub(super) gather_buf: Option<Buffer>,
    pub(super) sum_kernel: Option<CudaFunction>,
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
                crate::comms::launch::MASTER_VAR,
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

    pub(super) fn bind(&self) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the CUDA context"))
    }

    /// A stream of another context (another GPU) cannot carry this communicator's work.
    pub(super) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
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
    pub(super) fn grouped_p2p(
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
pub(super) fn ensure(
    buf: &mut Option<Buffer>,
    n: usize,
    stream: &Arc<CudaStream>,
    what: &str,
) -> Result<u64> {
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
