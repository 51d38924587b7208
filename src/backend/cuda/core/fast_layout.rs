//! Version 3.0's parity-major layout (Vh = V/2, cb = lexicographic index / 2, p =
//! (x+y+z+t) % 2, every extent even): a half field holds element k = spin*3 + colour of
//! site cb at complex index k*Vh + cb; a full field is [even half][odd half]: p*12*Vh +
//! k*Vh + cb. Links: element e = row*3 + col of the E stored elements of U_mu at site (p,
//! cb) at p*4E*Vh + (mu*E + e)*Vh + cb, E = 9, or 6 with two-row compression (rows 0 and 1
//! only: the kernels rebuild row 2, so it is not kept), or 4 with the 8-real form (element
//! e = real pair e of `Su3::pack8`). Host-side maps only (no CUDA), tested without a GPU.

use crate::error::{Error, Result};
use crate::field::{GaugeField, Su3, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use rayon::prelude::*;

/// Complex index of element k (0..12) of checkerboard site cb of parity p in a full 3.0
/// field (subtract p*12*Vh, or take p = 0, for a half field).
pub(crate) fn spinor_index(vh: usize, p: usize, cb: usize, k: usize) -> usize {
    p * 12 * vh + k * vh + cb
}

/// The first `elems` stored complex elements of link u (`Reconstruct::elems`): row-major elements
/// for 9 and 6, the real pairs of `Su3::pack8` for 4.
pub(crate) fn stored_link(u: &Su3, elems: usize) -> [C64; 9] {
    if elems == 4 {
        let r = u.pack8();
        let mut s = [C64::new(0.0, 0.0); 9];
        for (e, z) in s.iter_mut().take(4).enumerate() {
            *z = C64::new(r[2 * e], r[2 * e + 1]);
        }
        s
    } else {
        std::array::from_fn(|e| u.0[e / 3][e % 3])
    }
}

/// Complex index of element e = row*3 + col of U_mu at checkerboard site cb of parity p
/// in 3.0's link array of `elems` complex per link (what `links_to_soa` writes; the unit
/// tests check both against the kernel's reads).
#[cfg(test)]
pub(crate) fn link_index(
    vh: usize,
    p: usize,
    cb: usize,
    mu: usize,
    e: usize,
    elems: usize,
) -> usize {
    p * NDIM * elems * vh + (mu * elems + e) * vh + cb
}

/// Checkerboard sites per task of `links_to_soa` and `links_chunk_to_soa`.
const LINK_BLOCK: usize = 4096;

/// One piece of a staged upload: `len` values written at offset `dst` of the device array,
/// read from the staging buffer where the previous piece of its chunk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub dst: usize,
    pub len: usize,
}

/// A piece of 3.0's link array staged at once: the checkerboard sites `first..first +
/// sites` of one parity, as a segment of each of that parity's 4 * elems rows (`[row][2 *
/// sites]` in the staging buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinkChunk {
    pub parity: usize,
    pub first: usize,
    pub sites: usize,
}

impl LinkChunk {
    /// f64 values the chunk stages.
    pub fn values(&self, elems: usize) -> usize {
        2 * NDIM * elems * self.sites
    }

    /// Where the chunk's rows go in the link array (`link_index` order), in staging order.
    pub fn segments(&self, vh: usize, elems: usize) -> Vec<Segment> {
        (0..NDIM * elems)
            .map(|row| Segment {
                dst: 2 * ((self.parity * NDIM * elems + row) * vh + self.first),
                len: 2 * self.sites,
            })
            .collect()
    }
}

/// The link array of a lattice of `vh` sites per parity cut into chunks of at most
/// `max_values` f64 (and at least one `LINK_BLOCK` of sites), parity by parity.
pub(crate) fn link_chunks(vh: usize, elems: usize, max_values: usize) -> Vec<LinkChunk> {
    let per_site = 2 * NDIM * elems;
    let step = (max_values / per_site / LINK_BLOCK).max(1) * LINK_BLOCK;
    (0..2)
        .flat_map(|parity| {
            (0..vh).step_by(step).map(move |first| LinkChunk {
                parity,
                first,
                sites: step.min(vh - first),
            })
        })
        .collect()
}

