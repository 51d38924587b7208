//! What a `CudaBackend` allocates, by purpose, as functions of the lattice and its options
//! alone (no GPU): the sizes its code books in `backend::ledger`, for the per-plan estimate
//! made before anything is allocated (`app::footprint`) and for the construction's own
//! check of free memory. tests/gpu_memory.rs sets them beside the books of live backends.

use crate::backend::cuda::core::cr_state::cr_state_bytes;
use crate::backend::cuda::core::kernels::{reduce_blocks, reduce_buffer_bytes};
use crate::backend::cuda::core::options::CudaOptions;
use crate::backend::cuda::core::version::{LinkLayout, Reconstruct, StencilVersion};
use crate::backend::cuda::dirac::link_upload::chunks::scratch_values;
use crate::backend::cuda::dirac::link_upload::LinkUpload;
use crate::backend::cuda::halo::faces::face_bytes;
use crate::backend::cuda::halo::rank::gathered_bytes;
use crate::backend::ledger::{sorted_lines, MemoryLine, Purpose};
use crate::geometry::lattice::NDIM;
use crate::geometry::partition::Partition;
use crate::linalg::Precision;

fn line(purpose: Purpose, bytes: u64) -> MemoryLine {
    MemoryLine {
        purpose,
        count: 1,
        bytes,
    }
}

/// Sum of the lines' bytes.
pub fn total(lines: &[MemoryLine]) -> u64 {
    lines.iter().map(|l| l.bytes).sum()
}

/// The set-up of a backend: what it holds at the set-up's peak (the seed versions hold the
/// canonical field while they build their links, 1.6 the seed buffer while it reorders
/// it), and what stays once it is built.
#[derive(Clone, Debug, PartialEq)]
pub struct Construction {
    pub peak: Vec<MemoryLine>,
    pub resident: Vec<MemoryLine>,
}

/// 3.0's links in `precision` on `volume` sites: 4 per site of 18 reals, or 12 with
/// two-row compression (only rows 0 and 1 are stored), or 8 (`Reconstruct::R8`). Half:
/// the half build's 16-bit links (2 bytes a real; kernels/v3_core.cuh V3_LINK16), which
/// the 8-real form does not have (its half iterations read the single links).
pub fn v3_links(volume: usize, reconstruct: Reconstruct, precision: Precision) -> MemoryLine {
    let real = match precision {
        Precision::Double => 8,
        Precision::Single => 4,
        Precision::Half => 2,
    };
    let reals = 2 * reconstruct.elems();
    line(
        Purpose::Links {
            precision,
            reals: reals as u8,
            per_site: NDIM as u8,
        },
        (volume * NDIM * reals * real) as u64,
    )
}

/// The set-up's allocations for `opts` on a (local) lattice of `volume` sites, with 3.0's
/// link upload (the default) and the staging chunks of `opts.tuning` (`StageShape::of`).
pub fn construction(volume: usize, opts: &CudaOptions) -> Construction {
    let upload = LinkUpload::default();
    construction_with(
        volume,
        opts,
        upload,
        crate::backend::cuda::core::staging::StageShape::of(&opts.tuning)
            .link_chunk_values(upload.for_reconstruct(opts.reconstruct)),
    )
}

/// 3.0's scratch buffer of the device link upload (one chunk of whole sites, freed after
/// the set-up), None with the host upload (and r8).
pub fn link_upload_scratch(
    volume: usize,
    opts: &CudaOptions,
    upload: LinkUpload,
    chunk_values: usize,
) -> Option<MemoryLine> {
    let n = scratch_values(volume, opts.reconstruct, upload, chunk_values);
    (opts.version.link_layout() == LinkLayout::SoA && n > 0)
        .then(|| line(Purpose::GaugeUpload, (n * 8) as u64))
}

