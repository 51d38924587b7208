//! `NcclComms` as a `Comms` (host slices staged through device buffers, synchronous) and
//! as a `DeviceExchange` (device buffers, enqueued on the caller's stream).

use super::communicator::{ensure, NcclComms};
use super::library::{driver_err, nccl_err};
use crate::comms::{Comms, CommsStats, DeviceExchange, DeviceMessage, Incoming, Outgoing};
use crate::{Error, Result};
use cudarc::driver::CudaStream;
use cudarc::nccl::{result as nres, sys as nsys};
use std::sync::Arc;
use std::time::Instant;

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
