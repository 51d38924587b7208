//! Version 3.0 on a decomposed lattice: a rank's operator application as
//! pack -> exchange -> interior -> exterior (kernels/halo.cu, stencil_v3's split_mask),
//! with the exchange on a communication stream overlapping the interior kernel:
//!
//! ```text
//! main stream:  record `packed` -> interior -----------------------------------> wait `exchanged` -> exterior (every split mu)
//! comm stream:  wait `packed` -> pack (every split mu) -> DeviceExchange::exchange_on -> record `exchanged`
//! (the pack on the communication stream, so the interior does not wait for it;
//! `[tuning] pack_on = "main"` puts it back on the main stream before `packed`)
//! ```
//!
//! `Halo` holds the partition, the exchange (also the global sums of dot and norm2:
//! gathered on the device, added in rank order, the same bits on every rank), the host
//! communicator (barriers, agreements), the face and ghost
//! buffers (ghost links exchanged once at construction, through the host communicator),
//! the halo kernels and optional event timings (`HaloTimings`). `PeerCopies` is the
//! one-GPU `DeviceExchange`: ranks as threads of one process on the same GPU, faces moved
//! by device-to-device copies ordered by CUDA events (NCCL refuses two ranks on one GPU).
//!
//! Files: `rank` (the `Halo` struct, its kernels and timing books), `construct` (its
//! construction), `launch` (one application as named steps), `exchange` (the faces'
//! messages, the warm-up, the global sums), `faces` (a split direction's buffers), `ghost`
//! (edge masks and ghost links), `timings`, `peer_sums` (the fused CR's sums over peer
//! memory) and `peer` (`PeerCopies`, `enable_peer_access`).

mod construct;
mod exchange;
pub(crate) mod faces;
mod ghost;
mod launch;
pub mod peer;
pub(crate) mod peer_sums;
pub(crate) mod rank;
pub mod timings;
