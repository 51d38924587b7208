// stencil_fine.cu: stencilCore versions 1.1 to 1.6.1, fine grain (report 004, IV.4.C-H).
//
// 12 threads per site, thread e = j*3 + i owning element (colour i, spin j) of the 3x4
// results; per hop, tmp1 = psi(neighbour) * Li (xgemm34x44) into shared memory, a
// barrier, then tmp2 += Ulink * tmp1 (xgemm33x34) reading a column of tmp1 written by
// three other threads. A block holds `sites_per_block` sites (a run-time argument):
//   1.1  one site per block of 16 threads (4 idle), the seed's first fine-grain version;
//   1.2  `multiple` sites per block of 12 * multiple threads (same code, other geometry);
// and each later version adds one compile-time switch to the one before, as the seed's
// folders did:
//   LI_SPARSE              1.3   hand-written products of the sparse Li (common.cuh)
//   NEIGHBOUR_FROM_COORDS  1.4   neighbours from the coordinates, no bufMove table
//   FEWER_BARRIERS         1.5   reordered products, fewer barriers (counted below)
//   U_REORDERED            1.6   U in the 1.6 layout (common.cuh, v16_offset) ...
//   U_IN_SHARED            1.6   ... staged in shared memory; 1.6.1 reads it from global
// Every thread of a block reaches every barrier; threads without a site (the idle 4 of
// 1.1, or past the end of the lattice in the last block) only skip the arithmetic.
//
// Barriers per block: 1.1-1.4: 2 per hop = 16; 1.5 and 1.6.1: 8; 1.6: 9 (one more to
// stage U). The seed reports 17 before and 13 after its reordering; its barrier-free
// shared tmp2 initialisation and output steps are not described, so the counts differ.
#include "common.cuh"

#ifndef LI_SPARSE
#define LI_SPARSE 0
#endif
#ifndef NEIGHBOUR_FROM_COORDS
#define NEIGHBOUR_FROM_COORDS 0
#endif
#ifndef FEWER_BARRIERS
#define FEWER_BARRIERS 0
#endif
#ifndef U_REORDERED
#define U_REORDERED 0
#endif
#ifndef U_IN_SHARED
#define U_IN_SHARED 0
#endif

#if FEWER_BARRIERS
#define TMP1_BUFFERS 2
#else
#define TMP1_BUFFERS 1
#endif

#if !LI_SPARSE
// Li of hop h, 4x4 row-major, uploaded from dirac::reference::li_matrices().
__constant__ double2 c_li[8 * 16];
#endif

// tmp1 = psi(neighbour) * Li, element (i, j), for hop h.
__device__ __forceinline__ double2 hop_spin_product(const double2* __restrict__ psi, const int* __restrict__ move,
                                                    int site, const int* c, const Dims& d, int h, int i, int j)
{
#if NEIGHBOUR_FROM_COORDS
    const int mu = hop_mu(h);
    const int n = neighbour_index(site, c[mu], mu, hop_forward(h), d);
#else
    const int n = move[(size_t)site * 8 + h];
#endif
    const double2* psi_n = psi + (size_t)n * 12;
#if LI_SPARSE
    return li_sparse(psi_n, h, i, j);
#else
    return li_general(psi_n, c_li + h * 16, i, j);
#endif
}

// acc + (Ulink * tmp1)(i, j) for hop h.
__device__ __forceinline__ double2 hop_link_product(double2 acc, const double2* __restrict__ links,
                                                    const double2* ustage, int stage_pairs, int pair0, int site,
                                                    int volume, int h, const double2* t1, int i, int j)
{
#if U_REORDERED
    const int dir = h & 3, updown = h >> 2;
#if U_IN_SHARED
    const double2* u = ustage + ((size_t)(dir * stage_pairs + site / 2 - pair0) * 2 + updown) * 18 + (site & 1) * 3;
#else
    const double2* u = links + v16_offset(dir, (volume + 1) / 2, site, updown, 0, 0);
#endif
    // transposed: U(i, k) at i + 6 k (columns of the two sites of a pair interleaved)
    return link_times_column(acc, u, 1, 6, t1, i, j);
#else
    return link_times_column(acc, seed_link(links, site, h), 3, 1, t1, i, j);
#endif
}

