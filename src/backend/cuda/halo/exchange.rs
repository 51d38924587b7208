//! A split application's exchange: every face's sends and receives, the warm-up exchange
//! and capture at construction, and the global sums over ranks through the exchange.

use super::faces::{face_messages, raw, FaceBuffer, Faces};
use super::rank::{Halo, GATHER_DOUBLES};
use crate::backend::cuda::core::device::err;
use crate::comms::DeviceMessage;
use crate::error::Result;
use cudarc::driver::{sys, CudaStream};
use std::sync::Arc;

impl Halo {
    /// One exchange of every face buffer, whole, in both directions, now (waits for it):
    /// NCCL connects lazily, at a pair's first message in a direction, and on four ranks
    /// along t (the set-up's ghost links go forward only) the backward direction was first
    /// used inside the solve (rank 0 waited 36.5 ms a solve; with this, 8.9 ms; the cause is
    /// our reading, not traced; validate/RESULTS.md). Every rank calls it at construction.
    pub(super) fn warm_up(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let (sends, recvs) =
            self.face_messages_of(stream, |f| f.send_lo.len() * std::mem::size_of::<f64>());
        if sends.is_empty() {
            return Ok(());
        }
        self.comm
            .join(stream)
            .map_err(err("ordering the first exchange"))?;
        self.exchange.exchange_on(&self.comm, &sends, &recvs)?;
        self.comm
            .synchronize()
            .map_err(err("the first exchange of the faces"))?;
        self.warm_up_capture(stream, &sends, &recvs)
    }

    /// Where the exchange can be captured (NCCL): record, instantiate and drop a graph of
    /// what the solve's graphs hold (an exchange on the communication stream forked from
    /// `stream`, an all-gather on `stream`), never launched. The first graph a rank
    /// records pays a one-time cost that later ones do not: on four H200s the first CR
    /// graph took 0.8-1.4 ms to record and the next 0.1-0.3 ms for half the work,
    /// whichever of the two came first (validate/RESULTS.md). Paid here, at
    /// construction, as NCCL's connections are by the exchange above.
    fn warm_up_capture(
        &mut self,
        stream: &Arc<CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()> {
        if !self.exchange.capturable() {
            return Ok(());
        }
        // An all-gather of two doubles (a reduction's), in place: this rank's part of the
        // global sums' buffer is its source.
        let bytes = GATHER_DOUBLES * std::mem::size_of::<f64>();
        let dst = raw(&self.gathered, stream);
        let src = dst + (self.exchange.rank() * bytes) as u64;
        // NCCL connects a collective's peers at its first call, which a capture refuses
        // ("operation not permitted when stream is capturing"): one all-gather
        // outside it first.
        self.exchange.all_gather_on(stream, src, dst, bytes)?;
        stream.synchronize().map_err(err("the first all-gather"))?;
        let t = std::time::Instant::now();
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(err("beginning the warm-up capture"))?;
        let mut captured = || -> Result<()> {
            self.comm
                .join(stream)
                .map_err(err("forking the warm-up capture"))?;
            self.exchange.exchange_on(&self.comm, sends, recvs)?;
            stream
                .join(&self.comm)
                .map_err(err("joining the warm-up capture"))?;
            self.exchange.all_gather_on(stream, src, dst, bytes)
        };
        let outcome = captured();
        let ended = stream.end_capture(
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY,
        );
        outcome?;
        drop(ended.map_err(err("ending the warm-up capture"))?);
        tracing::debug!(
            ms = 1e3 * t.elapsed().as_secs_f64(),
            "halo: warm-up capture"
        );
        Ok(())
    }

    /// Every split direction's sends and receives (`face_messages`) over the face
    /// buffers, `bytes(face)` each.
    pub(super) fn face_messages_of(
        &self,
        stream: &CudaStream,
        bytes: impl Fn(&Faces) -> usize,
    ) -> (Vec<DeviceMessage>, Vec<DeviceMessage>) {
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        for f in &self.faces {
            let bytes = bytes(f);
            let msg = |(peer, tag, buf)| DeviceMessage {
                peer,
                tag,
                ptr: raw(
                    match buf {
                        FaceBuffer::SendLo => &f.send_lo,
                        FaceBuffer::SendHi => &f.send_hi,
                        FaceBuffer::RecvLo => &f.recv_lo,
                        FaceBuffer::RecvHi => &f.recv_hi,
                    },
                    stream,
                ),
                bytes,
            };
            let [s0, s1, r0, r1] = face_messages(&self.partition, f.mu);
            sends.extend([msg(s0), msg(s1)]);
            recvs.extend([msg(r0), msg(r1)]);
        }
        (sends, recvs)
    }

    /// The element-wise sum over ranks of the N doubles at device address `src`, queued
    /// on `stream` behind the kernel that wrote them: the exchange's all-gather into a
    /// device buffer, then one read of every rank's values (waits for the stream), added in
    /// rank order (`comms::sum_in_rank_order`, as `comms::global_sum` adds: the same bits). One wait
    /// for the host instead of three (the local read, then the host communicator's gather
    /// of the lengths and of the values; measured: the four-GPU reliable updates
    /// 6.7-7.0 -> 6.1 ms a solve).
    pub fn global_sum_device<const N: usize>(
        &mut self,
        stream: &Arc<CudaStream>,
        src: u64,
    ) -> Result<[f64; N]> {
        const {
            assert!(
                N <= GATHER_DOUBLES,
                "the global sums' buffer holds GATHER_DOUBLES a rank"
            )
        };
        let need = N * self.exchange.size();
        let dst = raw(&self.gathered, stream);
        self.exchange
            .all_gather_on(stream, src, dst, N * std::mem::size_of::<f64>())?;
        let mut all = vec![0.0f64; need];
        stream
            .memcpy_dtoh(&self.gathered.slice(..need), &mut all)
            .map_err(err("reading the ranks' sums"))?;
        stream
            .synchronize()
            .map_err(err("reading the ranks' sums"))?;
        let mut sum = [0.0f64; N];
        sum.copy_from_slice(&crate::comms::sum_in_rank_order(&all, N));
        Ok(sum)
    }
}
