//! `PeerCopies`, the `DeviceExchange` of ranks as threads of one process (on one GPU, or
//! rank r on GPU r): faces moved by device copies ordered by CUDA events, and
//! `enable_peer_access` for the GPUs of one process.

use crate::backend::cuda::core::device::err;
use crate::comms::{DeviceExchange, DeviceMessage};
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaEvent, CudaStream};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Let each of GPUs 0..gpus reach the others' memory directly, for
/// `PeerCopies::world_across_gpus`: cuCtxEnablePeerAccess between their primary contexts,
/// and read-write access of each GPU to the others' default memory pools (the stream-
/// ordered allocations the fields and face buffers come from; without it a copy between
/// two GPUs' pool memory is refused, CUDA_ERROR_INVALID_VALUE). Returns the pairs that
/// cannot reach each other (not supported: the caller refuses them).
pub fn enable_peer_access(gpus: usize) -> Result<Vec<(usize, usize)>> {
    let ctxs = (0..gpus)
        .map(crate::backend::cuda::core::device::open_context)
        .collect::<Result<Vec<_>>>()?;
    let mut without = Vec::new();
    for (i, a) in ctxs.iter().enumerate() {
        for (j, b) in ctxs.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut can = 0;
            // SAFETY: a valid out-pointer and two device handles of this driver.
            unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.cu_device(), b.cu_device()) }
                .result()
                .map_err(err("asking whether two GPUs can reach each other"))?;
            if can == 0 {
                without.push((i, j));
                continue;
            }
            a.bind_to_thread().map_err(err("binding a GPU's context"))?;
            // SAFETY: b's context is live (held in ctxs); flags must be 0.
            match unsafe { sys::cuCtxEnablePeerAccess(b.cu_ctx(), 0) } {
                sys::CUresult::CUDA_SUCCESS
                | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => {
                    return Err(Error::Cuda(format!(
                        "enabling GPU {i}'s access to GPU {j}'s memory: {e:?}"
                    )))
                }
            }
            let pool = crate::backend::cuda::core::device::default_pool(b)?;
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: i as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: a pool handle of GPU j and one valid descriptor.
            unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) }
                .result()
                .map_err(err("giving a GPU access to another's memory pool"))?;
        }
    }
    Ok(without)
}

/// One of an exchange's posts in `PeerShared`: a sender's face (address, length, the
/// event after which it is ready) or a receiver's acknowledgement (the event after which
/// its copy is done).
struct Post {
    ptr: u64,
    bytes: usize,
    event: CudaEvent,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum PostKind {
    Face,
    Copied,
}

type PostKey = (PostKind, usize, usize, u32);

#[derive(Default)]
struct PeerShared {
    /// (kind, from, to, tag) -> posts in order.
    posts: Mutex<HashMap<PostKey, VecDeque<Post>>>,
    arrived: Condvar,
}

/// The one-GPU `DeviceExchange`: the ranks are threads of one process sharing one GPU
/// (the same CUDA context), and a face moves by a device-to-device copy that the
/// receiver enqueues on its stream after the sender's "packed" event. The receiver then
/// posts a "copied" event on which the sender's stream waits before it goes on, so a
/// sender never packs the next face over one not yet copied (the pack follows the
/// exterior, which follows the exchange on the sender's main stream). The host waits
/// only for the posts (never for the GPU): each rank posts its faces first, then takes
/// its neighbours', then their acknowledgements, so the ranks cannot deadlock as long as
/// they exchange in the same order (as every SPMD solve does).
///
/// The same posts serve ranks on several GPUs of one process (`across_gpus`, rank r on
/// GPU r): a face then crosses on the copy engines (cuMemcpyAsync between the GPUs'
/// unified addresses, direct over NVLink once `enable_peer_access` has run), ordered by
/// events of the other GPU's stream, and no kernel of the exchange takes an SM from the
/// interior kernel. Not capturable (host-side posts), so the fused CR runs without graphs.
pub struct PeerCopies {
    rank: usize,
    size: usize,
    shared: Arc<PeerShared>,
    patience: Duration,
    /// Rank r on GPU r (else every rank on one GPU).
    across_gpus: bool,
}

impl PeerCopies {
    /// The `size` ranks of one world on one GPU (move each to its thread).
    pub fn world(size: usize) -> Vec<PeerCopies> {
        Self::make(size, false)
    }

