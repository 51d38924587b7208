// stencil_split.cu: stencilCore version 2.0, one kernel per product (report 004, IV.4.I).
//
// Instead of one stencilCore kernel, the host launches, for each hop h in the seed's order,
// xgemm34x44 (tmp1 = psi(neighbour) * Li, into a global intermediate buffer) and then
// xgemm33x34 (tmp2 = or += Ulink * tmp1, into a second global buffer), and finally
// dslash_combine (out = psi - kappa * tmp2): 17 launches per operator application. Each
// kernel is fine grain (one thread per complex element of a site's 3x4 result) and builds
// on 1.5: sparse Li, neighbours from the coordinates, the seed's link buffer. Every launch
// is guarded, so any volume works.
//
// Per site: xgemm34x44 24 flops, 384 bytes (psi neighbour read, tmp1 written);
// xgemm33x34 288 flops and 720 bytes (264 and 528 for the first hop, which writes tmp2
// instead of accumulating); dslash_combine 48 flops, 576 bytes. In all 2520 flops and
// 9216 bytes per site.
#include "common.cuh"

extern "C" __global__ void xgemm34x44(const double2* __restrict__ psi, double2* __restrict__ tmp1, int h,
                                      int volume, int lx, int ly, int lz, int lt)
{
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)volume * 12)
        return;
    const int site = (int)(k / 12), e = (int)(k % 12);
    const Dims d = make_dims(lx, ly, lz, lt);
    int c[4];
    site_coords(site, d, c);
    const int mu = hop_mu(h);
    const int n = neighbour_index(site, c[mu], mu, hop_forward(h), d);
    tmp1[k] = li_sparse(psi + (size_t)n * 12, h, e % 3, e / 3);
}

extern "C" __global__ void xgemm33x34(const double2* __restrict__ links, const double2* __restrict__ tmp1,
                                      double2* __restrict__ tmp2, int h, int accumulate, int volume)
{
    const size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)volume * 12)
        return;
    const int site = (int)(k / 12), e = (int)(k % 12);
    const int i = e % 3, j = e / 3;
    const double2* u = seed_link(links, site, h);
    const double2* t1 = tmp1 + (size_t)site * 12;
    double2 acc;
    if (accumulate) {
        acc = link_times_column(tmp2[k], u, 3, 1, t1, i, j);
    } else {
        acc = c_mul(u[i * 3], t1[j * 3]);
        acc = c_madd(acc, u[i * 3 + 1], t1[j * 3 + 1]);
        acc = c_madd(acc, u[i * 3 + 2], t1[j * 3 + 2]);
    }
    tmp2[k] = acc;
}

extern "C" __global__ void dslash_combine(const double2* __restrict__ psi, const double2* __restrict__ tmp2,
                                          double2* __restrict__ out, double kappa, int g5, int n)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        out[k] = dslash_output(psi[k], tmp2[k], kappa, g5, (k % 12) / 3);
}
