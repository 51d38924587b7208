//! One launch of 3.0's stencil: its argument list (`V3Launch`), its entry points
//! (`V3Kernels`), the block and column choices, and `launch_v3`.

use crate::backend::cuda::core::device::function;
use crate::backend::cuda::core::kernels::{Kernel, SiteEpilogue, V3Mode};
use crate::backend::cuda::core::launch::cfg_1d;
use crate::backend::cuda::core::stencil::programs;
use crate::backend::cuda::core::timing::{launch_values, GpuStream};
use crate::backend::cuda::core::version::{Reconstruct, V3_FULL_MAX_BLOCK, V3_LINK_HINTS};
use crate::error::Result;
use cudarc::driver::{CudaFunction, CudaModule, LaunchConfig};
use std::sync::Arc;

/// One launch of 3.0's stencil (kernels/stencil_v3.cu `stencil_v3`, whose argument list
/// this is): out = [g5] (y + c H inp) over the full lattice (`parity` None, y = inp) or
/// over the sites of one parity (half fields; y may be 0 = null). `s` non-zero gates the
/// launch on the fused-CR scalar block's `active`; `partials` and `ticket` non-zero (with
/// s) add the (y|out) epilogue. Pointers are device addresses (`dptr`), already offset.
#[derive(Clone, Copy)]
pub(crate) struct V3Launch {
    pub parity: Option<usize>,
    pub single: bool,
    /// Half-precision spinors (the V3_HALF module): the norms' addresses below.
    pub half: bool,
    pub reconstruct: Reconstruct,
    pub inp: u64,
    pub y: u64,
    pub out: u64,
    pub links: u64,
    pub c: f64,
    pub g5: bool,
    pub dims: [i32; 4],
    pub volume: usize,
    pub block: usize,
    /// The full mode's link hint without the dot (`V3_LINK_HINTS` index; tuned).
    pub link_hint: usize,
    /// Bit mu: direction mu is split over ranks; hops across the sub-lattice's faces in it
    /// are left to the exterior kernel (0: the undecomposed operator).
    pub split_mask: i32,
    /// Bit mu: the lower / upper edge of this (sub-)lattice in direction mu is a global
    /// antiperiodic edge (undecomposed: both the boundary mask).
    pub anti_lo: i32,
    pub anti_hi: i32,
    pub s: u64,
    pub partials: u64,
    pub ticket: u64,
    /// Half fields: the norms of inp, y and out (0 otherwise; already offset).
    pub inp_norm: u64,
    pub y_norm: u64,
    pub out_norm: u64,
    /// The site term's epilogue (the CLOVER builds' four more arguments; default: none,
    /// the Wilson epilogue).
    pub site: SiteArgs,
}

/// The CLOVER builds' epilogue arguments (kernels/clover.cuh `V3Clover`): the device
/// addresses of the clover arrays (both parities; `clover` 0: the Wilson epilogue), the
/// twist 2 kappa mu, and `inverse` (0: out = A y + c hop, 1: out = A^-1 (y + c hop)).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SiteArgs {
    pub clover: u64,
    pub inv: u64,
    pub twist: f64,
    pub inverse: i32,
}

impl SiteArgs {
    /// What the launch's epilogue computes, for its counts.
    pub fn epilogue(&self) -> SiteEpilogue {
        let twist = self.twist != 0.0;
        match (self.clover, self.inverse) {
            (0, _) => SiteEpilogue::None,
            (_, 0) => SiteEpilogue::Apply { twist },
            _ => SiteEpilogue::Inverse { twist },
        }
    }
}

impl V3Launch {
    /// Sites the launch writes (= threads with work).
    pub fn sites(&self) -> usize {
        match self.parity {
            None => self.volume,
            Some(_) => self.volume / 2,
        }
    }

    pub fn kernel(&self) -> Kernel {
        let mode = match (self.parity, self.y) {
            (None, _) => V3Mode::Full,
            (Some(_), 0) => V3Mode::Parity,
            (Some(_), _) => V3Mode::ParityXpay,
        };
        Kernel::V3 {
            mode,
            single: self.single,
            reconstruct: self.reconstruct,
            dot: self.partials != 0,
            half: self.half,
            site: self.site.epilogue(),
        }
    }
}