/// The gauge field in 3.0's link order as f64 pairs, `elems` complex per link
/// (`stored_link`): the array the stencil reads, built on the host and uploaded as it is
/// (no canonical copy on the device). `soa` holds 2 * 4 * elems * V values. Each parity's
/// rows are one `LinkChunk` of all its sites. (The backend stages chunks instead; this
/// whole-array form is the tests'.)
#[cfg(test)]
pub(crate) fn links_to_soa(gauge: &GaugeField, elems: usize, soa: &mut [f64]) {
    let vh = gauge.lattice.volume() / 2;
    assert_eq!(soa.len(), 2 * 2 * NDIM * elems * vh, "link array size");
    if vh == 0 {
        return;
    }
    for (parity, half) in soa.chunks_mut(2 * NDIM * elems * vh).enumerate() {
        let chunk = LinkChunk {
            parity,
            first: 0,
            sites: vh,
        };
        links_chunk_to_soa(gauge, elems, &chunk, half);
    }
}

/// One chunk of the link array into `rows` (`[row][2 * sites]`, row = mu * elems + e):
/// parallel over blocks of checkerboard sites, each task reading its sites' links once, in
/// order, and writing its segment of every row. Every value is a copy, so the result does
/// not depend on the thread count.
pub(crate) fn links_chunk_to_soa(
    gauge: &GaugeField,
    elems: usize,
    chunk: &LinkChunk,
    rows: &mut [f64],
) {
    let l = &gauge.lattice;
    let n = chunk.sites;
    assert_eq!(rows.len(), chunk.values(elems), "link chunk size");
    if n == 0 {
        return;
    }
    let blocks = n.div_ceil(LINK_BLOCK);
    // Segment b of every row goes to task b.
    let mut tasks: Vec<Vec<&mut [f64]>> = (0..blocks)
        .map(|_| Vec::with_capacity(NDIM * elems))
        .collect();
    for r in rows.chunks_mut(2 * n) {
        for (b, seg) in r.chunks_mut(2 * LINK_BLOCK).enumerate() {
            tasks[b].push(seg);
        }
    }
    tasks.into_par_iter().enumerate().for_each(|(b, mut rows)| {
        let first = chunk.first + b * LINK_BLOCK;
        for cb in first..(first + LINK_BLOCK).min(chunk.first + n) {
            let j = 2 * (cb - first);
            let site = l.checkerboard_site(chunk.parity, cb);
            for mu in 0..NDIM {
                let u = stored_link(gauge.link(site, mu), elems);
                for (e, &z) in u.iter().enumerate().take(elems) {
                    let row = &mut rows[mu * elems + e];
                    row[j] = z.re;
                    row[j + 1] = z.im;
                }
            }
        }
    });
}

/// Checkerboard sites per task of the chunked spinor layout (`SpinorOrder::fill`,
/// `SpinorOrder::scatter`).
const SPINOR_BLOCK: usize = 2048;

/// The order of a full double spinor field on the device, as the staged transfers of
/// `Core::upload_spinor` and `Core::download_spinor` see it: the canonical [site][12
/// complex] of the seed versions, or 3.0's parity-major rows (`spinor_index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpinorOrder {
    Canonical,
    ParityMajor,
}

/// A piece of a full double spinor field staged at once: the canonical sites `first..first
/// + sites` (24 f64 each, contiguous on the host). For `ParityMajor` both bounds are even:
/// the checkerboard sites `first / 2..(first + sites) / 2` of both parities, one segment of
/// each of the 24 (parity, element) rows, staged as `[row][sites]` (row = p * 12 + k).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpinorChunk {
    pub first: usize,
    pub sites: usize,
}

