// mg_coarse.cu: multigrid's coarse levels on the GPU (src/backend/cuda/mg): the coarse
// operator as a dense nearest-neighbour stencil, the restriction and prolongation through
// a prolongator, the gather and scatter between a full field and one parity, and the
// BLAS-1 updates of coarse fields (the reductions are reduce.cu's).
//
// A coarse field holds dof complex numbers a site, site after site (full fields in the
// lexicographic order of the coarse lattice, half fields in checkerboard order: the
// layout of src/dirac/coarse). Matrices (X(x), Y_d(x), X(x)^-1) are stored transposed,
// column j of a matrix at j * dof: the threads of a site, one per row, read consecutive
// numbers. Every kernel exists for double2 (suffix _d) and float2 (_f); sums in the
// field's precision.
#include "common.cuh"

// out[i] = a_site * S(i) in_site[i] + a_hop * sum_d Y_d(i) in_hop[nb[i][d]] for the n
// sites i of the output field, one thread per (site, row). S: site_m (X or X^-1, or null
// for none); the hop sum only when in_hop is not null. A site's matrices are those of
// the lattice site row_site[i] (null: i itself, full fields); nb holds each output site's
// 8 neighbours as indices into in_hop's field.
template <class Z>
__device__ void coarse_apply(Z* __restrict__ out, const Z* __restrict__ in_site, const Z* __restrict__ in_hop,
                             const Z* __restrict__ site_m, const Z* __restrict__ hop_m, const int* __restrict__ row_site,
                             const int* __restrict__ nb, int n, int dof, double a_hop)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * dof)
        return;
    const int i = (int)(t / dof);
    const int row = (int)(t % dof);
    const long long ms = row_site ? row_site[i] : i;
    const long long d2 = (long long)dof * dof;
    Z acc = c_of<Z>(0, 0);
    if (site_m && in_site) {
        const Z* m = site_m + ms * d2 + row;
        const Z* v = in_site + (long long)i * dof;
        for (int j = 0; j < dof; ++j)
            acc = c_madd(acc, m[(long long)j * dof], v[j]);
    }
    if (in_hop) {
        Z h = c_of<Z>(0, 0);
        for (int d = 0; d < 8; ++d) {
            const Z* m = hop_m + (ms * 8 + d) * d2 + row;
            const Z* v = in_hop + (long long)nb[i * 8 + d] * dof;
            for (int j = 0; j < dof; ++j)
                h = c_madd(h, m[(long long)j * dof], v[j]);
        }
        acc = c_add(acc, c_scale((real_of<Z>)a_hop, h));
    }
    out[t] = acc;
}

// out[a][s * nvec + v] = sum over the members m of aggregate a and the numbers k of
// chirality s of conj(V[a][m][k][v]) fine[base[a][m] + k * stride]: one thread per coarse
// number. V holds, per aggregate and member, fine_dof rows of nvec numbers (v fastest).
template <class Z>
__device__ void mg_restrict(const Z* __restrict__ fine, Z* __restrict__ out, const Z* __restrict__ V,
                            const long long* __restrict__ base, long long stride, int members, int fine_dof,
                            int nvec, int aggregates)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int cd = 2 * nvec;
    if (t >= (long long)aggregates * cd)
        return;
    const int a = (int)(t / cd);
    const int o = (int)(t % cd);
    const int s = o / nvec, v = o % nvec, h = fine_dof / 2;
    Z acc = c_of<Z>(0, 0);
    for (int m = 0; m < members; ++m) {
        const long long am = (long long)a * members + m;
        const Z* f = fine + base[am];
        const Z* vm = V + am * fine_dof * nvec + v;
        for (int k = s * h; k < (s + 1) * h; ++k) {
            const Z w = vm[(long long)k * nvec];
            const Z x = f[k * stride];
            acc = c_of<Z>(acc.x + w.x * x.x + w.y * x.y, acc.y + w.x * x.y - w.y * x.x);
        }
    }
    out[t] = acc;
}

