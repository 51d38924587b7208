//! The link upload bench (`--upload-dims`): the ways of uploading a field's links, timed
//! against each other.

use crate::backend::cuda::Reconstruct;
use crate::error::Result;

/// The link upload bench (`--upload-dims`): a random gauge field of `dims` (seed 1),
/// its double 12-real links uploaded as the main job's construction does, with the
/// default (`workers`, 3 MiB x2 buffers each, chunks from a queue) and the others worth
/// comparing (the workers in turns; their buffers of 2-4 MiB, two or three each; `device`
/// with 64 or 16 MiB shared buffers, streaming or cached stores; the field registered in
/// place), `repeat` times each, interleaved, and the `device` default's host copies alone.
pub(super) fn link_upload_bench(
    dims: [usize; 4],
    repeat: usize,
) -> Result<Vec<crate::backend::cuda::UploadBenchRow>> {
    use crate::backend::cuda::{LinkUpload, StageShape};
    use crate::threads::Stores;
    let lattice =
        crate::geometry::lattice::Lattice::new(dims, crate::geometry::lattice::DEFAULT_BOUNDARY)?;
    let gauge = crate::clock::timed("link upload bench: random gauge field", || {
        crate::field::GaugeField::random(&lattice, 1)
    });
    let shape = |mib: usize, buffers, stores| StageShape {
        values: (mib << 20) / 8,
        buffers,
        stores,
        ..StageShape::default()
    };
    let lane = |mib: usize, lane_buffers| StageShape {
        lane_values: (mib << 20) / 8,
        lane_buffers,
        ..StageShape::default()
    };
    let turns = |st: StageShape| StageShape {
        lane_deal: crate::backend::cuda::Deal::Turns,
        ..st
    };
    let variants = [
        (LinkUpload::Workers, StageShape::default()),
        (LinkUpload::Workers, turns(StageShape::default())),
        (LinkUpload::Workers, lane(2, 2)),
        (LinkUpload::Workers, turns(lane(2, 2))),
        (LinkUpload::Workers, lane(3, 3)),
        (LinkUpload::Workers, lane(4, 2)),
        (LinkUpload::Workers, lane(4, 3)),
        (LinkUpload::Device, StageShape::default()),
        (LinkUpload::Device, shape(64, 2, Stores::Cached)),
        (LinkUpload::Device, shape(16, 4, Stores::Cached)),
        (LinkUpload::Registered, StageShape::default()),
    ];
    // The host's copies alone, the `device` upload's default shape: one thread's chunk
    // copies in parallel into the shared buffers.
    let alone = [StageShape::default()];
    crate::backend::cuda::bench_link_upload(&gauge, Reconstruct::R12, &variants, &alone, repeat)
}
