//! A split direction's device buffers (`Faces`: four faces and the ghost links), their
//! bytes, and which neighbour each face goes to or comes from (`face_messages`).

use crate::backend::ledger::Booking;
use crate::geometry::partition::Partition;
use cudarc::driver::{CudaSlice, CudaStream};

/// The device buffers of one split direction.
pub(super) struct Faces {
    pub(super) mu: usize,
    /// Sites on a face perpendicular to mu.
    pub(super) face_sites: usize,
    pub(super) send_lo: CudaSlice<f64>,
    pub(super) send_hi: CudaSlice<f64>,
    pub(super) recv_lo: CudaSlice<f64>,
    pub(super) recv_hi: CudaSlice<f64>,
    /// The backward neighbour's upper-face links U_mu (double and single).
    pub(super) ghost_d: CudaSlice<f64>,
    pub(super) ghost_s: CudaSlice<f32>,
    /// All six on the backend's books (`Purpose::Halo`).
    pub(super) _booking: Booking,
}

impl Faces {
    /// The device address of the ghost links in the launch's precision.
    pub(super) fn ghost(&self, single: bool, stream: &CudaStream) -> u64 {
        if single {
            raw(&self.ghost_s, stream)
        } else {
            raw(&self.ghost_d, stream)
        }
    }
}

/// Bytes of one split direction's device buffers on a sub-lattice whose faces
/// perpendicular to it have `face_sites` sites: four face buffers of 6 complex doubles per
/// face site (both parities), and the ghost links (one per face site, `elems` complex
/// each) in double and in single.
pub(crate) fn face_bytes(face_sites: usize, elems: usize) -> u64 {
    (4 * 12 * face_sites * 8 + elems * face_sites * (16 + 8)) as u64
}

/// The four face buffers of a split direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FaceBuffer {
    SendLo,
    SendHi,
    RecvLo,
    RecvHi,
}

/// The messages of direction mu for this rank, as (peer, tag, buffer): sends, then
/// receives. The lower face (1 - g projected) goes to the backward neighbour with tag
/// 2 mu, where it is the forward hops' ghost (recv_hi); the upper face to the forward
/// neighbour with tag 2 mu + 1 (its recv_lo). Two ranks in mu make both neighbours one
/// rank: the tags tell the two faces apart.
pub(super) fn face_messages(p: &Partition, mu: usize) -> [(usize, u32, FaceBuffer); 4] {
    let (fwd, bwd) = (p.neighbour(mu, true), p.neighbour(mu, false));
    let lo_tag = 2 * mu as u32;
    [
        (bwd, lo_tag, FaceBuffer::SendLo),
        (fwd, lo_tag + 1, FaceBuffer::SendHi),
        (fwd, lo_tag, FaceBuffer::RecvHi),
        (bwd, lo_tag + 1, FaceBuffer::RecvLo),
    ]
}

/// The device address of an allocation (the backend's streams are ordered by events, and
/// event tracking is off).
pub(super) fn raw<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    crate::backend::cuda::core::launch::dptr(s, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::NDIM;

    #[test]
    fn every_receive_pairs_with_the_right_neighbours_face() {
        // recv_hi must hold the forward neighbour's lower face, recv_lo the backward
        // neighbour's upper face; each (sender, receiver, tag) once per exchange.
        for grid in [[1, 1, 1, 2], [2, 1, 1, 3], [2, 2, 2, 2], [1, 3, 1, 1]] {
            let global = [4, 6, 4, 6].map(|l: usize| l * 2);
            let parts: Vec<Partition> = (0..grid.iter().product())
                .map(|r| Partition::new(global, grid, r).unwrap())
                .collect();
            for me in &parts {
                for mu in (0..NDIM).filter(|&mu| me.is_split(mu)) {
                    let mut keys = std::collections::HashSet::new();
                    for (from, tag, buf) in &face_messages(me, mu)[2..] {
                        let sender = &parts[*from];
                        let sent: Vec<_> = (0..NDIM)
                            .filter(|&nu| sender.is_split(nu))
                            .flat_map(|nu| face_messages(sender, nu)[..2].to_vec())
                            .filter(|(to, t, _)| *to == me.rank() && t == tag)
                            .collect();
                        assert_eq!(sent.len(), 1, "grid {grid:?} rank {} mu {mu}", me.rank());
                        let want = match buf {
                            FaceBuffer::RecvHi => {
                                assert_eq!(*from, me.neighbour(mu, true));
                                FaceBuffer::SendLo
                            }
                            _ => {
                                assert_eq!(*from, me.neighbour(mu, false));
                                FaceBuffer::SendHi
                            }
                        };
                        assert_eq!(sent[0].2, want);
                        assert!(keys.insert((*from, *tag)));
                    }
                }
            }
        }
    }
}
