//! The Wilson hopping term vectorised over W = 4 sites (1320 flops/site, the same
//! spin-projected algorithm as `fast`), on a site-blocked AoSoA layout, plus the layout's
//! conversions to and from the canonical `SpinorField` / `GaugeField`.
//!
//! Layout. Block b holds the sites 4b .. 4b+3 of `Lattice::index` (x fastest), one site per
//! lane; every real number of a site is one lane of a `Lane = [f64; 4]`:
//! - spinor block: 24 lanes, `[spin][colour][re, im]` (`spinor_slot`), 768 bytes;
//! - link block: 4 directions x 18 lanes, `[mu][row][col][re, im]` (`link_slot`).
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
//! Instruction sets: AVX2 + FMA (`std::arch`, chosen at run time with
//! `is_x86_feature_detected!`, no `-C target-cpu` needed) or a portable `[f64; 4]` path
//! without fused multiply-adds. The two agree to rounding, not bitwise.

use super::fast::{self, Epilogue, CHIRAL_BLOCKS};
use super::Sites;
use crate::backend::Operator;
use crate::field::{GaugeField, SpinorField, Su3, C64};
use crate::lattice::{Lattice, NDIM};
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
                                let k = mu * LINK_LANES + link_slot(r, c);
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
        let blk = &self.data[((site / W) * NDIM + mu) * LINK_LANES..][..LINK_LANES];
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
    let geom = Geom::new(l);
    let row_lanes = geom.nbx * SPINOR_LANES;
    let min_rows = (MIN_SITES_PER_TASK / l.dims[0]).max(1);
    let (links, inp) = (&gauge.data[..], &psi.data[..]);
    let rows = out
        .data
        .par_chunks_mut(row_lanes)
        .with_min_len(min_rows)
        .enumerate();
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            assert!(Isa::detect() == Isa::Avx2Fma, "this CPU lacks AVX2/FMA");
            // SAFETY: the CPU was just checked to have AVX2 and FMA.
            rows.for_each(|(row, o)| unsafe { avx::row(&geom, links, inp, row, o, epilogue) });
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma => panic!("AVX2 is an x86_64 instruction set"),
        Isa::Portable => {
            rows.for_each(|(row, o)| row_kernel::<Portable>(&geom, links, inp, row, o, epilogue))
        }
    }
}

/// Extents in blocks and the fermion boundary phases, what each row needs to find its
/// neighbours.
#[derive(Clone, Copy, Debug)]
struct Geom {
    /// Blocks per x row.
    nbx: usize,
    /// LY, LZ, LT (rows are indexed y + LY (z + LZ t)).
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

/// What the kernel needs from a vector type: lane-wise arithmetic and the two rotations
/// that shift a row of sites by one in x across a block boundary.
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

    /// `hop_yzt`; an ISA may run it out of line (see `avx`).
    #[inline(always)]
    fn hop_yzt<const MU: usize, const INIT: bool, const S: usize>(
        links: &[Lane],
        psi: &[Lane],
        b: usize,
        n: Hops,
        acc: &mut Full<Self>,
    ) {
        hop_yzt::<Self, MU, INIT, S>(links, psi, b, n, acc)
    }

    /// `hop_x`; an ISA may run it out of line.
    #[inline(always)]
    fn hop_x<const S: usize>(x: &XHops<'_, Self>, acc: &mut Full<Self>) {
        hop_x::<Self, S>(x, acc)
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
    //! AVX2 + FMA lanes: the generic kernel instantiated inside a `target_feature` function
    //! so that the intrinsics inline into 256-bit code.

    use super::{hop_x, hop_yzt, row_kernel, Epilogue, Full, Geom, Hops, Lane, Simd, XHops, W};
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
        fn hop_yzt<const MU: usize, const INIT: bool, const S: usize>(
            links: &[Lane],
            psi: &[Lane],
            b: usize,
            n: Hops,
            acc: &mut Full<Self>,
        ) {
            unsafe { hop_yzt_avx::<MU, INIT, S>(links, psi, b, n, acc) }
        }

        #[inline(always)]
        fn hop_x<const S: usize>(x: &XHops<'_, Self>, acc: &mut Full<Self>) {
            unsafe { hop_x_avx::<S>(x, acc) }
        }
    }