    /// The `size` ranks of one world, rank r on GPU r of this process (call
    /// `enable_peer_access` for those GPUs first).
    pub fn world_across_gpus(size: usize) -> Vec<PeerCopies> {
        Self::make(size, true)
    }

    fn make(size: usize, across_gpus: bool) -> Vec<PeerCopies> {
        let shared = Arc::new(PeerShared::default());
        (0..size)
            .map(|rank| PeerCopies {
                rank,
                size,
                shared: shared.clone(),
                patience: Duration::from_secs(120),
                across_gpus,
            })
            .collect()
    }

    fn post(&self, key: PostKey, p: Post) {
        let mut posts = self.shared.posts.lock().unwrap();
        posts.entry(key).or_default().push_back(p);
        self.shared.arrived.notify_all();
    }

    fn take(&self, key: PostKey) -> Result<Post> {
        let deadline = Instant::now() + self.patience;
        let mut posts = self.shared.posts.lock().unwrap();
        loop {
            if let Some(p) = posts.get_mut(&key).and_then(|q| q.pop_front()) {
                return Ok(p);
            }
            let now = Instant::now();
            if now >= deadline {
                let (kind, from, _, tag) = key;
                return Err(Error::internal(format!(
                    "rank {} waited {:.0} s for {} tag {tag} from rank {from} (PeerCopies: do all ranks apply the operator in the same order?)",
                    self.rank,
                    self.patience.as_secs_f64(),
                    if kind == PostKind::Face { "the face" } else { "the copy acknowledgement" }
                )));
            }
            posts = self
                .shared
                .arrived
                .wait_timeout(posts, deadline - now)
                .unwrap()
                .0;
        }
    }
}

impl DeviceExchange for PeerCopies {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn describe(&self) -> String {
        if self.across_gpus && self.size > 1 {
            format!(
                "device copies between {} GPUs (copy engines, ranks as threads)",
                self.size
            )
        } else {
            format!("device copies on one GPU ({} ranks as threads)", self.size)
        }
    }

    fn exchange_on(
        &mut self,
        stream: &Arc<CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()> {
        let me = self.rank;
        for s in sends {
            let event = stream
                .record_event(None)
                .map_err(err("recording a face's ready event"))?;
            self.post(
                (PostKind::Face, me, s.peer, s.tag),
                Post {
                    ptr: s.ptr,
                    bytes: s.bytes,
                    event,
                },
            );
        }
        for r in recvs {
            let face = self.take((PostKind::Face, r.peer, me, r.tag))?;
            if face.bytes != r.bytes {
                return Err(Error::internal(format!(
                    "rank {me}: face tag {} from rank {} has {} bytes, expected {}",
                    r.tag, r.peer, face.bytes, r.bytes
                )));
            }
            stream
                .wait(&face.event)
                .map_err(err("waiting for a neighbour's face"))?;
            // SAFETY: both ranges are live device allocations of these bytes (the sender's
            // face buffer, this rank's receive buffer), on one GPU or on two of this
            // process (unified addresses: cuMemcpyAsync finds their devices); the sender
            // does not touch its buffer until it has waited on the event below.
            unsafe { sys::cuMemcpyAsync(r.ptr, face.ptr, r.bytes, stream.cu_stream()).result() }
                .map_err(err("copying a face between ranks"))?;
            let event = stream
                .record_event(None)
                .map_err(err("recording a face's copied event"))?;
            self.post(
                (PostKind::Copied, me, r.peer, r.tag),
                Post {
                    ptr: 0,
                    bytes: 0,
                    event,
                },
            );
        }
        for s in sends {
            let ack = self.take((PostKind::Copied, s.peer, me, s.tag))?;
            stream
                .wait(&ack.event)
                .map_err(err("waiting for a neighbour's copy"))?;
        }
        // Dropping another GPU's event (a post taken above) makes its context current on
        // this thread; the caller's launches that follow expect this rank's own.
        stream
            .context()
            .bind_to_thread()
            .map_err(err("binding the rank's context after an exchange"))
    }
}
