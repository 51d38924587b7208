//! Each rank reads its own part of a gauge file: `read_gauge_slab`
//! returns the rank's sub-lattice of the field (`Partition`), the same bits as
//! `scatter_gauge(read_gauge(file))` on that rank, having read only the rows of its
//! sub-lattice (plus one layer forward in each split direction) from the file, and the
//! whole file verified by all ranks together.
//!
//! NERSC, ILDG/SciDAC and MILC store their links as one site-major array (NERSC after
//! END_HEADER, ILDG/SciDAC in the ildg-/scidac-binary-data record, MILC after its
//! header), so a rank's sites are found by offset: each contiguous x-run of its box is one
//! read (runs that are adjacent in the file are read together, up to 4 MiB). openQCD
//! stores the links of each odd point, so a rank reads the odd points that hold its box's
//! links (`openqcd::read_sites`).
//!
//! Verification, per rank then combined over `Comms` (one all-gather per stage, ranks
//! added in rank order, so every rank takes the same decision and refuses a bad file with
//! the same error as the whole-file reader, naming the file, key and both values):
//! - checksums: NERSC's CHECKSUM is a sum of 32-bit words modulo 2^32 (each rank sums its
//!   sites' words, the partials are added); SciDAC suma/sumb and MILC sum29/sum31 XOR a
//!   term per site or word that depends on its global index (each rank XORs its own);
//! - non-finite values and unitarity per link (the first bad link and the worst link by
//!   global index, the counts summed);
//! - the header's plaquette and link trace: each rank sums the plaquettes based at its own
//!   sites, whose other links lie in the extra forward layer it read; the sums are added.
//!
//! A rank that cannot read (missing or truncated file, bad header) still takes part in the
//! gather, so the other ranks fail at once (naming that rank) instead of waiting for it.

use super::openqcd;
use super::payload::{LinkOrder, SiteSums};
use super::verify::{
    check_header, check_projected, check_stored, check_unchecked, file_info, projection_failures,
    LinkSurvey, Verified, SURVEY_REALS,
};
use super::{describe, open, unitarity_tolerance, GaugeFileInfo, GaugeFormat, GaugeHeader};
use super::{payload, ReadOptions};
use crate::comms::Comms;
use crate::error::{Error, Result};
use crate::field::gauge::{worse_link, worst_link, Plaquette};
use crate::field::{GaugeField, Su3};
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use crate::geometry::partition::Partition;
use crate::reduce::det_sum;
use std::path::Path;

/// The box of sites a rank reads: its sub-lattice and, in every split direction, the layer
/// one step forward (periodic), which holds the links that the plaquettes based at its
/// last layer need. Box coordinates c are global coordinates (offset + c) mod global.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlabPlan {
    pub global: [usize; NDIM],
    pub offset: [usize; NDIM],
    /// The rank's own extents.
    pub local: [usize; NDIM],
    /// The box's extents: local, plus 1 in each split direction.
    pub extent: [usize; NDIM],
}

impl SlabPlan {
    pub fn new(p: &Partition) -> SlabPlan {
        let local = p.local_dims();
        SlabPlan {
            global: p.global,
            offset: p.offset(),
            local,
            extent: std::array::from_fn(|mu| local[mu] + p.is_split(mu) as usize),
        }
    }

    pub fn box_volume(&self) -> usize {
        self.extent.iter().product()
    }

    fn box_coords(&self, mut i: usize) -> [usize; NDIM] {
        std::array::from_fn(|mu| {
            let c = i % self.extent[mu];
            i /= self.extent[mu];
            c
        })
    }

    /// The global lexicographic index of the site at box coordinates `c`.
    fn global_site(&self, c: [usize; NDIM]) -> usize {
        let g = self.global;
        let x: [usize; NDIM] = std::array::from_fn(|mu| (self.offset[mu] + c[mu]) % g[mu]);
        x[0] + g[0] * (x[1] + g[1] * (x[2] + g[2] * x[3]))
    }

    fn owns(&self, c: [usize; NDIM]) -> bool {
        (0..NDIM).all(|mu| c[mu] < self.local[mu])
    }

    /// The box index of the rank's local site `i` (local lexicographic order).
    fn box_index_of_local(&self, mut i: usize) -> usize {
        let c: [usize; NDIM] = std::array::from_fn(|mu| {
            let c = i % self.local[mu];
            i /= self.local[mu];
            c
        });
        let e = self.extent;
        c[0] + e[0] * (c[1] + e[1] * (c[2] + e[2] * c[3]))
    }

