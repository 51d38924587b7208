// stencil_v3.cu: version 3.0, the Wilson dslash written for the memory-bandwidth limit,
// for full fields and for the even-odd (parity) fields of the fast path, in double and
// single precision.
//
// out = [g5] (y + c * H inp), H the hopping term
//   H psi(x) = sum_mu [ (1 - g_mu) U_mu(x) psi(x+mu) + (1 + g_mu) U_mu(x-mu)^+ psi(x-mu) ],
// one thread per output site (or per column of T sites along t), the block size a launch
// parameter (the backend's `coarse_block`, capped at V3_MAX_BLOCK; at V3_FULL_MAX_BLOCK for
// the full mode without the dot epilogue). Two modes (argument `parity`), five entry points
// (the end of this file), and their batch over several right-hand sides in one launch
// (stencil_v3_batch, stencil_v3_batch_col, stencil_v3_batch_parity, after them):
// - full (parity < 0): inp, y, out are full fields, one thread per site over V sites
//   (warps alternate parity), or with parity = -T (the _col entry points) one thread per
//   column of T sites along t (below). y = inp, c = -kappa is D.
// - parity p (0 or 1): out and y are half fields of parity p, inp a half field of parity
//   1 - p, one thread per checkerboard site over Vh. y may be null: out = [g5] c H inp.
//   Schur: tmp_o = H inp_e (p = 1, y null, c = 1), then out_e = x_e - kappa^2 H tmp_o.
//
// - Spin projection (DeGrand-Rossi, g_mu = [[0, A],[A^+, 0]]): a forward hop projects the
//   neighbour to the half spinor h = psi_up - A psi_dn, multiplies its two colour vectors by
//   U_mu(x) and rebuilds the lower half as -A^+ (U h); a backward hop uses h = psi_up +
//   A psi_dn, U_mu(x-mu)^+ and +A^+ (U^+ h). A has one entry i^p per row, so the
//   projection is one complex addition per element. Executed flops per site: 8 hops x
//   (12 projection + 132 for two SU(3) mat-vecs) + 7 x 24 accumulation (the first hop
//   writes) = 1320, + 48 for y + c*hop (24 for c*hop without y) = 1368, QUDA's fused count.
// - Gauge field stored once: 4 links per site, the backward hop reads the neighbour's
//   U_mu(x-mu) and applies its dagger in registers.
// - Fermion boundary phases from the coordinates (bit mu of anti_hi / anti_lo: -1 across
//   the upper / lower edge in direction mu; the same mask twice on an undecomposed
//   lattice, only the global edges' bits on a sub-lattice), applied to the half spinor as
//   a sign.
// - Decomposed lattice (split_mask != 0, the interior kernel): hops that leave the
//   sub-lattice across a split direction are skipped; halo.cu packs the faces and adds
//   those hops from the received ones. split_mask = 0 is the undecomposed operator.
// - Layout: parity-major structure of arrays (every extent even), one complex (double2 or
//   float2) per element, Vh = V/2, cb = lexicographic index / 2. A half field holds
//   element k = spin*3 + colour of checkerboard site cb at k*Vh + cb; a full field is
//   [even half][odd half] (p*12*Vh + k*Vh + cb). Links: element e = row*3 + col of the E
//   stored elements of U_mu at site (p, cb) at p*4E*Vh + (mu*E + e)*Vh + cb (E =
//   V3_LINK_ELEMS). Consecutive threads read consecutive words: every load is coalesced.
//   The backend builds the link array in this order on the host (fast_layout::links_to_soa)
//   and uploads it; it permutes spinors to this order on upload and back on download.
// - V3_SINGLE=1: fields and links are float2 and the arithmetic is single precision
//   (the dot epilogue still accumulates in double).
// - V3_HALF=1: as V3_SINGLE, with spinors in the half format (half.cuh: short2 elements
//   at the same positions, one float norm per site in inp_norm / y_norm / out_norm,
//   parity blocks of Vh like the elements; null in the other builds). Every spinor access
//   goes through v3_core.cuh's v3_load / v3_store_site.
// - RECONSTRUCT_12=1: only rows 0 and 1 of each link are stored and read (E = 6 complex
//   per link instead of 9), row 2 = conj(row0 x row1) is rebuilt in registers (SU(3)
//   fields only). RECONSTRUCT_8=1: 8 reals per link (E = 4: U01, U02, U10 and the phases of
//   U00 and U20), the rest rebuilt in registers from unitarity and det = 1 (v3_unpack_8 in
//   v3_core.cuh; SU(3) fields only).
// - Fused CR: when s (the device scalar block, cr_device.cuh) is non-null, every thread
//   returns at once unless the iteration is active. When partials is also non-null the
//   kernel reduces (y|out) = sum conj(y) out over the sites it wrote (double, the
//   single-pass deterministic cr_reduce_last; dynamic shared memory blockDim.x double2)
//   and the last block stores it: beta = (y|out) / rar, rar = (y|out).
#include "common.cuh"
#include "cr_device.cuh"
#include "v3_core.cuh"

