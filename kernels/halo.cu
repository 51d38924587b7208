// halo.cu: the face exchange of version 3.0 on a decomposed lattice. A rank's
// operator is out = [g5] (y + c H inp) with H split into the hops that stay inside its
// sub-lattice (stencil_v3 with split_mask, the interior) and those that cross a face of a
// split direction (here, the exterior); g5 is linear, so out = [g5] (y + c H_int inp) +
// [g5] c H_ext inp. Per split direction mu, around the exchange:
//
// - halo_pack: the spin-projected half spinors (2 spins x 3 colours) of the input's two
//   faces: the lower face (c[mu] = 0) with 1 - g_mu (the backward neighbour's forward
//   hops across its upper edge need exactly that) into send_lo, the upper face
//   (c[mu] = L-1) with 1 + g_mu (the forward neighbour's backward hops) into send_hi. No
//   boundary sign: the receiver applies it (it knows whether its edge is a global one).
// - halo_exterior: for the face sites of the output, out += [g5] c (hop from the ghost):
//   at the upper face the forward hop from recv_hi (the forward neighbour's lower face)
//   with the own link U_mu(x); at the lower face the backward hop from recv_lo (the
//   backward neighbour's upper face) with the ghost link U_mu(x - mu) (ghost_links: the
//   backward neighbour's upper-face links of direction mu, exchanged once at set-up);
//   the sign -1 where the edge is a global antiperiodic one (anti_hi / anti_lo, bit mu).
//   One launch per split direction, one after another on a stream: a corner site gets
//   the hops of each of its directions without races.
// - The fused CR's (y|out) on a decomposed lattice (s, partials non-null): the interior
//   kernel's epilogue sums conj(y) out over every site of its (partial) output and leaves
//   the rank's sum in CR_LOCAL_RE/IM (cr_device.cuh); each exterior launch adds
//   conj(y) x (what it adds to out) over its face sites, with the same single-pass
//   reduction, to CR_LOCAL_RE/IM. By linearity the total is (y|out) of the final output,
//   so no pass of its own is needed after the exterior kernels. With s non-null the
//   exterior, like the interior, does nothing unless the iteration is active.
//
// Modes as stencil_v3 (argument `parity`): full fields (parity < 0; face buffers hold the
// even face sites, then the odd ones) or half fields (pack: the input's parity; exterior:
// the output's parity; face buffers hold one parity). Face layout (v3_core.cuh): element
// k = spin*3 + colour (spin 0, 1 of the half spinor) of face site fcb at k*Fh + fcb, Fh
// = F/2; ghost links element e = row*3 + col of the E = V3_LINK_ELEMS stored elements at
// q*E*Fh + e*Fh + fcb for the ghost site's parity q. Same precisions and link compression (V3_SINGLE, RECONSTRUCT_12, RECONSTRUCT_8) as the
// stencil module they pair with.
#include "common.cuh"
#include "cr_device.cuh"
#include "v3_core.cuh"

// The face site a thread of a halo launch stands for: the lower face's threads first,
// then the upper face's; per face Fh (half fields: parity `parity`) or 2 Fh (full: the
// even face sites, then the odd ones). False for the threads past the end.
struct HaloSite {
    bool upper;
    int p, fcb, fh, site;
    int c[4];
};
__device__ __forceinline__ bool halo_site_of(int mu, int parity, const Dims& d, int t, HaloSite& h)
{
    const bool full = parity < 0;
    h.fh = v3_face_sites(mu, d) / 2;
    const int per_face = full ? 2 * h.fh : h.fh;
    if (t >= 2 * per_face)
        return false;
    h.upper = t >= per_face;
    const int r = h.upper ? t - per_face : t;
    h.p = full ? r / h.fh : parity;
    h.fcb = full ? r % h.fh : r;
    h.site = v3_face_site(mu, h.upper ? d.l[mu] - 1 : 0, h.p, h.fcb, d, h.c);
    return true;
}
__device__ __forceinline__ bool halo_site(int mu, int parity, const Dims& d, HaloSite& h)
{
    return halo_site_of(mu, parity, d, blockIdx.x * blockDim.x + threadIdx.x, h);
}

template <int MU>
__device__ __forceinline__ void halo_pack_site(const real2* __restrict__ psi, size_t vh, int cb, bool upper,
                                               real2* __restrict__ buf, size_t fh, int fcb)
{
    real2 h[2][3];
    if (upper)
        v3_project<MU, false>(psi, nullptr, vh, cb, false, h);
    else
        v3_project<MU, true>(psi, nullptr, vh, cb, false, h);
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 3; ++c)
            buf[(size_t)(r * 3 + c) * fh + fcb] = h[r][c];
}

// One thread per face site of the input (`parity`: the input's parity, < 0 full).
extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK)
    halo_pack(const real2* __restrict__ inp, real2* __restrict__ send_lo, real2* __restrict__ send_hi, int mu,
              int parity, int volume, int lx, int ly, int lz, int lt)
{
    const Dims d = make_dims(lx, ly, lz, lt);
    HaloSite h;
    if (!halo_site(mu, parity, d, h))
        return;
    const bool full = parity < 0;
    const size_t vh = (size_t)volume / 2;
    const real2* psi = inp + (full ? (size_t)h.p * 12 * vh : 0);
    real2* buf = (h.upper ? send_hi : send_lo) + (full ? (size_t)h.p * 6 * h.fh : 0);
    const int cb = h.site >> 1;
    switch (mu) {
    case 0: halo_pack_site<0>(psi, vh, cb, h.upper, buf, h.fh, h.fcb); break;
    case 1: halo_pack_site<1>(psi, vh, cb, h.upper, buf, h.fh, h.fcb); break;
    case 2: halo_pack_site<2>(psi, vh, cb, h.upper, buf, h.fh, h.fcb); break;
    default: halo_pack_site<3>(psi, vh, cb, h.upper, buf, h.fh, h.fcb); break;
    }
}

