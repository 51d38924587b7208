//! NCCL between processes, one GPU each: `NcclComms` implements `Comms` (host
//! slices, staged through device buffers) and `DeviceExchange` (device buffers, enqueued on
//! the caller's stream), plus `global_sum_on`, the deterministic global sum on the device.
//!
//! Set-up: rank 0 makes NCCL's unique id (`new_unique_id`) and hands it to the others
//! through the TCP rendezvous (`NcclComms::from_launch` does both); every rank then calls
//! `NcclComms::new` with its stream, rank, size and the id (ncclCommInitRank, collective).
//!
//! Streams: NCCL takes the stream per call, so nothing is tied to a "communicator's
//! stream". `exchange_on` and `global_sum_on` enqueue directly on the stream they are given
//! (no event/wait pair, no host synchronisation): work queued on it before sees its inputs,
//! work queued after sees its outputs, and the calls can be captured into a CUDA graph.
//! The host paths (`Comms::exchange`, `Comms::all_gather`) use the stream `new` was given
//! and synchronise it. Rules (NCCL's): every rank issues the collective and point-to-point
//! calls of a communicator in the same order; one communicator is not used from two
//! threads at once, nor on two streams whose work may overlap.
//!
//! Messages have no tags in NCCL: sends to a peer are matched with that peer's receives in
//! the order they are issued. Both sides here issue them sorted by tag (stable), so a send
//! and a receive pair up when they have the same tag, as with `ThreadComms`. A receive's
//! length must equal the sender's (NCCL cannot check; a mismatch is undefined behaviour,
//! in practice a hang or an error).
//!
//! Global sums: ncclAllGather of every rank's partials, then a kernel adds them in rank
//! order (rank 0 first), the same order as `comms::global_sum` on the host: the same bits
//! on every rank and in every run (ncclAllReduce's order depends on the topology).
//!
//! Libraries: cudarc loads libcuda, libnccl and libnvrtc when first used and panics when
//! one is missing, so every entry point checks first and returns `Error::Cuda`. cudarc
//! looks for NCCL under the names libnccl.so, libnccl.so.13, .12, .11, .10, .9, .1, not
//! libnccl.so.2 as NCCL installs itself: a link named libnccl.so to the real library must
//! be on the loader path.
//!
//! Files: `library` (loading NCCL, its version, the unique id, the process defaults, the
//! errors), `communicator` (`NcclComms`: set-up, the grouped point-to-point calls, the
//! end), `collectives` (its `Comms` and `DeviceExchange`), `global_sum` (`global_sum_on`
//! and its kernel), `shared` (`SharedNccl`).

mod collectives;
pub mod communicator;
mod global_sum;
pub mod library;
pub mod shared;
