// reduce.cu: the seed's tree reductions (report 004, IV.3, after NVIDIA's "Optimizing
// Parallel Reduction in CUDA"), in one launch. Each block of REDUCE_BLOCK threads reduces
// 2 * REDUCE_BLOCK inputs to one partial sum (the first addition during the load, then a
// shared-memory tree with sequential addressing) into partial[block]. The seed then
// launched a summing pass on the partial sums until one value was left (each launch
// boundary the global barrier); here the blocks climb that same tree themselves
// (`climb`): at each level the last block to finish a group of 2 * REDUCE_BLOCK values
// (an atomic ticket per group, threadfence before it, the classic pattern) sums the
// group exactly as a pass's block did, and the one block that completes the top writes
// the result. Which block does a sum depends on timing, but what it adds and in which
// order does not: the result has the same bits as the multi-pass scheme, every run.
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

// The climb's buffers (src/backend/cuda/core.rs `ReduceBuffers`): the levels above the
// first pass one after another in `upper` (level 1 at 0, then level 2, ...), a ticket per
// group of each level in `tickets` (zero between launches: the last arrival wraps it back
// to 0), and the result (one double, or a double2 as two).
__device__ __forceinline__ double red_ld(const double* p) { return __ldcg(p); }
__device__ __forceinline__ double2 red_ld(const double2* p) { return __ldcg(p); }
__device__ __forceinline__ double red_zero(double) { return 0.0; }
__device__ __forceinline__ double2 red_zero(double2) { return c_zero(); }
__device__ __forceinline__ double red_add(double a, double b) { return a + b; }
__device__ __forceinline__ double2 red_add(double2 a, double2 b) { return c_add(a, b); }

// The block's tree sum of v (re and im as two trees for double2, as the seed's passes),
// for every thread; the shared arrays are free again on return.
__device__ __forceinline__ double climb_sum(double v)
{
    __shared__ double sc[REDUCE_BLOCK];
    const double s = tree_sum(sc, v);
    __syncthreads();
    return s;
}
__device__ __forceinline__ double2 climb_sum(double2 v)
{
    __shared__ double sc_re[REDUCE_BLOCK];
    __shared__ double sc_im[REDUCE_BLOCK];
    const double re = tree_sum(sc_re, v.x);
    const double im = tree_sum(sc_im, v.y);
    __syncthreads();
    return c_make(re, im);
}

// Called by every thread of every block after thread 0 stored this block's first-pass sum
// in level0[blockIdx.x] (gridDim.x values in all). Level by level: thread 0 takes the
// group's ticket (after a threadfence, so that its store is visible first); the last block
// of a group sums the group's values as the seed's sum pass did (the value at k plus the
// one at k + REDUCE_BLOCK, then the tree) into the next level; every other block leaves.
template <class V>
__device__ __forceinline__ void climb(const V* level0, V* upper, unsigned* tickets, V* result)
{
    __shared__ int climb_last;
    const V* in = level0;
    V* out = upper;
    unsigned len = gridDim.x, idx = blockIdx.x;
    while (len > 1) {
        const unsigned chunk = 2 * REDUCE_BLOCK;
        const unsigned groups = (len + chunk - 1) / chunk, group = idx / chunk;
        const unsigned first = group * chunk, members = min(chunk, len - first);
        if (threadIdx.x == 0) {
            __threadfence();
            climb_last = (atomicInc(tickets + group, members - 1) == members - 1);
        }
        __syncthreads();
        const bool last = climb_last;
        __syncthreads(); // climb_last is rewritten on the next level
        if (!last)
            return;
        __threadfence();
        const unsigned k = first + threadIdx.x;
        V v = red_zero(V());
        if (k < len)
            v = red_ld(in + k);
        if (k + REDUCE_BLOCK < len)
            v = red_add(v, red_ld(in + k + REDUCE_BLOCK));
        const V s = climb_sum(v);
        if (threadIdx.x == 0)
            out[group] = s;
        in = out;
        out += groups;
        tickets += groups;
        idx = group;
        len = groups;
    }
    if (threadIdx.x == 0)
        *result = red_ld(in);
}

// A whole reduction: the first pass over n inputs, 2 * REDUCE_BLOCK per block (the input at
// k plus the one at k + REDUCE_BLOCK, `term` giving each input's value: a double, or a
// double2 summed as two trees), the block's tree sum into partial[block], then the climb.
template <class V, class Term>
__device__ __forceinline__ void reduce_all(long long n, Term term, V* partial, V* upper, unsigned* tickets, V* result)
{
    const long long k = (long long)blockIdx.x * (2 * REDUCE_BLOCK) + threadIdx.x;
    V v = red_zero(V());
    if (k < n)
        v = term(k);
    if (k + REDUCE_BLOCK < n)
        v = red_add(v, term(k + REDUCE_BLOCK));
    const V s = climb_sum(v);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
    climb(partial, upper, tickets, result);
}

