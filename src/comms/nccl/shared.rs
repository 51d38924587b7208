//! `SharedNccl`: one communicator serving a rank as both its host `Comms` and its
//! `DeviceExchange`, one call at a time.

use super::communicator::NcclComms;
use crate::comms::{Comms, CommsStats, DeviceExchange, DeviceMessage, Incoming, Outgoing};
use crate::{Error, Result};
use cudarc::driver::CudaStream;
use std::sync::Arc;

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
