// stencil_v3.cu: version 3.0, the Wilson dslash written for the memory-bandwidth limit.
//
// out = psi - kappa * sum_mu [ (1 - g_mu) U_mu(x) psi(x+mu) + (1 + g_mu) U_mu(x-mu)^+ psi(x-mu) ]
// (times g5 = diag(1,1,-1,-1) for Operator G5D, fused in the store), one thread per site,
// the block size a launch parameter (the backend's `coarse_block`, capped at V3_MAX_BLOCK).
//
// - Spin projection (DeGrand-Rossi, g_mu = [[0, A],[A^+, 0]]): a forward hop projects the
//   neighbour to the half spinor h = psi_up - A psi_dn, multiplies its two colour vectors by
//   U_mu(x) and rebuilds the lower half as -A^+ (U h); a backward hop uses h = psi_up +
//   A psi_dn, U_mu(x-mu)^+ and +A^+ (U^+ h). A has one entry i^p per row, so the
//   projection is one complex addition per element. Executed flops per site: 8 hops x
//   (12 projection + 132 for two SU(3) mat-vecs) + 7 x 24 accumulation (the first hop
//   writes) + 48 for psi - kappa*hop = 1368, QUDA's fused count.
// - Gauge field stored once: 4 links per site (the canonical field), the backward hop reads
//   the neighbour's U_mu(x-mu) and applies its dagger in registers.
// - Fermion boundary phases from the coordinates (bit mu of antiperiodic_mask: -1 across
//   the edge in direction mu), applied to the half spinor as a sign.
// - Layout (structure of arrays, double2 per complex): spinor element k = spin*3 + colour
//   of site s at k*V + s; link element e = row*3 + col of U_mu(s) at (mu*9 + e)*V + s. So
//   consecutive threads (sites) read consecutive 16-byte words: every load is coalesced.
//   build_v3_links (layout.cu) builds the link array on the device; the backend permutes
//   spinors to this order on upload and back on download.
// - RECONSTRUCT_12=1: only rows 0 and 1 of each link are read, row 2 = conj(row0 x row1)
//   is rebuilt in registers (SU(3) fields only).
#include "common.cuh"

#ifndef V3_MAX_BLOCK
#define V3_MAX_BLOCK 512
#endif
#ifndef RECONSTRUCT_12
#define RECONSTRUCT_12 0
#endif

// A_mu of g_mu = [[0, A],[A^+, 0]]: row r has the single entry i^v3_ph(mu, r) in column
// v3_col(mu, r). x: [[0, i],[i, 0]], y: [[0, -1],[1, 0]], z: [[i, 0],[0, -i]], t: 1.
__device__ __forceinline__ constexpr int v3_col(int mu, int r) { return mu < 2 ? 1 - r : r; }
__device__ __forceinline__ constexpr int v3_ph(int mu, int r)
{
    return mu == 0 ? 1 : mu == 1 ? (r == 0 ? 2 : 0) : mu == 2 ? (r == 0 ? 1 : 3) : 0;
}

// U(i, k) of the link of direction mu at site s, 3x3 in registers.
__device__ __forceinline__ void v3_load_link(const double2* __restrict__ links, size_t vol, int mu, int s,
                                             double2 u[3][3])
{
    const double2* p = links + (size_t)mu * 9 * vol + s;
    const int rows = RECONSTRUCT_12 ? 2 : 3;
#pragma unroll
    for (int i = 0; i < rows; ++i)
#pragma unroll
        for (int k = 0; k < 3; ++k)
            u[i][k] = p[(i * 3 + k) * vol];
#if RECONSTRUCT_12
    su3_third_row(u);
#endif
}