// CLOVER=1: the clover term and twisted mass as epilogues (clover.cuh): every entry point
// takes four more arguments, (clover, clover_inv, twist, inverse), and with clover
// non-null ends in out = [g5] (A y + c H inp) (inverse 0) or [g5] A^-1 (y + c H inp)
// (inverse 1) instead of out = [g5] (y + c H inp); clover null is the Wilson epilogue.
// The build adds the site kernel stencil_v3_clover_inv (out = A^-1 inp). CLOVER=0 (the
// Wilson builds) compiles none of it: V3_CL_PARAM and V3_CL are empty.
#ifndef CLOVER
#define CLOVER 0
#endif
#if CLOVER
#include "clover.cuh"
#define V3_CL_PARAM , const V3Clover& cl
#define V3_CL , cl
// V3_CL_AT(p): the arrays offset to the output parity p, for v3_finish_site.
#define V3_CL_AT(p) , v3_clover_at(cl, p, vh)
#else
#define V3_CL_PARAM
#define V3_CL
#define V3_CL_AT(p)
#endif

// Link loads and L1 (validate/RESULTS.md). A parity launch (stencil_v3_parity)
// reads every link once, so its link loads skip L1 (ld.global.nc.L1::no_allocate), which
// then keeps the spinors that a block's neighbouring sites read again: the Schur operator
// went from 1.19x to 1.05x of its floor (32^3x64, double r18). The full mode (stencil_v3)
// shares a link between the warps of both parities of a block (the x and y links), and
// streaming all its links made it slower (1.54x to 1.68x), so only its t links skip L1
// (V3_FULL_STREAM_MASK). The modes are entry points of one body, so that each gets its
// own registers (one body choosing at run time spilled more: 48 bytes against 8,
// double r18). Defined at compile time, V3_STREAM_LINKS=0 turns the parity
// launch's hint off and V3_FULL_STREAM_MASK=0 the full mode's (the ablations).
#ifndef V3_STREAM_LINKS
#define V3_STREAM_LINKS 1
#endif
// V3_FULL_STREAM_MASK: bit mu, the full mode's links of direction mu skip L1. The t links
// do (8): a t link's other reader, the site one t step away, runs in another block, so
// L1 only loses spinors to it (32^3x64: dslash full double r18 1.552x -> 1.489x,
// r12 1.592x -> 1.516x; x, y or z too made it slower).
#ifndef V3_FULL_STREAM_MASK
#define V3_FULL_STREAM_MASK 8
#endif

// V3_L2_FIRST_FULL / V3_L2_FIRST_PARITY: bit mu, the links of direction mu are loaded
// with an L2 evict-first policy (createpolicy.fractional.L2::evict_first), so that they
// give way to the spinors that other blocks read again.
#ifndef V3_L2_FIRST_FULL
#define V3_L2_FIRST_FULL 0
#endif
#ifndef V3_L2_FIRST_PARITY
#define V3_L2_FIRST_PARITY 0
#endif
// V3_L2_LAST_SPINOR_FULL: the full mode's neighbour spinors with an L2 evict-last policy.
#ifndef V3_L2_LAST_SPINOR_FULL
#define V3_L2_LAST_SPINOR_FULL 0
#endif
// V3_L2_LAST_SPINOR_DOT: so in the full mode with the dot (the fused CR's apply, whose
// input r the p pass reads next). Measured (H100, 16^3x32, the full fused CR iteration
// against its floor, 0 -> 1, two processes each): double r18 1.145 -> 1.089-1.091, single
// r18 1.196-1.198 -> 1.121-1.124, double r12 1.162-1.163 -> 1.107-1.108, single r12
// 1.184-1.185 -> 1.098-1.099; 32^3x64 within 0.4%; the seed problem's full-lattice
// single-double CR solve 11.06-11.16 -> 10.44-10.51 ms. The full mode without the dot keeps
// V3_L2_LAST_SPINOR_FULL (0): mixed there (single r12 1.35 -> 1.38), and so were
// the parity launches (the even-odd CR iteration 3-7% slower), which have none.
// Other hints tried: the CR passes' loads and stores cache-streaming (the full
// iteration 2-3% faster, the even-odd one in single 2-5% slower), the full mode's links
// evict-last (the full-lattice rows 1-7% slower), the stencil's output stores
// cache-streaming (within 2% either way).
#ifndef V3_L2_LAST_SPINOR_DOT
#define V3_L2_LAST_SPINOR_DOT 1
#endif

// V3_PDL_TRIGGER: when a launch lets the next one start under programmatic dependent
// launch (common.cuh; v3_stencil): 1 at its start, 2 after its sites, 0 when its blocks
// exit. Measured (H100, 16^3x32, full dslash): 2 is the best; 1 cost double r18 4%.
#ifndef V3_PDL_TRIGGER
#define V3_PDL_TRIGGER 2
#endif