impl SpinorChunk {
    /// f64 values the chunk stages.
    pub fn values(&self) -> usize {
        24 * self.sites
    }

    /// The chunk's part of the canonical field.
    pub fn canonical_range(&self) -> std::ops::Range<usize> {
        24 * self.first..24 * (self.first + self.sites)
    }
}

impl SpinorOrder {
    /// A field of `volume` sites cut into chunks of at most `max_values` f64 (but at least
    /// one site, two for `ParityMajor`), in order. `ParityMajor` needs an even volume.
    pub fn chunks(self, volume: usize, max_values: usize) -> Vec<SpinorChunk> {
        let step = match self {
            SpinorOrder::Canonical => (max_values / 24).max(1),
            SpinorOrder::ParityMajor => {
                assert!(
                    volume.is_multiple_of(2),
                    "a parity-major field of odd volume"
                );
                (max_values / 48).max(1) * 2
            }
        };
        (0..volume)
            .step_by(step)
            .map(|first| SpinorChunk {
                first,
                sites: step.min(volume - first),
            })
            .collect()
    }

    /// Where the chunk goes in (or comes from in) the device array of a field of `volume`
    /// sites, in staging order.
    pub fn segments(self, volume: usize, chunk: &SpinorChunk) -> Vec<Segment> {
        match self {
            SpinorOrder::Canonical => vec![Segment {
                dst: 24 * chunk.first,
                len: chunk.values(),
            }],
            SpinorOrder::ParityMajor => {
                let vh = volume / 2;
                (0..24)
                    .map(|row| Segment {
                        dst: 2 * (row * vh + chunk.first / 2),
                        len: chunk.sites,
                    })
                    .collect()
            }
        }
    }

    /// Lay the chunk of the canonical field out in a staging buffer (`segments` order), in
    /// parallel. Copies only: the same bits for any thread count.
    pub fn fill(self, l: &Lattice, canonical: &[f64], chunk: &SpinorChunk, buf: &mut [f64]) {
        assert_eq!(buf.len(), chunk.values(), "spinor chunk size");
        let src = &canonical[chunk.canonical_range()];
        match self {
            SpinorOrder::Canonical => crate::threads::par_copy(buf, src),
            SpinorOrder::ParityMajor => {
                let n = chunk.sites / 2;
                if n == 0 {
                    return;
                }
                // Segment b of every row goes to task b.
                let blocks = n.div_ceil(SPINOR_BLOCK);
                let mut tasks: Vec<Vec<&mut [f64]>> =
                    (0..blocks).map(|_| Vec::with_capacity(24)).collect();
                for r in buf.chunks_mut(2 * n) {
                    for (b, seg) in r.chunks_mut(2 * SPINOR_BLOCK).enumerate() {
                        tasks[b].push(seg);
                    }
                }
                tasks.into_par_iter().enumerate().for_each(|(b, mut rows)| {
                    let pairs = src[48 * b * SPINOR_BLOCK..].chunks_exact(48);
                    for (j, pair) in pairs.take(rows[0].len() / 2).enumerate() {
                        let s = chunk.first + 2 * (b * SPINOR_BLOCK + j);
                        // Sites 2 cb and 2 cb + 1: one of each parity.
                        let p0 = l.parity(s);
                        for (h, site) in pair.chunks_exact(24).enumerate() {
                            let p = p0 ^ h;
                            for k in 0..12 {
                                let row = &mut rows[p * 12 + k];
                                row[2 * j] = site[2 * k];
                                row[2 * j + 1] = site[2 * k + 1];
                            }
                        }
                    }
                });
            }
        }
    }

