// bicgstab_fused.cu: BiCGStab's iteration with its scalars on the device (src/solver/bicgstab.rs
// `Fused`, src/backend/cuda/bicgstab.rs), so that an iteration needs no host read and is
// replayed as a CUDA graph. With v = A p and t = A s the operator's own launches, one
// iteration is
//   alpha   (if active) r0v = (r0|v); alpha = rho / r0v (a zero or non-finite r0v: broken)
//   s       (if active) r -= alpha v                      (r now holds s)
//   omega   (if active) tt = (t|t), ts = (t|s); omega = ts / tt (0 when tt = 0)
//   update  (if active) x += alpha p, x += omega s, r = s - omega t; nr = (r|r),
//           rho_new = (r0|r); iter += 1, hist[iter] = nr; active = nr > eps && iter <
//           max_iter && nr finite; if still active and (omega = 0 or rho_new zero or
//           non-finite): broken; else beta = (rho_new / rho)(alpha / omega), rho = rho_new
//   p       (if active) p -= omega v; p = r + beta p
// On a decomposed lattice (BI_SPLIT set) each reducing kernel's last block keeps the rank's
// sums in BI_LOCAL instead of finishing; the host all-gathers those BI_GATHERED doubles
// from every rank and bi_global adds them in rank order and finishes the reduction with
// the same code (bi_finish_*): the same bits on every rank, so every rank takes the same
// `active` and breakdown decisions.
// A breakdown ends the iteration (active = 0, broken = 1): the host restarts the shadow
// residual (r0 = p = r) and sets the block again. Every kernel of an iteration reads the
// `active` the previous kernel left (kernel boundaries order them), so all blocks of one
// launch agree and the tickets stay balanced.
//
// The order of operations and roundings is the host loop's (src/solver/bicgstab.rs
// `BiCgStab`, through the vector space): two-step updates round to the field's precision
// in between, as the CPU backend's axpy and xpay do. Compiled with --fmad=false. The
// reductions are cr_device.cuh's single-pass deterministic ones (fixed trees, a ticket):
// the same bits every run for the same launch geometry (cr_cfg: CR_BLOCK threads, cr_grid
// blocks, blockDim.x * 16 bytes of dynamic shared memory).
#include "cr_device.cuh"

#define BI_RHO_RE 0
#define BI_RHO_IM 1
#define BI_ALPHA_RE 2
#define BI_ALPHA_IM 3
#define BI_OMEGA_RE 4
#define BI_OMEGA_IM 5
#define BI_BETA_RE 6
#define BI_BETA_IM 7
#define BI_NR 8
#define BI_EPS 9
#define BI_ITER 10
#define BI_MAX_ITER 11
#define BI_ACTIVE 12
#define BI_BROKEN 13
// The host's part of the block ends here (BiScalars); the rest is set at creation.
#define BI_HOST_SCALARS 14
// Decomposed lattice: 1 when the reducing kernels leave this rank's sums in BI_LOCAL ..
// BI_LOCAL + 3 (two complex numbers) for bi_global to add over the ranks, 0 when they
// finish the reduction themselves.
#define BI_SPLIT 14
#define BI_LOCAL 15
#define BI_SCALARS 19
// Doubles each rank contributes to a decomposed reduction's all-gather: BI_LOCAL .. + 3.
#define BI_GATHERED 4

// The reductions, as bi_global's `which` names them.
#define BI_WHICH_START 0
#define BI_WHICH_ALPHA 1
#define BI_WHICH_OMEGA 2
#define BI_WHICH_UPDATE 3

#define BI_TICKET_ALPHA 0
#define BI_TICKET_OMEGA 1
#define BI_TICKET_UPDATE 2
#define BI_TICKETS 4

__device__ __forceinline__ bool bi_active(const double* s) { return s[BI_ACTIVE] != 0.0; }
__device__ __forceinline__ double2 bi_get(const double* s, int re) { return c_make(s[re], s[re + 1]); }
__device__ __forceinline__ void bi_put(double* s, int re, double2 z)
{
    s[re] = z.x;
    s[re + 1] = z.y;
}

// Whether a denominator (u|w) can be divided by: |z| > 0 and finite (the host's
// `breakdown`, with the same modulus).
__device__ __forceinline__ bool bi_ok(double2 z)
{
    const double m = hypot(z.x, z.y);
    return m > 0.0 && isfinite(m);
}

