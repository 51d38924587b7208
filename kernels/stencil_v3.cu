// stencil_v3.cu: version 3.0, the Wilson dslash written for the memory-bandwidth limit,
// for full fields and for the even-odd (parity) fields of the fast path, in double and
// single precision.
//
// out = [g5] (y + c * H inp), H the hopping term
//   H psi(x) = sum_mu [ (1 - g_mu) U_mu(x) psi(x+mu) + (1 + g_mu) U_mu(x-mu)^+ psi(x-mu) ],
// one thread per output site, the block size a launch parameter (the backend's
// `coarse_block`, capped at V3_MAX_BLOCK). Two modes (argument `parity`):
// - full (parity < 0): inp, y, out are full fields, one thread per site over V sites
//   (thread t: parity t / Vh, checkerboard index t % Vh). y = inp, c = -kappa is D.
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
// - Fermion boundary phases from the coordinates (bit mu of antiperiodic_mask: -1 across
//   the edge in direction mu), applied to the half spinor as a sign.
// - Layout: parity-major structure of arrays (every extent even), one complex (double2 or
//   float2) per element, Vh = V/2, cb = lexicographic index / 2. A half field holds
//   element k = spin*3 + colour of checkerboard site cb at k*Vh + cb; a full field is
//   [even half][odd half] (p*12*Vh + k*Vh + cb). Links: element e = row*3 + col of U_mu at
//   site (p, cb) at p*36*Vh + (mu*9 + e)*Vh + cb. Consecutive threads read consecutive
//   words: every load is coalesced. build_v3_links (layout.cu) builds the link array on
//   the device; the backend permutes spinors to this order on upload and back on download.
// - V3_SINGLE=1: fields and links are float2 and the arithmetic is single precision
//   (the dot epilogue still accumulates in double).
// - RECONSTRUCT_12=1: only rows 0 and 1 of each link are read, row 2 = conj(row0 x row1)
//   is rebuilt in registers (SU(3) fields only).
// - Fused CR: when s (the device scalar block, cr_device.cuh) is non-null, every thread
//   returns at once unless the iteration is active. When partials is also non-null the
//   kernel reduces (y|out) = sum conj(y) out over the sites it wrote (double, the
//   single-pass deterministic cr_reduce_last; dynamic shared memory blockDim.x double2)
//   and the last block stores it: beta = (y|out) / rar, rar = (y|out).
#include "common.cuh"
#include "cr_device.cuh"

#ifndef V3_MAX_BLOCK
#define V3_MAX_BLOCK 512
#endif
#ifndef RECONSTRUCT_12
#define RECONSTRUCT_12 0
#endif
#ifndef V3_SINGLE
#define V3_SINGLE 0
#endif

#if V3_SINGLE
typedef float2 real2;
#else
typedef double2 real2;
#endif
typedef real_of<real2> real;

// A_mu of g_mu = [[0, A],[A^+, 0]]: row r has the single entry i^v3_ph(mu, r) in column
// v3_col(mu, r). x: [[0, i],[i, 0]], y: [[0, -1],[1, 0]], z: [[i, 0],[0, -i]], t: 1.
__device__ __forceinline__ constexpr int v3_col(int mu, int r) { return mu < 2 ? 1 - r : r; }
__device__ __forceinline__ constexpr int v3_ph(int mu, int r)
{
    return mu == 0 ? 1 : mu == 1 ? (r == 0 ? 2 : 0) : mu == 2 ? (r == 0 ? 1 : 3) : 0;
}

// The lexicographic index and coordinates of checkerboard site cb of parity p: 2 cb or
// 2 cb + 1 (x is even at 2 cb because LX is even, so the pair shares y, z, t).
__device__ __forceinline__ int v3_site(int p, int cb, const Dims& d, int c[4])
{
    const int s0 = 2 * cb;
    site_coords(s0, d, c);
    const int shift = (c[0] + c[1] + c[2] + c[3] + p) & 1;
    c[0] += shift;
    return s0 + shift;
}

