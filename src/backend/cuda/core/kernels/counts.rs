//! The kernels' flop and byte counts (`Kernel::flops`, `Kernel::bytes` and the half
//! kernels' `HalfOp::flops`, `HalfOp::bytes`), with the reduction and fused-launch models
//! they are built from.

use super::{
    complex_bytes, cr_grid, reduce_blocks, reduce_shape, v3_bytes_per_site, v3_half_bytes_per_site,
    HalfOp, Kernel, SiteEpilogue, V3Mode, CR_BLOCK, CR_SCALARS, HALO_BLOCK, REDUCE_BLOCK,
};
use crate::backend::Precision;

/// Flops of cr_xr or cr_p over n complex numbers beyond the per-element work: the block
/// trees (double2 additions, 2 flops each) of every block and of the last block, the last
/// block's sum of the partials, and the scalar update (`finish` flops).
fn cr_reduction_flops(n: usize, finish: u64) -> u64 {
    tree_reduction_flops(cr_grid(n) as u64, CR_BLOCK as u64, finish)
}

/// Flops of `cr_reduce_last` over `grid` blocks of `block` threads: each block's tree
/// and the last block's (block - 1 double2 additions each, 2 flops), the last block's
/// sum of the grid's partials, then `finish` flops on the total.
fn tree_reduction_flops(grid: u64, block: u64, finish: u64) -> u64 {
    let tree = 2 * (block - 1);
    tree * (grid + 1) + 2 * grid + finish
}

/// Blocks of a halo launch over n face sites: the grid halo.rs launches with.
fn halo_grid(n: usize) -> u64 {
    crate::backend::cuda::core::launch::cfg_1d(n, HALO_BLOCK, 0)
        .grid_dim
        .0 as u64
}

/// Flops and bytes of the climb above a first pass of `blocks` blocks (real or complex
/// values): at each level what the seed's summing pass over it did (the additions of the
/// loads and the trees; its values read, its sums written), and the result's store. The
/// tickets' atomics are not counted.
fn climb_work(blocks: usize, complex: bool) -> (u64, u64) {
    let tree = (REDUCE_BLOCK as u64) - 1;
    let width = if complex { 2 } else { 1 };
    let (mut len, mut flops, mut bytes) = (blocks, 0, 8 * width);
    while len > 1 {
        let (second, groups) = reduce_shape(len);
        flops += width * (second + tree * groups);
        bytes += 8 * width * (len as u64 + groups);
        len = groups as usize;
    }
    (flops, bytes)
}

/// Flops of a one-launch reduction over n inputs (real sums, or complex ones as two
/// trees) beyond the inputs' own terms: the first pass's second-half additions and block
/// trees, then the climb (`climb_work`).
fn reduction_flops(n: usize, complex: bool) -> u64 {
    let tree = (REDUCE_BLOCK as u64) - 1;
    let width = if complex { 2 } else { 1 };
    let (second, blocks) = reduce_shape(n);
    width * (second + tree * blocks) + climb_work(blocks as usize, complex).0
}

/// Bytes of a one-launch reduction over n inputs beyond the inputs: the first pass's
/// partial sums written, then the climb (`climb_work`).
fn reduction_bytes(n: usize, complex: bool) -> u64 {
    let width = if complex { 2 } else { 1 };
    let blocks = reduce_blocks(n);
    8 * width * blocks as u64 + climb_work(blocks, complex).1
}

/// Bytes of a fused BiCGStab launch over n complex numbers of precision `p`: `fields`
/// field accesses per element, `sums` reduced values (partials written and read back),
/// and the scalar block.
/// Bytes of the clover arrays a site's epilogue reads (float arrays for single and half
/// fields).
fn clover_bytes(site: SiteEpilogue, single: bool) -> u64 {
    site.reals() * if single { 4 } else { 8 }
}

fn bi_bytes(p: Precision, n: usize, fields: u64, sums: u64) -> u64 {
    let grid = cr_grid(n) as u64;
    fields * complex_bytes(p == Precision::Single) * n as u64
        + sums * 32 * grid
        + 8 * crate::backend::cuda::core::kernels::BI_SCALARS as u64
}

