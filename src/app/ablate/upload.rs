//! The link upload bench (`--upload-dims`): the ways of uploading a field's links, timed
//! against each other.

use crate::backend::cuda::Reconstruct;
use crate::error::Result;

/// The link upload bench (`--upload-dims`): a random gauge field of `dims` (seed 1),
/// its double 12-real links uploaded as the main job's construction does, with the
/// default (`workers`, 3 MiB x2 buffers each, chunks from a queue) and the workers' other
/// shapes worth comparing (buffers of 2-4 MiB, two or three each), `repeat` times each,
/// interleaved.
pub(super) fn link_upload_bench(
    dims: [usize; 4],
    repeat: usize,
) -> Result<Vec<crate::backend::cuda::UploadBenchRow>> {
    use crate::backend::cuda::{LinkUpload, StageShape};
    let lattice =
        crate::geometry::lattice::Lattice::new(dims, crate::geometry::lattice::DEFAULT_BOUNDARY)?;
    let gauge = crate::clock::timed("link upload bench: random gauge field", || {
        crate::field::GaugeField::random(&lattice, 1)
    });
    let lane = |mib: usize, lane_buffers| StageShape {
        lane_values: (mib << 20) / 8,
        lane_buffers,
        ..StageShape::default()
    };
    let variants = [
        (LinkUpload::Workers, StageShape::default()),
        (LinkUpload::Workers, lane(2, 2)),
        (LinkUpload::Workers, lane(3, 3)),
        (LinkUpload::Workers, lane(4, 2)),
        (LinkUpload::Workers, lane(4, 3)),
    ];
    crate::backend::cuda::bench_link_upload(&gauge, Reconstruct::R12, &variants, repeat)
}