// V3_FULL_MAX_BLOCK: the launch bound of the full-mode entry without the dot epilogue
// (src/backend/cuda/version.rs V3_FULL_MAX_BLOCK, to which the host clamps its launches).
// With 512, as the others have, the double builds were held to 128 registers and spilled;
// with 128 they take 146-166 (no spill), an SM holding 384-448 of their threads instead of
// 512 (32^3x64, against this define at 512 in the same call: dslash full double
// r12 1.38x -> 1.23x, double r18 1.37x -> 1.30x, single r12 1.34x -> 1.28x). The parity launches with more registers were slower
// and keep V3_MAX_BLOCK, as does the full mode with the dot (stencil_v3_full_dot), which
// the fused CR launches with 256 or more threads (a full-mode dot at 128 threads made the
// single-double fused CR take 440 iterations in gpu_decomposed's test where it takes
// ~100; a fresh backend converges normally at 128: not
// understood). Defined at compile time, 512 is the
// ablation (the host still launches at most 128; a value below 128 makes launches fail).
#ifndef V3_FULL_MAX_BLOCK
#define V3_FULL_MAX_BLOCK 128
#endif

// V3_TILE_T: the full mode's sites in the order x, y, t, z, t-block instead of x, y, z, t
// (t blocks of T slices, T the largest power of two <= V3_TILE_T dividing LT), so that a
// site's t neighbours are read about one plane's data later, not a time slice's. Measured,
// 32^3x64: dslash full double r18 1.49x -> 1.43x with T = 8 (4: 1.44x, 16: 1.45x, 32:
// 1.53x), 16^3x32 unchanged; the parity launches were 1-3% slower with it, so they keep
// the plain order. 0 turns it off (defined at compile time, the ablation).
#ifndef V3_TILE_T
#define V3_TILE_T 8
#endif
#if V3_TILE_T
// The checkerboard index of slot s (0 <= s < V/2) in the tiled order; a bijection.
__device__ __forceinline__ int v3_tiled_cb(int s, int lx, int ly, int lz, int lt)
{
    int tt = V3_TILE_T;
    while (tt > 1 && lt % tt)
        tt >>= 1;
    const int plane = lx / 2 * ly; // checkerboard sites of an (x, y) plane
    const int q = s / plane, r = s - q * plane;
    const int k = q / tt, t4 = q - k * tt; // k = z + lz * (t block)
    const int kt = k / lz, z = k - kt * lz;
    return r + plane * (z + lz * (kt * tt + t4));
}
#endif

// V3_DIR_MASK (a probe for ncu, not an operator): bit mu set, the hops of direction mu are
// made; the others are left out, so that each direction's DRAM bytes can be counted alone.
#ifndef V3_DIR_MASK
#define V3_DIR_MASK 15
#endif

// One hop of direction MU (FWD: forward, else backward) for the site `site` (coordinates
// c) of parity p: psi is the input half field (parity 1 - p), links_here / links_there the
// link arrays of parity p and 1 - p. A hop that leaves the sub-lattice across a split
// direction (bit MU of split_mask) is skipped (the exterior kernel of halo.cu adds it from
// the received face); the first hop, which writes acc, then writes zeros. anti_hi /
// anti_lo: bit MU set when this sub-lattice's upper / lower edge in MU is a global
// antiperiodic edge (undecomposed: both are the boundary mask).
template <int MU, bool FWD, bool FIRST, int HINT>
__device__ __forceinline__ void v3_one(const v3_spinor* __restrict__ psi, const float* __restrict__ norm,
                                       const v3_link* __restrict__ links_here, const v3_link* __restrict__ links_there,
                                       size_t vh, int site, int cb, const int c[4], const Dims& d, int split_mask,
                                       int anti_lo, int anti_hi, real2 acc[4][3])
{
    const bool split = QCD_ANTIPERIODIC(split_mask, MU);
    if (FWD) {
        const bool top = c[MU] == d.l[MU] - 1;
        const int up = neighbour_index(site, c[MU], MU, true, d) >> 1;
        if (FIRST || !(split && top))
            v3_hop<MU, true, FIRST>(psi, norm, links_here, vh, up, cb, QCD_ANTIPERIODIC(anti_hi, MU) && top,
                                    FIRST && split && top, acc, HINT);
    } else {
        const bool bottom = c[MU] == 0;
        const int dn = neighbour_index(site, c[MU], MU, false, d) >> 1;
        if (FIRST || !(split && bottom))
            v3_hop<MU, false, FIRST>(psi, norm, links_there, vh, dn, dn, QCD_ANTIPERIODIC(anti_lo, MU) && bottom,
                                     FIRST && split && bottom, acc, HINT);
    }
}

// The eight hops in the order H (hop h: direction h / 2, forward when h is even), the
// first writing acc; bit mu of STREAM: direction mu's links skip L1, bit 4 + mu: they are
// the first to be evicted from L2; bit 8: the neighbour spinors the last.
// v3_hop's hint for a hop of direction MU under the bits STREAM (v3_hops below): bit 0 its
// links past L1, bit 1 its links L2 evict-first, bit 2 its spinors L2 evict-last.
template <int STREAM, int MU> constexpr int v3_hint()
{
    return ((STREAM >> MU) & 1) | ((STREAM >> (MU + 3)) & 2) | ((STREAM >> 6) & 4);
}