impl Kernel {
    /// Executed floating-point operations of one launch over n elements (complex numbers
    /// for BLAS-1 and reductions, sites for the stencils).
    pub fn flops(&self, n: usize) -> u64 {
        let nn = n as u64;
        match self {
            Kernel::Xscal => 6 * nn,
            Kernel::Xaxpy => 8 * nn,
            Kernel::Copy => 0,
            Kernel::Norm2Partial => 3 * nn + reduction_flops(n, false),
            Kernel::DotPartial => 6 * nn + reduction_flops(n, true),
            Kernel::Stencil(v) => v.flops_per_site() * nn,
            Kernel::Xgemm34x44 => 24 * nn,
            Kernel::Xgemm33x34 { accumulate } => (if *accumulate { 288 } else { 264 }) * nn,
            Kernel::DslashCombine => 48 * nn,
            // Per element: two complex multiply-adds (8 each), |z|^2 (3) and its sum (1).
            // xr's last block adds 1 to iter; p's divides twice (alpha).
            Kernel::CrXr(_) => 20 * nn + cr_reduction_flops(n, 1),
            Kernel::CrP(_) => 20 * nn + cr_reduction_flops(n, 2),
            Kernel::CrLoad(_) => 0,
            // n - 1 complex and n - 1 real additions (apply's sum and xr's nr) and at most
            // a complex division.
            Kernel::CrGlobal | Kernel::CrPeerSum => 3 * nn.saturating_sub(1) + 11,
            Kernel::BiGlobal => 4 * nn.saturating_sub(1) + 11,
            // Per element: conj(b) b as a complex product (6, as kernels/bicgstab_fused.cu
            // bi_start computes it) and its complex sum (2); the last block stores rho.
            Kernel::BiStart(_) => 8 * nn + cr_reduction_flops(n, 0),
            // A conjugate multiply-add (8); the last block's complex division (11).
            Kernel::BiAlpha(_) => 8 * nn + cr_reduction_flops(n, 11),
            // One complex multiply-add.
            Kernel::BiS(_) => 8 * nn,
            // |t|^2 and its sum (4), a conjugate multiply-add (8); two sums per block
            // tree; omega's two divisions.
            Kernel::BiOmega(_) => 12 * nn + 2 * cr_reduction_flops(n, 1),
            // Three complex multiply-adds (24), |r|^2 (4), a conjugate multiply-add (8);
            // beta: two complex divisions and a product (28).
            Kernel::BiUpdate(_) => 36 * nn + 2 * cr_reduction_flops(n, 14),
            // Two complex multiply-adds.
            Kernel::BiP(_) => 16 * nn,
            Kernel::Setup(_) => 0,
            Kernel::V3 {
                mode, dot, site, ..
            } => {
                // 1320 for the hopping term; y + c*hop 48 (c*hop alone 24); the (y|out)
                // epilogue 12 conj-multiply-adds of 8 (the block trees not counted); the
                // site term's (`SiteEpilogue::flops`).
                let tail = if *mode == V3Mode::Parity { 24 } else { 48 };
                let dot = if *dot { 96 } else { 0 };
                (1320 + tail + dot + site.flops()) * nn
            }
            Kernel::V3Batch(b) => b.flops_per_site() * nn,
            // The inverse's block products (and twist), as the epilogue's.
            Kernel::CloverInv { twist, .. } => SiteEpilogue::Inverse { twist: *twist }.flops() * nn,
            Kernel::Half(op) => op.flops(n),
            Kernel::XaxpyF | Kernel::XpayF => 8 * nn,
            Kernel::Norm2PartialF => Kernel::Norm2Partial.flops(n),
            Kernel::DotPartialF => Kernel::DotPartial.flops(n),
            // One complex addition.
            Kernel::AddWidened => 2 * nn,
            // The complex subtraction, then norm2's work.
            Kernel::ResidualNorm2 => 2 * nn + Kernel::Norm2Partial.flops(n),
            Kernel::Convert { .. } | Kernel::CopySingle | Kernel::Zero { .. } => 0,
            // The projection: 6 complex additions (one half spinor).
            Kernel::HaloPack { .. } => 12 * nn,
            // Two SU(3) mat-vecs (132), c * hop (24) and the addition to out (24).
            Kernel::HaloExterior { dot: false, .. } => (132 + 24 + 24) * nn,
            // With the dot: conj(y) times what the site adds (a conjugate multiply-add per
            // complex, 8 flops, 12 complex numbers), reduced over the launch's own grid,
            // and the total added to the scalar block (2 flops).
            Kernel::HaloExterior { dot: true, .. } => {
                (132 + 24 + 24 + 96) * nn + tree_reduction_flops(halo_grid(n), HALO_BLOCK as u64, 2)
            }
        }
    }