// The hop of one face site from its ghost half spinor g (element k at g[k*fh]) and link u,
// added as [g5] c * hop to the output spinor at out (stride vh); with y (the dot's y at
// the site, stride vh) non-null, conj(y) x what is added is added to dot.
template <int MU, bool FWD>
__device__ __forceinline__ void halo_add_hop(const real2* __restrict__ g, size_t fh, bool neg, const real2 u[3][3],
                                             real2* __restrict__ out, size_t vh, real cr, int g5,
                                             const real2* __restrict__ y, double2& dot)
{
    real2 h[2][3];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 3; ++c)
            h[r][c] = neg ? c_neg(g[(size_t)(r * 3 + c) * fh]) : g[(size_t)(r * 3 + c) * fh];
    real2 acc[4][3];
    v3_hop_half<MU, FWD, true>(h, u, acc);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            real2 v = c_scale(cr, acc[j][i]);
            if (g5 && j >= 2)
                v = c_neg(v);
            const size_t k = (size_t)(j * 3 + i) * vh;
            out[k] = c_add(out[k], v);
            if (y)
                dot = c_add(dot, c_conj_mul(c_dbl(y[k]), c_dbl(v)));
        }
}

// The exterior hops of one face site (below).
__device__ __forceinline__ void halo_exterior_site(const HaloSite& hs, const real2* __restrict__ recv_lo,
                                                   const real2* __restrict__ recv_hi, real2* __restrict__ out,
                                                   const real2* __restrict__ links,
                                                   const real2* __restrict__ ghost_links, double c, int g5,
                                                   bool full, int mu, int anti_lo, int anti_hi, size_t vh,
                                                   const real2* __restrict__ y, double2& dot)
{
    const bool upper = hs.upper;
    const int p = hs.p, fcb = hs.fcb, fh = hs.fh, cb = hs.site >> 1;
    const size_t at = (full ? (size_t)p * 12 * vh : 0) + cb;
    real2* o = out + at;
    const real2* yk = y ? y + at : nullptr;
    // The ghost site has the other parity; half buffers hold that parity only.
    const size_t gq = full ? (size_t)(1 - p) : 0;
    const real cr = (real)c;
    real2 u[3][3];
    if (upper) {
        const real2* g = recv_hi + gq * 6 * fh + fcb;
        v3_load_link(links + (size_t)p * 4 * V3_LINK_ELEMS * vh, vh, mu, cb, u);
        const bool neg = QCD_ANTIPERIODIC(anti_hi, mu);
        switch (mu) {
        case 0: halo_add_hop<0, true>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        case 1: halo_add_hop<1, true>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        case 2: halo_add_hop<2, true>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        default: halo_add_hop<3, true>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        }
    } else {
        const real2* g = recv_lo + gq * 6 * fh + fcb;
        v3_load_link(ghost_links + (size_t)(1 - p) * V3_LINK_ELEMS * fh, fh, 0, fcb, u);
        const bool neg = QCD_ANTIPERIODIC(anti_lo, mu);
        switch (mu) {
        case 0: halo_add_hop<0, false>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        case 1: halo_add_hop<1, false>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        case 2: halo_add_hop<2, false>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        default: halo_add_hop<3, false>(g, fh, neg, u, o, vh, cr, g5, yk, dot); break;
        }
    }
}

// The exterior kernels' (y|out) part (partials non-null): the launch's sum of the threads'
// dot, added by its last block to the rank's CR_LOCAL_RE/IM (dynamic shared memory
// blockDim.x double2). Every thread calls it.
__device__ __forceinline__ void halo_dot_finish(double2 dot, double* __restrict__ s, double2* __restrict__ partials,
                                                unsigned* __restrict__ ticket)
{
    if (partials) {
        QCD_DYNAMIC_SHARED(double2, halo_shared);
        double2 total;
        if (cr_reduce_last(dot, halo_shared, partials, ticket, &total) && threadIdx.x == 0) {
            s[CR_LOCAL_RE] += total.x;
            s[CR_LOCAL_IM] += total.y;
        }
    }
}

// One thread per face site of the output (`parity`: the output's parity, < 0 full). s
// non-null: nothing unless the fused CR iteration is active; partials (and ticket, y)
// also non-null: the (y|out) part of these hops added to CR_LOCAL_RE/IM (dynamic shared
// memory blockDim.x double2).
extern "C" __global__ void __launch_bounds__(V3_MAX_BLOCK)
    halo_exterior(const real2* __restrict__ recv_lo, const real2* __restrict__ recv_hi, real2* __restrict__ out,
                  const real2* __restrict__ links, const real2* __restrict__ ghost_links, double c, int g5,
                  int parity, int mu, int anti_lo, int anti_hi, int volume, int lx, int ly, int lz, int lt,
                  const real2* __restrict__ y, double* __restrict__ s, double2* __restrict__ partials,
                  unsigned* __restrict__ ticket)
{
    qcd_pdl_wait(); // before the first read (launched with PDL after the interior)
    if (s && !cr_active(s))
        return; // uniform: every thread of every block
    const Dims d = make_dims(lx, ly, lz, lt);
    HaloSite hs;
    double2 dot = c_zero();
    if (halo_site(mu, parity, d, hs))
        halo_exterior_site(hs, recv_lo, recv_hi, out, links, ghost_links, c, g5, parity < 0, mu, anti_lo, anti_hi,
                           (size_t)volume / 2, partials ? y : nullptr, dot);
    halo_dot_finish(dot, s, partials, ticket);
}