/// The fewest threads per block of a launch with the (y|out) epilogue: its last block sums
/// one partial per block with its own threads (`cr_reduce_last`): with the tuner's
/// smallest blocks (32) at 32^3x64 (32768 blocks, 1024 loads a thread) the launch took 732
/// us, with 256 threads 363 us (validate/RESULTS.md).
pub(crate) const DOT_MIN_BLOCK: usize = 256;
// The dot launches' entry points (stencil_v3_full_dot, stencil_v3_parity) take up to
// V3_MAX_BLOCK threads a block.
const _: () = assert!(crate::backend::cuda::core::version::V3_MAX_BLOCK >= DOT_MIN_BLOCK);

/// Threads per block of a 3.0 stencil launch: the tuned block, at least `DOT_MIN_BLOCK`
/// with the dot epilogue; a full-mode launch without it (`full`, the `stencil_v3` entry)
/// at most `V3_FULL_MAX_BLOCK`, its launch bound.
pub(crate) fn launch_block(tuned: usize, dot: bool, full: bool) -> usize {
    if dot {
        tuned.max(DOT_MIN_BLOCK)
    } else if full {
        tuned.min(V3_FULL_MAX_BLOCK)
    } else {
        tuned
    }
}

/// 3.0's entry points (kernels/stencil_v3.cu), one body compiled once per entry so that
/// each has its own registers, launch bound and link-load hints: `stencil_v3` for the full
/// mode (at most `V3_FULL_MAX_BLOCK` threads a block), `stencil_v3_col` for it in columns
/// along t (`full_column`; the same bound), each in the `V3_LINK_HINTS` variants;
/// `stencil_v3_full_dot` for the full mode with the (y|out) epilogue (the fused CR's apply,
/// at least `DOT_MIN_BLOCK` threads), `stencil_v3_full_dot_col` for that in columns
/// (exactly `DOT_MIN_BLOCK` threads, its bound), `stencil_v3_parity` for a parity launch.
/// `launch_v3` picks by the launch's parity, epilogue, column and link hint.
#[derive(Clone, Debug)]
pub(crate) struct V3Kernels {
    /// By link hint (`V3_LINK_HINTS`).
    pub full: [CudaFunction; V3_LINK_HINTS.len()],
    pub full_col: [CudaFunction; V3_LINK_HINTS.len()],
    pub full_dot: CudaFunction,
    pub full_dot_col: CudaFunction,
    pub parity: CudaFunction,
    /// The batch entries over several right-hand sides (`batch::launch_v3_batch`): the full
    /// mode, in columns, a parity launch.
    pub batch: [CudaFunction; 3],
    /// A CLOVER build's site kernel `stencil_v3_clover_inv` (None: a Wilson build, whose
    /// entries take no site-term arguments).
    pub clover_inv: Option<CudaFunction>,
}

impl V3Kernels {
    /// The entry points without a link-hint variant: with the dot, with the dot in
    /// columns, parity launch.
    pub const NAMES: [&'static str; 3] = [
        "stencil_v3_full_dot",
        "stencil_v3_full_dot_col",
        "stencil_v3_parity",
    ];

    /// The batch entry points (kernels/stencil_v3.cu, after the others), in the order of
    /// `batch`: the full mode, in columns, a parity launch.
    pub const BATCH_NAMES: [&'static str; 3] = [
        "stencil_v3_batch",
        "stencil_v3_batch_col",
        "stencil_v3_batch_parity",
    ];