    /// Global-memory bytes read plus written by one launch over n elements.
    pub fn bytes(&self, n: usize) -> u64 {
        let nn = n as u64;
        let spinor = 192;
        match self {
            Kernel::Xscal => 32 * nn,
            Kernel::Xaxpy => 48 * nn,
            Kernel::Copy => 32 * nn,
            Kernel::Norm2Partial => 16 * nn + reduction_bytes(n, false),
            Kernel::DotPartial => 32 * nn + reduction_bytes(n, true),
            Kernel::Stencil(v) => v.bytes_per_site() * nn,
            Kernel::Xgemm34x44 => 2 * spinor * nn,
            Kernel::Xgemm33x34 { accumulate } => {
                (144 + spinor + spinor + if *accumulate { spinor } else { 0 }) * nn
            }
            Kernel::DslashCombine => 3 * spinor * nn,
            // Four fields read, two written; each block writes a double2 partial and the
            // last block reads them all; the scalars (12 doubles read, a few written, and
            // xr's history entry) are noise but counted as one block read.
            Kernel::CrXr(p) | Kernel::CrP(p) => {
                let grid = cr_grid(n) as u64;
                6 * complex_bytes(*p == Precision::Single) * nn + 32 * grid + 8 * CR_SCALARS as u64
            }
            // rhs read; r, x, p and Ap written.
            Kernel::CrLoad(p) => 5 * complex_bytes(*p == Precision::Single) * nn,
            // The n ranks' gathered sums (three doubles each) and the scalar block.
            Kernel::CrGlobal => 24 * nn + 8 * CR_SCALARS as u64,
            Kernel::BiGlobal => {
                32 * nn + 8 * crate::backend::cuda::core::kernels::BI_SCALARS as u64
            }
            // Its slot (four doubles) written to each of the n ranks and their n slots read.
            Kernel::CrPeerSum => 64 * nn + 8 * CR_SCALARS as u64,
            // Fields read and written per element; each reducing launch writes its
            // partials (16 B per sum per block) and its last block reads them; the
            // scalar block counted once.
            Kernel::BiStart(p) => bi_bytes(*p, n, 5, 1),
            Kernel::BiAlpha(p) => bi_bytes(*p, n, 2, 1),
            Kernel::BiS(p) => bi_bytes(*p, n, 3, 0),
            Kernel::BiOmega(p) => bi_bytes(*p, n, 2, 2),
            Kernel::BiUpdate(p) => bi_bytes(*p, n, 7, 2),
            Kernel::BiP(p) => bi_bytes(*p, n, 4, 0),
            Kernel::Setup(_) => 0,
            Kernel::V3 {
                mode,
                single,
                reconstruct,
                half: false,
                site,
                ..
            } => {
                (v3_bytes_per_site(*mode, *single, *reconstruct) + clover_bytes(*site, *single))
                    * nn
            }
            Kernel::V3 {
                mode,
                reconstruct,
                half: true,
                site,
                ..
            } => (v3_half_bytes_per_site(*mode, *reconstruct) + clover_bytes(*site, true)) * nn,
            Kernel::V3Batch(b) => b.bytes_per_site() * nn,
            // The clover arrays it reads, a spinor read and one written.
            Kernel::CloverInv {
                single,
                half,
                twist,
            } => {
                let spinor = if *half {
                    crate::linalg::half::SITE_BYTES
                } else {
                    24 * if *single { 4 } else { 8 }
                };
                (2 * spinor + clover_bytes(SiteEpilogue::Inverse { twist: *twist }, *single)) * nn
            }
            Kernel::Half(op) => op.bytes(n),
            Kernel::XaxpyF => 24 * nn,
            Kernel::XpayF => 24 * nn,
            Kernel::Norm2PartialF => 8 * nn + reduction_bytes(n, false),
            Kernel::DotPartialF => 16 * nn + reduction_bytes(n, true),
            // x (8) and y (16) read, y written.
            Kernel::AddWidened => 40 * nn,
            // b and r read, r and low written; the partials and the climb as norm2's.
            Kernel::ResidualNorm2 => 56 * nn + reduction_bytes(n, false),
            Kernel::Convert { .. } => 24 * nn,
            Kernel::CopySingle => 16 * nn,
            Kernel::Zero { single } => complex_bytes(*single) * nn,
            // A spinor read, a half spinor written.
            Kernel::HaloPack { single } => 18 * complex_bytes(*single) * nn,
            // A half spinor and a link read, a spinor read and written (with the dot also
            // y's spinor read, and each block's double2 partial written and read back by
            // the last block).
            Kernel::HaloExterior {
                single,
                reconstruct,
                dot,
            } => {
                let link = reconstruct.elems() as u64;
                let y = if *dot { 12 } else { 0 };
                let partials = if *dot { 32 * halo_grid(n) } else { 0 };
                partials + (6 + link + 24 + y) * complex_bytes(*single) * nn
            }
        }
    }
}

