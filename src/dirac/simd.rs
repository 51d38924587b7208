//! The Wilson hopping term vectorised over W = 4 sites (1320 flops/site, the same
//! spin-projected algorithm as `fast`), on a site-blocked AoSoA layout, plus the layout's
//! conversions to and from the canonical `SpinorField` / `GaugeField`.
//!
//! Layout. Block b holds the sites 4b .. 4b+3 of `Lattice::index` (x fastest), one site per
//! lane; every real number of a site is one lane of a `Lane = [f64; 4]`:
//! - spinor block: 24 lanes, `[spin][colour][re, im]` (`spinor_slot`), 768 bytes;
//! - link block: 4 directions x 18 lanes, `[link_pos(mu)][row][col][re, im]` (`link_slot`),
//!   the directions in the order the kernel reads them (y, z, t, x).
//!
//! The kernel needs LX % 4 == 0 (`supported`): then a block is 4 consecutive x in one row,
//! every hop in y, z, t lands on a whole block with one boundary phase, and the hops in x
//! are a lane rotation across the current and the neighbouring block of the row (with the
//! x phase on the one lane that wraps). For other LX the layout still exists (the last
//! block zero-padded when the volume is not a multiple of 4) but `LaneGauge::new` returns
//! None and `apply_lanes` falls back to the scalar `fast` operator through the canonical
//! layout. Each output block is written by one task with a fixed operation order, so the
//! result is bitwise the same for any thread count.
//!
//! Work per block: for y, z, t and each of the two half-spinor rows, one out-of-line piece
//! projects both neighbours, multiplies by U and U^+ and adds f + b to the upper and
//! i^-k (b - f) to the lower spin; x last, where the backward product U_x(y)^+ P+ psi(y) is
//! computed once per block and carried to the next block of the row, and the epilogue
//! psi - kappa H psi (x g5) is written directly. The flop count is the model's 1320 per
//! site plus one x-backward product per row (1/(LX/4) of a hop per block) to start the
//! carry. The output block, the t+1 spinor and the t-1 link are prefetched 4 blocks ahead.
//!
//! Instruction sets: AVX2 + FMA (`std::arch`, chosen at run time with
//! `is_x86_feature_detected!`, no `-C target-cpu` needed) or a portable `[f64; 4]` path
//! without fused multiply-adds. The two agree to rounding, not bitwise.

use super::fast::{self, Epilogue, CHIRAL_BLOCKS};
use super::Sites;
use crate::field::{GaugeField, SpinorField, Su3, C64};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::linalg::Operator;
use rayon::prelude::*;

/// Sites per block (lanes of a vector).
pub const W: usize = 4;
/// Lanes of one spinor block: 4 spins x 3 colours x (re, im).
pub const SPINOR_LANES: usize = 24;
/// Lanes of one link in a block: 3 x 3 x (re, im).
pub const LINK_LANES: usize = 18;
/// Sites each rayon task gets at least (a few KiB of output, so task overhead is noise).
const MIN_SITES_PER_TASK: usize = 512;

/// One real component of W consecutive sites; 32-byte aligned so that a vector load never
/// splits a cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(32))]
pub struct Lane(pub [f64; W]);

/// Lane of the real part of (spin, colour) in a spinor block; the imaginary part follows.
#[inline(always)]
pub const fn spinor_slot(spin: usize, colour: usize) -> usize {
    2 * (3 * spin + colour)
}

/// Lane of Re U[row][col] in one direction's link block; Im follows.
#[inline(always)]
pub const fn link_slot(row: usize, col: usize) -> usize {
    2 * (3 * row + col)
}

/// Where direction mu sits among a block's four links: in the order the kernel uses
/// them (y, z, t, x), so that the link stream, the largest, is read front to back; read
/// out of order, the hardware prefetchers miss it and a core streams it at half speed.
#[inline(always)]
pub const fn link_pos(mu: usize) -> usize {
    (mu + NDIM - 1) % NDIM
}

/// Whether the vectorised kernel handles this lattice (LX a multiple of W).
pub fn supported(l: &Lattice) -> bool {
    l.dims[0].is_multiple_of(W)
}

/// Which code the kernel runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 256-bit AVX2 with fused multiply-add.
    Avx2Fma,
    /// `[f64; 4]` arithmetic, no FMA (whatever the compiler's baseline target gives).
    Portable,
}

impl Isa {
    /// The best one this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::Avx2Fma;
            }
        }
        Isa::Portable
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx2Fma => "avx2+fma",
            Isa::Portable => "portable",
        }
    }
}

/// A spinor field in the blocked layout (the CPU backend's field).
#[derive(Clone, Debug, PartialEq)]
pub struct LaneSpinor {
    volume: usize,
    pub data: Vec<Lane>,
}

impl LaneSpinor {
    pub fn zeros(volume: usize) -> Self {
        LaneSpinor {
            volume,
            data: vec![Lane::default(); volume.div_ceil(W) * SPINOR_LANES],
        }
    }

    pub fn volume(&self) -> usize {
        self.volume
    }