// z as a field of the pointer's precision stores it.
__device__ __forceinline__ double2 bi_round(const double2*, double2 z) { return z; }
__device__ __forceinline__ double2 bi_round(const float2*, double2 z)
{
    return c_make((double)(float)z.x, (double)(float)z.y);
}

// Two sums at once: the grid-stride loop's and the reduction's value (cr_device.cuh's
// overloads for it).
struct bi_pair {
    double2 a, b;
};
__device__ __forceinline__ bi_pair cr_plus(bi_pair u, bi_pair v) { return {c_add(u.a, v.a), c_add(u.b, v.b)}; }
__device__ __forceinline__ bi_pair cr_zero(bi_pair) { return {c_zero(), c_zero()}; }
__device__ __forceinline__ bi_pair cr_load_cg(const bi_pair* p) { return {__ldcg(&p->a), __ldcg(&p->b)}; }
__device__ __forceinline__ bi_pair cr_block_sum(bi_pair v, double2* sh)
{
    return {cr_block_sum(v.a, sh), cr_block_sum(v.b, sh)};
}

// On a decomposed lattice: keep this rank's sums (a, b) for bi_global and return true.
__device__ __forceinline__ bool bi_keep_local(double* s, double2 a, double2 b)
{
    if (s[BI_SPLIT] == 0.0)
        return false;
    s[BI_LOCAL] = a.x;
    s[BI_LOCAL + 1] = a.y;
    s[BI_LOCAL + 2] = b.x;
    s[BI_LOCAL + 3] = b.y;
    return true;
}

// The reductions' updates of the scalars from their totals (thread 0 of the last block,
// or bi_global).
__device__ __forceinline__ void bi_finish_start(double* s, double2 rho) { bi_put(s, BI_RHO_RE, rho); }

__device__ __forceinline__ void bi_finish_alpha(double* s, double2 r0v)
{
    if (bi_ok(r0v)) {
        bi_put(s, BI_ALPHA_RE, c_div(bi_get(s, BI_RHO_RE), r0v));
    } else {
        s[BI_ACTIVE] = 0.0;
        s[BI_BROKEN] = 1.0;
    }
}

__device__ __forceinline__ void bi_finish_omega(double* s, double tt, double2 ts)
{
    bi_put(s, BI_OMEGA_RE, tt > 0.0 ? c_make(ts.x / tt, ts.y / tt) : c_zero());
}

__device__ __forceinline__ void bi_finish_update(double* s, double* hist, double nr, double2 rho_new)
{
    const double2 alpha = bi_get(s, BI_ALPHA_RE), omega = bi_get(s, BI_OMEGA_RE);
    const double it = s[BI_ITER] + 1.0;
    s[BI_NR] = nr;
    s[BI_ITER] = it;
    if (it <= s[BI_MAX_ITER]) // always, when the host set a consistent block
        hist[(size_t)it] = nr;
    const bool go = isfinite(nr) && nr > s[BI_EPS] && it < s[BI_MAX_ITER];
    if (!go) {
        s[BI_ACTIVE] = 0.0;
    } else if ((omega.x == 0.0 && omega.y == 0.0) || !bi_ok(rho_new)) {
        s[BI_ACTIVE] = 0.0;
        s[BI_BROKEN] = 1.0;
    } else {
        const double2 beta = c_mul(c_div(rho_new, bi_get(s, BI_RHO_RE)), c_div(alpha, omega));
        bi_put(s, BI_BETA_RE, beta);
        bi_put(s, BI_RHO_RE, rho_new);
    }
}

template <class T>
__device__ __forceinline__ void bi_alpha(const T* __restrict__ r0, const T* __restrict__ v, int n, double* s,
                                         double2* partials, unsigned* tickets)
{
    if (!bi_active(s))
        return;
    QCD_DYNAMIC_SHARED(double2, bi_sh);
    const double2 acc =
        cr_stride_sum((size_t)n, c_zero(), [&](size_t i) { return c_conj_mul(cr_load(r0, i), cr_load(v, i)); });
    double2 r0v;
    if (cr_reduce_last(acc, bi_sh, partials, tickets + BI_TICKET_ALPHA, &r0v) && threadIdx.x == 0 &&
        !bi_keep_local(s, r0v, c_zero()))
        bi_finish_alpha(s, r0v);
}

