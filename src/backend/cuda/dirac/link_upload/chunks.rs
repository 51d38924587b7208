//! The canonical links cut into chunks of whole sites for 3.0's upload, seen as f64, and
//! the size of the device scratch buffer the chunks are laid out from.

use crate::backend::cuda::core::staging::{chunk_sites, LinkUpload};
use crate::backend::cuda::core::version::Reconstruct;
use crate::field::Su3;
use crate::geometry::lattice::NDIM;

/// f64 of the device scratch buffer of a 3.0 backend with `reconstruct` and `mode` on
/// `volume` sites, staging `max_values` at most per chunk (0: none). The footprint's and
/// the backend's one formula.
pub(crate) fn scratch_values(
    volume: usize,
    reconstruct: Reconstruct,
    mode: LinkUpload,
    max_values: usize,
) -> usize {
    match mode.stride(reconstruct) {
        None => 0,
        Some(stride) => {
            let per_chunk = chunk_sites(volume, stride, max_values);
            per_chunk * 2 * NDIM * stride * mode.lanes(volume, per_chunk)
        }
    }
}

/// The lexicographic sites `first..first + sites` of the canonical field (`first` and, but
/// for a whole odd volume, `sites` even).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiteChunk {
    pub first: usize,
    pub sites: usize,
}

/// The volume cut into chunks of `per_chunk` sites, the last one shorter.
pub(crate) fn site_chunks(volume: usize, per_chunk: usize) -> Vec<SiteChunk> {
    (0..volume)
        .step_by(per_chunk.max(1))
        .map(|first| SiteChunk {
            first,
            sites: per_chunk.min(volume - first),
        })
        .collect()
}

const _: () = assert!(
    std::mem::size_of::<Su3>() == 144 && std::mem::offset_of!(Su3, 0) == 0,
    "Su3 must be its 9 complex numbers and nothing else"
);

/// The canonical links as f64: [site][mu][row][col][re, im].
pub(crate) fn links_as_f64(links: &[Su3]) -> &[f64] {
    // SAFETY: Su3 is repr(transparent) over [[C64; 3]; 3] (size and offset asserted above),
    // C64 two f64 (repr(C)), so a slice of n links is 18 n f64, aligned for f64.
    unsafe { std::slice::from_raw_parts(links.as_ptr() as *const f64, links.len() * 18) }
}

/// Chunk `c`'s sites of the canonical links (`links_as_f64`), whole links.
pub(super) fn chunk_source<'a>(canonical: &'a [f64], c: &SiteChunk) -> &'a [f64] {
    &canonical[18 * NDIM * c.first..18 * NDIM * (c.first + c.sites)]
}