extern "C" __global__ void stencil_fine(const double2* __restrict__ psi, double2* __restrict__ out,
                                        const double2* __restrict__ links, const int* __restrict__ move,
                                        double kappa, int g5, int volume, int lx, int ly, int lz, int lt,
                                        int sites_per_block)
{
    QCD_DYNAMIC_SHARED(double2, smem);
    const int spb = sites_per_block;
    const int g = threadIdx.x / 12, e = threadIdx.x % 12;
    const int i = e % 3, j = e / 3;
    const int site = blockIdx.x * spb + g;
    const bool active = g < spb && site < volume;
    // shared: tmp1[spb][TMP1_BUFFERS][12], tmp2[spb][12], then (1.6) the staged links
    double2* tmp1 = smem + (size_t)g * 12 * TMP1_BUFFERS;
    double2* tmp2 = smem + (size_t)spb * 12 * TMP1_BUFFERS + g * 12;
    const Dims d = make_dims(lx, ly, lz, lt);
    int c[4] = {0, 0, 0, 0};
#if NEIGHBOUR_FROM_COORDS
    if (active)
        site_coords(site, d, c);
#endif
    if (active)
        tmp2[e] = c_zero();

    const double2* ustage = 0;
    const int stage_pairs = spb / 2 + 1;
    const int first = blockIdx.x * spb;
    const int pair0 = first / 2;
#if U_IN_SHARED
    {
        // Stage the links of the block's sites: per direction, whole pairs from the one
        // holding the first site to the one holding the last, a contiguous run of the 1.6
        // layout copied by consecutive threads.
        double2* stage = smem + (size_t)spb * 12 * (TMP1_BUFFERS + 1);
        const int last = min(first + spb, volume) - 1;
        const int count = last / 2 - pair0 + 1;
        const int pairs = (volume + 1) / 2;
        for (int k = threadIdx.x; k < 4 * count * 36; k += blockDim.x) {
            const int dir = k / (count * 36), r = k % (count * 36);
            stage[dir * stage_pairs * 36 + r] = links[((size_t)dir * pairs + pair0) * 36 + r];
        }
        ustage = stage;
    }
    __syncthreads(); // U staged
#endif

#if !FEWER_BARRIERS
    // Versions 1.1-1.4: the seed's order, hop by hop: 2 barriers per hop, 16 in all.
#pragma unroll
    for (int h = 0; h < 8; ++h) {
        if (active)
            tmp1[e] = hop_spin_product(psi, move, site, c, d, h, i, j);
        __syncthreads(); // tmp1 complete
        if (active)
            tmp2[e] = hop_link_product(tmp2[e], links, ustage, stage_pairs, pair0, site, volume, h, tmp1, i, j);
        __syncthreads(); // tmp1 free again
    }
#else
    // Version 1.5 and later: the products are reordered so that the spin product of hop h
    // runs next to the colour product of hop h-1, with tmp1 double-buffered: writing
    // buffer h%2 while reading buffer (h-1)%2 needs no barrier in between, and one barrier
    // per step orders both. 8 barriers in all.
    if (active)
        tmp1[e] = hop_spin_product(psi, move, site, c, d, 0, i, j);
    __syncthreads();
#pragma unroll
    for (int h = 1; h < 8; ++h) {
        if (active) {
            tmp1[(h & 1) * 12 + e] = hop_spin_product(psi, move, site, c, d, h, i, j);
            tmp2[e] = hop_link_product(tmp2[e], links, ustage, stage_pairs, pair0, site, volume, h - 1,
                                       tmp1 + ((h - 1) & 1) * 12, i, j);
        }
        __syncthreads();
    }
    if (active)
        tmp2[e] = hop_link_product(tmp2[e], links, ustage, stage_pairs, pair0, site, volume, 7, tmp1 + 12, i, j);
#endif

    if (active) {
        const size_t k = (size_t)site * 12 + e;
        out[k] = dslash_output(psi[k], tmp2[e], kappa, g5, j);
    }
}