// fine[base[a][m] + k * stride] = sum_v V[a][m][k][v] coarse[a][s(k) * nvec + v], s(k)
// the chirality of row k: one thread per fine number.
template <class Z>
__device__ void mg_prolong(const Z* __restrict__ coarse, Z* __restrict__ fine, const Z* __restrict__ V,
                           const long long* __restrict__ base, long long stride, int members, int fine_dof, int nvec,
                           int aggregates)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)aggregates * members * fine_dof)
        return;
    const long long am = t / fine_dof;
    const int k = (int)(t % fine_dof);
    const int a = (int)(am / members);
    const int s = k / (fine_dof / 2);
    const Z* vm = V + (am * fine_dof + k) * nvec;
    const Z* c = coarse + (long long)a * 2 * nvec + s * nvec;
    Z acc = c_of<Z>(0, 0);
    for (int v = 0; v < nvec; ++v)
        acc = c_madd(acc, vm[v], c[v]);
    fine[base[am] + k * stride] = acc;
}

// Half field <-> full field: half[i] = full[sites[i]] (to_half) or the reverse, dof
// numbers a site.
template <class Z>
__device__ void coarse_pick(Z* __restrict__ full, Z* __restrict__ half, const int* __restrict__ sites, int n, int dof,
                            int to_half)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)n * dof)
        return;
    const long long i = t / dof, j = t % dof;
    const long long f = (long long)sites[i] * dof + j;
    if (to_half)
        half[t] = full[f];
    else
        full[f] = half[t];
}

// y = y + a x (xpay = 0) or y = x + a y (xpay = 1) over n complex numbers.
template <class Z>
__device__ void coarse_axpy(const Z* __restrict__ x, Z* __restrict__ y, double a_re, double a_im, long long n,
                            int xpay)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    const Z a = c_of<Z>((real_of<Z>)a_re, (real_of<Z>)a_im);
    y[k] = xpay ? c_madd(x[k], a, y[k]) : c_madd(y[k], a, x[k]);
}

// Several fields at once for GCR's classical Gram-Schmidt (src/solver/gcr.rs through
// Space::dots and Space::axpys): up to MULTI_MAX fields x_j a launch, their addresses as
// arguments (null past m), n complex numbers each, sums and updates in double.
#define MULTI_MAX 8
#define MULTI_BLOCK 128 // the host launches coarse_dots and coarse_dots_finish with this many threads

// The block's tree sums of v[j] for j < m (sequential addressing in shared memory), left
// in s[j][0].
__device__ __forceinline__ void multi_tree(double2 (*s)[MULTI_BLOCK], const double2* v, int m)
{
    const int tid = threadIdx.x;
    for (int j = 0; j < m; ++j)
        s[j][tid] = v[j];
    __syncthreads();
    for (int stride = MULTI_BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            for (int j = 0; j < m; ++j)
                s[j][tid] = c_add(s[j][tid], s[j][tid + stride]);
        __syncthreads();
    }
}

// partial[j * gridDim.x + b] = block b's share of (x_j | y) = sum_k conj(x_j[k]) y[k]
// (a grid-stride loop: y read once for all j); the order of every sum is fixed by the
// grid, so the result has the same bits every run.
template <class Z>
__device__ __forceinline__ void coarse_dots(const Z* const* xs, const Z* __restrict__ y, int m, long long n,
                                            double2* __restrict__ partial)
{
    double2 acc[MULTI_MAX];
#pragma unroll
    for (int j = 0; j < MULTI_MAX; ++j)
        acc[j] = c_zero();
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x) {
        const double2 yk = c_dbl(y[k]);
#pragma unroll
        for (int j = 0; j < MULTI_MAX; ++j)
            if (j < m)
                acc[j] = c_add(acc[j], c_conj_mul(c_dbl(xs[j][k]), yk));
    }
    __shared__ double2 s[MULTI_MAX][MULTI_BLOCK];
    multi_tree(s, acc, m);
    if (threadIdx.x < m)
        partial[(long long)threadIdx.x * gridDim.x + blockIdx.x] = s[threadIdx.x][0];
}

// result[j] = sum_b partial[j * blocks + b] for the m = gridDim.x fields: block j.
extern "C" __global__ void coarse_dots_finish(const double2* __restrict__ partial, int blocks,
                                              double2* __restrict__ result)
{
    const int j = blockIdx.x;
    double2 t = c_zero();
    for (int b = threadIdx.x; b < blocks; b += MULTI_BLOCK)
        t = c_add(t, partial[(long long)j * blocks + b]);
    __shared__ double2 s[1][MULTI_BLOCK];
    multi_tree(s, &t, 1);
    if (threadIdx.x == 0)
        result[j] = s[0][0];
}