template <int STREAM, bool FIRST, int H, int... REST>
__device__ __forceinline__ void v3_hops(const v3_spinor* __restrict__ psi, const float* __restrict__ norm,
                                        const v3_link* __restrict__ links_here, const v3_link* __restrict__ links_there,
                                        size_t vh, int site, int cb, const int c[4], const Dims& d, int split_mask,
                                        int anti_lo, int anti_hi, real2 acc[4][3])
{
    constexpr int mu = H / 2;
    constexpr int hint = v3_hint<STREAM, mu>();
    v3_one<mu, H % 2 == 0, FIRST, hint>(psi, norm, links_here, links_there, vh, site, cb, c, d, split_mask, anti_lo,
                                        anti_hi, acc);
    if constexpr (sizeof...(REST) > 0)
        v3_hops<STREAM, false, REST...>(psi, norm, links_here, links_there, vh, site, cb, c, d, split_mask, anti_lo,
                                        anti_hi, acc);
}

template <int... H> constexpr bool v3_is_order()
{
    int m = 0;
    ((m |= 1 << H), ...);
    return sizeof...(H) == 8 && m == 255;
}

// V3_ORDER_FULL / V3_ORDER_PARITY: the hop order of each entry point (hop 2 mu + 0 the
// forward hop of direction mu, 2 mu + 1 the backward one). The z and t hops read data
// that other blocks read too (the measured per-direction DRAM bytes: x and y at their floor,
// z 1.3x, t 1.6x); by count a block lives ~34 us (32^3x64) while the GPU streams ~95
// MB, so the phase of a hop within a thread decides whether the other block's read still
// hits in L2. The backward hop reads what an earlier block read in its forward hop; doing it
// earlier in the thread shortens the gap. Measured (32^3x64): full t-, t+, x-, x+, y-,
// y+, z-, z+ took dslash full double r18 1.425x -> 1.371-1.379x, single r18 1.30x ->
// 1.25-1.26x; parity x, y, t-, z+, t+, z- took Schur double r12 1.097x -> 1.041-1.043x,
// double r18 1.048x -> 1.026-1.028x (16^3x32: the full dslash 1-2% slower, Schur the
// same). The order before: t+, t-, x+, x-, y+, y-, z+, z- (6, 7, 0, 1, 2, 3, 4, 5) in both.
#ifndef V3_ORDER_FULL
#define V3_ORDER_FULL 7, 6, 1, 0, 3, 2, 5, 4
#endif
#ifndef V3_ORDER_PARITY
#define V3_ORDER_PARITY 0, 1, 2, 3, 7, 4, 6, 5
#endif
static_assert(v3_is_order<V3_ORDER_FULL>() && v3_is_order<V3_ORDER_PARITY>(),
              "a hop order lists each of the hops 0..7 once");

// Columns along t (stencil_v3_col, stencil_v3_full_dot_col): a full-mode thread
// makes T = -parity sites along t, (x, y, z, t0 .. t0 + T - 1) with t0 a multiple of T (the
// host picks T, a power of two dividing LT: stencil.rs full_column). Between two sites of
// a column the t link U_t(x, t) is read once, for site t's forward hop and site t + 1's
// backward one (whose product U^+ h+ is kept in registers until that site starts), and
// the spinor psi(x, t + 1) is read once, for site t's forward half spinor h- and site t +
// 2's backward one h+ (kept in registers). So the t hops read (T + 2) / T spinors and
// (T + 1) / T links a site instead of 2 and 2, and the data a column reads again is in
// registers, not wherever L1 or L2 left it (measured: the t hop read 1.6x its DRAM floor).
// Slot s of a parity's warps is the column (r, q) = (s % S, s / S), S the checkerboard
// sites of a time slice, starting at checkerboard index r + S q T; warps still alternate
// parity, which flips from one site of a column to the next.

// The end of a site's work: acc (the hopping term H inp at site cb) becomes out = [g5] (y
// + c acc) or [g5] c acc (y_h null) and is stored whole (half: with its norm); with
// `partials`, (y|out) is added to dot.
__device__ __forceinline__ void v3_finish_site(real2 acc[4][3], const v3_spinor* __restrict__ y_h,
                                               const float* __restrict__ y_n, v3_spinor* __restrict__ out_h,
                                               float* __restrict__ out_n, int vh, int cb, double c, int g5,
                                               const double2* __restrict__ partials, double2& dot V3_CL_PARAM)
{
#if CLOVER
    if (cl.a) {
        v3_clover_finish_site(acc, y_h, y_n, out_h, out_n, vh, cb, c, g5, partials, dot, cl);
        return;
    }
#endif
    const real cr = (real)c;
    const real y_step = y_h ? v3_site_step(y_n, cb) : (real)0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            const real2 h = acc[j][i];
            real2 v;
            if (y_h) {
                const real2 yk = v3_load(y_h, vh, j * 3 + i, cb, y_step);
                v = c_of<real2>(yk.x + cr * h.x, yk.y + cr * h.y);
                if (g5 && j >= 2)
                    v = c_neg(v);
#if !V3_HALF
                if (partials)
                    dot = c_add(dot, c_conj_mul(c_dbl(yk), c_dbl(v)));
#endif
            } else {
                v = c_scale(cr, h);
                if (g5 && j >= 2)
                    v = c_neg(v);
            }
            acc[j][i] = v;
        }
    v3_store_site(out_h, out_n, vh, cb, acc);