impl HalfOp {
    /// Flops over n sites.
    pub fn flops(self, n: usize) -> u64 {
        let nn = n as u64;
        match self {
            HalfOp::Axpy | HalfOp::Xpay => 12 * 8 * nn,
            HalfOp::Norm2Partial => 12 * 4 * nn + reduction_flops(n, false),
            HalfOp::DotPartial => 12 * 8 * nn + reduction_flops(n, true),
            HalfOp::FromDouble | HalfOp::ToDouble | HalfOp::Copy | HalfOp::Zero => 0,
        }
    }

    /// Bytes over n sites (a half site: 52 bytes; a double site 192).
    pub fn bytes(self, n: usize) -> u64 {
        let nn = n as u64;
        let h = crate::linalg::half::SITE_BYTES;
        match self {
            HalfOp::Axpy | HalfOp::Xpay => 3 * h * nn,
            HalfOp::Norm2Partial => h * nn + reduction_bytes(n, false),
            HalfOp::DotPartial => 2 * h * nn + reduction_bytes(n, true),
            HalfOp::FromDouble | HalfOp::ToDouble => (h + 192) * nn,
            HalfOp::Copy => 2 * h * nn,
            HalfOp::Zero => h * nn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::core::kernels::climb_len;
    use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};

    #[test]
    fn split_kernels_add_up_to_the_version_count() {
        // 8 spin products, 7 accumulating and 1 writing colour products, 1 combine.
        let v = 1000;
        let flops = 8 * Kernel::Xgemm34x44.flops(v)
            + 7 * Kernel::Xgemm33x34 { accumulate: true }.flops(v)
            + Kernel::Xgemm33x34 { accumulate: false }.flops(v)
            + Kernel::DslashCombine.flops(v);
        assert_eq!(flops, StencilVersion::V2_0.flops_per_site() * v as u64);
        let bytes = 8 * Kernel::Xgemm34x44.bytes(v)
            + 7 * Kernel::Xgemm33x34 { accumulate: true }.bytes(v)
            + Kernel::Xgemm33x34 { accumulate: false }.bytes(v)
            + Kernel::DslashCombine.bytes(v);
        assert_eq!(bytes, StencilVersion::V2_0.bytes_per_site() * v as u64);
    }

    #[test]
    fn fused_cr_counts() {
        // 2048 complex: one block of 256 threads.
        let n = 2048;
        assert_eq!(
            Kernel::CrXr(Precision::Double).flops(n),
            20 * 2048 + 510 * 2 + 2 + 1
        );
        assert_eq!(
            Kernel::CrP(Precision::Single).flops(n),
            20 * 2048 + 510 * 2 + 2 + 2
        );
        // Six fields of 16 (double) or 8 (single) bytes a complex number; one block's
        // partial (32) and the scalar block of CR_SCALARS = 16 doubles.
        assert_eq!(
            Kernel::CrXr(Precision::Double).bytes(n),
            6 * 16 * 2048 + 32 + 8 * 16
        );
        assert_eq!(
            Kernel::CrP(Precision::Single).bytes(n),
            6 * 8 * 2048 + 32 + 8 * 16
        );
        // Four ranks: three complex and three real additions and the update.
        assert_eq!(Kernel::CrGlobal.flops(4), 9 + 11);
        assert_eq!(Kernel::CrGlobal.bytes(4), 96 + 8 * 16);
        assert_eq!(Kernel::CrXr(Precision::Single).name(), "cr_xr (single)");
        assert!(!Kernel::CrP(Precision::Double).is_stencil());
    }

    #[test]
    fn v3_books_follow_precision_reconstruct_and_mode() {
        let full = Kernel::V3 {
            mode: V3Mode::Full,
            single: false,
            reconstruct: Reconstruct::R18,
            dot: false,
            half: false,
            site: SiteEpilogue::None,
        };
        // The full double R=18 launch is the old 3.0 count, under the old name.
        assert_eq!(full.bytes(1), StencilVersion::V3_0.bytes_per_site());
        assert_eq!(full.flops(1), StencilVersion::V3_0.flops_per_site());
        assert_eq!(full.name(), "stencilCore 3.0");
        assert_eq!(v3_bytes_per_site(V3Mode::Full, true, Reconstruct::R18), 480);
        assert_eq!(
            v3_bytes_per_site(V3Mode::Full, false, Reconstruct::R12),
            4 * 96 + 384
        );
        assert_eq!(
            v3_bytes_per_site(V3Mode::Parity, false, Reconstruct::R18),
            8 * 144 + 384
        );
        assert_eq!(
            v3_bytes_per_site(V3Mode::ParityXpay, true, Reconstruct::R12),
            8 * 48 + 3 * 96
        );
        // 8 reals per link (conventions.md: 8 (R P + 24 P) + 24 P with the output write,
        // here the DRAM floor 4 R P + 2 * 24 P): 4 * 64 + 384 double, 4 * 32 + 192 single.
        assert_eq!(v3_bytes_per_site(V3Mode::Full, false, Reconstruct::R8), 640);
        assert_eq!(v3_bytes_per_site(V3Mode::Full, true, Reconstruct::R8), 320);
        assert_eq!(
            Kernel::HaloExterior {
                single: true,
                reconstruct: Reconstruct::R8,
                dot: false,
            }
            .name(),
            "halo exterior [single, r8]"
        );
        let ext = |dot| Kernel::HaloExterior {
            single: true,
            reconstruct: Reconstruct::R12,
            dot,
        };
        assert_eq!(ext(true).name(), "halo exterior [single, r12, dot]");
        // The dot adds y's 12 complex numbers read per face site and a 16-byte partial per
        // 128-thread block, written and read once; 96 flops per site (12 conjugate
        // multiply-adds), each block's tree of 127 double2 additions and the last block's
        // (2 flops each), the partials' sum and the 2 for the scalar block. 10 sites: one
        // block; 1000 sites: 8 blocks.
        assert_eq!(ext(true).bytes(10) - ext(false).bytes(10), 10 * 12 * 8 + 32);
        assert_eq!(
            ext(true).flops(10) - ext(false).flops(10),
            10 * 96 + 2 * 127 * 2 + 2 + 2
        );
        assert_eq!(
            ext(true).bytes(1000) - ext(false).bytes(1000),
            1000 * 12 * 8 + 8 * 32
        );
        assert_eq!(
            ext(true).flops(1000) - ext(false).flops(1000),
            1000 * 96 + 2 * 127 * 9 + 2 * 8 + 2
        );
        let eo = Kernel::V3 {
            mode: V3Mode::Parity,
            single: true,
            reconstruct: Reconstruct::R12,
            dot: true,
            half: false,
            site: SiteEpilogue::None,
        };
        assert_eq!(eo.flops(10), (1344 + 96) * 10);
        assert_eq!(eo.name(), "stencilCore 3.0 [eo, single, r12, dot]");
        assert!(eo.is_stencil());
        // Half: 52-byte spinors (24 i16 + the f32 norm) and 16-bit links; the same flops.
        let half = Kernel::V3 {
            mode: V3Mode::Full,
            single: true,
            reconstruct: Reconstruct::R18,
            dot: false,
            half: true,
            site: SiteEpilogue::None,
        };
        assert_eq!(half.bytes(1), 4 * 36 + 2 * 52);
        assert_eq!(half.flops(1), full.flops(1));
        assert_eq!(half.name(), "stencilCore 3.0 [half]");
        assert_eq!(
            v3_half_bytes_per_site(V3Mode::ParityXpay, Reconstruct::R12),
            8 * 24 + 3 * 52
        );
        // The 8-real form keeps float links in the half build.
        assert_eq!(
            v3_half_bytes_per_site(V3Mode::Full, Reconstruct::R8),
            4 * 32 + 2 * 52
        );
        // The site-wise half kernels count per site: axpy reads two sites, writes one.
        assert_eq!(Kernel::Half(HalfOp::Axpy).bytes(10), 3 * 52 * 10);
        assert_eq!(Kernel::Half(HalfOp::Axpy).flops(10), 96 * 10);
        assert_eq!(Kernel::Half(HalfOp::FromDouble).name(), "to_half (half)");
    }

    #[test]
    fn the_clover_epilogue_adds_its_blocks_and_arrays() {
        // kernels/clover.cuh's header: a Hermitian 6x6 block product is 6 x 2 + 15 x 2 x 8
        // = 252 flops, two blocks 504, reading 72 reals; the twist 48 more; the inverse
        // with a twist two block products (both arrays, 144 reals) and the twist.
        let of = |site, single, half| Kernel::V3 {
            mode: V3Mode::ParityXpay,
            single,
            reconstruct: Reconstruct::R12,
            dot: false,
            half,
            site,
        };
        let wilson = of(SiteEpilogue::None, false, false);
        let cases = [
            (SiteEpilogue::Apply { twist: false }, 504, 72),
            (SiteEpilogue::Apply { twist: true }, 552, 72),
            (SiteEpilogue::Inverse { twist: false }, 504, 72),
            (SiteEpilogue::Inverse { twist: true }, 1056, 144),
        ];
        for (site, flops, reals) in cases {
            let k = of(site, false, false);
            assert_eq!(k.flops(1) - wilson.flops(1), flops, "{site:?}");
            assert_eq!(k.bytes(1) - wilson.bytes(1), 8 * reals, "{site:?}");
            let single =
                of(site, true, false).bytes(1) - of(SiteEpilogue::None, true, false).bytes(1);
            assert_eq!(single, 4 * reals, "{site:?}");
            let half = of(site, true, true).bytes(1) - of(SiteEpilogue::None, true, true).bytes(1);
            assert_eq!(half, 4 * reals, "{site:?}");
        }
        assert_eq!(
            of(SiteEpilogue::Inverse { twist: true }, true, false).name(),
            "stencilCore 3.0 [eo xpay, single, r12, clover inverse, twist]"
        );
        // The site kernel: a spinor in and out and the arrays.
        let inv = Kernel::CloverInv {
            single: false,
            half: false,
            twist: false,
        };
        assert_eq!(inv.bytes(1), 2 * 192 + 8 * 72);
        assert_eq!(inv.flops(1), 504);
        assert!(inv.is_stencil());
    }

    #[test]
    fn reduction_shape() {
        // 1000 inputs: blocks of 512 -> 2 blocks; second halves: 256 + (488 - 256) = 488.
        assert_eq!(reduce_shape(1000), (488, 2));
        assert_eq!(reduce_shape(512), (256, 1));
        assert_eq!(reduce_shape(100), (0, 1));
        assert_eq!(reduce_blocks(1), 1);
        // norm2 of 100: 300 for the squares, no second half, 255 tree additions; one block,
        // so no climb (bytes: the inputs, the partial and the result).
        assert_eq!(Kernel::Norm2Partial.flops(100), 300 + 255);
        assert_eq!(Kernel::Norm2Partial.bytes(100), 1600 + 8 + 8);
    }

    #[test]
    fn climb_shape() {
        // The seed problem's even field: 786432 complex -> 1536 blocks -> 3 -> 1.
        assert_eq!(reduce_blocks(786_432), 1536);
        assert_eq!(climb_len(1536), 3 + 1);
        assert_eq!(climb_len(1), 0);
        assert_eq!(climb_len(2), 1);
        assert_eq!(climb_len(512 * 512 + 1), 513 + 2 + 1);
        // The climb's work is the two summing passes the seed launched: 1536 values
        // (768 in second halves, 3 trees), then 3 values (1 tree); the result stored.
        let (flops, bytes) = climb_work(1536, false);
        assert_eq!(flops, 768 + 3 * 255 + 255);
        assert_eq!(bytes, 8 * (1536 + 3) + 8 * (3 + 1) + 8);
        assert_eq!(climb_work(1536, true).0, 2 * flops);
        assert_eq!(climb_work(1, true), (0, 16));
    }
}
