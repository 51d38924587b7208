// cr_device.cuh: what the fused CR iteration's kernels share (kernels/cr_fused.cu and the
// dot epilogue of stencil_v3.cu): the device-resident scalar block and the single-pass
// deterministic reduction.
//
// Scalars: one array of CR_SCALARS doubles (indices below; the same numbers are in
// src/cuda/fused.rs). The kernels of one iteration are
//   xr    (if active) x += alpha p, r -= alpha Ap, nr = (r|r); iter += 1, hist[iter] = nr
//   apply (if active) Ar = A r with rar_new = (r|Ar); beta = rar_new / rar, rar = rar_new
//   p     (if active) p = r + beta p, Ap = Ar + beta Ap, apap = (Ap|Ap);
//         alpha = conj(rar) / apap; active = nr > eps && iter < max_iter && nr finite
// so every kernel of an iteration reads the same `active` (only the last kernel sets it),
// and the host needs to read the block only when it wants to check convergence.
//
// Decomposed lattice (CR_SPLIT set): the last block stores the rank's sum in CR_LOCAL_RE/IM
// (xr: its nr in CR_LOCAL_NR) instead; the host then all-gathers the three doubles
// CR_LOCAL_RE, CR_LOCAL_IM, CR_LOCAL_NR from every rank (NCCL, or device copies) and
// cr_global (cr_fused.cu) adds them in rank order and makes the same update: the same bits
// on every rank. Two all-gathers an iteration, not three: nr is first read by p (the
// `active` decision), so xr's sum over the ranks travels with apply's (r|Ar).
//
// Reduction: each block sums its threads' values in a fixed tree into partials[block];
// the last block to arrive (an atomic ticket, which wraps back to 0 for the next launch)
// sums the partials in index order with a fixed tree. The result does not depend on
// which block finished last or on timing: the same bits every run for the same launch
// geometry.
#pragma once
#include "common.cuh"

#define CR_RAR_RE 0
#define CR_RAR_IM 1
#define CR_APAP 2
#define CR_NR 3
#define CR_EPS 4
#define CR_ALPHA_RE 5
#define CR_ALPHA_IM 6
#define CR_BETA_RE 7
#define CR_BETA_IM 8
#define CR_ITER 9
#define CR_MAX_ITER 10
#define CR_ACTIVE 11
// The host's part of the block ends here (CrScalars); the rest is set at creation.
#define CR_HOST_SCALARS 12
// Decomposed lattice: 1 when the reducing kernels leave their sum in CR_LOCAL_RE/IM (this
// rank's partial) for cr_global to add over ranks, 0 when they finish it themselves.
#define CR_SPLIT 12
#define CR_LOCAL_RE 13
#define CR_LOCAL_IM 14
#define CR_LOCAL_NR 15
#define CR_SCALARS 16
// Doubles each rank contributes to a decomposed reduction's all-gather: CR_LOCAL_RE..NR.
#define CR_GATHERED (CR_LOCAL_NR - CR_LOCAL_RE + 1)
// CR_LOCAL_NR when no xr has left its nr since the last apply (a norm is never negative).
#define CR_NO_NR (-1.0)
// Doubles of a rank's slot in cr_peer_sum's buffers (cr_fused.cu): its CR_LOCAL_RE,
// CR_LOCAL_IM, CR_LOCAL_NR and the reduction's sequence number.
#define CR_PEER_SLOT 4

// Ticket counters, one per reducing kernel of the iteration (unsigned[CR_TICKETS]).
#define CR_TICKET_XR 0
#define CR_TICKET_APPLY 1
#define CR_TICKET_P 2
#define CR_TICKETS 4

__device__ __forceinline__ bool cr_active(const double* s) { return s[CR_ACTIVE] != 0.0; }

// a / b for complex a, b.
__device__ __forceinline__ double2 c_div(double2 a, double2 b)
{
    const double d = b.x * b.x + b.y * b.y;
    return c_make((a.x * b.x + a.y * b.y) / d, (a.y * b.x - a.x * b.y) / d);
}

// Sum of v over the block in a fixed tree; sh has blockDim.x entries (any block size).
// Every thread gets the total.
__device__ __forceinline__ double2 cr_block_sum(double2 v, double2* sh)
{
    const unsigned t = threadIdx.x, n = blockDim.x;
    unsigned half = 1;
    while (half < n)
        half <<= 1;
    sh[t] = v;
    __syncthreads();
    for (half >>= 1; half > 0; half >>= 1) {
        if (t < half && t + half < n)
            sh[t] = c_add(sh[t], sh[t + half]);
        __syncthreads();
    }
    const double2 total = sh[0];
    __syncthreads(); // sh may be reused
    return total;
}

__device__ __forceinline__ double cr_plus(double a, double b) { return a + b; }
__device__ __forceinline__ double2 cr_plus(double2 a, double2 b) { return c_add(a, b); }