#if V3_HALF
    // The dot of what was stored (the rounded site).
    if (partials && y_h)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 3; ++i)
                dot = c_add(dot, c_conj_mul(c_dbl(v3_load(y_h, vh, j * 3 + i, cb, y_step)), c_dbl(acc[j][i])));
#endif
}

// The full mode's column of tt sites along t for the thread of parity p (of its first
// site) and column slot `slot` (above); STREAM as for v3_hops.
template <int STREAM>
__device__ __forceinline__ void v3_column(const v3_spinor* __restrict__ inp, const v3_spinor* __restrict__ y,
                                          v3_spinor* __restrict__ out, const v3_link* __restrict__ links, double c,
                                          int g5, int p, int tt, int slot, int vh, const Dims& d, int split_mask,
                                          int anti_lo, int anti_hi, const double2* partials, double2& dot,
                                          const float* __restrict__ inp_norm, const float* __restrict__ y_norm,
                                          float* __restrict__ out_norm V3_CL_PARAM)
{
    constexpr int hint_t = v3_hint<STREAM, 3>();
    const int slice = vh / d.l[3]; // checkerboard sites of a time slice
    const int q = slot / slice, r = slot - q * slice;
    const size_t half = (size_t)12 * vh;
    real2 wb[2][3]; // U_t(x, t - 1)^+ h+(psi(x, t - 1)) for the next site
    real2 hc[2][3]; // h+(psi(x, t)) for the next site's backward product
#pragma unroll 1
    for (int k = 0; k < tt; ++k) {
        const int pk = p ^ (k & 1);
        const int cb = r + slice * (q * tt + k);
        const v3_spinor* in_h = inp + (size_t)(1 - pk) * half;
        const v3_spinor* own_h = inp + (size_t)pk * half; // psi of this parity (at x, t)
        v3_spinor* out_h = out + (size_t)pk * half;
        const float* in_n = inp_norm ? inp_norm + (size_t)(1 - pk) * vh : nullptr;
        const float* own_n = inp_norm ? inp_norm + (size_t)pk * vh : nullptr;
        float* out_n = out_norm ? out_norm + (size_t)pk * vh : nullptr;
        const v3_link* l_here = links + (size_t)pk * 4 * V3_LINK_ELEMS * vh;
        const v3_link* l_there = links + (size_t)(1 - pk) * 4 * V3_LINK_ELEMS * vh;
        int x[4];
        const int site = v3_site(pk, cb, d, x);
        real2 acc[4][3];
        if (k == 0) {
            v3_one<3, false, true, hint_t>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask, anti_lo,
                                           anti_hi, acc);
            if (tt > 1)
                v3_project<3, false>(own_h, own_n, vh, cb, false, hc, hint_t);
        } else {
            v3_rebuild<3, false, true>(wb, acc);
        }
        v3_hops<STREAM, false, 1, 0, 3, 2, 5, 4>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask,
                                                  anti_lo, anti_hi, acc);
        if (k + 1 < tt) {
            // Inside the column: t + 1 <= LT - 1, no edge. One load of U_t(x, t) for this
            // site's forward hop and the next site's backward one.
            real2 u[3][3];
            v3_load_link(l_here, vh, 3, cb, u, hint_t);
            real2 hm[2][3], w[2][3];
            // The next site's backward product from the carried h+(psi(x, t)), then both
            // half spinors of psi(x, t + 1): h- for this hop, h+ carried on.
            v3_mul_half<false>(hc, u, wb);
            v3_project_both<3>(in_h, in_n, vh, cb + slice, hm, hc, hint_t);
            v3_mul_half<true>(hm, u, w);
            v3_rebuild<3, true, false>(w, acc);
        } else {
            v3_one<3, true, false, hint_t>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask, anti_lo,
                                           anti_hi, acc);
        }
        v3_finish_site(acc, y ? y + (size_t)pk * half : nullptr, y_norm ? y_norm + (size_t)pk * vh : nullptr,
                       out_h, out_n, vh, cb, c, g5, partials, dot V3_CL_AT(pk));
    }
}