    /// Bit-exact reordering of a canonical field (padding lanes zero).
    pub fn from_canonical(psi: &SpinorField) -> Self {
        let mut out = LaneSpinor::zeros(psi.volume());
        out.assign_canonical(psi);
        out
    }

    /// Overwrite with a canonical field of the same volume.
    pub fn assign_canonical(&mut self, psi: &SpinorField) {
        assert_eq!(psi.volume(), self.volume, "volume mismatch");
        let v = self.volume;
        self.data
            .par_chunks_mut(SPINOR_LANES)
            .enumerate()
            .for_each(|(b, blk)| {
                for lane in 0..W {
                    let site = b * W + lane;
                    for k in 0..12 {
                        let z = if site < v {
                            psi.data[site * 12 + k]
                        } else {
                            C64::new(0.0, 0.0)
                        };
                        blk[2 * k].0[lane] = z.re;
                        blk[2 * k + 1].0[lane] = z.im;
                    }
                }
            });
    }

    /// Bit-exact reordering back to the canonical layout.
    pub fn to_canonical(&self) -> SpinorField {
        let mut out = SpinorField::zeros(self.volume);
        self.write_canonical(&mut out);
        out
    }

    pub fn write_canonical(&self, out: &mut SpinorField) {
        assert_eq!(out.volume(), self.volume, "volume mismatch");
        out.data
            .par_chunks_mut(12)
            .enumerate()
            .for_each(|(site, o)| {
                let blk = &self.data[(site / W) * SPINOR_LANES..][..SPINOR_LANES];
                let lane = site % W;
                for (k, z) in o.iter_mut().enumerate() {
                    *z = C64::new(blk[2 * k].0[lane], blk[2 * k + 1].0[lane]);
                }
            });
    }
}

/// The gauge field in the blocked layout; exists only for `supported` lattices.
#[derive(Clone, Debug)]
pub struct LaneGauge {
    lattice: Lattice,
    data: Vec<Lane>,
}

impl LaneGauge {
    /// Reorder the links (bit-exact); None when LX % W != 0.
    pub fn new(g: &GaugeField) -> Option<Self> {
        if !supported(&g.lattice) {
            return None;
        }
        let mut data = vec![Lane::default(); g.lattice.volume() / W * NDIM * LINK_LANES];
        data.par_chunks_mut(NDIM * LINK_LANES)
            .enumerate()
            .for_each(|(b, blk)| {
                for lane in 0..W {
                    for mu in 0..NDIM {
                        let u = g.link(b * W + lane, mu);
                        for r in 0..3 {
                            for c in 0..3 {
                                let k = link_pos(mu) * LINK_LANES + link_slot(r, c);
                                blk[k].0[lane] = u.0[r][c].re;
                                blk[k + 1].0[lane] = u.0[r][c].im;
                            }
                        }
                    }
                }
            });
        Some(LaneGauge {
            lattice: g.lattice.clone(),
            data,
        })
    }

    pub fn lattice(&self) -> &Lattice {
        &self.lattice
    }

    /// U_mu(site) read back from the blocked layout.
    pub fn link(&self, site: usize, mu: usize) -> Su3 {
        let blk = &self.data[((site / W) * NDIM + link_pos(mu)) * LINK_LANES..][..LINK_LANES];
        let lane = site % W;
        let mut u = Su3::zero();
        for r in 0..3 {
            for c in 0..3 {
                let k = link_slot(r, c);
                u.0[r][c] = C64::new(blk[k].0[lane], blk[k + 1].0[lane]);
            }
        }
        u
    }
}

/// out = A inp for A = D or g5 D on blocked fields: the vectorised kernel when `gauge` has
/// a blocked copy, else the scalar `fast` operator through the canonical layout (two
/// conversions per call; only small or odd lattices take that path).
pub fn apply_lanes(
    op: Operator,
    gauge: &GaugeField,
    blocked: Option<&LaneGauge>,
    kappa: f64,
    inp: &LaneSpinor,
    out: &mut LaneSpinor,
) {
    let epilogue = Epilogue::Wilson {
        kappa,
        gamma5: op == Operator::G5D,
    };
    match blocked {
        Some(lg) => apply(Isa::detect(), lg, inp, out, epilogue),
        None => {
            let mut o = SpinorField::zeros(inp.volume());
            fast::apply(gauge, &inp.to_canonical(), &mut o, Sites::All, epilogue);
            out.assign_canonical(&o);
        }
    }
}

/// out = A inp on canonical fields through the blocked layout (converts the gauge field
/// each call: for tests and one-off use, not for solver loops).
pub fn apply_canonical(
    op: Operator,
    gauge: &GaugeField,
    kappa: f64,
    inp: &SpinorField,
    out: &mut SpinorField,
) {
    let lg = LaneGauge::new(gauge);
    let mut o = LaneSpinor::zeros(inp.volume());
    apply_lanes(
        op,
        gauge,
        lg.as_ref(),
        kappa,
        &LaneSpinor::from_canonical(inp),
        &mut o,
    );
    o.write_canonical(out);
}