// One hop of direction MU (forward or backward) from neighbour site n, whose link is the
// one at site ls (x for forward, x - mu for backward), with sign `neg` for an antiperiodic
// crossing. FIRST: write acc instead of accumulating.
template <int MU, bool FWD, bool FIRST>
__device__ __forceinline__ void v3_hop(const double2* __restrict__ psi, const double2* __restrict__ links,
                                       size_t vol, int n, int ls, bool neg, double2 acc[4][3])
{
    constexpr int c0 = v3_col(MU, 0), c1 = v3_col(MU, 1);
    constexpr int p0 = v3_ph(MU, 0), p1 = v3_ph(MU, 1);
    // Half spinor h_r = psi_r -/+ i^p_r psi_{2 + c_r}.
    double2 h[2][3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const double2 u0 = psi[(size_t)c * vol + n];
        const double2 u1 = psi[(size_t)(3 + c) * vol + n];
        const double2 a0 = c_ipow<p0>(psi[(size_t)((2 + c0) * 3 + c) * vol + n]);
        const double2 a1 = c_ipow<p1>(psi[(size_t)((2 + c1) * 3 + c) * vol + n]);
        h[0][c] = FWD ? c_sub(u0, a0) : c_add(u0, a0);
        h[1][c] = FWD ? c_sub(u1, a1) : c_add(u1, a1);
        if (neg) {
            h[0][c] = c_neg(h[0][c]);
            h[1][c] = c_neg(h[1][c]);
        }
    }
    double2 u[3][3];
    v3_load_link(links, vol, MU, ls, u);
    // w_r = U h_r (forward) or U^+ h_r (backward): 2 x 66 flops.
    double2 w[2][3];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            if (FWD) {
                double2 s = c_mul(u[i][0], h[r][0]);
                s = c_madd(s, u[i][1], h[r][1]);
                w[r][i] = c_madd(s, u[i][2], h[r][2]);
            } else {
                double2 s = c_conj_mul(u[0][i], h[r][0]);
                s = c_add(s, c_conj_mul(u[1][i], h[r][1]));
                w[r][i] = c_add(s, c_conj_mul(u[2][i], h[r][2]));
            }
        }
    // Upper half += w; lower half: component c_r gets -/+ conj(i^p_r) w_r.
    constexpr int q0 = (4 - p0) & 3, q1 = (4 - p1) & 3;
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const double2 l0 = c_ipow<q0>(w[0][c]);
        const double2 l1 = c_ipow<q1>(w[1][c]);
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

// Forward and backward hop of direction MU.
template <int MU, bool FIRST>
__device__ __forceinline__ void v3_direction(const double2* __restrict__ psi, const double2* __restrict__ links,
                                             size_t vol, int site, const int c[4], const Dims& d, int mask,
                                             double2 acc[4][3])
{
    const int up = neighbour_index(site, c[MU], MU, true, d);
    const int dn = neighbour_index(site, c[MU], MU, false, d);
    const bool anti = QCD_ANTIPERIODIC(mask, MU);
    v3_hop<MU, true, FIRST>(psi, links, vol, up, site, anti && c[MU] == d.l[MU] - 1, acc);
    v3_hop<MU, false, false>(psi, links, vol, dn, dn, anti && c[MU] == 0, acc);
}

extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK)
    stencil_v3(const double2* __restrict__ psi, double2* __restrict__ out, const double2* __restrict__ links,
               double kappa, int g5, int volume, int lx, int ly, int lz, int lt, int antiperiodic_mask)
{
    const int site = blockIdx.x * blockDim.x + threadIdx.x;
    if (site >= volume)
        return;
    const size_t vol = (size_t)volume;
    const Dims d = make_dims(lx, ly, lz, lt);
    int c[4];
    site_coords(site, d, c);
    double2 acc[4][3];
    v3_direction<3, true>(psi, links, vol, site, c, d, antiperiodic_mask, acc);
    v3_direction<0, false>(psi, links, vol, site, c, d, antiperiodic_mask, acc);
    v3_direction<1, false>(psi, links, vol, site, c, d, antiperiodic_mask, acc);
    v3_direction<2, false>(psi, links, vol, site, c, d, antiperiodic_mask, acc);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            const size_t k = (size_t)(j * 3 + i) * vol + site;
            out[k] = dslash_output(psi[k], acc[j][i], kappa, g5, j);
        }
}