// The body of the entry points: FULL, the full mode (the host launches stencil_v3 and
// stencil_v3_full_dot with parity -1, stencil_v3_col and stencil_v3_full_dot_col with
// parity -T, T >= 2 the sites of a column, and stencil_v3_parity with parity 0 or 1:
// stencil.rs launch_v3); COL, the full mode in columns along t; DOT, the entries with the
// dot epilogue (stencil_v3_full_dot, stencil_v3_full_dot_col: their spinors' L2 hint);
// FMASK, the full mode's links that skip L1 (bit mu; the hint variants below). `block`:
// the block of the one-right-hand-side launch this block does (blockIdx.x, except in the
// batch entries at the end of this file, which map several blocks to each).
template <bool FULL, bool COL, bool DOT = false, int FMASK = V3_FULL_STREAM_MASK>
__device__ __forceinline__ void v3_stencil(int block, const v3_spinor* __restrict__ inp, const v3_spinor* __restrict__ y,
                                           v3_spinor* __restrict__ out, const v3_link* __restrict__ links, double c,
                                           int g5, int parity, int volume, int lx, int ly, int lz, int lt,
                                           int split_mask, int anti_lo, int anti_hi, double* __restrict__ s,
                                           double2* __restrict__ partials, unsigned* __restrict__ ticket,
                                           const float* __restrict__ inp_norm, const float* __restrict__ y_norm,
                                           float* __restrict__ out_norm V3_CL_PARAM)
{
    // Before the first read (s, inp, y) or write (V3_PDL_TRIGGER 1: the next launch may
    // start now).
    qcd_pdl_wait();
    if (V3_PDL_TRIGGER == 1)
        qcd_pdl_trigger();
    if (s && !cr_active(s))
        return; // uniform: every thread of every block
    const int vh = volume / 2;
    constexpr bool full = FULL;
    // Bit mu: the links of direction mu skip L1; bit 4 + mu: they go first from L2; bit 8:
    // the neighbour spinors go last from L2.
    constexpr int stream = (FULL ? FMASK : V3_STREAM_LINKS ? 15 : 0) |
                           (FULL ? V3_L2_FIRST_FULL : V3_L2_FIRST_PARITY) << 4 |
                           (FULL ? (DOT ? V3_L2_LAST_SPINOR_DOT : V3_L2_LAST_SPINOR_FULL) : 0) << 8;
    const int t = block * blockDim.x + threadIdx.x;
    // Full mode: warps alternate parity over the same checkerboard range (warp w: parity
    // w % 2, slots 32 (w / 2) + lane, slot s the site v3_tiled_cb(s)), so that a link read
    // by one site's forward hop and by its neighbour's backward hop, and a spinor read by
    // its neighbours of the other parity, are fetched at about the same time and hit in
    // L1 or L2. (Even sites first, then odd ones, read every link twice from DRAM: 2.1-2.4x
    // of the floor, measured.)
    const int w = t >> 5;
    const int p = full ? (w & 1) : parity;
    const int slot = full ? ((w >> 1) << 5) + (t & 31) : t;
    double2 dot = c_zero();
    if constexpr (COL) {
        const Dims d = make_dims(lx, ly, lz, lt);
        const int tt = -parity;
        if (slot < vh / tt)
            v3_column<stream>(inp, y, out, links, c, g5, p, tt, slot, vh, d, split_mask, anti_lo, anti_hi, partials,
                              dot, inp_norm, y_norm, out_norm V3_CL);
    } else {
#if V3_TILE_T
        const int cb = full && slot < vh ? v3_tiled_cb(slot, lx, ly, lz, lt) : slot;
#else
        const int cb = slot;
#endif
        if (cb < vh) {
            const size_t half = (size_t)12 * vh;
            const v3_spinor* in_h = inp + (full ? (size_t)(1 - p) * half : 0);
            const v3_spinor* y_h = y ? y + (full ? (size_t)p * half : 0) : nullptr;
            v3_spinor* out_h = out + (full ? (size_t)p * half : 0);
            // Half: the norms, one per site, parity blocks of vh (null in the other builds).
            const float* in_n = inp_norm ? inp_norm + (full ? (size_t)(1 - p) * vh : 0) : nullptr;
            const float* y_n = y_norm ? y_norm + (full ? (size_t)p * vh : 0) : nullptr;
            float* out_n = out_norm ? out_norm + (full ? (size_t)p * vh : 0) : nullptr;
            const v3_link* l_here = links + (size_t)p * 4 * V3_LINK_ELEMS * vh;
            const v3_link* l_there = links + (size_t)(1 - p) * 4 * V3_LINK_ELEMS * vh;
            const Dims d = make_dims(lx, ly, lz, lt);
            int x[4];
            const int site = v3_site(p, cb, d, x);
            real2 acc[4][3];
#if V3_DIR_MASK != 15
            // The probe: only the directions of the mask (not the operator).
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int i = 0; i < 3; ++i)
                    acc[j][i] = c_of<real2>(0, 0);
            if constexpr (V3_DIR_MASK & 8)
                v3_hops<stream, false, 6, 7>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask, anti_lo,
                                             anti_hi, acc);
            if constexpr (V3_DIR_MASK & 1)
                v3_hops<stream, false, 0, 1>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask, anti_lo,
                                             anti_hi, acc);
            if constexpr (V3_DIR_MASK & 2)
                v3_hops<stream, false, 2, 3>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask, anti_lo,
                                             anti_hi, acc);
            if constexpr (V3_DIR_MASK & 4)
                v3_hops<stream, false, 4, 5>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask, anti_lo,
                                             anti_hi, acc);
#else
            if constexpr (FULL)
                v3_hops<stream, true, V3_ORDER_FULL>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask,
                                                     anti_lo, anti_hi, acc);
            else
                v3_hops<stream, true, V3_ORDER_PARITY>(in_h, in_n, l_here, l_there, vh, site, cb, x, d, split_mask,
                                                       anti_lo, anti_hi, acc);