/// The hopping term with its epilogue on every site, vectorised with `isa` (which must be
/// one the CPU runs: `Isa::detect()` or `Isa::Portable`).
pub fn apply(
    isa: Isa,
    gauge: &LaneGauge,
    psi: &LaneSpinor,
    out: &mut LaneSpinor,
    epilogue: Epilogue,
) {
    let l = &gauge.lattice;
    assert_eq!(psi.volume, l.volume(), "input volume mismatch");
    assert_eq!(out.volume, l.volume(), "output volume mismatch");
    let k = Kernel {
        geom: Geom::new(l),
        links: gauge.data.as_chunks::<LINK_LANES>().0,
        psi: psi.data.as_chunks::<SPINOR_LANES>().0,
        out: out.data.as_ptr() as *const SBlock,
    };
    let nbx = k.geom.nbx;
    let min_rows = (MIN_SITES_PER_TASK / l.dims[0]).max(1);
    let rows = out
        .data
        .as_chunks_mut::<SPINOR_LANES>()
        .0
        .par_chunks_mut(nbx)
        .with_min_len(min_rows)
        .enumerate();
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            assert!(Isa::detect() == Isa::Avx2Fma, "this CPU lacks AVX2/FMA");
            // SAFETY: the CPU was just checked to have AVX2 and FMA.
            rows.for_each(|(row, o)| unsafe { avx::row(&k, row, o, epilogue) });
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma => panic!("AVX2 is an x86_64 instruction set"),
        Isa::Portable => rows.for_each(|(row, o)| match epilogue {
            Epilogue::Hop => row_kernel::<Portable, false>(&k, row, o, 0.0, false),
            Epilogue::Wilson { kappa, gamma5 } => {
                row_kernel::<Portable, true>(&k, row, o, kappa, gamma5)
            }
        }),
    }
}

/// One spinor block (4 sites).
type SBlock = [Lane; SPINOR_LANES];
/// One direction's links of a block.
type LBlock = [Lane; LINK_LANES];
/// The two colour vectors of a projected half spinor after the link: what the x-backward
/// hop carries from one block to the next in a row (2 rows x 3 colours x re, im).
type Carry = [Lane; 12];

/// Extents in blocks and the fermion boundary phases, what each row needs to find its
/// neighbours.
#[derive(Clone, Copy, Debug)]
struct Geom {
    /// Blocks per x row.
    nbx: usize,
    /// The extents (rows are indexed y + LY (z + LZ t)).
    dims: [usize; NDIM],
    phase: [f64; NDIM],
}

impl Geom {
    fn new(l: &Lattice) -> Geom {
        Geom {
            nbx: l.dims[0] / W,
            dims: l.dims,
            phase: std::array::from_fn(|mu| l.boundary[mu].phase()),
        }
    }

    /// For mu = 1, 2, 3: the forward and backward neighbour rows of `row` and their phases.
    #[inline(always)]
    fn row_neighbours(&self, row: usize) -> [[(usize, f64); 2]; NDIM] {
        let mut out = [[(row, 1.0); 2]; NDIM];
        let mut rest = row;
        let mut stride = 1;
        for (mu, o) in out.iter_mut().enumerate().skip(1) {
            let l = self.dims[mu];
            let c = rest % l;
            rest /= l;
            let ph = self.phase[mu];
            o[0] = if c + 1 == l {
                (row + stride - l * stride, ph)
            } else {
                (row + stride, 1.0)
            };
            o[1] = if c == 0 {
                (row + (l - 1) * stride, ph)
            } else {
                (row - stride, 1.0)
            };
            stride *= l;
        }
        out
    }
}

/// What every row reads: the geometry, the links as `[block * 4 + mu]` and the input.
struct Kernel<'a> {
    geom: Geom,
    links: &'a [LBlock],
    psi: &'a [SBlock],
    /// The output's address, for prefetching only (never dereferenced through this).
    out: *const SBlock,
}

// SAFETY: `out` is only used as a prefetch address; the output itself reaches each task
// as a disjoint `&mut` chunk.
unsafe impl Sync for Kernel<'_> {}

/// What the kernel needs from a vector type: lane-wise arithmetic, the two rotations that
/// shift a row of sites by one in x across a block boundary, and the three pieces of a
/// block's work, which an ISA may run out of line (see `avx`).
trait Simd: Copy {
    fn ld(p: &Lane) -> Self;
    fn st(self, p: &mut Lane);
    fn splat(x: f64) -> Self;
    fn from_lanes(x: [f64; W]) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn neg(self) -> Self;
    /// Flip the sign where `mask` has its sign bit set (x times +-1, exact).
    fn flip(self, mask: Self) -> Self;
    /// a * b + c (one rounding where the ISA fuses).
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// c - a * b.
    fn fnma(a: Self, b: Self, c: Self) -> Self;
    /// [cur1, cur2, cur3, next0]: the value at x+1 for each lane.
    fn rot_next(cur: Self, next: Self) -> Self;
    /// [prev3, cur0, cur1, cur2]: the value at x-1 for each lane.
    fn rot_prev(prev: Self, cur: Self) -> Self;
    /// Hint that the `bytes` from `p` on will be used soon.
    #[inline(always)]
    fn prefetch(_p: *const u8, _bytes: usize) {}

