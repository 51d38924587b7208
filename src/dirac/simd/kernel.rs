//! The generic row kernel behind every instruction set: the `Simd` trait (whose default
//! pieces call the hop helpers here), the block geometry, the spin projections, the link
//! products and the x carry.

use super::lanes::{link_pos, link_slot, spinor_slot, Lane, LINK_LANES, SPINOR_LANES, W};
use crate::dirac::fast::CHIRAL_BLOCKS;
use crate::geometry::lattice::{Lattice, NDIM};

/// One spinor block (4 sites).
pub(super) type SBlock = [Lane; SPINOR_LANES];
/// One direction's links of a block.
pub(super) type LBlock = [Lane; LINK_LANES];
/// The two colour vectors of a projected half spinor after the link: what the x-backward
/// hop carries from one block to the next in a row (2 rows x 3 colours x re, im).
pub(super) type Carry = [Lane; 12];

/// Extents in blocks and the fermion boundary phases, what each row needs to find its
/// neighbours.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geom {
    /// Blocks per x row.
    pub(super) nbx: usize,
    /// The extents (rows are indexed y + LY (z + LZ t)).
    dims: [usize; NDIM],
    phase: [f64; NDIM],
}

impl Geom {
    pub(super) fn new(l: &Lattice) -> Geom {
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
pub(super) struct Kernel<'a> {
    pub(super) geom: Geom,
    pub(super) links: &'a [LBlock],
    pub(super) psi: &'a [SBlock],
    /// The output's address, for prefetching only (never dereferenced through this).
    pub(super) out: *const SBlock,
}

// SAFETY: `out` is only used as a prefetch address; the output itself reaches each task
// as a disjoint `&mut` chunk.
unsafe impl Sync for Kernel<'_> {}

/// What the kernel needs from a vector type: lane-wise arithmetic, the two rotations that
/// shift a row of sites by one in x across a block boundary, and the three pieces of a
/// block's work, which an ISA may run out of line (see `avx`).
pub(super) trait Simd: Copy {
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

/// A complex number of W sites.
#[derive(Clone, Copy)]
pub(super) struct Cx<V> {
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
pub(super) type Row<V> = [Cx<V>; 3];
/// Four spin components x 3 colours.
pub(super) type Full<V> = [Row<V>; 4];

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
pub(super) struct Hops<'a> {
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
pub(super) fn hop_yzt<
    V: Simd,
    const MU: usize,
    const INIT: bool,
    const S: usize,
    const PH: bool,
>(
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
pub(super) fn x_carry<V: Simd, const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
    let v = mat_vec::<V, true>(link, &proj_row::<V, 0, false, S>(psi));
    for (c, z) in v.iter().enumerate() {
        st_cx(*z, carry, 2 * (3 * S + c));
    }
}

/// Where the x hops of one block read, and the epilogue constants.
pub(super) struct XHops<'a, V> {
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
pub(super) fn hop_x<V: Simd, const S: usize, const WILSON: bool, const PH: bool>(
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
pub(super) fn row_kernel<V: Simd, const WILSON: bool>(
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
