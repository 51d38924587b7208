// reduce.cu: the seed's multi-pass tree reductions (report 004, IV.3, after NVIDIA's
// "Optimizing Parallel Reduction in CUDA"): each block of REDUCE_BLOCK threads reduces
// 2 * REDUCE_BLOCK inputs to one partial sum (the first addition during the load, then a
// shared-memory tree with sequential addressing); the host launches the *_partial kernel
// on the partial sums again until one value is left, each launch boundary being the
// global barrier. The tree depends only on n and REDUCE_BLOCK, never on timing, so the
// result has the same bits on every run.
#include "common.cuh"
#include "half.cuh"

#ifndef REDUCE_BLOCK
#define REDUCE_BLOCK 256
#endif

__device__ __forceinline__ double tree_sum(double* sdata, double v)
{
    const int tid = threadIdx.x;
    sdata[tid] = v;
    __syncthreads();
    for (int stride = REDUCE_BLOCK / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            sdata[tid] += sdata[tid + stride];
        __syncthreads();
    }
    return sdata[0];
}

// partial[b] = sum |x_k|^2 over block b's 2*REDUCE_BLOCK elements (Z = double2, or float2
// for version 3.0's single-precision fields: widened to double, summed in double).
template <class Z>
__device__ __forceinline__ void norm2_partial_t(const Z* __restrict__ x, int n, double* __restrict__ partial)
{
    __shared__ double sdata[REDUCE_BLOCK];
    const int k = blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    double v = 0.0;
    if (k < n) {
        const double2 z = c_dbl(x[k]);
        v = z.x * z.x + z.y * z.y;
    }
    if (k + REDUCE_BLOCK < n) {
        const double2 z = c_dbl(x[k + REDUCE_BLOCK]);
        v += z.x * z.x + z.y * z.y;
    }
    const double s = tree_sum(sdata, v);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
}

// partial[b] = sum conj(x_k) y_k over block b's elements (re and im as two trees).
template <class Z>
__device__ __forceinline__ void dot_partial_t(const Z* __restrict__ x, const Z* __restrict__ y, int n,
                                              double2* __restrict__ partial)
{
    __shared__ double sre[REDUCE_BLOCK];
    __shared__ double sim[REDUCE_BLOCK];
    const int k = blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    double2 v = c_zero();
    if (k < n)
        v = c_conj_mul(c_dbl(x[k]), c_dbl(y[k]));
    if (k + REDUCE_BLOCK < n)
        v = c_add(v, c_conj_mul(c_dbl(x[k + REDUCE_BLOCK]), c_dbl(y[k + REDUCE_BLOCK])));
    const double re = tree_sum(sre, v.x);
    const double im = tree_sum(sim, v.y);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = c_make(re, im);
}

extern "C" __global__ void norm2_partial(const double2* __restrict__ x, int n, double* __restrict__ partial)
{
    norm2_partial_t(x, n, partial);
}
extern "C" __global__ void norm2_partial_f(const float2* __restrict__ x, int n, double* __restrict__ partial)
{
    norm2_partial_t(x, n, partial);
}
extern "C" __global__ void dot_partial(const double2* __restrict__ x, const double2* __restrict__ y, int n,
                                       double2* __restrict__ partial)
{
    dot_partial_t(x, y, n, partial);
}
extern "C" __global__ void dot_partial_f(const float2* __restrict__ x, const float2* __restrict__ y, int n,
                                         double2* __restrict__ partial)
{
    dot_partial_t(x, y, n, partial);
}

// Half fields (half.cuh): the first pass over n sites in parity blocks of vh, one site
// (12 complex, decoded in double as the host's linalg::half::dequantize does, q * (norm /
// 32767), and summed in double) per input, 2 * REDUCE_BLOCK sites per block: the values
// summed are the host's to the bit, so norms and dots differ from the CPU backend's only
// by the order of the sum. The later passes are sum_partial / sum2_partial.
__device__ __forceinline__ double2 half_site_dot(const short2* __restrict__ xq, const float* __restrict__ xn,
                                                 const short2* __restrict__ yq, const float* __restrict__ yn,
                                                 long long s, long long vh)
{
    const size_t b = half_base(s, vh);
    const double xs = (double)xn[s] / 32767.0, ys = (double)yn[s] / 32767.0;
    double2 v = c_zero();
#pragma unroll
    for (int k = 0; k < 12; ++k) {
        const short2 x = xq[(size_t)k * vh + b], y = yq[(size_t)k * vh + b];
        v = c_add(v, c_conj_mul(c_make((double)x.x * xs, (double)x.y * xs), c_make((double)y.x * ys, (double)y.y * ys)));
    }
    return v;
}

extern "C" __global__ void norm2_partial_h(const short2* __restrict__ q, const float* __restrict__ norm, long long n,
                                           long long vh, double* __restrict__ partial)
{
    __shared__ double sdata[REDUCE_BLOCK];
    const long long s = (long long)blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    double v = 0.0;
    if (s < n)
        v = half_site_dot(q, norm, q, norm, s, vh).x;
    if (s + REDUCE_BLOCK < n)
        v += half_site_dot(q, norm, q, norm, s + REDUCE_BLOCK, vh).x;
    const double t = tree_sum(sdata, v);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = t;
}

extern "C" __global__ void dot_partial_h(const short2* __restrict__ xq, const float* __restrict__ xn,
                                         const short2* __restrict__ yq, const float* __restrict__ yn, long long n,
                                         long long vh, double2* __restrict__ partial)
{
    __shared__ double sre[REDUCE_BLOCK];
    __shared__ double sim[REDUCE_BLOCK];
    const long long s = (long long)blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    double2 v = c_zero();
    if (s < n)
        v = half_site_dot(xq, xn, yq, yn, s, vh);
    if (s + REDUCE_BLOCK < n)
        v = c_add(v, half_site_dot(xq, xn, yq, yn, s + REDUCE_BLOCK, vh));
    const double re = tree_sum(sre, v.x);
    const double im = tree_sum(sim, v.y);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = c_make(re, im);
}

// The later passes: out[b] = sum of block b's 2*REDUCE_BLOCK partial sums.
extern "C" __global__ void sum_partial(const double* __restrict__ in, int n, double* __restrict__ out)
{
    __shared__ double sdata[REDUCE_BLOCK];
    const int k = blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    double v = 0.0;
    if (k < n)
        v = in[k];
    if (k + REDUCE_BLOCK < n)
        v += in[k + REDUCE_BLOCK];
    const double s = tree_sum(sdata, v);
    if (threadIdx.x == 0)
        out[blockIdx.x] = s;
}

extern "C" __global__ void sum2_partial(const double2* __restrict__ in, int n, double2* __restrict__ out)
{
    __shared__ double sre[REDUCE_BLOCK];
    __shared__ double sim[REDUCE_BLOCK];
    const int k = blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    double2 v = c_zero();
    if (k < n)
        v = in[k];
    if (k + REDUCE_BLOCK < n)
        v = c_add(v, in[k + REDUCE_BLOCK]);
    const double re = tree_sum(sre, v.x);
    const double im = tree_sum(sim, v.y);
    if (threadIdx.x == 0)
        out[blockIdx.x] = c_make(re, im);
}