    #[inline(always)]
    fn hop_yzt<const MU: usize, const INIT: bool, const S: usize, const PH: bool>(
        h: &Hops<'_>,
        acc: &mut Full<Self>,
    ) {
        hop_yzt::<Self, MU, INIT, S, PH>(h, acc)
    }

    #[inline(always)]
    fn hop_x<const S: usize, const WILSON: bool, const PH: bool>(
        x: &XHops<'_, Self>,
        carry: &mut Carry,
        acc: &Full<Self>,
        out: &mut SBlock,
    ) {
        hop_x::<Self, S, WILSON, PH>(x, carry, acc, out)
    }

    #[inline(always)]
    fn x_carry<const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
        x_carry::<Self, S>(psi, link, carry)
    }
}

/// Plain arrays; LLVM maps them onto whatever vector width the build target has.
#[derive(Clone, Copy)]
struct Portable([f64; W]);

impl Portable {
    #[inline(always)]
    fn zip(mut self, o: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        for i in 0..W {
            self.0[i] = f(self.0[i], o.0[i]);
        }
        self
    }
}

impl Simd for Portable {
    #[inline(always)]
    fn ld(p: &Lane) -> Self {
        Portable(p.0)
    }
    #[inline(always)]
    fn st(self, p: &mut Lane) {
        p.0 = self.0;
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        Portable([x; W])
    }
    #[inline(always)]
    fn from_lanes(x: [f64; W]) -> Self {
        Portable(x)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.zip(o, |a, b| a + b)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self.zip(o, |a, b| a - b)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self.zip(o, |a, b| a * b)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        Portable(self.0.map(|a| -a))
    }
    #[inline(always)]
    fn flip(self, mask: Self) -> Self {
        self.zip(mask, |a, m| f64::from_bits(a.to_bits() ^ m.to_bits()))
    }
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        a.mul(b).add(c)
    }
    #[inline(always)]
    fn fnma(a: Self, b: Self, c: Self) -> Self {
        c.sub(a.mul(b))
    }
    #[inline(always)]
    fn rot_next(cur: Self, next: Self) -> Self {
        Portable([cur.0[1], cur.0[2], cur.0[3], next.0[0]])
    }
    #[inline(always)]
    fn rot_prev(prev: Self, cur: Self) -> Self {
        Portable([prev.0[3], cur.0[0], cur.0[1], cur.0[2]])
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    //! AVX2 + FMA lanes: the generic kernel instantiated inside `target_feature` functions
    //! so that the intrinsics inline into 256-bit code.

    use super::{
        hop_x, hop_yzt, row_kernel, x_carry, Carry, Epilogue, Full, Hops, Kernel, LBlock, Lane,
        SBlock, Simd, XHops, W,
    };
    use std::arch::x86_64::*;

    #[derive(Clone, Copy)]
    pub(super) struct Avx(__m256d);

    // SAFETY (all methods): only reached from `row`, whose caller checked AVX2 and FMA;
    // loads and stores go through `&Lane`, which is 32-byte aligned.
    impl Simd for Avx {
        #[inline(always)]
        fn ld(p: &Lane) -> Self {
            unsafe { Avx(_mm256_load_pd(p.0.as_ptr())) }
        }
        #[inline(always)]
        fn st(self, p: &mut Lane) {
            unsafe { _mm256_store_pd(p.0.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        fn splat(x: f64) -> Self {
            unsafe { Avx(_mm256_set1_pd(x)) }
        }
        #[inline(always)]
        fn from_lanes(x: [f64; W]) -> Self {
            unsafe { Avx(_mm256_loadu_pd(x.as_ptr())) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            unsafe { Avx(_mm256_add_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            unsafe { Avx(_mm256_sub_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            unsafe { Avx(_mm256_mul_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn neg(self) -> Self {
            unsafe { Avx(_mm256_xor_pd(self.0, _mm256_set1_pd(-0.0))) }
        }
        #[inline(always)]
        fn flip(self, mask: Self) -> Self {
            unsafe { Avx(_mm256_xor_pd(self.0, mask.0)) }
        }
        #[inline(always)]
        fn fma(a: Self, b: Self, c: Self) -> Self {
            unsafe { Avx(_mm256_fmadd_pd(a.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn fnma(a: Self, b: Self, c: Self) -> Self {
            unsafe { Avx(_mm256_fnmadd_pd(a.0, b.0, c.0)) }
        }
        #[inline(always)]
        fn rot_next(cur: Self, next: Self) -> Self {
            unsafe {
                // t = [cur2, cur3, next0, next1]; pick cur1, t0, cur3, t2.
                let t = _mm256_permute2f128_pd::<0x21>(cur.0, next.0);
                Avx(_mm256_shuffle_pd::<0b0101>(cur.0, t))
            }
        }
        #[inline(always)]
        fn rot_prev(prev: Self, cur: Self) -> Self {
            unsafe {
                // t = [prev2, prev3, cur0, cur1]; pick t1, cur0, t3, cur2.
                let t = _mm256_permute2f128_pd::<0x21>(prev.0, cur.0);
                Avx(_mm256_shuffle_pd::<0b0101>(t, cur.0))
            }
        }

        #[inline(always)]
        fn prefetch(p: *const u8, bytes: usize) {
            // Every 64-byte line the range touches, whatever its alignment. A prefetch never
            // faults, so the address need not be valid.
            let first = (p as usize) & !63;
            let end = p as usize + bytes;
            let mut line = p.wrapping_sub(p as usize - first) as *const i8;
            while (line as usize) < end {
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line) };
                line = line.wrapping_add(64);
            }
        }

        #[inline(always)]
        fn hop_yzt<const MU: usize, const INIT: bool, const S: usize, const PH: bool>(
            h: &Hops<'_>,
            acc: &mut Full<Self>,
        ) {
            unsafe { hop_yzt_avx::<MU, INIT, S, PH>(h, acc) }
        }

        #[inline(always)]
        fn hop_x<const S: usize, const WILSON: bool, const PH: bool>(
            x: &XHops<'_, Self>,
            carry: &mut Carry,
            acc: &Full<Self>,
            out: &mut SBlock,
        ) {
            unsafe { hop_x_avx::<S, WILSON, PH>(x, carry, acc, out) }
        }

        #[inline(always)]
        fn x_carry<const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
            unsafe { x_carry_avx::<S>(psi, link, carry) }
        }
    }

    // Out of line on purpose: inlined into one block of ~2000 instructions, LLVM hoists
    // the loads of all hops and spills hundreds of vectors; a call per direction and spin
    // row keeps each piece within the 16 registers (the sum lives in memory anyway).
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn hop_yzt_avx<const MU: usize, const INIT: bool, const S: usize, const PH: bool>(
        h: &Hops<'_>,
        acc: &mut Full<Avx>,
    ) {
        hop_yzt::<Avx, MU, INIT, S, PH>(h, acc)
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn hop_x_avx<const S: usize, const WILSON: bool, const PH: bool>(
        x: &XHops<'_, Avx>,
        carry: &mut Carry,
        acc: &Full<Avx>,
        out: &mut SBlock,
    ) {
        hop_x::<Avx, S, WILSON, PH>(x, carry, acc, out)
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn x_carry_avx<const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
        x_carry::<Avx, S>(psi, link, carry)
    }

    /// One x row of output blocks in 256-bit code.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row(k: &Kernel<'_>, row: usize, out: &mut [SBlock], epilogue: Epilogue) {
        match epilogue {
            Epilogue::Hop => row_kernel::<Avx, false>(k, row, out, 0.0, false),
            Epilogue::Wilson { kappa, gamma5 } => {
                row_kernel::<Avx, true>(k, row, out, kappa, gamma5)
            }
        }
    }
}

/// A complex number of W sites.
#[derive(Clone, Copy)]
struct Cx<V> {
    re: V,
    im: V,
}

impl<V: Simd> Cx<V> {
    #[inline(always)]
    fn zero() -> Self {
        Cx {
            re: V::splat(0.0),
            im: V::splat(0.0),
        }
    }
}

/// One spin component: 3 colours.
type Row<V> = [Cx<V>; 3];
/// Four spin components x 3 colours.
type Full<V> = [Row<V>; 4];

// The hot helpers below work on one spin row (6 vectors) at a time and use explicit
// loops, not closures: with AVX2's 16 registers anything larger spills, and LLVM's inliner
// leaves closures as calls here, which costs more than the arithmetic.

/// a + i^k b using only additions (i^k permutes re/im and flips signs).
#[inline(always)]
fn add_ipow<V: Simd>(a: Cx<V>, b: Cx<V>, k: u8) -> Cx<V> {
    match k & 3 {
        0 => Cx {
            re: a.re.add(b.re),
            im: a.im.add(b.im),
        },
        1 => Cx {
            re: a.re.sub(b.im),
            im: a.im.add(b.re),
        },
        2 => Cx {
            re: a.re.sub(b.re),
            im: a.im.sub(b.im),
        },
        _ => Cx {
            re: a.re.add(b.im),
            im: a.im.sub(b.re),
        },
    }
}

/// i^k b.
#[inline(always)]
fn ipow<V: Simd>(b: Cx<V>, k: u8) -> Cx<V> {
    match k & 3 {
        0 => b,
        1 => Cx {
            re: b.im.neg(),
            im: b.re,
        },
        2 => Cx {
            re: b.re.neg(),
            im: b.im.neg(),
        },
        _ => Cx {
            re: b.im,
            im: b.re.neg(),
        },
    }
}

#[inline(always)]
fn ld_cx<V: Simd>(lanes: &[Lane], slot: usize) -> Cx<V> {
    Cx {
        re: V::ld(&lanes[slot]),
        im: V::ld(&lanes[slot + 1]),
    }
}

#[inline(always)]
fn st_cx<V: Simd>(z: Cx<V>, lanes: &mut [Lane], slot: usize) {
    z.re.st(&mut lanes[slot]);
    z.im.st(&mut lanes[slot + 1]);
}

/// Row S (0 or 1; a constant so the phase folds) of the half spinor
/// h = psi_up + sgn A_mu psi_dn of a whole block, sgn = -1 forward, +1 backward.
#[inline(always)]
fn proj_row<V: Simd, const MU: usize, const FWD: bool, const S: usize>(blk: &SBlock) -> Row<V> {
    let b = &CHIRAL_BLOCKS[MU];
    let k = b.phase[S] + if FWD { 2 } else { 0 };
    let mut h = [Cx::zero(); 3];
    for (c, hc) in h.iter_mut().enumerate() {
        let up = ld_cx::<V>(blk, spinor_slot(S, c));
        let dn = ld_cx::<V>(blk, spinor_slot(2 + b.col[S], c));
        *hc = add_ipow(up, dn, k);
    }
    h
}

/// h times the boundary phase +-1 given as a sign mask per lane, when the piece is the
/// one for blocks that touch the edge (PH); other blocks run a copy without the XORs.
/// Branch-free on purpose: a branch here splits the piece and LLVM then hoists and spills
/// the link loads.
#[inline(always)]
fn flip_row<V: Simd, const PH: bool>(mut h: Row<V>, mask: V) -> Row<V> {
    if !PH {
        return h;
    }
    for z in h.iter_mut() {
        *z = Cx {
            re: z.re.flip(mask),
            im: z.im.flip(mask),
        };
    }
    h
}

/// The sign mask of a phase +-1: -0.0 (sign bit only) for -1, else 0.0.
#[inline(always)]
fn sign_mask(phase: f64) -> f64 {
    if phase < 0.0 {
        -0.0
    } else {
        0.0
    }
}

/// The value at x+1 of every lane, from this block's row and the next block's.
#[inline(always)]
fn shift_next<V: Simd>(cur: Row<V>, next: Row<V>) -> Row<V> {
    let mut h = cur;
    for c in 0..3 {
        h[c].re = V::rot_next(cur[c].re, next[c].re);
        h[c].im = V::rot_next(cur[c].im, next[c].im);
    }
    h
}

/// The value at x-1 of every lane, from the previous block's row and this block's.
#[inline(always)]
fn shift_prev<V: Simd>(prev: Row<V>, cur: Row<V>) -> Row<V> {
    let mut h = cur;
    for c in 0..3 {
        h[c].re = V::rot_prev(prev[c].re, cur[c].re);
        h[c].im = V::rot_prev(prev[c].im, cur[c].im);
    }
    h
}

/// U h (DAG = false) or U^+ h (DAG = true, without forming U^+) for one colour vector,
/// reading the link straight from memory.
#[inline(always)]
fn mat_vec<V: Simd, const DAG: bool>(u: &LBlock, h: &Row<V>) -> Row<V> {
    let el = |r: usize, c: usize| {
        let k = if DAG {
            link_slot(c, r)
        } else {
            link_slot(r, c)
        };
        (V::ld(&u[k]), V::ld(&u[k + 1]))
    };
    let mut o = [Cx::zero(); 3];
    for (r, or) in o.iter_mut().enumerate() {
        let (ur, ui) = el(r, 0);
        let mut re = ur.mul(h[0].re);
        let mut im = ur.mul(h[0].im);
        // conj(U) flips the sign of the ui terms.
        if DAG {
            re = V::fma(ui, h[0].im, re);
            im = V::fnma(ui, h[0].re, im);
        } else {
            re = V::fnma(ui, h[0].im, re);
            im = V::fma(ui, h[0].re, im);
        }
        for (c, hc) in h.iter().enumerate().skip(1) {
            let (ur, ui) = el(r, c);
            re = V::fma(ur, hc.re, re);
            im = V::fma(ur, hc.im, im);
            if DAG {
                re = V::fma(ui, hc.im, re);
                im = V::fnma(ui, hc.re, im);
            } else {
                re = V::fnma(ui, hc.im, re);
                im = V::fma(ui, hc.re, im);
            }
        }
        *or = Cx { re, im };
    }
    o
}

/// How a direction's two hops enter the sum.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// First direction: assign.
    Init,
    Add,
}

/// Add both hops of direction MU for half-spinor row S: f = U (P- psi)_S forward and
/// b = U^+ (P+ psi)_S backward. Upper spin S gets f + b; the lower half is sgn A^+ (U h),
/// and A^+ maps row S to spin 2 + col[S] with conj(i^phase[S]), so that spin gets
/// i^-phase[S] (b - f).
#[inline(always)]
fn combine<V: Simd, const MU: usize, const S: usize>(
    acc: &mut Full<V>,
    f: &Row<V>,
    b: &Row<V>,
    mode: Mode,
) {
    let blk = &CHIRAL_BLOCKS[MU];
    let lo = 2 + blk.col[S];
    let k = (4 - blk.phase[S]) & 3;
    for c in 0..3 {
        let sum = add_ipow(f[c], b[c], 0);
        let diff = add_ipow(b[c], f[c], 2);
        if mode == Mode::Init {
            acc[S][c] = sum;
            acc[lo][c] = ipow(diff, k);
        } else {
            acc[S][c] = add_ipow(acc[S][c], sum, 0);
            acc[lo][c] = add_ipow(acc[lo][c], diff, k);
        }
    }
}

/// The neighbour blocks, links and phases of one block in y, z or t.
struct Hops<'a> {
    pf: &'a SBlock,
    pb: &'a SBlock,
    /// U_mu(x) and U_mu(x - mu).
    uf: &'a LBlock,
    ub: &'a LBlock,
    /// `sign_mask` of the phases.
    sign_fwd: f64,
    sign_bwd: f64,
    /// Whether either phase is -1 (the row touches an antiperiodic edge).
    phased: bool,
}

/// Both hops in direction MU = 1, 2, 3 for half-spinor row S: whole neighbour blocks, one
/// phase per block.
#[inline(always)]
fn hop_yzt<V: Simd, const MU: usize, const INIT: bool, const S: usize, const PH: bool>(
    n: &Hops<'_>,
    acc: &mut Full<V>,
) {
    let h = flip_row::<V, PH>(proj_row::<V, MU, true, S>(n.pf), V::splat(n.sign_fwd));
    let f = mat_vec::<V, false>(n.uf, &h);
    let h = flip_row::<V, PH>(proj_row::<V, MU, false, S>(n.pb), V::splat(n.sign_bwd));
    let bk = mat_vec::<V, true>(n.ub, &h);
    combine::<V, MU, S>(acc, &f, &bk, if INIT { Mode::Init } else { Mode::Add });
}

/// U_x(y)^+ (P+ psi(y))_S for every site y of a block: the x-backward contribution this
/// block makes to the sites one step up in x, stored for the next block of the row.
#[inline(always)]
fn x_carry<V: Simd, const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
    let v = mat_vec::<V, true>(link, &proj_row::<V, 0, false, S>(psi));
    for (c, z) in v.iter().enumerate() {
        st_cx(*z, carry, 2 * (3 * S + c));
    }
}

/// Where the x hops of one block read, and the epilogue constants.
struct XHops<'a, V> {
    cur: &'a SBlock,
    next: &'a SBlock,
    /// U_x(x) of this block: forward hop here, backward contribution to the next block.
    link: &'a LBlock,
    /// Per-lane sign masks of the phases (nonzero only on the lane that wraps).
    sign_next: V,
    sign_prev: V,
    kappa: V,
    /// Sign mask for the lower spins: g5 = diag(1, 1, -1, -1).
    g5: V,
}

/// Both x hops for half-spinor row S, then the epilogue for the two spins they complete.
/// Forward: project this block and the next, rotate down one lane, multiply by U_x(x).
/// Backward: U_x(y)^+ P+ psi(y) is computed once per block (`carry`) and rotated up one
/// lane, so neither the link nor two projections need shifting.
#[inline(always)]
fn hop_x<V: Simd, const S: usize, const WILSON: bool, const PH: bool>(
    x: &XHops<'_, V>,
    carry: &mut Carry,
    acc: &Full<V>,
    out: &mut SBlock,
) {
    let h = shift_next(
        proj_row::<V, 0, true, S>(x.cur),
        proj_row::<V, 0, true, S>(x.next),
    );
    let f = mat_vec::<V, false>(x.link, &flip_row::<V, PH>(h, x.sign_next));
    let here = mat_vec::<V, true>(x.link, &proj_row::<V, 0, false, S>(x.cur));
    let mut prev = [Cx::zero(); 3];
    for (c, p) in prev.iter_mut().enumerate() {
        *p = ld_cx(carry, 2 * (3 * S + c));
        st_cx(here[c], carry, 2 * (3 * S + c));
    }
    let bk = flip_row::<V, PH>(shift_prev(prev, here), x.sign_prev);
    // The last direction: finish spins S and lo straight into the output.
    let mut sum = *acc;
    combine::<V, 0, S>(&mut sum, &f, &bk, Mode::Add);
    let lo = 2 + CHIRAL_BLOCKS[0].col[S];
    for (s, mask) in [(S, None), (lo, Some(x.g5))] {
        for (c, &z) in sum[s].iter().enumerate() {
            let slot = spinor_slot(s, c);
            let mut v = z;
            if WILSON {
                let p = ld_cx::<V>(x.cur, slot);
                v.re = V::fnma(x.kappa, v.re, p.re);
                v.im = V::fnma(x.kappa, v.im, p.im);
                if let Some(m) = mask {
                    v = Cx {
                        re: v.re.flip(m),
                        im: v.im.flip(m),
                    };
                }
            }
            st_cx(v, out, slot);
        }
    }
}

/// How many blocks ahead `prefetch_ahead` reaches: ~4 x 500 cycles of work, enough to
/// cover a DRAM or far-L3 latency without evicting what is still in use from L1.
const PREFETCH_BLOCKS: usize = 4;

/// Software prefetch for block p of the streams the hardware prefetchers serve worst,
/// measured on both the 2-core EPYC and the 16-core Xeon: the output block (whose first
/// touch is a store), the spinor one step forward in t (its first read) and the t link of
/// the block one step back (reused from far away). The sequential link stream is left to
/// the hardware: prefetching it too was slower on both machines. Addresses wrap modulo
/// the lattice and are never dereferenced.
#[inline(always)]
fn prefetch_ahead<V: Simd>(k: &Kernel<'_>, p: usize, tstride: usize) {
    let n = k.psi.len();
    let spinor = k.psi.as_ptr().wrapping_add((p + tstride) % n);
    let link = k
        .links
        .as_ptr()
        .wrapping_add(((p + n - tstride) % n) * NDIM + link_pos(3));
    let out = k.out.wrapping_add(p % n);
    V::prefetch(out as *const u8, size_of::<SBlock>());
    V::prefetch(spinor as *const u8, size_of::<SBlock>());
    V::prefetch(link as *const u8, size_of::<LBlock>());
}

/// One row of output blocks: the generic kernel behind every ISA. y initialises the sum,
/// z and t add, x adds and writes the output.
#[inline(always)]
fn row_kernel<V: Simd, const WILSON: bool>(
    k: &Kernel<'_>,
    row: usize,
    out: &mut [SBlock],
    kappa: f64,
    gamma5: bool,
) {
    let g = &k.geom;
    let nbx = g.nbx;
    let base = row * nbx;
    let rn = g.row_neighbours(row);
    let links = |b: usize, mu: usize| &k.links[b * NDIM + link_pos(mu)];
    // The x phase sits on lane 3 of the last block (forward) or lane 0 of the first.
    let mx = sign_mask(g.phase[0]);
    let sign_last = V::from_lanes([0.0, 0.0, 0.0, mx]);
    let sign_first = V::from_lanes([mx, 0.0, 0.0, 0.0]);
    let no_sign = V::splat(0.0);
    let kappa = V::splat(kappa);
    let g5 = V::splat(if gamma5 { -0.0 } else { 0.0 });
    // The x-backward hop into block 0 comes from the last block of the row (one extra
    // mat-vec pair per row, 1/nbx of a hop per block).
    let mut carry: Carry = [Lane::default(); 12];
    let last = base + nbx - 1;
    V::x_carry::<0>(&k.psi[last], links(last, 0), &mut carry);
    V::x_carry::<1>(&k.psi[last], links(last, 0), &mut carry);
    let mut acc: Full<V> = [[Cx::zero(); 3]; 4];
    let tstride = nbx * g.dims[1] * g.dims[2];
    for (bx, o) in out.iter_mut().enumerate() {
        let b = base + bx;
        prefetch_ahead::<V>(k, b + PREFETCH_BLOCKS, tstride);
        let hops = |mu: usize| {
            let (fwd, bwd) = (rn[mu][0].0 * nbx + bx, rn[mu][1].0 * nbx + bx);
            Hops {
                pf: &k.psi[fwd],
                pb: &k.psi[bwd],
                uf: links(b, mu),
                ub: links(bwd, mu),
                sign_fwd: sign_mask(rn[mu][0].1),
                sign_bwd: sign_mask(rn[mu][1].1),
                phased: rn[mu][0].1 < 0.0 || rn[mu][1].1 < 0.0,
            }
        };
        // Both spin rows of one direction, with or without the phase XORs.
        macro_rules! yzt {
            ($mu:literal, $init:literal) => {{
                let h = hops($mu);
                if h.phased {
                    V::hop_yzt::<$mu, $init, 0, true>(&h, &mut acc);
                    V::hop_yzt::<$mu, $init, 1, true>(&h, &mut acc);
                } else {
                    V::hop_yzt::<$mu, $init, 0, false>(&h, &mut acc);
                    V::hop_yzt::<$mu, $init, 1, false>(&h, &mut acc);
                }
            }};
        }
        yzt!(1, true);
        yzt!(2, false);
        yzt!(3, false);

        let x = XHops {
            cur: &k.psi[b],
            next: &k.psi[base + (bx + 1) % nbx],
            link: links(b, 0),
            sign_next: if bx + 1 == nbx { sign_last } else { no_sign },
            sign_prev: if bx == 0 { sign_first } else { no_sign },
            kappa,
            g5,
        };
        if g.phase[0] < 0.0 && (bx == 0 || bx + 1 == nbx) {
            V::hop_x::<0, WILSON, true>(&x, &mut carry, &acc, o);
            V::hop_x::<1, WILSON, true>(&x, &mut carry, &acc, o);
        } else {
            V::hop_x::<0, WILSON, false>(&x, &mut carry, &acc, o);
            V::hop_x::<1, WILSON, false>(&x, &mut carry, &acc, o);
        }
    }
}
