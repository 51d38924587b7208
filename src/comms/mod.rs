//! Communication between the ranks of a decomposed lattice. It enters the
//! solvers at two places only (docs/architecture.md): an operator's apply exchanges the
//! faces of its sub-lattice with the neighbours (`Comms::exchange`), and a space's
//! reductions combine per-rank partial sums (`global_sum`).
//!
//! Implementations: `Single` (one rank, no communication), `threads::ThreadComms` (ranks
//! as threads of one process, messages over channels: the CPU tests of the decomposition),
//! and NCCL (`nccl::communicator::NcclComms`), which moves device buffers between GPUs
//! and processes.
//!
//! Global sums are deterministic: every rank gathers every rank's partials and adds them
//! in rank order, so the result is the same bits on every rank and from run to run (an
//! all-reduce may add in an order that depends on the topology).

pub mod launch;
pub mod nccl;
pub mod rendezvous;
pub mod threads;

use crate::Result;

/// A message an exchange sends: `data` to rank `to`, told apart from the other messages of
/// the same exchange between the same two ranks by `tag`.
pub struct Outgoing<'a> {
    pub to: usize,
    pub tag: u32,
    pub data: &'a [f64],
}

/// A message an exchange receives into `data` (its length must match the sender's).
pub struct Incoming<'a> {
    pub from: usize,
    pub tag: u32,
    pub data: &'a mut [f64],
}

/// What a rank has sent and waited for, for the reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommsStats {
    pub exchanges: u64,
    pub bytes_sent: u64,
    pub gathers: u64,
    /// Seconds spent inside exchange and all_gather (sending, then waiting).
    pub seconds: f64,
}

/// One rank's view of the communicator. Every rank calls the collective operations
/// (`all_gather`) in the same order; an exchange's sends and receives must pair up across
/// ranks (same tag, same length).
pub trait Comms: Send {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// "single", "threads (4 ranks)", "nccl 2.27.3 (8 ranks)".
    fn describe(&self) -> String;
    /// Send every outgoing message, then fill every incoming one.
    fn exchange(&mut self, sends: &[Outgoing<'_>], recvs: &mut [Incoming<'_>]) -> Result<()>;
    /// Every rank's `local` (each of the same length), concatenated in rank order: the
    /// same on every rank.
    fn all_gather(&mut self, local: &[f64]) -> Result<Vec<f64>>;
    fn stats(&self) -> CommsStats;
}

/// The element-wise sum over ranks of `local`, added in rank order (rank 0 first): the
/// same bits on every rank and in every run.
pub fn global_sum(comms: &mut dyn Comms, local: &[f64]) -> Result<Vec<f64>> {
    if comms.size() == 1 {
        return Ok(local.to_vec());
    }
    let all = comms.all_gather(local)?;
    Ok(sum_in_rank_order(&all, local.len()))
}

/// The element-wise sum of every rank's `n` values, `all` holding them in rank order
/// (an all-gather's result), added rank 0 first: `global_sum`'s order, wherever the
/// values were gathered (the GPU backend gathers on the device).
pub fn sum_in_rank_order(all: &[f64], n: usize) -> Vec<f64> {
    let mut sum = all[..n.min(all.len())].to_vec();
    if n > 0 {
        for part in all[n..].chunks_exact(n) {
            for (s, v) in sum.iter_mut().zip(part) {
                *s += v;
            }
        }
    }
    sum
}

/// One rank and no communication; an exchange can only send to itself.
#[derive(Default)]
pub struct Single {
    stats: CommsStats,
}

impl Comms for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn describe(&self) -> String {
        "single".into()
    }
    fn exchange(&mut self, sends: &[Outgoing<'_>], recvs: &mut [Incoming<'_>]) -> Result<()> {
        self.stats.exchanges += 1;
        for r in recvs.iter_mut() {
            let s = sends
                .iter()
                .find(|s| s.to == 0 && r.from == 0 && s.tag == r.tag)
                .ok_or_else(|| {
                    crate::Error::internal(format!("exchange: no message with tag {}", r.tag))
                })?;
            check_len(s.data.len(), r, 0)?;
            r.data.copy_from_slice(s.data);
            self.stats.bytes_sent += 8 * s.data.len() as u64;
        }
        Ok(())
    }
    fn all_gather(&mut self, local: &[f64]) -> Result<Vec<f64>> {
        self.stats.gathers += 1;
        Ok(local.to_vec())
    }
    fn stats(&self) -> CommsStats {
        self.stats
    }
}