// U(i, k) of the link of direction mu at checkerboard site cb of one parity's link array.
__device__ __forceinline__ void v3_load_link(const real2* __restrict__ links, size_t vh, int mu, int cb,
                                             real2 u[3][3])
{
    const real2* p = links + (size_t)mu * 9 * vh + cb;
    const int rows = RECONSTRUCT_12 ? 2 : 3;
#pragma unroll
    for (int i = 0; i < rows; ++i)
#pragma unroll
        for (int k = 0; k < 3; ++k)
            u[i][k] = p[(i * 3 + k) * vh];
#if RECONSTRUCT_12
    su3_third_row(u);
#endif
}

// One hop of direction MU (forward or backward) from the neighbour at checkerboard index
// n of the input half field psi, whose link is at checkerboard index ls of the link half
// array `links` (x for forward, x - mu for backward), with sign `neg` for an
// antiperiodic crossing. FIRST: write acc instead of accumulating.
template <int MU, bool FWD, bool FIRST>
__device__ __forceinline__ void v3_hop(const real2* __restrict__ psi, const real2* __restrict__ links,
                                       size_t vh, int n, int ls, bool neg, real2 acc[4][3])
{
    constexpr int c0 = v3_col(MU, 0), c1 = v3_col(MU, 1);
    constexpr int p0 = v3_ph(MU, 0), p1 = v3_ph(MU, 1);
    // Half spinor h_r = psi_r -/+ i^p_r psi_{2 + c_r}.
    real2 h[2][3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const real2 u0 = psi[(size_t)c * vh + n];
        const real2 u1 = psi[(size_t)(3 + c) * vh + n];
        const real2 a0 = c_ipow<p0>(psi[(size_t)((2 + c0) * 3 + c) * vh + n]);
        const real2 a1 = c_ipow<p1>(psi[(size_t)((2 + c1) * 3 + c) * vh + n]);
        h[0][c] = FWD ? c_sub(u0, a0) : c_add(u0, a0);
        h[1][c] = FWD ? c_sub(u1, a1) : c_add(u1, a1);
        if (neg) {
            h[0][c] = c_neg(h[0][c]);
            h[1][c] = c_neg(h[1][c]);
        }
    }
    real2 u[3][3];
    v3_load_link(links, vh, MU, ls, u);
    // w_r = U h_r (forward) or U^+ h_r (backward): 2 x 66 flops.
    real2 w[2][3];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            if (FWD) {
                real2 s = c_mul(u[i][0], h[r][0]);
                s = c_madd(s, u[i][1], h[r][1]);
                w[r][i] = c_madd(s, u[i][2], h[r][2]);
            } else {
                real2 s = c_conj_mul(u[0][i], h[r][0]);
                s = c_add(s, c_conj_mul(u[1][i], h[r][1]));
                w[r][i] = c_add(s, c_conj_mul(u[2][i], h[r][2]));
            }
        }
    // Upper half += w; lower half: component c_r gets -/+ conj(i^p_r) w_r.
    constexpr int q0 = (4 - p0) & 3, q1 = (4 - p1) & 3;
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const real2 l0 = c_ipow<q0>(w[0][c]);
        const real2 l1 = c_ipow<q1>(w[1][c]);
        if (FIRST) {
            acc[0][c] = w[0][c];
            acc[1][c] = w[1][c];
            acc[2 + c0][c] = FWD ? c_neg(l0) : l0;
            acc[2 + c1][c] = FWD ? c_neg(l1) : l1;
        } else {
            acc[0][c] = c_add(acc[0][c], w[0][c]);
            acc[1][c] = c_add(acc[1][c], w[1][c]);
            acc[2 + c0][c] = FWD ? c_sub(acc[2 + c0][c], l0) : c_add(acc[2 + c0][c], l0);
            acc[2 + c1][c] = FWD ? c_sub(acc[2 + c1][c], l1) : c_add(acc[2 + c1][c], l1);
        }
    }
}