    /// The inverse of `fill`: a staging buffer holding the chunk (`segments` order) into
    /// its sites of the canonical field, in parallel.
    pub fn scatter(self, l: &Lattice, buf: &[f64], chunk: &SpinorChunk, canonical: &mut [f64]) {
        assert_eq!(buf.len(), chunk.values(), "spinor chunk size");
        let dst = &mut canonical[chunk.canonical_range()];
        match self {
            SpinorOrder::Canonical => crate::threads::par_copy(dst, buf),
            SpinorOrder::ParityMajor => {
                let n = chunk.sites / 2;
                dst.par_chunks_mut(48 * SPINOR_BLOCK)
                    .enumerate()
                    .for_each(|(b, d)| {
                        for (j, pair) in d.chunks_exact_mut(48).enumerate() {
                            let cb = b * SPINOR_BLOCK + j;
                            let s = chunk.first + 2 * cb;
                            let p0 = l.parity(s);
                            for (h, site) in pair.chunks_exact_mut(24).enumerate() {
                                let p = p0 ^ h;
                                for k in 0..12 {
                                    let i = 2 * ((p * 12 + k) * n + cb);
                                    site[2 * k] = buf[i];
                                    site[2 * k + 1] = buf[i + 1];
                                }
                            }
                        }
                    });
            }
        }
    }
}

/// Refuse a lattice 3.0 cannot lay out by parity.
pub(crate) fn check_even_lattice(l: &Lattice) -> Result<()> {
    let parity_offset: usize = l.offset.iter().sum();
    if l.dims.iter().any(|d| !d.is_multiple_of(2)) || !parity_offset.is_multiple_of(2) {
        return Err(Error::invalid(
            "kernel",
            format!(
                "kernel 3.0 stores fields by parity and needs even extents, but the lattice is {}",
                l.dims_string()
            ),
        ));
    }
    Ok(())
}

/// Canonical [site][12 complex] (as f64 pairs) to 3.0's parity-major full field, in
/// parallel: each task writes one block of one (parity, element) row, reading the sites'
/// elements (copies only: the same bits for any thread count). The backend stages chunks
/// instead (`SpinorOrder::fill`); this whole-field form is the tests' reference.
#[cfg(test)]
pub(crate) fn spinor_to_soa(l: &Lattice, canonical: &[f64], soa: &mut [f64]) {
    let vh = l.volume() / 2;
    assert_eq!(canonical.len(), 48 * vh, "canonical spinor size");
    assert_eq!(soa.len(), 48 * vh, "parity-major spinor size");
    if vh == 0 {
        return;
    }
    soa.par_chunks_mut(2 * vh).enumerate().for_each(|(row, r)| {
        let (p, k) = (row / 12, row % 12);
        r.par_chunks_mut(2 * LINK_BLOCK)
            .enumerate()
            .for_each(|(b, seg)| {
                let first = b * LINK_BLOCK;
                for (j, z) in seg.chunks_exact_mut(2).enumerate() {
                    let site = l.checkerboard_site(p, first + j);
                    z[0] = canonical[24 * site + 2 * k];
                    z[1] = canonical[24 * site + 2 * k + 1];
                }
            });
    });
}