fn check_len(sent: usize, r: &Incoming<'_>, rank: usize) -> Result<()> {
    if sent != r.data.len() {
        return Err(crate::Error::internal(format!(
            "rank {rank}: message tag {} from rank {} has {} values, expected {}",
            r.tag,
            r.from,
            sent,
            r.data.len()
        )));
    }
    Ok(())
}

/// A face buffer in device memory for `DeviceExchange`: `bytes` at the raw device address
/// `ptr`, sent to or received from rank `peer`, told apart by `tag` as in `Outgoing`.
#[derive(Clone, Copy, Debug)]
pub struct DeviceMessage {
    pub peer: usize,
    pub tag: u32,
    pub ptr: u64,
    pub bytes: usize,
}

/// The GPU side of an exchange: faces move between device buffers, enqueued on the
/// caller's stream, so the operator's interior kernel runs while they travel. NCCL
/// (grouped ncclSend/ncclRecv) between processes or GPUs; device copies between
/// sub-lattices of one GPU.
pub trait DeviceExchange: Send {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    fn describe(&self) -> String;
    /// Enqueue every send and receive on `stream`: work enqueued on it afterwards sees
    /// the received faces; the send buffers must not change until the stream has passed
    /// this point.
    fn exchange_on(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        sends: &[DeviceMessage],
        recvs: &[DeviceMessage],
    ) -> Result<()>;

    /// Enqueue on `stream`: `dst[r * bytes ..][.. bytes] = src` of rank r, for every rank r
    /// (an all-gather of device buffers; the fused CR's global sums on a decomposed
    /// lattice). `dst` holds size * bytes. By default an exchange in which every rank
    /// sends `src` to every rank (itself too) under the tag `GATHER_TAG`.
    fn all_gather_on(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        src: u64,
        dst: u64,
        bytes: usize,
    ) -> Result<()> {
        let sends: Vec<DeviceMessage> = (0..self.size())
            .map(|peer| DeviceMessage {
                peer,
                tag: GATHER_TAG,
                ptr: src,
                bytes,
            })
            .collect();
        let recvs: Vec<DeviceMessage> = (0..self.size())
            .map(|peer| DeviceMessage {
                peer,
                tag: GATHER_TAG,
                ptr: dst + (peer * bytes) as u64,
                bytes,
            })
            .collect();
        self.exchange_on(stream, &sends, &recvs)
    }

    /// Whether `exchange_on` and `all_gather_on` may be recorded into a CUDA graph (NCCL:
    /// yes; device copies between threads ordered by host-side posts: no).
    fn capturable(&self) -> bool {
        false
    }

    /// Whether every rank is a thread of this process on its own GPU, each GPU able to
    /// reach the others' memory (peer access enabled, pools shared): device addresses can
    /// then be handed between the ranks (the fused CR's `cr_peer_sum`).
    fn peer_memory(&self) -> bool {
        false
    }
}

/// The tag of `DeviceExchange::all_gather_on`'s messages (face tags are 0..8).
pub const GATHER_TAG: u32 = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_values_are_added_in_rank_order() {
        // Three ranks, two values each, chosen so that the order of addition shows in the
        // bits: the expected sums are folded here rank 0 first, by hand.
        let all = [1e16, 0.5, 1.0, 1e-300, -1e16, -0.5];
        let sum = sum_in_rank_order(&all, 2);
        assert_eq!(sum.len(), 2);
        assert_eq!(sum[0].to_bits(), ((1e16_f64 + 1.0) + -1e16).to_bits());
        assert_eq!(sum[1].to_bits(), ((0.5_f64 + 1e-300) + -0.5).to_bits());
        // Another order gives other bits for the first (1e16 - 1e16 + 1 = 1, not 0).
        assert_ne!(sum[0].to_bits(), ((1e16_f64 + -1e16) + 1.0).to_bits());
        // One rank: its own values; no values: nothing.
        assert_eq!(sum_in_rank_order(&[2.5, -3.0], 2), vec![2.5, -3.0]);
        assert!(sum_in_rank_order(&[], 0).is_empty());
    }

    #[test]
    fn a_single_rank_global_sum_is_its_input() {
        let mut one = Single::default();
        assert_eq!(global_sum(&mut one, &[4.0, -1.5]).unwrap(), vec![4.0, -1.5]);
    }
}
