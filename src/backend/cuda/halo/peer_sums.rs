//! The fused CR's sums over peer memory (`PeerSums`): a rank's slot buffer, which the
//! other ranks write, and the table of every rank's buffer address.

use super::faces::raw;
use crate::backend::cuda::core::device::err;
use crate::backend::ledger::{Booking, Ledger, Purpose};
use crate::comms::Comms;
use crate::error::{Error, Result};
use cudarc::driver::{CudaSlice, CudaStream};
use std::sync::Arc;

/// Doubles of a rank's slot in `cr_peer_sum`'s buffers (kernels/cr_fused.cu CR_PEER_SLOT).
pub(crate) const PEER_SLOT: usize = 4;

/// Bytes of a rank's `PeerSums`: its slot buffer (two generations of `ranks` slots and its
/// sequence number) and the table of the ranks' buffer addresses.
pub(crate) fn peer_sums_bytes(ranks: usize) -> u64 {
    (8 * (2 * ranks * PEER_SLOT + 1) + 8 * ranks) as u64
}

/// A rank's part of `cr_peer_sum`: its slot buffer, which the other ranks write, and the
/// ranks' buffer addresses in rank order (exchanged once through the host communicator:
/// the ranks are threads of one process, so the addresses are valid in all of them).
pub(crate) struct PeerSums {
    _slots: CudaSlice<f64>,
    table: CudaSlice<u64>,
    _booking: Booking,
}

impl PeerSums {
    pub(super) fn new(
        stream: &Arc<CudaStream>,
        comms: &mut dyn Comms,
        ranks: usize,
        ledger: &Ledger,
    ) -> Result<Self> {
        let slots = stream
            .alloc_zeros::<f64>(2 * ranks * PEER_SLOT + 1)
            .map_err(err("allocating the peer sums' slots"))?;
        stream
            .synchronize()
            .map_err(err("allocating the peer sums' slots"))?;
        let mine = raw(&slots, stream);
        let all = comms.all_gather(&[f64::from_bits(mine)])?;
        let addresses: Vec<u64> = all.iter().map(|a| a.to_bits()).collect();
        if addresses.len() != ranks {
            return Err(Error::internal("the peer sums' table has a wrong length"));
        }
        let table = stream
            .clone_htod(&addresses)
            .map_err(err("uploading the peer sums' table"))?;
        stream
            .synchronize()
            .map_err(err("uploading the peer sums' table"))?;
        Ok(PeerSums {
            _slots: slots,
            table,
            _booking: ledger.book(Purpose::Halo, peer_sums_bytes(ranks)),
        })
    }

    /// The device address of the ranks' buffer addresses.
    pub fn table(&self, stream: &CudaStream) -> u64 {
        raw(&self.table, stream)
    }
}
