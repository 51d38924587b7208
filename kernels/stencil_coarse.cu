// stencil_coarse.cu: stencilCore version 1.0, coarse grain (report 004, IV.4.B).
//
// One thread per site does the whole site, as the seed's OpenMP loop body did: for each of
// the 8 hops, tmp1 = psi(neighbour) * Li (general xgemm34x44, Li from constant memory)
// and tmp2 += Ulink * tmp1 (xgemm33x34), with tmp1 and tmp2 private 3x4 arrays; the
// neighbour index is read from the displacement table (bufMove); U is the seed buffer
// (8 matrices per site, boundary phases folded in). Blocks of 256 threads (the seed's
// choice; the block size is a launch parameter the autotuner sweeps); the last block
// is guarded, so any volume works. Then out = psi - kappa * tmp2 (g5 sign fused).
//
// Executed work per site: 8 * (12 * 30 + 12 * 24) + 12 * 4 = 5232 flops; global memory
// 8 * 192 (neighbour spinors) + 8 * 144 (links) + 8 * 4 (table) + 192 + 192 = 3104 bytes.
#include "common.cuh"

// Li of hop h, 4x4 row-major (hop order of common.cuh), uploaded from the CPU's
// dirac::reference::li_matrices() after the module is loaded.
__constant__ double2 c_li[8 * 16];

extern "C" __global__ void stencil_v1_0(const double2* __restrict__ psi, double2* __restrict__ out,
                                        const double2* __restrict__ links, const int* __restrict__ move,
                                        double kappa, int g5, int volume)
{
    const int site = blockIdx.x * blockDim.x + threadIdx.x;
    if (site >= volume)
        return;
    double2 tmp1[12];
    double2 tmp2[12];
    for (int e = 0; e < 12; ++e)
        tmp2[e] = c_zero();
#pragma unroll 1
    for (int h = 0; h < 8; ++h) {
        const double2* psi_n = psi + (size_t)move[(size_t)site * 8 + h] * 12;
        const double2* li = c_li + h * 16;
        // xgemm34x44: tmp1 = psi_n * Li
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 3; ++i)
                tmp1[j * 3 + i] = li_general(psi_n, li, i, j);
        // xgemm33x34: tmp2 += U * tmp1
        const double2* u = seed_link(links, site, h);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < 3; ++i)
                tmp2[j * 3 + i] = link_times_column(tmp2[j * 3 + i], u, 3, 1, tmp1, i, j);
    }
    const double2* p = psi + (size_t)site * 12;
    double2* o = out + (size_t)site * 12;
#pragma unroll
    for (int e = 0; e < 12; ++e)
        o[e] = dslash_output(p[e], tmp2[e], kappa, g5, e / 3);
}