#endif
            // acc becomes the output site, then is stored whole (half: with its norm).
            v3_finish_site(acc, y_h, y_n, out_h, out_n, vh, cb, c, g5, partials, dot V3_CL_AT(p));
        }
    }
    if (V3_PDL_TRIGGER == 2)
        qcd_pdl_trigger(); // this thread's sites are written; only the dot's sum is left
    if (partials) {
        QCD_DYNAMIC_SHARED(double2, v3_shared);
        double2 total;
        if (cr_reduce_last(dot, v3_shared, partials, ticket, &total) && threadIdx.x == 0 && !cr_keep_local(s, total))
            cr_finish_apply(s, total);
    }
}

#if CLOVER
// The CLOVER build's four more arguments (the arrays' bases, both parities).
#define V3_CLOVER_ARGS                                                                                                \
    , const real2 *__restrict__ clover, const real2 *__restrict__ clover_inv, double twist, int inverse
#define V3_CLOVER_CALL , V3Clover{clover, clover_inv, (real)twist, inverse}
#else
#define V3_CLOVER_ARGS
#define V3_CLOVER_CALL
#endif
#define V3_STENCIL_ARGS                                                                                               \
    const v3_spinor *__restrict__ inp, const v3_spinor *__restrict__ y, v3_spinor *__restrict__ out,                 \
        const v3_link *__restrict__ links, double c, int g5, int parity, int volume, int lx, int ly, int lz, int lt,   \
        int split_mask, int anti_lo, int anti_hi, double *__restrict__ s, double2 *__restrict__ partials,              \
        unsigned *__restrict__ ticket, const float *__restrict__ inp_norm, const float *__restrict__ y_norm,           \
        float *__restrict__ out_norm V3_CLOVER_ARGS
#define V3_STENCIL_CALL                                                                                               \
    inp, y, out, links, c, g5, parity, volume, lx, ly, lz, lt, split_mask, anti_lo, anti_hi, s, partials, ticket,     \
        inp_norm, y_norm, out_norm V3_CLOVER_CALL

// The full mode (parity -1) without the dot epilogue (partials null; the host launches
// it with at most V3_FULL_MAX_BLOCK threads a block): stencil_v3SUFFIX, and
// stencil_v3_colSUFFIX for it in columns of -parity sites along t, with the links of the
// directions in MASK past L1.
#define V3_FULL_ENTRIES(SUFFIX, MASK)                                                                                 \
    extern "C" __global__ void __launch_bounds__(V3_FULL_MAX_BLOCK) stencil_v3##SUFFIX(V3_STENCIL_ARGS)              \
    {                                                                                                                 \
        v3_stencil<true, false, false, MASK>(blockIdx.x, V3_STENCIL_CALL);                                            \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(V3_FULL_MAX_BLOCK) stencil_v3_col##SUFFIX(V3_STENCIL_ARGS)          \
    {                                                                                                                 \
        v3_stencil<true, true, false, MASK>(blockIdx.x, V3_STENCIL_CALL);                                             \
    }

// The link hint variants of the full mode without the dot, which the tuner chooses between
// (stencil.rs V3_LINK_HINTS, in this order): the default (V3_FULL_STREAM_MASK, the t links
// past L1), every link through L1, the z and t links past L1. No one mask is best for
// every row (measured, H100, the full dslash against its floor): at 16^3x32 double r12
// took 1.309-1.313 with the default and 1.293-1.303 with every link through L1 (double
// r18 1.211-1.215 against 1.275-1.277), single r12 1.318-1.340 against 1.286-1.301 with
// the z and t links past L1, which at 32^3x64 made single r12 1.305 (default 1.260-1.262).
// The dot entries keep the default: the full fused CR rows at 16^3x32 were 0.8-2% slower
// with the others.
V3_FULL_ENTRIES(, V3_FULL_STREAM_MASK)
V3_FULL_ENTRIES(_l1all, 0)
V3_FULL_ENTRIES(_l1xy, 12)

// The full mode with the (y|out) epilogue (the fused CR's apply: at least 256 threads a
// block, stencil.rs DOT_MIN_BLOCK).
extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK) stencil_v3_full_dot(V3_STENCIL_ARGS)
{
    v3_stencil<true, false, true>(blockIdx.x, V3_STENCIL_CALL);
}

// As stencil_v3_full_dot, in columns of -parity sites along t; the host launches it with
// V3_DOT_COL_BLOCK threads a block (stencil.rs DOT_MIN_BLOCK), so that the double builds
// keep their ~234 registers (with V3_MAX_BLOCK they were held to 128 and spilled 328-488
// bytes).
#ifndef V3_DOT_COL_BLOCK
#define V3_DOT_COL_BLOCK 256
#endif
extern "C" __global__ void __launch_bounds__(V3_DOT_COL_BLOCK) stencil_v3_full_dot_col(V3_STENCIL_ARGS)
{
    v3_stencil<true, true, true>(blockIdx.x, V3_STENCIL_CALL);
}

// A parity launch (parity 0 or 1).
extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK) stencil_v3_parity(V3_STENCIL_ARGS)
{
    v3_stencil<false, false>(blockIdx.x, V3_STENCIL_CALL);
}