/// `construction` with the link upload and the f64 per staged chunk given
/// (`CudaBackend::new_with_link_upload`).
pub fn construction_with(
    volume: usize,
    opts: &CudaOptions,
    upload: LinkUpload,
    chunk_values: usize,
) -> Construction {
    let version = opts.version;
    let table = line(
        Purpose::MoveTable,
        4 * if version.uses_move_table() {
            volume as u64 * 8
        } else {
            1
        },
    );
    let partials = MemoryLine {
        purpose: Purpose::Reductions,
        count: 1,
        bytes: reduce_buffer_bytes(reduce_blocks(volume * 12)),
    };
    let seed_links = line(
        Purpose::Links {
            precision: Precision::Double,
            reals: 18,
            per_site: 8,
        },
        volume as u64 * 144 * 8,
    );
    let canonical = line(Purpose::GaugeUpload, (volume * NDIM * 18 * 8) as u64);
    let mut phases: Vec<Vec<MemoryLine>> = Vec::new();
    let resident = match version.link_layout() {
        LinkLayout::SoA => {
            // The (one-entry) displacement table lives during the set-up only: 3.0 reads
            // its neighbours from the coordinates and drops it. The device link upload
            // holds its scratch buffer (one chunk) while it runs.
            let links = v3_links(volume, opts.reconstruct, Precision::Double);
            let mut setup = vec![links, table, partials];
            setup.extend(link_upload_scratch(volume, opts, upload, chunk_values));
            phases.push(setup);
            vec![links, partials]
        }
        LinkLayout::Seed => {
            phases.push(vec![canonical, seed_links, table, partials]);
            let mut r = vec![seed_links, table, partials];
            if version == StencilVersion::V2_0 {
                r.push(MemoryLine {
                    purpose: Purpose::StencilTemporaries,
                    count: 2,
                    bytes: 2 * volume as u64 * 24 * 8,
                });
            }
            r
        }
        LinkLayout::Reordered => {
            phases.push(vec![canonical, seed_links, table, partials]);
            let reordered = line(
                seed_links.purpose,
                (volume.div_ceil(2) * 2 * 144 * 8) as u64,
            );
            phases.push(vec![seed_links, reordered, table, partials]);
            vec![reordered, table, partials]
        }
    };
    phases.push(resident.clone());
    let mut peak = &phases[0];
    for p in &phases {
        if total(p) > total(peak) {
            peak = p;
        }
    }
    Construction {
        peak: sorted_lines(peak.iter().copied()),
        resident: sorted_lines(resident),
    }
}

/// Bytes a backend's set-up needs at its peak (checked against free memory before it
/// allocates).
pub fn construction_bytes(volume: usize, opts: &CudaOptions) -> u64 {
    total(&construction(volume, opts).peak)
}

/// `construction_bytes` of `construction_with`.
pub(crate) fn construction_bytes_with(
    volume: usize,
    opts: &CudaOptions,
    upload: LinkUpload,
    chunk_values: usize,
) -> u64 {
    total(&construction_with(volume, opts, upload, chunk_values).peak)
}

/// 3.0's Schur temporary: one odd half field of double size, shared by both precisions.
pub fn schur_temporary(volume: usize) -> MemoryLine {
    line(Purpose::SchurTemporary, (volume / 2 * 24 * 8) as u64)
}

/// The clover term's two device arrays (the clover part and the inverse's factor, 72 reals
/// a site each) in double, or in float for single and half fields.
pub fn clover_term(volume: usize, precision: Precision) -> MemoryLine {
    let real = if precision == Precision::Double { 8 } else { 4 };
    let reals = 2 * crate::dirac::clover::PACKED_SITE;
    line(
        Purpose::CloverTerm(precision),
        (volume * reals * real) as u64,
    )
}

/// The norms of the Schur temporary when it holds a half field (one f32 per odd site).
pub fn schur_temporary_norms(volume: usize) -> MemoryLine {
    line(Purpose::SchurTemporary, (volume / 2 * 4) as u64)
}

/// A fused CR solve's device state with room for `max_iter` iterations.
pub fn cr_state(volume: usize, max_iter: u64, ranks: Option<usize>) -> MemoryLine {
    line(Purpose::CrState, cr_state_bytes(volume, max_iter, ranks))
}

/// A fused BiCGStab solve's device state with room for `max_iter` iterations (`ranks`:
/// those of a decomposed lattice).
pub fn bi_state(max_iter: u64, ranks: Option<usize>) -> MemoryLine {
    line(
        Purpose::CrState,
        crate::backend::cuda::engines::bicgstab::bi_state_bytes(max_iter, ranks),
    )
}

/// A decomposed rank's halo: the face buffers and ghost links (one allocation set per split
/// direction) and the global sums' buffer (`GATHER_DOUBLES` a rank), which a rank has even
/// when nothing is split (a grid of one).
pub fn halo(partition: &Partition, reconstruct: Reconstruct) -> MemoryLine {
    let split: Vec<usize> = (0..NDIM).filter(|&mu| partition.is_split(mu)).collect();
    MemoryLine {
        purpose: Purpose::Halo,
        count: split.len() + 1,
        bytes: split
            .iter()
            .map(|&mu| face_bytes(partition.face_sites(mu), reconstruct.elems()))
            .sum::<u64>()
            + gathered_bytes(partition.ranks()),
    }
}