// The value types a reduction can carry: double2 here; a kernel may add its own (a
// struct of several double2, bicgstab_fused.cu's bi_pair) with these three overloads and
// cr_plus.
__device__ __forceinline__ double2 cr_zero(double2) { return c_zero(); }
__device__ __forceinline__ double2 cr_load_cg(const double2* p) { return __ldcg(p); }

// Adds this block's sum of v to partials[blockIdx.x]. Returns true in the last block to
// arrive, where every thread gets the total over all blocks in *total.
template <class V>
__device__ __forceinline__ bool cr_reduce_last(V v, double2* sh, V* partials, unsigned* ticket, V* total)
{
    __shared__ int cr_is_last;
    const V b = cr_block_sum(v, sh);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = b;
        __threadfence();
        const unsigned k = atomicInc(ticket, gridDim.x - 1);
        cr_is_last = (k == gridDim.x - 1);
    }
    __syncthreads();
    if (!cr_is_last)
        return false;
    __threadfence();
    V acc = cr_zero(v);
    for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x)
        acc = cr_plus(acc, cr_load_cg(partials + i));
    *total = cr_block_sum(acc, sh);
    return true;
}

// On a decomposed lattice: keep this rank's sum for cr_global and return true.
__device__ __forceinline__ bool cr_keep_local(double* s, double2 local)
{
    if (s[CR_SPLIT] == 0.0)
        return false;
    s[CR_LOCAL_RE] = local.x;
    s[CR_LOCAL_IM] = local.y;
    return true;
}

// On a decomposed lattice: keep this rank's nr (xr) for apply's cr_global and return true.
__device__ __forceinline__ bool cr_keep_local_nr(double* s, double nr)
{
    if (s[CR_SPLIT] == 0.0)
        return false;
    s[CR_LOCAL_NR] = nr;
    return true;
}

// The last block's updates of the scalars, one per kernel (thread 0 calls them).
__device__ __forceinline__ void cr_finish_xr(double* s, double* hist, double nr)
{
    const double it = s[CR_ITER] + 1.0;
    s[CR_NR] = nr;
    s[CR_ITER] = it;
    if (it <= s[CR_MAX_ITER]) // always, when the host set a consistent block (active => iter < max_iter)
        hist[(size_t)it] = nr;
}

__device__ __forceinline__ void cr_finish_apply(double* s, double2 rar_new)
{
    const double2 beta = c_div(rar_new, c_make(s[CR_RAR_RE], s[CR_RAR_IM]));
    s[CR_BETA_RE] = beta.x;
    s[CR_BETA_IM] = beta.y;
    s[CR_RAR_RE] = rar_new.x;
    s[CR_RAR_IM] = rar_new.y;
}

__device__ __forceinline__ void cr_finish_p(double* s, double apap)
{
    s[CR_APAP] = apap;
    s[CR_ALPHA_RE] = s[CR_RAR_RE] / apap;
    s[CR_ALPHA_IM] = -s[CR_RAR_IM] / apap;
    const double nr = s[CR_NR];
    const bool go = isfinite(nr) && nr > s[CR_EPS] && s[CR_ITER] < s[CR_MAX_ITER];
    s[CR_ACTIVE] = go ? 1.0 : 0.0;
}

// Loads and stores of the element-wise kernels: single fields are storage precision,
// loaded into double, computed in double and rounded on the store.
__device__ __forceinline__ double2 cr_load(const double2* __restrict__ a, size_t i) { return a[i]; }
__device__ __forceinline__ double2 cr_load(const float2* __restrict__ a, size_t i)
{
    const float2 z = a[i];
    return c_make((double)z.x, (double)z.y);
}
// Store z; returns the value as stored.
__device__ __forceinline__ double2 cr_store(double2* __restrict__ a, size_t i, double2 z)
{
    a[i] = z;
    return z;
}
__device__ __forceinline__ double2 cr_store(float2* __restrict__ a, size_t i, double2 z)
{
    float2 w;
    w.x = (float)z.x;
    w.y = (float)z.y;
    a[i] = w;
    return c_make((double)w.x, (double)w.y);
}
__device__ __forceinline__ double cr_norm(double2 z) { return z.x * z.x + z.y * z.y; }

// The grid-stride loop of the element-wise kernels (cr_fused.cu, bicgstab_fused.cu): f(i)
// for every element of this thread, in increasing i, summing what it returns (four
// elements per step while four are left, so that their loads are in flight together).

template <class V, class F>
__device__ __forceinline__ V cr_stride_sum(size_t n, V acc, F f)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const V a0 = f(i), a1 = f(i + stride), a2 = f(i + 2 * stride), a3 = f(i + 3 * stride);
        acc = cr_plus(acc, a0);
        acc = cr_plus(acc, a1);
        acc = cr_plus(acc, a2);
        acc = cr_plus(acc, a3);
    }
    for (; i < n; i += stride)
        acc = cr_plus(acc, f(i));
    return acc;
}

// The grid-stride loop without a sum: f(i) for every element of this thread.
template <class F> __device__ __forceinline__ void cr_for_each(size_t n, F f)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        f(i);
}