// y[k] = y[k] + sum_j a_j x_j[k] (in double, rounded once to y's precision).
template <class Z>
__device__ __forceinline__ void coarse_axpys(const Z* const* xs, Z* __restrict__ y, const double* a_re, const double* a_im, int m,
                             long long n)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    double2 acc = c_dbl(y[k]);
#pragma unroll
    for (int j = 0; j < MULTI_MAX; ++j)
        if (j < m)
            acc = c_madd(acc, c_make(a_re[j], a_im[j]), c_dbl(xs[j][k]));
    y[k] = c_of<Z>((real_of<Z>)acc.x, (real_of<Z>)acc.y);
}

#define MULTI_PTRS(Z) const Z *x0, const Z *x1, const Z *x2, const Z *x3, const Z *x4, const Z *x5, const Z *x6, \
                      const Z *x7
#define MULTI_LIST { x0, x1, x2, x3, x4, x5, x6, x7 }

#define MG_INSTANCES(Z, S)                                                                                        \
    extern "C" __global__ void coarse_apply_##S(Z* out, const Z* in_site, const Z* in_hop, const Z* site_m,      \
                                                const Z* hop_m, const int* row_site, const int* nb, int n, int dof, \
                                                double a_hop)                                                    \
    {                                                                                                            \
        coarse_apply(out, in_site, in_hop, site_m, hop_m, row_site, nb, n, dof, a_hop);                          \
    }                                                                                                            \
    extern "C" __global__ void mg_restrict_##S(const Z* fine, Z* out, const Z* V, const long long* base,         \
                                               long long stride, int members, int fine_dof, int nvec,           \
                                               int aggregates)                                                  \
    {                                                                                                            \
        mg_restrict(fine, out, V, base, stride, members, fine_dof, nvec, aggregates);                            \
    }                                                                                                            \
    extern "C" __global__ void mg_prolong_##S(const Z* coarse, Z* fine, const Z* V, const long long* base,       \
                                              long long stride, int members, int fine_dof, int nvec,            \
                                              int aggregates)                                                   \
    {                                                                                                            \
        mg_prolong(coarse, fine, V, base, stride, members, fine_dof, nvec, aggregates);                          \
    }                                                                                                            \
    extern "C" __global__ void coarse_pick_##S(Z* full, Z* half, const int* sites, int n, int dof, int to_half)  \
    {                                                                                                            \
        coarse_pick(full, half, sites, n, dof, to_half);                                                         \
    }                                                                                                            \
    extern "C" __global__ void coarse_axpy_##S(const Z* x, Z* y, double a_re, double a_im, long long n,         \
                                               int xpay)                                                        \
    {                                                                                                            \
        coarse_axpy(x, y, a_re, a_im, n, xpay);                                                                  \
    }                                                                                                            \
    extern "C" __global__ void coarse_dots_##S(MULTI_PTRS(Z), const Z* y, int m, long long n, double2* partial) \
    {                                                                                                            \
        const Z* xs[MULTI_MAX] = MULTI_LIST;                                                                     \
        coarse_dots(xs, y, m, n, partial);                                                                       \
    }                                                                                                            \
    extern "C" __global__ void coarse_axpys_##S(MULTI_PTRS(Z), Z* y, double r0, double r1, double r2, double r3, \
                                                double r4, double r5, double r6, double r7, double i0, double i1, \
                                                double i2, double i3, double i4, double i5, double i6, double i7, \
                                                int m, long long n)                                              \
    {                                                                                                            \
        const Z* xs[MULTI_MAX] = MULTI_LIST;                                                                     \
        const double re[MULTI_MAX] = {r0, r1, r2, r3, r4, r5, r6, r7};                                           \
        const double im[MULTI_MAX] = {i0, i1, i2, i3, i4, i5, i6, i7};                                           \
        coarse_axpys(xs, y, re, im, m, n);                                                                       \
    }

MG_INSTANCES(double2, d)
MG_INSTANCES(float2, f)