    /// The reads that fetch the box, in box order: (first global site, number of sites),
    /// one per contiguous x-run (a run that wraps around the x boundary is two), with
    /// runs that follow each other in the file merged up to `max_sites` sites.
    pub fn reads(&self, max_sites: usize) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        let mut push = |first: usize, n: usize| match out.last_mut() {
            Some((f, m)) if *f + *m == first && *m + n <= max_sites => *m += n,
            _ => out.push((first, n)),
        };
        let (e, g, o) = (self.extent, self.global, self.offset);
        for t in 0..e[3] {
            for z in 0..e[2] {
                for y in 0..e[1] {
                    let row = self.global_site([0, y, z, t]);
                    // The run starts at x = offset (row's x is offset there).
                    let first = (g[0] - o[0]).min(e[0]);
                    push(row, first);
                    if first < e[0] {
                        push(row - o[0], e[0] - first);
                    }
                }
            }
        }
        out
    }
}

/// Rank `partition.rank()`'s sub-lattice of the gauge file at `path` (format detected
/// when `None`), read and verified as `read_gauge_with` does but with every rank of
/// `comms` reading only its own part. Every rank must call this at once (it gathers
/// twice). Returns the rank's links on `partition.local_lattice(boundary)`, and the
/// file's info as the whole-file reader gives it (checksums, plaquette and link trace,
/// worst link, all of the whole file: the same on every rank; the plaquette and link
/// trace are sums over ranks, so they may differ from the whole-file reader's in the last
/// bits).
pub fn read_gauge_slab(
    path: &Path,
    format: Option<GaugeFormat>,
    partition: &Partition,
    boundary: [Boundary; NDIM],
    opts: ReadOptions,
    comms: &mut dyn Comms,
) -> Result<(GaugeField, GaugeFileInfo)> {
    read_gauge_slab_checked(path, format, partition, boundary, (opts, true), comms)
}

/// `read_gauge_slab` with the read options and `accept_unchecked`
/// (`io::read_gauge_checked`); `read_gauge_slab` accepts unverifiable files with a
/// warning, as `read_gauge_with` does.
pub fn read_gauge_slab_checked(
    path: &Path,
    format: Option<GaugeFormat>,
    partition: &Partition,
    boundary: [Boundary; NDIM],
    (opts, accept_unchecked): (ReadOptions, bool),
    comms: &mut dyn Comms,
) -> Result<(GaugeField, GaugeFileInfo)> {
    if comms.size() != partition.ranks() || comms.rank() != partition.rank() {
        return Err(Error::internal(format!(
            "slab read: rank {} of {} ranks given the partition of rank {} of grid {:?}",
            comms.rank(),
            comms.size(),
            partition.rank(),
            partition.grid
        )));
    }
    let rank = comms.rank();
    let plan = SlabPlan::new(partition);

    // Stage 1: every rank reads its box and surveys its own links as stored.
    let local = read_local(path, format, partition, &plan, boundary);
    let mine: Vec<f64> = match &local {
        Ok(l) => {
            let mut v = vec![1.0, 0.0, l.sums[0] as f64, l.sums[1] as f64];
            v.extend(l.survey.to_reals());
            v
        }
        Err(e) => {
            let mut v = vec![0.0; STAGE1_REALS];
            v[1] = e.exit_code() as f64;
            v
        }
    };
    let all = comms.all_gather(&mine);
    let mut local = local?;
    let all = all?;
    let parts: Vec<&[f64]> = all.chunks_exact(STAGE1_REALS).collect();
    if let Some((r, p)) = parts.iter().enumerate().find(|(_, p)| p[0] == 0.0) {
        return Err(failed_elsewhere(path, r, p[1] as i32));
    }
    let header = &local.header;
    // The same header on every rank: all refuse alike.
    check_unchecked(path, header, accept_unchecked, rank == 0)?;
    if rank == 0 {
        for w in &header.warnings {
            tracing::warn!("{w}");
        }
    }
    let sums = parts.iter().fold([0u32; 2], |acc, p| {
        header.payload.sums.combine(acc, [p[2] as u32, p[3] as u32])
    });
    let checksums = payload::compare_sums(path, &header.stored_sums, sums)?;
    let survey = parts
        .iter()
        .map(|p| LinkSurvey::from_reals(&p[4..]))
        .reduce(LinkSurvey::merge)
        .unwrap_or_default();
    let forced = check_stored(path, header, &survey, opts, rank == 0)?;

    // Stage 2: plaquette and link trace sums (as stored when links are forced onto SU(3),
    // and as returned), and the worst link after reunitarisation.
    let volume = header.volume();
    let local_volume = partition.local_dims().iter().product();
    let own = |i: usize| plan.box_index_of_local(i);
    let global_link = |k: usize| partition.global_site(k / NDIM) * NDIM + k % NDIM;
    let trace_sum = |links: &[Su3]| det_sum(links, |u| u.trace().re);
    let reunitarised = header.precision_bits == 32 || forced > 0;
    let mut mine = [0.0; STAGE2_REALS];
    if forced > 0 {
        let s = local.box_field.plaquette_sums(local_volume, own);
        let links = plan_own_links(&plan, &local.box_field.links, local_volume);
        mine[..3].copy_from_slice(&[s[0], s[1], trace_sum(&links)]);
    }
    if reunitarised {
        local.box_field.reunitarise();
        let links = plan_own_links(&plan, &local.box_field.links, local_volume);
        let worst = worst_link(&links);
        let failures = projection_failures(&links, worst);
        let (k, d) = worst.unwrap_or((0, 0.0));
        mine[3..7].copy_from_slice(&[
            worst.is_some() as u8 as f64,
            global_link(k) as f64,
            d,
            failures as f64,
        ]);
    }
    let links = plan_own_links(&plan, &local.box_field.links, local_volume);
    let s = local.box_field.plaquette_sums(local_volume, own);
    mine[7..].copy_from_slice(&[s[0], s[1], trace_sum(&links)]);
    let all = comms.all_gather(&mine)?;
    let parts: Vec<&[f64]> = all.chunks_exact(STAGE2_REALS).collect();
    // Sums in rank order, as `comms::global_sum` adds them.
    let total = |i: usize| parts[1..].iter().fold(parts[0][i], |s, p| s + p[i]);
    let links_total = (volume * NDIM) as f64 * 3.0;
    if forced > 0 {
        let plaquette = Plaquette::from_sums([total(0), total(1)], volume);
        check_header(path, header, plaquette.total, total(2) / links_total)?;
    }
    let after = if reunitarised {
        let worst = parts
            .iter()
            .filter(|p| p[3] != 0.0)
            .map(|p| (p[4] as usize, p[5]))
            .reduce(worse_link);
        Some(check_projected(
            path,
            header.dims,
            worst,
            total(6) as usize,
        )?)
    } else {
        None
    };
    let plaquette = Plaquette::from_sums([total(7), total(8)], volume);
    let link_trace = total(9) / links_total;
    if forced == 0 {
        check_header(path, header, plaquette.total, link_trace)?;
    }
    let field = GaugeField {
        lattice: local.lattice,
        links,
    };
    let info = file_info(
        path,
        local.header,
        Verified {
            checksums,
            plaquette,
            link_trace,
            survey,
            after,
            forced,
        },
    );
    if rank == 0 {
        super::checks::record("gauge file", path, info.checks.clone());
    }
    Ok((field, info))
}