    // Out of line on purpose: inlined into one block of ~3000 instructions, LLVM hoists
    // the loads of all hops and spills hundreds of vectors; a call per direction and spin
    // row keeps each piece within the 16 registers (the sum lives in memory anyway).
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn hop_yzt_avx<const MU: usize, const INIT: bool, const S: usize>(
        links: &[Lane],
        psi: &[Lane],
        b: usize,
        n: Hops,
        acc: &mut Full<Avx>,
    ) {
        hop_yzt::<Avx, MU, INIT, S>(links, psi, b, n, acc)
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn hop_x_avx<const S: usize>(x: &XHops<'_, Avx>, acc: &mut Full<Avx>) {
        hop_x::<Avx, S>(x, acc)
    }

    /// One x row of output blocks in 256-bit code.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row(
        g: &Geom,
        links: &[Lane],
        psi: &[Lane],
        row: usize,
        out: &mut [Lane],
        epilogue: Epilogue,
    ) {
        row_kernel::<Avx>(g, links, psi, row, out, epilogue)
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
fn ld_cx<V: Simd>(blk: &[Lane], slot: usize) -> Cx<V> {
    Cx {
        re: V::ld(&blk[slot]),
        im: V::ld(&blk[slot + 1]),
    }
}

/// Row S (0 or 1; a constant so the phase folds) of the half spinor h = psi_up + sgn A_mu psi_dn of a whole block,
/// sgn = -1 forward, +1 backward.
#[inline(always)]
fn proj_row<V: Simd, const MU: usize, const FWD: bool, const S: usize>(blk: &[Lane]) -> Row<V> {
    let b = &CHIRAL_BLOCKS[MU];
    let s = S;
    let k = b.phase[s] + if FWD { 2 } else { 0 };
    let mut h = [Cx::zero(); 3];
    for (c, hc) in h.iter_mut().enumerate() {
        let up = ld_cx::<V>(blk, spinor_slot(s, c));
        let dn = ld_cx::<V>(blk, spinor_slot(2 + b.col[s], c));
        *hc = add_ipow(up, dn, k);
    }
    h
}

/// h times the boundary phase +-1 given as a sign mask per lane. Branch-free on purpose:
/// a branch here splits the piece and LLVM then hoists and spills the link loads.
#[inline(always)]
fn flip_row<V: Simd>(mut h: Row<V>, mask: V) -> Row<V> {
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

/// U h (DAG = false) or U^+ h (DAG = true, without forming U^+) for one colour vector;
/// `u` is one direction's 18-lane link block, read straight from memory.
#[inline(always)]
fn mat_vec<V: Simd, const DAG: bool>(u: &[Lane], h: &Row<V>) -> Row<V> {
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

/// Add both hops of direction MU for half-spinor row S: f = U (P- psi)_s forward and
/// b = U^+ (P+ psi)_s backward. Upper spin s gets f + b; the lower half is sgn A^+ (U h),
/// and A^+ maps row s to spin 2 + col[s] with conj(i^phase[s]), so that spin gets
/// i^-phase[s] (b - f). With `INIT` (first direction) the accumulator is assigned.
#[inline(always)]
fn combine<V: Simd, const MU: usize, const INIT: bool, const S: usize>(
    acc: &mut Full<V>,
    f: &Row<V>,
    b: &Row<V>,
) {
    let blk = &CHIRAL_BLOCKS[MU];
    let s = S;
    let lo = 2 + blk.col[s];
    let k = (4 - blk.phase[s]) & 3;
    for c in 0..3 {
        let sum = add_ipow(f[c], b[c], 0);
        let diff = add_ipow(b[c], f[c], 2);
        if INIT {
            acc[s][c] = sum;
            acc[lo][c] = ipow(diff, k);
        } else {
            acc[s][c] = add_ipow(acc[s][c], sum, 0);
            acc[lo][c] = add_ipow(acc[lo][c], diff, k);
        }
    }
}

/// Neighbour blocks and phases of one block in y, z or t.
#[derive(Clone, Copy)]
struct Hops {
    fwd: usize,
    bwd: usize,
    /// `sign_mask` of the phases.
    sign_fwd: f64,
    sign_bwd: f64,
}

#[inline(always)]
fn spinor_block(psi: &[Lane], b: usize) -> &[Lane] {
    &psi[b * SPINOR_LANES..][..SPINOR_LANES]
}

#[inline(always)]
fn link_block(links: &[Lane], b: usize, mu: usize) -> &[Lane] {
    &links[(b * NDIM + mu) * LINK_LANES..][..LINK_LANES]
}

/// Both hops in direction MU = 1, 2, 3 for half-spinor row S: whole neighbour blocks, one
/// phase per block.
#[inline(always)]
fn hop_yzt<V: Simd, const MU: usize, const INIT: bool, const S: usize>(
    links: &[Lane],
    psi: &[Lane],
    b: usize,
    n: Hops,
    acc: &mut Full<V>,
) {
    let (uf, ub) = (link_block(links, b, MU), link_block(links, n.bwd, MU));
    let (pf, pb) = (spinor_block(psi, n.fwd), spinor_block(psi, n.bwd));
    let h = flip_row(proj_row::<V, MU, true, S>(pf), V::splat(n.sign_fwd));
    let f = mat_vec::<V, false>(uf, &h);
    let h = flip_row(proj_row::<V, MU, false, S>(pb), V::splat(n.sign_bwd));
    let bk = mat_vec::<V, true>(ub, &h);
    combine::<V, MU, INIT, S>(acc, &f, &bk);
}

/// Where the x hops of one block read: this block, its neighbours in the row, U_x(x - 1)
/// already shifted into place, and the lane phases when the block touches the edge.
struct XHops<'a, V> {
    cur: &'a [Lane],
    next: &'a [Lane],
    prev: &'a [Lane],
    link: &'a [Lane],
    link_prev: &'a [Lane],
    /// Per-lane sign masks of the phases (nonzero only on the lane that wraps).
    sign_next: V,
    sign_prev: V,
}

/// Both hops in x for half-spinor row S (lane rotations across the block boundary).
#[inline(always)]
fn hop_x<V: Simd, const S: usize>(x: &XHops<'_, V>, acc: &mut Full<V>) {
    let cur = proj_row::<V, 0, true, S>(x.cur);
    let h = flip_row(
        shift_next(cur, proj_row::<V, 0, true, S>(x.next)),
        x.sign_next,
    );
    let f = mat_vec::<V, false>(x.link, &h);
    let cur = proj_row::<V, 0, false, S>(x.cur);
    let h = flip_row(
        shift_prev(proj_row::<V, 0, false, S>(x.prev), cur),
        x.sign_prev,
    );
    let bk = mat_vec::<V, true>(x.link_prev, &h);
    combine::<V, 0, false, S>(acc, &f, &bk);
}

/// One row of output blocks: the generic kernel behind every ISA.
#[inline(always)]
fn row_kernel<V: Simd>(
    g: &Geom,
    links: &[Lane],
    psi: &[Lane],
    row: usize,
    out: &mut [Lane],
    epilogue: Epilogue,
) {
    let nbx = g.nbx;
    let rn = g.row_neighbours(row);
    // The x phase sits on lane 3 of the last block (forward) or lane 0 of the first.
    let mx = sign_mask(g.phase[0]);
    let sign_last = V::from_lanes([0.0, 0.0, 0.0, mx]);
    let sign_first = V::from_lanes([mx, 0.0, 0.0, 0.0]);
    let no_sign = V::splat(0.0);
    for (bx, o) in out.chunks_exact_mut(SPINOR_LANES).enumerate() {
        let b = row * nbx + bx;
        let next = row * nbx + (bx + 1) % nbx;
        let prev = row * nbx + (bx + nbx - 1) % nbx;
        let mut acc: Full<V> = [[Cx::zero(); 3]; 4];

        // y, z, t first (y initialises the sum), x last: x reads this block's spinor like
        // the epilogue does, and LLVM keeps such shared loads in registers in between, so
        // the two should be close.
        let hops = |mu: usize| Hops {
            fwd: rn[mu][0].0 * nbx + bx,
            bwd: rn[mu][1].0 * nbx + bx,
            sign_fwd: sign_mask(rn[mu][0].1),
            sign_bwd: sign_mask(rn[mu][1].1),
        };
        let (h1, h2, h3) = (hops(1), hops(2), hops(3));
        V::hop_yzt::<1, true, 0>(links, psi, b, h1, &mut acc);
        V::hop_yzt::<1, true, 1>(links, psi, b, h1, &mut acc);
        V::hop_yzt::<2, false, 0>(links, psi, b, h2, &mut acc);
        V::hop_yzt::<2, false, 1>(links, psi, b, h2, &mut acc);
        V::hop_yzt::<3, false, 0>(links, psi, b, h3, &mut acc);
        V::hop_yzt::<3, false, 1>(links, psi, b, h3, &mut acc);

        // x: U_x(x - 1) shifted up one lane, once for both spin rows.
        let mut u_prev = [Lane::default(); LINK_LANES];
        let (lp, lc) = (link_block(links, prev, 0), link_block(links, b, 0));
        for k in 0..LINK_LANES {
            V::rot_prev(V::ld(&lp[k]), V::ld(&lc[k])).st(&mut u_prev[k]);
        }
        let pc = spinor_block(psi, b);
        let x = XHops {
            cur: pc,
            next: spinor_block(psi, next),
            prev: spinor_block(psi, prev),
            link: lc,
            link_prev: &u_prev,
            sign_next: if bx + 1 == nbx { sign_last } else { no_sign },
            sign_prev: if bx == 0 { sign_first } else { no_sign },
        };
        V::hop_x::<0>(&x, &mut acc);
        V::hop_x::<1>(&x, &mut acc);

        match epilogue {
            Epilogue::Hop => {
                for s in 0..4 {
                    for c in 0..3 {
                        acc[s][c].re.st(&mut o[spinor_slot(s, c)]);
                        acc[s][c].im.st(&mut o[spinor_slot(s, c) + 1]);
                    }
                }
            }
            Epilogue::Wilson { kappa, gamma5 } => {
                let k = V::splat(kappa);
                for s in 0..4 {
                    for c in 0..3 {
                        let p = ld_cx::<V>(pc, spinor_slot(s, c));
                        let mut re = V::fnma(k, acc[s][c].re, p.re);
                        let mut im = V::fnma(k, acc[s][c].im, p.im);
                        if gamma5 && s >= 2 {
                            (re, im) = (re.neg(), im.neg());
                        }
                        re.st(&mut o[spinor_slot(s, c)]);
                        im.st(&mut o[spinor_slot(s, c) + 1]);
                    }
                }
            }
        }
    }
}