// Forward and backward hop of direction MU for the site `site` (coordinates c) of parity
// p: psi is the input half field (parity 1 - p), links_here / links_there the link arrays
// of parity p and 1 - p.
template <int MU, bool FIRST>
__device__ __forceinline__ void v3_direction(const real2* __restrict__ psi, const real2* __restrict__ links_here,
                                             const real2* __restrict__ links_there, size_t vh, int site, int cb,
                                             const int c[4], const Dims& d, int mask, real2 acc[4][3])
{
    const int up = neighbour_index(site, c[MU], MU, true, d) >> 1;
    const int dn = neighbour_index(site, c[MU], MU, false, d) >> 1;
    const bool anti = QCD_ANTIPERIODIC(mask, MU);
    v3_hop<MU, true, FIRST>(psi, links_here, vh, up, cb, anti && c[MU] == d.l[MU] - 1, acc);
    v3_hop<MU, false, false>(psi, links_there, vh, dn, dn, anti && c[MU] == 0, acc);
}

extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK)
    stencil_v3(const real2* __restrict__ inp, const real2* __restrict__ y, real2* __restrict__ out,
               const real2* __restrict__ links, double c, int g5, int parity, int volume, int lx, int ly, int lz,
               int lt, int antiperiodic_mask, double* __restrict__ s, double2* __restrict__ partials,
               unsigned* __restrict__ ticket)
{
    if (s && !cr_active(s))
        return; // uniform: every thread of every block
    const int vh = volume / 2;
    const bool full = parity < 0;
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    // Full mode: warps alternate parity over the same checkerboard range (warp w: parity
    // w % 2, sites cb = 32 (w / 2) + lane), so that a link read by one site's forward hop
    // and by its neighbour's backward hop, and a spinor read by its neighbours of the
    // other parity, are fetched at about the same time and hit in L2. (Even sites first,
    // then odd ones, read every link twice from DRAM: 2.1-2.4x of the floor, run 7.)
    const int w = t >> 5;
    const int p = full ? (w & 1) : parity;
    const int cb = full ? ((w >> 1) << 5) + (t & 31) : t;
    double2 dot = c_zero();
    if (cb < vh) {
        const size_t half = (size_t)12 * vh;
        const real2* in_h = inp + (full ? (size_t)(1 - p) * half : 0);
        const real2* y_h = y ? y + (full ? (size_t)p * half : 0) : nullptr;
        real2* out_h = out + (full ? (size_t)p * half : 0);
        const real2* l_here = links + (size_t)p * 36 * vh;
        const real2* l_there = links + (size_t)(1 - p) * 36 * vh;
        const Dims d = make_dims(lx, ly, lz, lt);
        int x[4];
        const int site = v3_site(p, cb, d, x);
        real2 acc[4][3];
        v3_direction<3, true>(in_h, l_here, l_there, vh, site, cb, x, d, antiperiodic_mask, acc);
        v3_direction<0, false>(in_h, l_here, l_there, vh, site, cb, x, d, antiperiodic_mask, acc);
        v3_direction<1, false>(in_h, l_here, l_there, vh, site, cb, x, d, antiperiodic_mask, acc);
        v3_direction<2, false>(in_h, l_here, l_there, vh, site, cb, x, d, antiperiodic_mask, acc);
        const real cr = (real)c;
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 3; ++i) {
                const size_t k = (size_t)(j * 3 + i) * vh + cb;
                const real2 h = acc[j][i];
                real2 v;
                if (y_h) {
                    const real2 yk = y_h[k];
                    v = c_of<real2>(yk.x + cr * h.x, yk.y + cr * h.y);
                    if (g5 && j >= 2)
                        v = c_neg(v);
                    if (partials)
                        dot = c_add(dot, c_conj_mul(c_dbl(yk), c_dbl(v)));
                } else {
                    v = c_scale(cr, h);
                    if (g5 && j >= 2)
                        v = c_neg(v);
                }
                out_h[k] = v;
            }
    }
    if (partials) {
        QCD_DYNAMIC_SHARED(double2, v3_shared);
        double2 total;
        if (cr_reduce_last(dot, v3_shared, partials, ticket, &total) && threadIdx.x == 0)
            cr_finish_apply(s, total);
    }
}