template <class T> __device__ __forceinline__ void bi_s(T* __restrict__ r, const T* __restrict__ v, int n, double* s)
{
    if (!bi_active(s))
        return;
    const double2 alpha = bi_get(s, BI_ALPHA_RE);
    const double2 minus = c_make(-alpha.x, -alpha.y);
    cr_for_each((size_t)n, [&](size_t i) { cr_store(r, i, c_add(cr_load(r, i), c_mul(minus, cr_load(v, i)))); });
}

template <class T>
__device__ __forceinline__ void bi_omega(const T* __restrict__ t, const T* __restrict__ r, int n, double* s,
                                         double2* partials, unsigned* tickets)
{
    if (!bi_active(s))
        return;
    QCD_DYNAMIC_SHARED(double2, bi_sh);
    const bi_pair acc = cr_stride_sum((size_t)n, bi_pair{c_zero(), c_zero()}, [&](size_t i) {
        const double2 tv = cr_load(t, i);
        return bi_pair{c_make(cr_norm(tv), 0.0), c_conj_mul(tv, cr_load(r, i))};
    });
    bi_pair total;
    if (cr_reduce_last(acc, bi_sh, (bi_pair*)partials, tickets + BI_TICKET_OMEGA, &total) && threadIdx.x == 0 &&
        !bi_keep_local(s, total.a, total.b))
        bi_finish_omega(s, total.a.x, total.b);
}

template <class T>
__device__ __forceinline__ void bi_update(T* __restrict__ x, T* __restrict__ r, const T* __restrict__ p,
                                          const T* __restrict__ t, const T* __restrict__ r0, int n, double* s,
                                          double* hist, double2* partials, unsigned* tickets)
{
    if (!bi_active(s))
        return;
    QCD_DYNAMIC_SHARED(double2, bi_sh);
    const double2 alpha = bi_get(s, BI_ALPHA_RE), omega = bi_get(s, BI_OMEGA_RE);
    const double2 minus = c_make(-omega.x, -omega.y);
    const bi_pair acc = cr_stride_sum((size_t)n, bi_pair{c_zero(), c_zero()}, [&](size_t i) {
        const double2 sv = cr_load(r, i);
        const double2 x1 = bi_round(x, c_add(cr_load(x, i), c_mul(alpha, cr_load(p, i))));
        cr_store(x, i, c_add(x1, c_mul(omega, sv)));
        const double2 rv = cr_store(r, i, c_add(sv, c_mul(minus, cr_load(t, i))));
        return bi_pair{c_make(cr_norm(rv), 0.0), c_conj_mul(cr_load(r0, i), rv)};
    });
    bi_pair total;
    if (cr_reduce_last(acc, bi_sh, (bi_pair*)partials, tickets + BI_TICKET_UPDATE, &total) && threadIdx.x == 0 &&
        !bi_keep_local(s, total.a, total.b))
        bi_finish_update(s, hist, total.a.x, total.b);
}

template <class T>
__device__ __forceinline__ void bi_p(T* __restrict__ p, const T* __restrict__ r, const T* __restrict__ v, int n,
                                     const double* s)
{
    if (!bi_active(s))
        return;
    const double2 omega = bi_get(s, BI_OMEGA_RE), beta = bi_get(s, BI_BETA_RE);
    const double2 minus = c_make(-omega.x, -omega.y);
    cr_for_each((size_t)n, [&](size_t i) {
        const double2 p1 = bi_round(p, c_add(cr_load(p, i), c_mul(minus, cr_load(v, i))));
        cr_store(p, i, c_add(cr_load(r, i), c_mul(beta, p1)));
    });
}