// |z|^2, the one expression of the double norms (norm2_partial_t, residual_norm2).
__device__ __forceinline__ double norm_term(double2 z) { return z.x * z.x + z.y * z.y; }

// partial[b] = sum |x_k|^2 over block b's 2*REDUCE_BLOCK elements (Z = double2, or float2
// for version 3.0's single-precision fields: widened to double, summed in double).
template <class Z>
__device__ __forceinline__ void norm2_partial_t(const Z* __restrict__ x, int n, double* partial, double* upper,
                                                unsigned* tickets, double* result)
{
    reduce_all(n, [&](long long k) { return norm_term(c_dbl(x[k])); }, partial, upper, tickets, result);
}

// partial[b] = sum conj(x_k) y_k over block b's elements (re and im as two trees).
template <class Z>
__device__ __forceinline__ void dot_partial_t(const Z* __restrict__ x, const Z* __restrict__ y, int n,
                                              double2* partial, double2* upper, unsigned* tickets, double2* result)
{
    reduce_all(
        n, [&](long long k) { return c_conj_mul(c_dbl(x[k]), c_dbl(y[k])); }, partial, upper, tickets, result);
}

// The reductions proper: the first pass and the climb, result in *result.
extern "C" __global__ void norm2_partial(const double2* __restrict__ x, int n, double* partial, double* upper,
                                         unsigned* tickets, double* result)
{
    norm2_partial_t(x, n, partial, upper, tickets, result);
}
extern "C" __global__ void norm2_partial_f(const float2* __restrict__ x, int n, double* partial, double* upper,
                                           unsigned* tickets, double* result)
{
    norm2_partial_t(x, n, partial, upper, tickets, result);
}
extern "C" __global__ void dot_partial(const double2* __restrict__ x, const double2* __restrict__ y, int n,
                                       double2* partial, double2* upper, unsigned* tickets, double2* result)
{
    dot_partial_t(x, y, n, partial, upper, tickets, result);
}
extern "C" __global__ void dot_partial_f(const float2* __restrict__ x, const float2* __restrict__ y, int n,
                                         double2* partial, double2* upper, unsigned* tickets, double2* result)
{
    dot_partial_t(x, y, n, partial, upper, tickets, result);
}

// The reliable update's residual (src/solver/mixed.rs, Space::residual_converted): r = b - r
// (r holding A x on entry) in double, low = r rounded to float, and (r|r) exactly as
// norm2_partial over the new r (the same elements per thread, trees and climb): the seed's
// xscal and xaxpy (which round -Ax + b once, as this does), to_single and norm2 in one
// launch. 56 bytes per element.
__device__ __forceinline__ double residual_one(const double2* __restrict__ b, double2* __restrict__ r,
                                               float2* __restrict__ low, long long k)
{
    const double2 z = c_sub(b[k], r[k]);
    r[k] = z;
    low[k] = c_of<float2>((float)z.x, (float)z.y);
    return norm_term(z);
}

extern "C" __global__ void residual_norm2(const double2* __restrict__ b, double2* __restrict__ r,
                                          float2* __restrict__ low, int n, double* partial, double* upper,
                                          unsigned* tickets, double* result)
{
    reduce_all(n, [&](long long k) { return residual_one(b, r, low, k); }, partial, upper, tickets, result);
}

// Half fields (half.cuh): the first pass over n sites in parity blocks of vh, one site
// (12 complex, decoded in double as the host's linalg::half::dequantize does, q * (norm /
// 32767), and summed in double) per input, 2 * REDUCE_BLOCK sites per block: the values
// summed are the host's to the bit, so norms and dots differ from the CPU backend's only
// by the order of the sum. Then the climb, as for the other reductions.
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
                                           long long vh, double* partial, double* upper, unsigned* tickets,
                                           double* result)
{
    reduce_all(
        n, [&](long long s) { return half_site_dot(q, norm, q, norm, s, vh).x; }, partial, upper, tickets, result);
}

extern "C" __global__ void dot_partial_h(const short2* __restrict__ xq, const float* __restrict__ xn,
                                         const short2* __restrict__ yq, const float* __restrict__ yn, long long n,
                                         long long vh, double2* partial, double2* upper, unsigned* tickets,
                                         double2* result)
{
    reduce_all(
        n, [&](long long s) { return half_site_dot(xq, xn, yq, yn, s, vh); }, partial, upper, tickets, result);
}