    /// The entry points with a link-hint variant: the full mode, and in columns.
    const HINTED: [&'static str; 2] = ["stencil_v3", "stencil_v3_col"];

    /// The names of `base`'s link-hint variants, in `V3_LINK_HINTS`' order.
    fn hinted_names(base: &str) -> [String; V3_LINK_HINTS.len()] {
        V3_LINK_HINTS.map(|(suffix, _)| format!("{base}{suffix}"))
    }

    /// Every entry point's name: the full mode and its columns in each link hint, then
    /// `NAMES`.
    #[cfg(test)]
    pub fn all_names() -> Vec<String> {
        Self::HINTED
            .iter()
            .flat_map(|base| Self::hinted_names(base))
            .chain(Self::NAMES.iter().map(|n| n.to_string()))
            .chain(Self::BATCH_NAMES.iter().map(|n| n.to_string()))
            .collect()
    }

    pub fn load(module: &Arc<CudaModule>) -> Result<Self> {
        let hinted = |base: &str| -> Result<[CudaFunction; V3_LINK_HINTS.len()]> {
            let f = Self::hinted_names(base)
                .iter()
                .map(|name| function(module, name))
                .collect::<Result<Vec<_>>>()?;
            Ok(f.try_into().expect("one function per link hint"))
        };
        Ok(V3Kernels {
            full: hinted(Self::HINTED[0])?,
            full_col: hinted(Self::HINTED[1])?,
            full_dot: function(module, Self::NAMES[0])?,
            full_dot_col: function(module, Self::NAMES[1])?,
            parity: function(module, Self::NAMES[2])?,
            batch: [
                function(module, Self::BATCH_NAMES[0])?,
                function(module, Self::BATCH_NAMES[1])?,
                function(module, Self::BATCH_NAMES[2])?,
            ],
            clover_inv: None,
        })
    }

    /// A CLOVER build's entry points (`programs::v3_clover_program`): the same names, each
    /// with the site-term arguments, and the site kernel.
    pub fn load_clover(module: &Arc<CudaModule>) -> Result<Self> {
        let mut k = Self::load(module)?;
        k.clover_inv = Some(function(module, programs::CLOVER_INV_ENTRY)?);
        Ok(k)
    }

    /// The entry point of a launch's mode (`column`: `full_column`'s sites per thread).
    pub fn of(&self, a: &V3Launch, column: usize) -> &CudaFunction {
        // The hint is in range: every geometry passes `check_geometry` (backend.rs).
        match (a.parity, a.partials != 0, column > 1) {
            (None, false, false) => &self.full[a.link_hint],
            (None, false, true) => &self.full_col[a.link_hint],
            (None, true, false) => &self.full_dot,
            (None, true, true) => &self.full_dot_col,
            (Some(_), _, _) => &self.parity,
        }
    }
}

/// Sites a full-mode column makes along t (kernels/stencil_v3.cu's columns), as measured
/// (H100, `floor`, ratios to the DRAM floor, 32^3x64 and 16^3x32):
/// - double, 18 or 12 reals: 4. Dslash r18 1.31x -> 1.15x and 1.62x -> 1.33x (columns of
///   2: 1.17x, 1.47x); the full fused CR iteration 1.11x -> 1.06x and 1.22x -> 1.14x.
/// - single, 18 or 12 reals: 2. Dslash r18 1.25x -> 1.18x and 1.70x -> 1.46x (columns of
///   4: 1.20x, 1.67x: a quarter of the threads leaves the small lattice's GPU half idle);
///   the fused CR iteration r12 1.16x -> 1.12x and 1.25x -> 1.19x.
/// - 8 reals, and half spinors: 1 (none). At 32^3x64 columns made them slower (double r8
///   1.67x -> 1.88x, half r18 1.43x -> 1.48x): the 8-real decoding and the half format's
///   arithmetic already keep those builds busy, and a column's registers leave fewer
///   threads to hide it.
/// - parity launches: 1 (columns are a path of the full mode only; a parity launch reads
///   each link once already).
/// - with the clover epilogue: double 4, as Wilson's (without columns the clover dslash
///   double r12 took 1.14x longer at 32^3x64 and 16^3x32, r18 1.02x); single 1 (columns
///   of 2 took 1.08x (r18) and 1.02x (r12) longer at 32^3x64, 1.25x and 1.21x at 16^3x32;
///   with the block-by-block epilogue, which holds a column to 128 registers, columns of
///   2 gave 1.325 against 1.169 of the floor (r18) and 1.282 against 1.304 (r12) at
///   32^3x64, 1.432 against 1.367 and 1.393 against 1.400 at 16^3x32: no consistent
///   gain). H200, validate/RESULTS.md.
///
/// The largest power of two <= that dividing LT (the local LT on a sub-lattice).
pub(crate) fn full_column(a: &V3Launch) -> usize {
    if a.parity.is_some() {
        return 1;
    }
    let want = if a.half || a.reconstruct == Reconstruct::R8 || (a.single && a.site.clover != 0) {
        1
    } else if a.single {
        COLUMN_SINGLE
    } else {
        COLUMN_DOUBLE
    };
    column_dividing(want, a.dims[3].max(1) as usize)
}

/// Sites per full-mode column in double and in single (`full_column`).
pub(crate) const COLUMN_DOUBLE: usize = 4;
pub(crate) const COLUMN_SINGLE: usize = 2;

/// The largest power of two <= want that divides lt.
fn column_dividing(want: usize, lt: usize) -> usize {
    let mut t = want.max(1).next_power_of_two();
    if t > want {
        t >>= 1;
    }
    while t > 1 && !lt.is_multiple_of(t) {
        t >>= 1;
    }
    t
}

/// The geometry of a launch (`launch_v3`; a batch launch runs it once per right-hand
/// side): its column (`full_column`), its configuration and its `parity` argument (the
/// full mode: -1, or -column for the column entry points).
pub(crate) fn launch_shape(a: &V3Launch) -> (usize, LaunchConfig, i32) {
    let column = full_column(a);
    let dot = a.partials != 0;
    // Full mode: warps alternate parity over the same checkerboard range (kernels/
    // stencil_v3.cu), so the threads cover both halves (one thread per column of `column`
    // sites) rounded up to whole warps.
    let threads = if a.parity.is_none() {
        2 * (a.volume / 2 / column).div_ceil(32) * 32
    } else {
        a.sites()
    };
    let block = if dot && column > 1 {
        DOT_MIN_BLOCK // stencil_v3_full_dot_col's bound
    } else {
        launch_block(a.block, dot, a.parity.is_none())
    };
    let cfg = cfg_1d(threads, block, if dot { block * 16 } else { 0 });
    let parity: i32 = a.parity.map_or(-(column as i32), |p| p as i32);
    (column, cfg, parity)
}

/// Run one 3.0 stencil launch on `gpu`, booking it.
pub(crate) fn launch_v3(gpu: &mut GpuStream, k: &V3Kernels, a: &V3Launch) -> Result<()> {
    let (column, cfg, parity) = launch_shape(a);
    let f = k.of(a, column);
    let n = a.sites();
    let g5 = a.g5 as i32;
    let volume = a.volume as i32;
    let [lx, ly, lz, lt] = a.dims;
    // The stencil's arguments (kernels/stencil_v3.cu V3_STENCIL_ARGS), then a CLOVER
    // build's four more (V3_CLOVER_ARGS).
    let clover = k.clover_inv.is_some();
    if !clover && a.site.clover != 0 {
        return Err(crate::Error::internal(
            "a site-term launch of a Wilson build of 3.0",
        ));
    }
    macro_rules! arg {
        ($x:expr) => {
            $x as *const _ as *mut std::ffi::c_void
        };
    }
    let s = &a.site;
    let mut params = [
        arg!(&a.inp),
        arg!(&a.y),
        arg!(&a.out),
        arg!(&a.links),
        arg!(&a.c),
        arg!(&g5),
        arg!(&parity),
        arg!(&volume),
        arg!(&lx),
        arg!(&ly),
        arg!(&lz),
        arg!(&lt),
        arg!(&a.split_mask),
        arg!(&a.anti_lo),
        arg!(&a.anti_hi),
        arg!(&a.s),
        arg!(&a.partials),
        arg!(&a.ticket),
        arg!(&a.inp_norm),
        arg!(&a.y_norm),
        arg!(&a.out_norm),
        arg!(&s.clover),
        arg!(&s.inv),
        arg!(&s.twist),
        arg!(&s.inverse),
    ];
    let count = if clover {
        params.len()
    } else {
        params.len() - 4
    };
    launch_values!(@params gpu, a.kernel(), n, f, cfg, &mut params[..count]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_launches_take_at_least_256_threads_full_ones_at_most_128() {
        // The tuner's candidates run from 32 to 512 threads.
        for tuned in [32, 64, 128, 256, 512] {
            assert_eq!(launch_block(tuned, false, false), tuned);
            assert_eq!(launch_block(tuned, true, false), tuned.max(256));
            assert_eq!(launch_block(tuned, true, true), tuned.max(256));
            assert_eq!(launch_block(tuned, false, true), tuned.min(128));
        }
        // The partial-sum buffer holds a block's sum for blocks of 32 (partials_len):
        // enough for the fewer, larger blocks of the dot launches.
        let v: usize = 32 * 32 * 32 * 64;
        let blocks = (v / 2).div_ceil(launch_block(32, true, false));
        assert!(2 * blocks <= crate::backend::cuda::core::cr_state::partials_len(v));
    }

    #[test]
    fn the_full_entry_points_bound_is_the_hosts_clamp() {
        // The kernel's default V3_FULL_MAX_BLOCK, stencil_v3's __launch_bounds__, must be
        // the block the host clamps full-mode launches without the dot to (a larger launch
        // fails on the GPU), and the dot's entry must keep the bound of its 256+ threads.
        let src = include_str!("../../../../../kernels/stencil_v3.cu");
        let line = src
            .lines()
            .find(|l| l.starts_with("#define V3_FULL_MAX_BLOCK "))
            .expect("stencil_v3.cu defines V3_FULL_MAX_BLOCK");
        let value: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(value, V3_FULL_MAX_BLOCK);
        // The full mode's entries without the dot come from V3_FULL_ENTRIES, once per link
        // hint (V3_LINK_HINTS' suffixes), both under this bound.
        assert!(src.contains("__launch_bounds__(V3_FULL_MAX_BLOCK) stencil_v3##SUFFIX("));
        assert!(src.contains("__launch_bounds__(V3_FULL_MAX_BLOCK) stencil_v3_col##SUFFIX("));
        for (suffix, _) in V3_LINK_HINTS {
            assert!(
                src.contains(&format!("\nV3_FULL_ENTRIES({suffix}, ")),
                "no V3_FULL_ENTRIES for the hint {suffix:?}"
            );
        }
        assert!(src.contains("__launch_bounds__(V3_MAX_BLOCK) stencil_v3_full_dot("));
    }

    #[test]
    fn the_dot_column_entry_is_bounded_at_the_dot_launches_block() {
        // stencil_v3_full_dot_col is launched with exactly DOT_MIN_BLOCK threads: its
        // bound must be that (a smaller one fails the launch, a larger one caps the
        // double builds' registers at 128 and they spill).
        let src = include_str!("../../../../../kernels/stencil_v3.cu");
        let line = src
            .lines()
            .find(|l| l.starts_with("#define V3_DOT_COL_BLOCK "))
            .expect("stencil_v3.cu defines V3_DOT_COL_BLOCK");
        let value: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(value, DOT_MIN_BLOCK);
        assert!(src.contains("__launch_bounds__(V3_DOT_COL_BLOCK) stencil_v3_full_dot_col("));
    }

    fn full_launch(
        single: bool,
        reconstruct: Reconstruct,
        dims: [i32; 4],
        parity: Option<usize>,
    ) -> V3Launch {
        V3Launch {
            parity,
            single,
            half: false,
            reconstruct,
            inp: 0,
            y: 0,
            out: 0,
            links: 0,
            c: 0.0,
            g5: false,
            dims,
            volume: dims.iter().product::<i32>() as usize,
            block: 128,
            link_hint: 0,
            split_mask: 0,
            anti_lo: 0,
            anti_hi: 0,
            s: 0,
            partials: 0,
            ticket: 0,
            inp_norm: 0,
            y_norm: 0,
            out_norm: 0,
            site: SiteArgs::default(),
        }
    }

    #[test]
    fn columns_divide_lt_and_follow_precision_and_links() {
        // The largest power of two <= want dividing lt.
        assert_eq!(column_dividing(4, 64), 4);
        assert_eq!(column_dividing(4, 6), 2);
        assert_eq!(column_dividing(4, 2), 2);
        assert_eq!(column_dividing(3, 12), 2);
        assert_eq!(column_dividing(8, 12), 4);
        assert_eq!(column_dividing(1, 64), 1);
        let dims = [16, 16, 16, 32];
        // Double 4, single 2, 8-real links and half none; parity launches none.
        for r in [Reconstruct::R18, Reconstruct::R12] {
            assert_eq!(full_column(&full_launch(false, r, dims, None)), 4);
            assert_eq!(full_column(&full_launch(true, r, dims, None)), 2);
            assert_eq!(full_column(&full_launch(false, r, dims, Some(0))), 1);
        }
        assert_eq!(
            full_column(&full_launch(false, Reconstruct::R8, dims, None)),
            1
        );
        assert_eq!(
            full_column(&full_launch(true, Reconstruct::R8, dims, None)),
            1
        );
        let mut half = full_launch(true, Reconstruct::R18, dims, None);
        half.half = true;
        assert_eq!(full_column(&half), 1);
        // With the clover epilogue: double keeps its columns, single has none.
        for (single, want) in [(false, 4), (true, 1)] {
            let mut clover = full_launch(single, Reconstruct::R12, dims, None);
            clover.site.clover = 0x1000;
            assert_eq!(full_column(&clover), want, "single {single}");
        }
        // Each column starts on a t that is a multiple of its length, so it never wraps.
        for lt in [2, 4, 6, 8, 10, 12, 32, 64] {
            let t = full_column(&full_launch(false, Reconstruct::R18, [4, 4, 4, lt], None));
            assert!(
                t >= 2 && (lt as usize).is_multiple_of(t),
                "lt {lt}: column {t}"
            );
        }
        assert_eq!(
            full_column(&full_launch(false, Reconstruct::R18, [4, 4, 4, 6], None)),
            2
        );
    }
}