// The start of a run (not gated on `active`): r = r0 = p = rhs, x = 0, rho = (rhs|rhs).
template <class T>
__device__ __forceinline__ void bi_start(const T* __restrict__ rhs, T* __restrict__ x, T* __restrict__ r,
                                         T* __restrict__ r0, T* __restrict__ p, int n, double* s, double2* partials,
                                         unsigned* tickets)
{
    QCD_DYNAMIC_SHARED(double2, bi_sh);
    const T zero = c_of<T>(0, 0);
    const double2 acc = cr_stride_sum((size_t)n, c_zero(), [&](size_t i) {
        const T b = rhs[i];
        r[i] = b;
        r0[i] = b;
        p[i] = b;
        x[i] = zero;
        const double2 bv = cr_load(rhs, i);
        return c_conj_mul(bv, bv);
    });
    double2 rho;
    if (cr_reduce_last(acc, bi_sh, partials, tickets + BI_TICKET_ALPHA, &rho) && threadIdx.x == 0 &&
        !bi_keep_local(s, rho, c_zero()))
        bi_finish_start(s, rho);
}

#define BI_KERNELS(T, sfx)                                                                                            \
    extern "C" __global__ void bi_alpha_##sfx(const T* __restrict__ r0, const T* __restrict__ v, int n, double* s,    \
                                              double2* partials, unsigned* tickets)                                 \
    {                                                                                                                 \
        bi_alpha(r0, v, n, s, partials, tickets);                                                                     \
    }                                                                                                                 \
    extern "C" __global__ void bi_s_##sfx(T* __restrict__ r, const T* __restrict__ v, int n, double* s)               \
    {                                                                                                                 \
        bi_s(r, v, n, s);                                                                                             \
    }                                                                                                                 \
    extern "C" __global__ void bi_omega_##sfx(const T* __restrict__ t, const T* __restrict__ r, int n, double* s,     \
                                              double2* partials, unsigned* tickets)                                 \
    {                                                                                                                 \
        bi_omega(t, r, n, s, partials, tickets);                                                                      \
    }                                                                                                                 \
    extern "C" __global__ void bi_update_##sfx(T* __restrict__ x, T* __restrict__ r, const T* __restrict__ p,         \
                                               const T* __restrict__ t, const T* __restrict__ r0, int n, double* s, \
                                               double* hist, double2* partials, unsigned* tickets)                  \
    {                                                                                                                 \
        bi_update(x, r, p, t, r0, n, s, hist, partials, tickets);                                                     \
    }                                                                                                                 \
    extern "C" __global__ void bi_p_##sfx(T* __restrict__ p, const T* __restrict__ r, const T* __restrict__ v, int n, \
                                          const double* s)                                                            \
    {                                                                                                                 \
        bi_p(p, r, v, n, s);                                                                                          \
    }                                                                                                                 \
    extern "C" __global__ void bi_start_##sfx(const T* __restrict__ rhs, T* __restrict__ x, T* __restrict__ r,        \
                                              T* __restrict__ r0, T* __restrict__ p, int n, double* s,              \
                                              double2* partials, unsigned* tickets)                                 \
    {                                                                                                                 \
        bi_start(rhs, x, r, r0, p, n, s, partials, tickets);                                                          \
    }

BI_KERNELS(double2, d)
BI_KERNELS(float2, s)

// Decomposed lattice: the ranks' sums of reduction `which` (BI_WHICH_*; gathered[BI_GATHERED
// r ..] from rank r: its BI_LOCAL .. BI_LOCAL + 3) added in rank order, and the reduction
// finished as one GPU finishes it. Gated on `active` as the reducing kernels are, but for
// the start (not gated). One thread.
extern "C" __global__ void bi_global(int which, double* s, double* hist, const double* __restrict__ gathered,
                                     int ranks)
{
    if (threadIdx.x != 0 || blockIdx.x != 0 || (which != BI_WHICH_START && !bi_active(s)))
        return;
    double2 a = c_make(gathered[0], gathered[1]), b = c_make(gathered[2], gathered[3]);
    for (int r = 1; r < ranks; ++r) {
        const double* g = gathered + (size_t)BI_GATHERED * r;
        a = c_add(a, c_make(g[0], g[1]));
        b = c_add(b, c_make(g[2], g[3]));
    }
    switch (which) {
    case BI_WHICH_START:
        bi_finish_start(s, a);
        break;
    case BI_WHICH_ALPHA:
        bi_finish_alpha(s, a);
        break;
    case BI_WHICH_OMEGA:
        bi_finish_omega(s, a.x, b);
        break;
    default:
        bi_finish_update(s, hist, a.x, b);
        break;
    }
}