// The batch: one launch applies the operator of stencil_v3, stencil_v3_col or
// stencil_v3_parity to nrhs (1 .. V3_BATCH_MAX) right-hand sides whose fields lie anywhere:
// their addresses come in a V3Batch passed by value (the kernel parameters, read through
// the constant cache: no device table to upload before a launch, and a launch a CUDA graph
// records as it is). Block b of the launch makes block b / nrhs of right-hand side
// b % nrhs's launch, so the nrhs blocks that read one block's links (and clover arrays)
// are issued back to back: the first reads them from DRAM, the others find them in L2, and
// the links cross DRAM about once a batch instead of once a right-hand side (the byte
// model: src/backend/cuda/core/kernels/batch.rs). Each right-hand side's sites, loads,
// arithmetic and stores are those of its one-right-hand-side entry, so the results are the
// same bits (validate/emu/emu_batch.cpp). No dot epilogue and no fused-CR gate (s, partials
// and ticket null); y[k] null: out = [g5] c H inp for that right-hand side. The host
// launches nrhs times the blocks of one right-hand side (src/backend/cuda/core/stencil/
// batch.rs) under the block bound of the matching entry.
#ifndef V3_BATCH_MAX
#define V3_BATCH_MAX 16
#endif
struct V3Batch {
    const v3_spinor* inp[V3_BATCH_MAX];
    const v3_spinor* y[V3_BATCH_MAX];
    v3_spinor* out[V3_BATCH_MAX];
    // Half spinors' norms (null in the other builds).
    const float* inp_norm[V3_BATCH_MAX];
    const float* y_norm[V3_BATCH_MAX];
    float* out_norm[V3_BATCH_MAX];
};
#define V3_BATCH_ARGS                                                                                                 \
    const V3Batch rhs, int nrhs, const v3_link *__restrict__ links, double c, int g5, int parity,                    \
        int volume, int lx, int ly, int lz, int lt, int split_mask, int anti_lo, int anti_hi V3_CLOVER_ARGS
#define V3_BATCH_CALL rhs, nrhs, links, c, g5, parity, volume, lx, ly, lz, lt, split_mask, anti_lo, anti_hi V3_CLOVER_CALL

// Right-hand side k = b % nrhs of the batch block b, as its one-right-hand-side entry's
// block b / nrhs.
template <bool FULL, bool COL>
__device__ __forceinline__ void v3_batch(const V3Batch& rhs, int nrhs, const v3_link* __restrict__ links, double c,
                                         int g5, int parity, int volume, int lx, int ly, int lz, int lt,
                                         int split_mask, int anti_lo, int anti_hi V3_CL_PARAM)
{
    const int b = blockIdx.x / nrhs, k = blockIdx.x - b * nrhs;
    // The norms only where they are read (the half build): no registers for them elsewhere.
    const bool h = V3_HALF;
    v3_stencil<FULL, COL>(b, rhs.inp[k], rhs.y[k], rhs.out[k], links, c, g5, parity, volume, lx, ly, lz, lt,
                          split_mask, anti_lo, anti_hi, nullptr, nullptr, nullptr, h ? rhs.inp_norm[k] : nullptr,
                          h ? rhs.y_norm[k] : nullptr, h ? rhs.out_norm[k] : nullptr V3_CL);
}

extern "C" __global__ void __launch_bounds__(V3_FULL_MAX_BLOCK) stencil_v3_batch(V3_BATCH_ARGS)
{
    v3_batch<true, false>(V3_BATCH_CALL);
}
extern "C" __global__ void __launch_bounds__(V3_FULL_MAX_BLOCK) stencil_v3_batch_col(V3_BATCH_ARGS)
{
    v3_batch<true, true>(V3_BATCH_CALL);
}
extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK) stencil_v3_batch_parity(V3_BATCH_ARGS)
{
    v3_batch<false, false>(V3_BATCH_CALL);
}

#if CLOVER
// The site kernel out = A^-1 inp (the Schur source's A_oo^-1 b_o): over the half fields of
// parity `parity` (0 or 1; inp, out and their norms at that half) or, with parity -1, over
// full fields (V threads, site t of parity t / Vh). One thread a site.
extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK)
    stencil_v3_clover_inv(const v3_spinor* __restrict__ inp, v3_spinor* __restrict__ out,
                          const real2* __restrict__ clover, const real2* __restrict__ clover_inv, double twist,
                          int parity, int volume, const float* __restrict__ inp_norm, float* __restrict__ out_norm)
{
    qcd_pdl_wait();
    const int vh = volume / 2;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < (parity < 0 ? 2 * vh : vh)) {
        const int p = parity < 0 ? t / vh : parity;
        const int cb = parity < 0 ? t - p * vh : t;
        const size_t off = parity < 0 ? (size_t)p * 12 * vh : 0, noff = parity < 0 ? (size_t)p * vh : 0;
        const V3Clover cl = v3_clover_at(V3Clover{clover, clover_inv, (real)twist, 1}, p, vh);
        v3_clover_inv_site(inp + off, inp_norm ? inp_norm + noff : nullptr, out + off, out_norm ? out_norm + noff : nullptr,
                           vh, cb, cl);
    }
    qcd_pdl_trigger();
}
#endif