/// Stage 1's message: ok (1) or failed (0), the exit code of a failure, the two checksum
/// partials, the survey.
const STAGE1_REALS: usize = 4 + SURVEY_REALS;
/// Stage 2's: plaquette sums [spatial, temporal] and link trace sum of the links as
/// stored (when forced), the worst link after reunitarisation (present, index,
/// deviation) and the links without projection, the final plaquette and trace sums.
const STAGE2_REALS: usize = 10;

/// What a rank read: the file's header, its box of links as stored, the checksum
/// partials over its own sites and the survey of its own links.
struct Local {
    header: GaugeHeader,
    box_field: GaugeField,
    sums: [u32; 2],
    survey: LinkSurvey,
    lattice: Lattice,
}

fn read_local(
    path: &Path,
    format: Option<GaugeFormat>,
    partition: &Partition,
    plan: &SlabPlan,
    boundary: [Boundary; NDIM],
) -> Result<Local> {
    let header = describe(path, format, Some(partition.global))?;
    let lattice = partition.local_lattice(boundary)?;
    let (box_links, sums) = read_box(path, &header, plan)?;
    let box_field = GaugeField {
        lattice: Lattice::new(plan.extent, boundary)?,
        links: box_links,
    };
    let links = plan_own_links(plan, &box_field.links, lattice.volume());
    let survey = LinkSurvey::of(
        &links,
        unitarity_tolerance(header.precision_bits),
        |k: usize| partition.global_site(k / NDIM) * NDIM + k % NDIM,
    );
    Ok(Local {
        header,
        box_field,
        sums,
        survey,
        lattice,
    })
}

/// The links of the rank's own sites, in local order, out of its box.
fn plan_own_links(plan: &SlabPlan, box_links: &[Su3], local_volume: usize) -> Vec<Su3> {
    let mut out = Vec::with_capacity(local_volume * NDIM);
    for i in 0..local_volume {
        let b = plan.box_index_of_local(i);
        out.extend_from_slice(&box_links[b * NDIM..(b + 1) * NDIM]);
    }
    out
}