/// The triad measurement of `bytes` (its three arrays).
pub fn triad(bytes: usize) -> MemoryLine {
    line(Purpose::Measurement, (3 * (bytes / 24) * 8) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(version: StencilVersion, reconstruct: Reconstruct) -> CudaOptions {
        CudaOptions {
            version,
            reconstruct,
            ..CudaOptions::default()
        }
    }

    #[test]
    fn links_per_site_by_precision_and_compression() {
        // 4 links x 18 reals x 8 B = 576 B/site; 12 reals: 384; 8 reals: 256; single: 288,
        // 192 and 128.
        let v = 1000;
        for (r, p, per_site) in [
            (Reconstruct::R18, Precision::Double, 576),
            (Reconstruct::R12, Precision::Double, 384),
            (Reconstruct::R8, Precision::Double, 256),
            (Reconstruct::R18, Precision::Single, 288),
            (Reconstruct::R12, Precision::Single, 192),
            (Reconstruct::R8, Precision::Single, 128),
        ] {
            assert_eq!(v3_links(v, r, p).bytes, per_site * v as u64);
        }
    }

    #[test]
    fn the_set_up_peak_holds_the_canonical_copy_only_for_the_seed_versions() {
        let v = 16 * 16 * 16 * 32;
        let red = reduce_buffer_bytes(reduce_blocks(v * 12));
        let vv = v as u64;
        // 3.0: the links built on the host, no canonical copy: the peak is the resident set
        // and the one-entry displacement table, which the backend drops after the set-up
        // (the GPU test every_plan_books_exactly_what_its_estimate_says caught it held in
        // the estimate's solve phase, 4 bytes over the books).
        let r12 = opts(StencilVersion::V3_0, Reconstruct::R12);
        let stage = crate::backend::cuda::core::staging::STAGE_BYTES / 8;
        let c = construction_with(v, &r12, LinkUpload::Host, stage);
        assert_eq!(total(&c.peak), 384 * vv + 4 + red);
        assert_eq!(total(&c.resident), 384 * vv + red);
        // r8 never stages on the device.
        let r8 = opts(StencilVersion::V3_0, Reconstruct::R8);
        assert_eq!(
            construction_with(v, &r8, LinkUpload::Workers, stage),
            construction_with(v, &r8, LinkUpload::Host, stage)
        );
        // The workers: a slot of one chunk per worker thread, 3 MiB of r12 sites each
        // (8192 sites: 3 * 2^17 f64 / 48 per site), at most one per chunk (16 here).
        let lane = crate::backend::cuda::core::staging::LANE_BYTES / 8;
        let lanes = rayon::current_num_threads().min(v.div_ceil(8192));
        let c = construction_with(v, &r12, LinkUpload::Workers, lane);
        assert_eq!(
            total(&c.peak),
            384 * vv + lanes as u64 * 8192 * 384 + 4 + red
        );
        // Without arguments: the default upload and the options' staging shape.
        let upload = LinkUpload::default();
        let values = crate::backend::cuda::StageShape::of(&r12.tuning).link_chunk_values(upload);
        assert_eq!(
            construction(v, &r12),
            construction_with(v, &r12, upload, values)
        );
        // 1.5: canonical (576) + seed buffer (1152) at the peak, the buffer after.
        let c = construction(v, &opts(StencilVersion::V1_5, Reconstruct::R18));
        assert_eq!(total(&c.peak), (576 + 1152) * vv + 4 + red);
        assert_eq!(total(&c.resident), 1152 * vv + 4 + red);
        // 1.0: and its table (32 B/site).
        let c = construction(v, &opts(StencilVersion::V1_0, Reconstruct::R18));
        assert_eq!(total(&c.resident), (1152 + 32) * vv + red);
        // 1.6: the seed buffer and its reordered copy (2 x 1152) at the peak.
        let c = construction(v, &opts(StencilVersion::V1_6, Reconstruct::R18));
        assert_eq!(total(&c.peak), 2 * 1152 * vv + 4 + red);
        // 2.0: its two temporaries (2 x 192) stay.
        let c = construction(v, &opts(StencilVersion::V2_0, Reconstruct::R18));
        assert_eq!(total(&c.resident), (1152 + 384) * vv + 4 + red);
    }
}