/// The inverse of `spinor_to_soa`; with `parity` Some(p), `soa` is a half field of parity
/// p and only those sites of `canonical` are written. Parallel over sites.
pub(crate) fn spinor_from_soa(
    l: &Lattice,
    soa: &[f64],
    canonical: &mut [f64],
    parity: Option<usize>,
) {
    let vh = l.volume() / 2;
    canonical
        .par_chunks_exact_mut(24)
        .enumerate()
        .for_each(|(site, s)| {
            let (p, cb) = l.checkerboard(site);
            let base = match parity {
                None => p * 12 * vh,
                Some(q) if q == p => 0,
                Some(_) => return,
            };
            for k in 0..12 {
                let i = base + spinor_index(vh, 0, cb, k);
                s[2 * k] = soa[2 * i];
                s[2 * k + 1] = soa[2 * i + 1];
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::core::version::Reconstruct;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    fn lat(d: [usize; 4]) -> Lattice {
        Lattice::new(d, DEFAULT_BOUNDARY).unwrap()
    }

    /// The site stencil_v3 computes for (p, cb) (v3_site), written as in the kernel.
    fn kernel_site(l: &Lattice, p: usize, cb: usize) -> usize {
        let s0 = 2 * cb;
        let c = l.coords(s0);
        s0 + ((c[0] + c[1] + c[2] + c[3] + p) & 1)
    }

    #[test]
    fn checkerboard_maps_are_bijections_and_match_the_kernels() {
        for d in [[4, 4, 4, 8], [6, 4, 8, 4], [2, 2, 2, 2], [2, 4, 6, 2]] {
            let l = lat(d);
            let v = l.volume();
            let vh = v / 2;
            let mut seen = vec![false; v * 12];
            let mut seen_links = [
                vec![false; v * 36],
                vec![false; v * 24],
                vec![false; v * 16],
            ];
            for s in 0..v {
                let (p, cb) = l.checkerboard(s);
                assert!(cb < vh);
                assert_eq!(kernel_site(&l, p, cb), s, "{d:?} site {s}");
                for k in 0..12 {
                    let i = spinor_index(vh, p, cb, k);
                    assert!(!seen[i]);
                    seen[i] = true;
                }
                for (seen_links, elems) in seen_links.iter_mut().zip([9, 6, 4]) {
                    for mu in 0..4 {
                        for e in 0..elems {
                            let i = link_index(vh, p, cb, mu, e, elems);
                            assert!(!seen_links[i]);
                            seen_links[i] = true;
                            // stencil_v3 reads element e of U_mu at (p, cb) from the link
                            // array of parity p (p*4E*Vh), at (mu*E + e)*Vh + cb.
                            let (pp, r) = (i / (4 * elems * vh), i % (4 * elems * vh));
                            assert_eq!((kernel_site(&l, pp, r % vh), r / vh), (s, mu * elems + e));
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&b| b));
            assert!(seen_links.iter().all(|s| s.iter().all(|&b| b)));
            // A full field is two half fields: even sites first.
            assert_eq!(spinor_index(vh, 1, 0, 0), 12 * vh);
        }
    }

    #[test]
    fn the_host_link_array_holds_each_stored_element_at_its_index() {
        // Two blocks' worth of sites per parity on 8x8x8x36 (vh = 9216 > 2 * LINK_BLOCK),
        // so that the block split and its last, partial block are exercised.
        for d in [[4, 2, 6, 2], [8, 8, 8, 36]] {
            let l = lat(d);
            let g = GaugeField::random(&l, 7);
            let vh = l.volume() / 2;
            for r in Reconstruct::ALL {
                let elems = r.elems();
                let mut soa = vec![f64::NAN; 2 * 4 * elems * l.volume()];
                links_to_soa(&g, elems, &mut soa);
                for s in 0..l.volume() {
                    let (p, cb) = l.checkerboard(s);
                    for mu in 0..4 {
                        for e in 0..elems {
                            let i = link_index(vh, p, cb, mu, e, elems);
                            // 18 and 12: element e = row*3 + col; 8: real pair e of
                            // pack8.
                            let u = g.link(s, mu);
                            let z = if elems == 4 {
                                let r = u.pack8();
                                C64::new(r[2 * e], r[2 * e + 1])
                            } else {
                                u.0[e / 3][e % 3]
                            };
                            assert_eq!((soa[2 * i], soa[2 * i + 1]), (z.re, z.im));
                        }
                    }
                }
                assert!(soa.iter().all(|x| !x.is_nan()), "every element written");
            }
        }
    }

    #[test]
    fn parity_major_spinor_order_round_trips() {
        let l = lat([4, 2, 2, 6]);
        let v = l.volume();
        let canonical: Vec<f64> = (0..v * 24).map(|k| k as f64).collect();
        let mut soa = vec![0.0; v * 24];
        spinor_to_soa(&l, &canonical, &mut soa);
        // element k = 7 of site 3 (parity 1, cb 1) sits at 12*Vh + 7*Vh + 1.
        let vh = v / 2;
        assert_eq!(l.parity(3), 1);
        assert_eq!(soa[2 * (12 * vh + 7 * vh + 1)], canonical[3 * 24 + 14]);
        let mut back = vec![0.0; v * 24];
        spinor_from_soa(&l, &soa, &mut back, None);
        assert_eq!(back, canonical);
        // The odd half alone fills the odd sites and leaves the even ones.
        let mut odd_only = vec![-1.0; v * 24];
        spinor_from_soa(&l, &soa[24 * vh..], &mut odd_only, Some(1));
        for s in 0..v {
            let got = &odd_only[24 * s..24 * s + 24];
            if l.parity(s) == 1 {
                assert_eq!(got, &canonical[24 * s..24 * s + 24]);
            } else {
                assert!(got.iter().all(|&x| x == -1.0));
            }
        }
    }

    /// The serial spinor permutation as it was before it ran in parallel: the oracle of
    /// the parallel one.
    fn spinor_to_soa_serial(l: &Lattice, canonical: &[f64], soa: &mut [f64]) {
        let vh = l.volume() / 2;
        for (site, s) in canonical.chunks_exact(24).enumerate() {
            let (p, cb) = l.checkerboard(site);
            for k in 0..12 {
                let i = spinor_index(vh, p, cb, k);
                soa[2 * i] = s[2 * k];
                soa[2 * i + 1] = s[2 * k + 1];
            }
        }
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn parallel_permutations_are_the_serial_ones_for_any_thread_count() {
        // 8x8x8x36: vh = 9216, more than two LINK_BLOCKs per row, the last one partial.
        let l = lat([8, 8, 8, 36]);
        let v = l.volume();
        let canonical: Vec<f64> = (0..v * 24).map(|k| (k as f64).sin()).collect();
        let mut serial = vec![0.0; v * 24];
        spinor_to_soa_serial(&l, &canonical, &mut serial);
        let g = GaugeField::random(&l, 3);
        let mut links_one = Vec::new();
        for threads in [1, 4] {
            let (soa, back, links) = pool(threads).install(|| {
                let mut soa = vec![f64::NAN; v * 24];
                spinor_to_soa(&l, &canonical, &mut soa);
                let mut back = vec![f64::NAN; v * 24];
                spinor_from_soa(&l, &soa, &mut back, None);
                let mut links = vec![f64::NAN; 2 * 4 * 6 * v];
                links_to_soa(&g, 6, &mut links);
                (soa, back, links)
            });
            // Copies only: bit for bit the serial permutation and its inverse.
            assert!(soa
                .iter()
                .zip(&serial)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert!(back
                .iter()
                .zip(&canonical)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            if threads == 1 {
                links_one = links;
            } else {
                assert!(links
                    .iter()
                    .zip(&links_one)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    #[test]
    fn staged_link_chunks_rebuild_the_link_array_exactly() {
        // vh = 9216: with room for 4096 sites per chunk, three chunks per parity (the last
        // of 1024 sites); also one chunk per parity when everything fits.
        let l = lat([8, 8, 8, 36]);
        let vh = l.volume() / 2;
        let g = GaugeField::random(&l, 11);
        for elems in [6, 9] {
            let mut whole = vec![0.0; 2 * 4 * elems * l.volume()];
            links_to_soa(&g, elems, &mut whole);
            for max_values in [2 * 4 * elems * 4096, 2 * 4 * elems * 5000, usize::MAX / 2] {
                let chunks = link_chunks(vh, elems, max_values);
                let per_parity = if max_values == usize::MAX / 2 { 1 } else { 3 };
                assert_eq!(chunks.len(), 2 * per_parity, "{max_values}");
                // As the device would receive it: every segment from the staging buffer.
                let mut device = vec![f64::NAN; whole.len()];
                let mut written = vec![0u8; whole.len()];
                for c in &chunks {
                    assert!(c.values(elems) <= max_values.max(2 * 4 * elems * 4096));
                    let mut staging = vec![f64::NAN; c.values(elems)];
                    links_chunk_to_soa(&g, elems, c, &mut staging);
                    let at =
                        copy_segments(&staging, c.segments(vh, elems), &mut device, &mut written);
                    assert_eq!(at, staging.len(), "the segments use the whole chunk");
                }
                assert!(written.iter().all(|&w| w == 1), "each value written once");
                assert!(device
                    .iter()
                    .zip(&whole)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    /// The copies of one staged chunk as the device would make them: `segments`, back to
    /// back from the start of `staging`, into `device`, counting each value's writes in
    /// `written`. Returns the staged values used.
    fn copy_segments(
        staging: &[f64],
        segments: impl IntoIterator<Item = Segment>,
        device: &mut [f64],
        written: &mut [u8],
    ) -> usize {
        let mut at = 0;
        for s in segments {
            device[s.dst..s.dst + s.len].copy_from_slice(&staging[at..at + s.len]);
            written[s.dst..s.dst + s.len]
                .iter_mut()
                .for_each(|w| *w += 1);
            at += s.len;
        }
        at
    }

    /// A staged upload then download of `canonical` in `order` with chunks of at most
    /// `max_values` (as the device would see them: every segment copied from and to the
    /// staging buffer), checking that the device array is `expect` (bit for bit, each value
    /// written once) and that the download gives `canonical` back.
    fn stage_round_trip(
        l: &Lattice,
        order: SpinorOrder,
        canonical: &[f64],
        expect: &[f64],
        max_values: usize,
    ) {
        let v = l.volume();
        let what = format!("{:?} {order:?} max {max_values}", l.dims);
        let chunks = order.chunks(v, max_values);
        // The chunks tile the sites in order, whole sites (pairs for parity-major).
        let mut next = 0;
        for c in &chunks {
            assert_eq!(c.first, next, "{what}");
            assert!(c.sites > 0, "{what}");
            let min = if order == SpinorOrder::ParityMajor {
                48
            } else {
                24
            };
            assert!(c.values() <= max_values.max(min), "{what}");
            if order == SpinorOrder::ParityMajor {
                assert!(c.first % 2 == 0 && c.sites % 2 == 0, "{what}");
            }
            next += c.sites;
        }
        assert_eq!(next, v, "{what}");
        let mut device = vec![f64::NAN; 24 * v];
        let mut written = vec![0u8; 24 * v];
        for c in &chunks {
            let mut staging = vec![f64::NAN; c.values()];
            order.fill(l, canonical, c, &mut staging);
            let at = copy_segments(&staging, order.segments(v, c), &mut device, &mut written);
            assert_eq!(
                at,
                staging.len(),
                "{what}: the segments use the whole chunk"
            );
        }
        assert!(written.iter().all(|&w| w == 1), "{what}: each value once");
        assert!(
            device
                .iter()
                .zip(expect)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{what}: upload"
        );
        let mut back = vec![f64::NAN; 24 * v];
        for c in &chunks {
            let mut staging = vec![f64::NAN; c.values()];
            let mut at = 0;
            for s in order.segments(v, c) {
                staging[at..at + s.len].copy_from_slice(&device[s.dst..s.dst + s.len]);
                at += s.len;
            }
            order.scatter(l, &staging, c, &mut back);
        }
        assert!(
            back.iter()
                .zip(canonical)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{what}: download"
        );
    }

    #[test]
    fn staged_spinor_chunks_are_the_whole_field_permutations() {
        // Small lattices with tiny chunks (one site pair, uneven last chunks), a sub-lattice
        // whose global offset flips the parities, and 8x8x8x36 (vh = 9216: several
        // SPINOR_BLOCKs per chunk row, the last one partial) with chunks that end mid-block.
        let mut shifted = lat([4, 2, 6, 2]);
        shifted.offset = [1, 0, 0, 1];
        let mut odd_shift = lat([2, 4, 2, 2]);
        odd_shift.offset = [1, 0, 0, 0];
        let lattices = [lat([2, 2, 2, 2]), lat([4, 2, 2, 6]), shifted, odd_shift];
        for l in &lattices {
            let v = l.volume();
            let canonical: Vec<f64> = (0..24 * v).map(|k| k as f64 + 0.25).collect();
            let mut soa = vec![f64::NAN; 24 * v];
            spinor_to_soa(l, &canonical, &mut soa);
            for max_values in [1, 48, 24 * 5, 24 * 14, 24 * (v - 2), 24 * v, usize::MAX / 2] {
                stage_round_trip(l, SpinorOrder::ParityMajor, &canonical, &soa, max_values);
                stage_round_trip(
                    l,
                    SpinorOrder::Canonical,
                    &canonical,
                    &canonical,
                    max_values,
                );
            }
        }
        // The seed versions' order takes any volume, odd included.
        let l = lat([3, 3, 1, 1]);
        let canonical: Vec<f64> = (0..24 * 9).map(|k| -(k as f64)).collect();
        for max_values in [1, 24 * 2, 24 * 4, 24 * 9] {
            stage_round_trip(
                &l,
                SpinorOrder::Canonical,
                &canonical,
                &canonical,
                max_values,
            );
        }
        let l = lat([8, 8, 8, 36]);
        let v = l.volume();
        let canonical: Vec<f64> = (0..24 * v).map(|k| (k as f64).sin()).collect();
        let mut serial = vec![f64::NAN; 24 * v];
        spinor_to_soa_serial(&l, &canonical, &mut serial);
        for threads in [1, 4] {
            pool(threads).install(|| {
                for max_values in [24 * 5000, 48 * (SPINOR_BLOCK + 7), usize::MAX / 2] {
                    stage_round_trip(
                        &l,
                        SpinorOrder::ParityMajor,
                        &canonical,
                        &serial,
                        max_values,
                    );
                    stage_round_trip(
                        &l,
                        SpinorOrder::Canonical,
                        &canonical,
                        &canonical,
                        max_values,
                    );
                }
            });
        }
    }

    #[test]
    fn spinor_chunks_fill_their_staging_size() {
        // 64 MiB of staging on 48^3x96: whole site pairs, 24 rows of 349524 values.
        let (v, max) = (48 * 48 * 48 * 96, (64 << 20) / 8);
        let chunks = SpinorOrder::ParityMajor.chunks(v, max);
        assert_eq!(chunks[0].sites, 349524);
        assert!(chunks[0].values() <= max);
        assert_eq!(chunks.len(), v.div_ceil(349524));
        let segs = SpinorOrder::ParityMajor.segments(v, &chunks[1]);
        assert_eq!(segs.len(), 24);
        assert_eq!(
            segs[0],
            Segment {
                dst: 349524,
                len: 349524
            }
        );
        assert_eq!(segs[13].dst, 2 * (13 * v / 2) + 349524);
        // One chunk when the field fits.
        assert_eq!(SpinorOrder::Canonical.chunks(10, 240).len(), 1);
        assert_eq!(SpinorOrder::Canonical.chunks(10, 239).len(), 2);
    }

    #[test]
    fn odd_extents_are_refused_with_the_dims() {
        let l = lat([4, 3, 4, 4]);
        match check_even_lattice(&l) {
            Err(Error::InvalidValue { message, .. }) => {
                assert!(message.contains("even extents"), "{message}");
                assert!(message.contains("4x3x4x4"), "{message}");
            }
            other => panic!("expected InvalidValue, got {other:?}"),
        }
        assert!(check_even_lattice(&lat([4, 4, 4, 8])).is_ok());
    }
}