/// Reads the box's links (box order) and the checksum partials over the rank's own sites.
fn read_box(path: &Path, header: &GaugeHeader, plan: &SlabPlan) -> Result<(Vec<Su3>, [u32; 2])> {
    let p = &header.payload;
    if p.order == LinkOrder::OpenQcd {
        // No checksum; the links of a site lie at two odd points, not in one run.
        let sites: Vec<usize> = (0..plan.box_volume())
            .map(|i| plan.global_site(plan.box_coords(i)))
            .collect();
        return Ok((openqcd::read_sites(path, header, &sites)?, [0, 0]));
    }
    let enc = p.encoding;
    let site_bytes = enc.site_bytes();
    let (mut file, _) = open(path)?;
    let mut links = Vec::with_capacity(plan.box_volume() * NDIM);
    let mut sums = SiteSums::new(p.sums, enc);
    let mut buf = Vec::new();
    let mut next = 0usize;
    for (first, n) in plan.reads(((4 << 20) / site_bytes).max(1)) {
        buf.resize(n * site_bytes, 0);
        let at = p.offset + (first * site_bytes) as u64;
        super::bytes::fill_exact_at(&mut file, path, at, &mut buf, || {
            format!(
                "{} ends before site {} of {} ({site_bytes} bytes per site)",
                p.what,
                first + n,
                header.volume()
            )
        })?;
        for site in buf.chunks_exact(site_bytes) {
            let c = plan.box_coords(next);
            if plan.owns(c) {
                sums.add_site(plan.global_site(c), site);
            }
            for link in site.chunks_exact(enc.link_bytes()) {
                links.push(enc.decode(link));
            }
            next += 1;
        }
    }
    if next != plan.box_volume() {
        return Err(Error::internal(format!(
            "slab read: {next} sites read, the box holds {}",
            plan.box_volume()
        )));
    }
    Ok((links, sums.values))
}

/// The error of a rank whose read succeeded when rank `r` failed with exit code `code`:
/// of the same kind (so the process exits with the same code), naming the file and `r`.
fn failed_elsewhere(path: &Path, r: usize, code: i32) -> Error {
    let msg = format!("rank {r} could not read its part of this file (rank {r}'s error says why)");
    match code {
        3 => Error::io(path, std::io::Error::other(msg)),
        4 => Error::format(path, msg),
        2 => Error::invalid("gauge", format!("{}: {msg}", path.display())),
        _ => Error::internal(format!("{}: {msg}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_is_the_sub_lattice_plus_a_forward_layer_in_split_directions() {
        // 8x8x8x4 over [2,1,1,2], rank 3 = coords (1,0,0,1): offset (4,0,0,2), local
        // (4,8,8,2), box (5,8,8,3); its x-runs start at x = 4 and wrap to x = 0 for the
        // fifth site, its t layer wraps from t = 3 to t = 0.
        let p = Partition::new([8, 8, 8, 4], [2, 1, 1, 2], 3).unwrap();
        let plan = SlabPlan::new(&p);
        assert_eq!(plan.extent, [5, 8, 8, 3]);
        let reads = plan.reads(usize::MAX);
        let sites: usize = reads.iter().map(|r| r.1).sum();
        assert_eq!(sites, plan.box_volume());
        // First row (y = z = 0, t = 2): global sites 4..8 of that row, then x = 0.
        let row = 8 * 8 * 8 * 2;
        assert_eq!(reads[0], (row + 4, 4));
        assert_eq!(reads[1], (row, 1));
        // The last row is t = 0 (wrapped), y = z = 7.
        let last = 7 * 8 + 7 * 64;
        assert_eq!(reads[reads.len() - 2], (last + 4, 4));
        // Unsplit x and y: whole planes are contiguous and merge.
        let p = Partition::new([8, 8, 8, 4], [1, 1, 2, 2], 0).unwrap();
        let plan = SlabPlan::new(&p);
        assert_eq!(plan.extent, [8, 8, 5, 3]);
        assert_eq!(
            plan.reads(usize::MAX),
            vec![(0, 320), (512, 320), (1024, 320)]
        );
        // One rank: the whole file in reads of at most max_sites.
        let plan = SlabPlan::new(&Partition::single([8, 8, 8, 4]));
        assert_eq!(plan.reads(1000), vec![(0, 1000), (1000, 1000), (2000, 48)]);
    }

    #[test]
    fn own_sites_map_to_their_global_index() {
        // Every own site of every rank, through the box, lands on the global site the
        // partition gives it (`Partition::global_site`, the scatter's map).
        for grid in [[1, 1, 1, 2], [2, 1, 1, 2], [2, 2, 2, 2]] {
            for r in 0..grid.iter().product() {
                let p = Partition::new([8, 4, 4, 8], grid, r).unwrap();
                let plan = SlabPlan::new(&p);
                let l: usize = p.local_dims().iter().product();
                for i in 0..l {
                    let c = plan.box_coords(plan.box_index_of_local(i));
                    assert!(plan.owns(c));
                    assert_eq!(plan.global_site(c), p.global_site(i));
                }
            }
        }
    }
}
