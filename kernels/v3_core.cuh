// v3_core.cuh: the pieces of version 3.0's hop that the stencil (stencil_v3.cu) and the
// halo kernels of a decomposed lattice (halo.cu) share, so that a face's half spinor is
// projected, multiplied and rebuilt by the same code whichever kernel does it.
//
// - real2: double2, or float2 with V3_SINGLE=1; RECONSTRUCT_12=1 stores and reads two rows
//   per link (V3_LINK_ELEMS = 6 complex per link instead of 9), RECONSTRUCT_8=1 the 8-real
//   form (V3_LINK_ELEMS = 4, decoded by v3_unpack_8).
// - V3_HALF=1 (implies V3_SINGLE=1: float arithmetic, float2 links): spinors in the half
//   format of half.cuh (short2 elements, one float norm per site). Every spinor read and
//   write goes through v3_site_step / v3_load / v3_store_site, which are plain loads and
//   stores of real2 in the other builds (the norm pointers then unused, may be null).
// - v3_col / v3_ph: A_mu of g_mu = [[0, A],[A^+, 0]] (DeGrand-Rossi).
// - v3_site: lexicographic index and coordinates of a checkerboard site.
// - v3_load_link: a link from a parity's structure-of-arrays link array (or a ghost face).
// - v3_project: the half spinor h = psi_up -/+ A psi_dn of a forward / backward hop.
// - v3_hop_half: U h (forward) or U^+ h (backward), rebuilt into the 4-spinor and written
//   (FIRST) or added to acc; its two halves v3_mul_half (the product) and v3_rebuild (the
//   4-spinor), which the full mode's columns along t call apart (stencil_v3.cu).
// - v3_project_both: both half spinors of a direction from one load of a spinor.
// - v3_face_site: the site of face-checkerboard index fcb on the face c[mu] = cmu;
//   v3_face_cb its inverse.
#pragma once
#include "common.cuh"

#ifndef V3_MAX_BLOCK
#define V3_MAX_BLOCK 512
#endif
#ifndef RECONSTRUCT_12
#define RECONSTRUCT_12 0
#endif
#ifndef RECONSTRUCT_8
#define RECONSTRUCT_8 0
#endif
#if RECONSTRUCT_12 && RECONSTRUCT_8
#error "RECONSTRUCT_12 and RECONSTRUCT_8 exclude each other"
#endif
#ifndef V3_HALF
#define V3_HALF 0
#endif
#if V3_HALF
#undef V3_SINGLE
#define V3_SINGLE 1
#endif
#ifndef V3_SINGLE
#define V3_SINGLE 0
#endif

#if V3_SINGLE
typedef float2 real2;
#else
typedef double2 real2;
#endif
typedef real_of<real2> real;

#if V3_HALF
#include "half.cuh"
typedef short2 v3_spinor; // a stored spinor element
#else
typedef real2 v3_spinor;
#endif

// V3_LINK16 (the half build with 18 or 12 reals a link; QUDA's half links): every stored
// link real as a signed 16-bit integer q, value q / 32767 (an SU(3) element's real and
// imaginary parts lie in [-1, 1]; layout.cu to_link16 rounds them), a stored link element
// a short2 at the position of the float2 of the other builds. The 8-real form keeps float
// links: its degenerate flag (8) lies outside [-1, 1]. Defined 0 by hand, the half build
// reads float links (the ablation).
#if V3_HALF && !RECONSTRUCT_8
#ifndef V3_LINK16
#define V3_LINK16 1
#endif
#else
#undef V3_LINK16
#define V3_LINK16 0
#endif
#if V3_LINK16
typedef short2 v3_link; // a stored link element
#define V3_LINK_STEP (1.0f / 32767.0f)
#else
typedef real2 v3_link;
#endif

// The value of one stored step at site n (half: norm[n] / 32767; otherwise unused).
__device__ __forceinline__ real v3_site_step(const float* __restrict__ norm, size_t n)
{
#if V3_HALF
    return half_step(norm[n]);
#else
    return (real)1;
#endif
}

// One element (double2 or float2) through the cache hints `hint`: bit 0 not allocated
// in L1, bit 1 first out of L2 (evict_first), bit 2 last out of L2 (evict_last; bit 1
// wins). The links take bits 0 and 1, the spinors bit 2 (stencil_v3.cu says which); no
// bit is a plain load, and the CPU emulation of validate/emu always loads plainly. One
// macro makes both overloads: only the PTX type and the register constraint differ.
#ifdef __CUDA_ARCH__
#define V3_LD(T, PTX, R)                                                                                              \
    __device__ __forceinline__ T v3_ld(const T* p, int hint)                                                          \
    {                                                                                                                 \
        T v;                                                                                                          \
        if (hint & 6) {                                                                                               \
            unsigned long long pol;                                                                                   \
            if (hint & 2)                                                                                             \
                asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));                             \
            else                                                                                                      \
                asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));                              \
            if (hint & 1)                                                                                             \
                asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v2." PTX " {%0, %1}, [%2], %3;"                     \
                    : "=" R(v.x), "=" R(v.y)                                                                          \
                    : "l"(p), "l"(pol));                                                                              \
            else                                                                                                      \
                asm("ld.global.nc.L2::cache_hint.v2." PTX " {%0, %1}, [%2], %3;"                                     \
                    : "=" R(v.x), "=" R(v.y)                                                                          \
                    : "l"(p), "l"(pol));                                                                              \
            return v;                                                                                                 \
        }                                                                                                             \
        if (hint & 1) {                                                                                               \
            asm("ld.global.nc.L1::no_allocate.v2." PTX " {%0, %1}, [%2];" : "=" R(v.x), "=" R(v.y) : "l"(p));        \
            return v;                                                                                                 \
        }                                                                                                             \
        return *p;                                                                                                    \
    }
#else
#define V3_LD(T, PTX, R)                                                                                              \
    __device__ __forceinline__ T v3_ld(const T* p, int) { return *p; }
#endif
V3_LD(double2, "f64", "d")
V3_LD(float2, "f32", "f")
V3_LD(short2, "s16", "h")
#undef V3_LD

// A stored link element's value (V3_LINK16: q * V3_LINK_STEP).
__device__ __forceinline__ real2 v3_link_value(v3_link q)
{
#if V3_LINK16
    return c_of<real2>((float)q.x * V3_LINK_STEP, (float)q.y * V3_LINK_STEP);
#else
    return q;
#endif
}

// Element k of site n of a spinor structure of arrays (stride vh), step from v3_site_step;
// hint bit 2: L2 evict-last (not in the half build).
__device__ __forceinline__ real2 v3_load(const v3_spinor* __restrict__ psi, size_t vh, int k, size_t n, real step,
                                         int hint = 0)
{
#if V3_HALF
    return half_load(psi, vh, k, n, step);
#else
    return v3_ld(psi + (size_t)k * vh + n, hint & 4);
#endif
}

// Write site n's 12 complex values v[spin][colour] (half: with the site's norm, norm[n],
// and v replaced by the stored values, so that a reduction over the written field sees
// what is stored).
__device__ __forceinline__ void v3_store_site(v3_spinor* __restrict__ psi, float* __restrict__ norm, size_t vh,
                                              size_t n, real2 v[4][3])
{
#if V3_HALF
    half_store_site(&v[0][0], psi, vh, n, norm + n);
#else
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 3; ++i)
            psi[(size_t)(j * 3 + i) * vh + n] = v[j][i];
#endif
}

// Complex elements stored per link: rows 0 and 1 with RECONSTRUCT_12 (row 2 is rebuilt in
// registers, so it is not kept in memory: 12 reals per link), 4 with RECONSTRUCT_8 (8 reals,
// v3_unpack_8), all three rows otherwise.
#define V3_LINK_ELEMS (RECONSTRUCT_8 ? 4 : RECONSTRUCT_12 ? 6 : 9)

// A_mu of g_mu = [[0, A],[A^+, 0]]: row r has the single entry i^v3_ph(mu, r) in column
// v3_col(mu, r). x: [[0, i],[i, 0]], y: [[0, -1],[1, 0]], z: [[i, 0],[0, -i]], t: 1.
__device__ __forceinline__ constexpr int v3_col(int mu, int r) { return mu < 2 ? 1 - r : r; }
__device__ __forceinline__ constexpr int v3_ph(int mu, int r)
{
    return mu == 0 ? 1 : mu == 1 ? (r == 0 ? 2 : 0) : mu == 2 ? (r == 0 ? 1 : 3) : 0;
}

// The lexicographic index and coordinates of checkerboard site cb of parity p: 2 cb or
// 2 cb + 1 (x is even at 2 cb because LX is even, so the pair shares y, z, t).
__device__ __forceinline__ int v3_site(int p, int cb, const Dims& d, int c[4])
{
    const int s0 = 2 * cb;
    site_coords(s0, d, c);
    const int shift = (c[0] + c[1] + c[2] + c[3] + p) & 1;
    c[0] += shift;
    return s0 + shift;
}

#if RECONSTRUCT_8
// The 8-real form of an SU(3) link U (stored by the host: Su3::pack8 in src/field/su3.rs;
// src/field/su3.rs unpack8 is the host's transcription of this decoder):
//   s[0] = U01, s[1] = U02, s[2] = U10, s[3] = (arg U00, arg U20) / pi.
// The phases are stored in units of pi (in [-1, 1]) so that sincospi rebuilds them: its
// range reduction is exact, with none of sincos's slow path for large arguments (PTX of
// stencil_v3 with sincos 193 kB in both precisions, with sincospi 187 kB double, 156 kB
// single).
// Derivation. Write n = 1 - |U00|^2. Row 0 and column 0 of a unitary U have norm 1, so
//   n = |U01|^2 + |U02|^2 (computed this way: no cancellation when |U00| is near 1),
//   |U00| = sqrt(1 - n), |U20| = sqrt(n - |U10|^2),
// which with the stored phases give all of row 0 and column 0. For the 2x2 block, U^+ =
// U^-1 = adj(U) (det U = 1) says every element is the conjugate of its cofactor:
//   conj(U11) = U00 U22 - U02 U20,  conj(U22) = U00 U11 - U01 U10,
//   conj(U12) = U01 U20 - U00 U21,  conj(U21) = U02 U10 - U00 U12.
// Substituting the second of each pair into the first leaves (1 - |U00|^2) = n times one
// unknown, and swapping indices 1 <-> 2 (P U P, P the permutation, is SU(3) too) gives the
// other two:
//   U11 = -(conj(U00) U01 U10 + conj(U02 U20)) / n
//   U12 =  (conj(U01 U20) - conj(U00) U02 U10) / n
//   U21 =  (conj(U02 U10) - conj(U00) U01 U20) / n
//   U22 = -(conj(U00) U02 U20 + conj(U01 U10)) / n
// Edge cases. n -> 0 (|U00| -> 1: row 0 and column 0 are (e^{i a}, 0, 0)) leaves the block
// undetermined (any W in U(2) with det W = e^{-i a}); the host stores such links (n < 1e-32,
// e.g. a unit field) in the degenerate form s[0] = U11, s[1] = U12, s[3] = (a / pi, 8):
// the second phase 8 > 1 flags it, and W = [[U11, U12], [-e^{-i a} conj(U12), e^{-i a} conj(U11)]]
// (W = e^{-i a/2} times an SU(2) matrix). Otherwise n >= 1e-32 and the division is safe in
// both precisions (n and the numerators stay normal floats). |U00| or |U20| near 0: the
// square roots turn the rounding of n (about eps) into an error of about eps / |U00| (or
// eps / |U20|), at most sqrt(eps); the arguments are clamped at 0 against rounding below.
__device__ __forceinline__ void v3_sincospi(double a, double* s, double* c) { sincospi(a, s, c); }
__device__ __forceinline__ void v3_sincospi(float a, float* s, float* c) { sincospif(a, s, c); }
__device__ __forceinline__ double v3_sqrt(double a) { return sqrt(a > 0 ? a : 0); }
__device__ __forceinline__ float v3_sqrt(float a) { return sqrtf(a > 0 ? a : 0); }

template <class Z>
__device__ __forceinline__ void v3_unpack_8(const Z s[4], Z u[3][3])
{
    typedef real_of<Z> R;
    const Z u01 = s[0], u02 = s[1], u10 = s[2];
    R sin0, cos0;
    v3_sincospi(s[3].x, &sin0, &cos0);
    if (s[3].y > (R)4) { // degenerate: row 0 and column 0 are (e^{i a}, 0, 0)
        const Z zero = c_of<Z>(0, 0), e_minus = c_of<Z>(cos0, -sin0);
        u[0][0] = c_of<Z>(cos0, sin0);
        u[0][1] = u[0][2] = u[1][0] = u[2][0] = zero;
        u[1][1] = u01;
        u[1][2] = u02;
        u[2][1] = c_neg(c_mul(e_minus, c_of<Z>(u02.x, -u02.y)));
        u[2][2] = c_mul(e_minus, c_of<Z>(u01.x, -u01.y));
        return;
    }
    R sin2, cos2;
    v3_sincospi(s[3].y, &sin2, &cos2);
    const R n = u01.x * u01.x + u01.y * u01.y + u02.x * u02.x + u02.y * u02.y;
    const R m00 = v3_sqrt((R)1 - n), m20 = v3_sqrt(n - (u10.x * u10.x + u10.y * u10.y));
    const Z u00 = c_of<Z>(m00 * cos0, m00 * sin0), u20 = c_of<Z>(m20 * cos2, m20 * sin2);
    const R inv = (R)1 / n;
    const Z c10 = c_conj_mul(u00, u10), c20 = c_conj_mul(u00, u20); // conj(U00) U10, conj(U00) U20
    const Z p0220 = c_mul(u02, u20), p0120 = c_mul(u01, u20), p0210 = c_mul(u02, u10), p0110 = c_mul(u01, u10);
    const Z a11 = c_madd(c_of<Z>(p0220.x, -p0220.y), u01, c10); // conj(U02 U20) + conj(U00) U01 U10
    const Z a12 = c_sub(c_of<Z>(p0120.x, -p0120.y), c_mul(u02, c10));
    const Z a21 = c_sub(c_of<Z>(p0210.x, -p0210.y), c_mul(u01, c20));
    const Z a22 = c_madd(c_of<Z>(p0110.x, -p0110.y), u02, c20);
    u[0][0] = u00;
    u[0][1] = u01;
    u[0][2] = u02;
    u[1][0] = u10;
    u[2][0] = u20;
    u[1][1] = c_scale(-inv, a11);
    u[1][2] = c_scale(inv, a12);
    u[2][1] = c_scale(inv, a21);
    u[2][2] = c_scale(-inv, a22);
}
#endif

// U(i, k) of the link of direction mu at checkerboard site cb of one parity's link array
// (element e = row*3 + col of the stored rows at (mu*V3_LINK_ELEMS + e)*vh + cb; with
// RECONSTRUCT_8 element e of the 8-real form, decoded by v3_unpack_8).
__device__ __forceinline__ void v3_load_link(const v3_link* __restrict__ links, size_t vh, int mu, int cb,
                                             real2 u[3][3], int hint = 0)
{
    const v3_link* p = links + (size_t)mu * V3_LINK_ELEMS * vh + cb;
#if RECONSTRUCT_8
    real2 s[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
        s[e] = v3_ld(p + e * vh, hint & 3);
    v3_unpack_8(s, u);
#else
    const int rows = RECONSTRUCT_12 ? 2 : 3;
#pragma unroll
    for (int i = 0; i < rows; ++i)
#pragma unroll
        for (int k = 0; k < 3; ++k)
            u[i][k] = v3_link_value(v3_ld(p + (i * 3 + k) * vh, hint & 3));
#if RECONSTRUCT_12
    su3_third_row(u);
#endif
#endif
}

// The half spinor of a hop of direction MU from the spinor at index n of the structure of
// arrays psi (stride vh; half: norms `norm`): h_r = psi_r -/+ i^p_r psi_{2 + c_r}
// (forward: 1 - g_mu, backward: 1 + g_mu), negated with `neg` (an antiperiodic crossing).
// 12 flops.
template <int MU, bool FWD>
__device__ __forceinline__ void v3_project(const v3_spinor* __restrict__ psi, const float* __restrict__ norm,
                                           size_t vh, int n, bool neg, real2 h[2][3], int hint = 0)
{
    constexpr int c0 = v3_col(MU, 0), c1 = v3_col(MU, 1);
    constexpr int p0 = v3_ph(MU, 0), p1 = v3_ph(MU, 1);
    const real step = v3_site_step(norm, n);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const real2 u0 = v3_load(psi, vh, c, n, step, hint);
        const real2 u1 = v3_load(psi, vh, 3 + c, n, step, hint);
        const real2 a0 = c_ipow<p0>(v3_load(psi, vh, (2 + c0) * 3 + c, n, step, hint));
        const real2 a1 = c_ipow<p1>(v3_load(psi, vh, (2 + c1) * 3 + c, n, step, hint));
        h[0][c] = FWD ? c_sub(u0, a0) : c_add(u0, a0);
        h[1][c] = FWD ? c_sub(u1, a1) : c_add(u1, a1);
        if (neg) {
            h[0][c] = c_neg(h[0][c]);
            h[1][c] = c_neg(h[1][c]);
        }
    }
}

// The product of a hop from its half spinor h and its link u: w_r = U h_r (forward) or
// U^+ h_r (backward), 2 x 66 flops.
template <bool FWD>
__device__ __forceinline__ void v3_mul_half(const real2 h[2][3], const real2 u[3][3], real2 w[2][3])
{
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int i = 0; i < 3; ++i) {
            if (FWD) {
                real2 s = c_mul(u[i][0], h[r][0]);
                s = c_madd(s, u[i][1], h[r][1]);
                w[r][i] = c_madd(s, u[i][2], h[r][2]);
            } else {
                real2 s = c_conj_mul(u[0][i], h[r][0]);
                s = c_add(s, c_conj_mul(u[1][i], h[r][1]));
                w[r][i] = c_add(s, c_conj_mul(u[2][i], h[r][2]));
            }
        }
}

// The 4-spinor of a hop of direction MU from its product w: the upper half of acc gets w,
// component c_r of the lower half -/+ conj(i^p_r) w_r. FIRST: write acc instead of
// accumulating.
template <int MU, bool FWD, bool FIRST>
__device__ __forceinline__ void v3_rebuild(const real2 w[2][3], real2 acc[4][3])
{
    constexpr int c0 = v3_col(MU, 0), c1 = v3_col(MU, 1);
    constexpr int p0 = v3_ph(MU, 0), p1 = v3_ph(MU, 1);
    constexpr int q0 = (4 - p0) & 3, q1 = (4 - p1) & 3;
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const real2 l0 = c_ipow<q0>(w[0][c]);
        const real2 l1 = c_ipow<q1>(w[1][c]);
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

// The rest of a hop of direction MU from its half spinor h and its link u: the product
// (v3_mul_half) rebuilt into acc (v3_rebuild).
template <int MU, bool FWD, bool FIRST>
__device__ __forceinline__ void v3_hop_half(const real2 h[2][3], const real2 u[3][3], real2 acc[4][3])
{
    real2 w[2][3];
    v3_mul_half<FWD>(h, u, w);
    v3_rebuild<MU, FWD, FIRST>(w, acc);
}

// Both half spinors of direction MU from one load of the spinor at index n: hm for a
// forward hop (1 - g_mu), hp for a backward one (1 + g_mu); no antiperiodic sign.
template <int MU>
__device__ __forceinline__ void v3_project_both(const v3_spinor* __restrict__ psi, const float* __restrict__ norm,
                                                size_t vh, int n, real2 hm[2][3], real2 hp[2][3], int hint = 0)
{
    constexpr int c0 = v3_col(MU, 0), c1 = v3_col(MU, 1);
    constexpr int p0 = v3_ph(MU, 0), p1 = v3_ph(MU, 1);
    const real step = v3_site_step(norm, n);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const real2 u0 = v3_load(psi, vh, c, n, step, hint);
        const real2 u1 = v3_load(psi, vh, 3 + c, n, step, hint);
        const real2 a0 = c_ipow<p0>(v3_load(psi, vh, (2 + c0) * 3 + c, n, step, hint));
        const real2 a1 = c_ipow<p1>(v3_load(psi, vh, (2 + c1) * 3 + c, n, step, hint));
        hm[0][c] = c_sub(u0, a0);
        hm[1][c] = c_sub(u1, a1);
        hp[0][c] = c_add(u0, a0);
        hp[1][c] = c_add(u1, a1);
    }
}

// One hop of direction MU (forward or backward) from the neighbour at checkerboard index
// n of the input half field psi (half: norms `norm`), whose link is at checkerboard index ls of the link half
// array `links` (x for forward, x - mu for backward), with sign `neg` for an
// antiperiodic crossing. FIRST: write acc instead of accumulating; with `zero` the half
// spinor is replaced by zeros (selects, no branch), so the first hop writes zeros when it
// is to be skipped.
template <int MU, bool FWD, bool FIRST>
__device__ __forceinline__ void v3_hop(const v3_spinor* __restrict__ psi, const float* __restrict__ norm,
                                       const v3_link* __restrict__ links, size_t vh, int n, int ls, bool neg, bool zero,
                                       real2 acc[4][3], int hint = 0)
{
    real2 h[2][3];
    v3_project<MU, FWD>(psi, norm, vh, n, neg, h, hint);
    if (FIRST) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int c = 0; c < 3; ++c)
                h[r][c] = zero ? c_of<real2>(0, 0) : h[r][c];
    }
    real2 u[3][3];
    v3_load_link(links, vh, MU, ls, u, hint);
    v3_hop_half<MU, FWD, FIRST>(h, u, acc);
}

// The faces of a decomposed lattice. A face perpendicular to mu holds the F sites with
// c[mu] fixed; f = their lexicographic index over the other three directions (in order,
// the first fastest). Every local extent is even, so the pair f = 2 fcb, 2 fcb + 1 has
// one site of each parity: fcb (0 .. F/2) is the face's checkerboard index. Face buffers
// are structures of arrays like the fields: element k of face site fcb at k * Fh + fcb
// (Fh = F / 2), one parity after the other for full fields.

// Sites on a face perpendicular to mu.
__device__ __forceinline__ int v3_face_sites(int mu, const Dims& d)
{
    int f = 1;
#pragma unroll
    for (int nu = 0; nu < 4; ++nu)
        if (nu != mu)
            f *= d.l[nu];
    return f;
}

// The site (lexicographic index, coordinates c) of parity p at face checkerboard index
// fcb on the face c[mu] = cmu.
__device__ __forceinline__ int v3_face_site(int mu, int cmu, int p, int fcb, const Dims& d, int c[4])
{
    int f = 2 * fcb;
    int first = -1;
#pragma unroll
    for (int nu = 0; nu < 4; ++nu) {
        if (nu == mu) {
            c[nu] = cmu;
            continue;
        }
        if (first < 0)
            first = nu;
        c[nu] = f % d.l[nu];
        f /= d.l[nu];
    }
    c[first] += (c[0] + c[1] + c[2] + c[3] + p) & 1;
    return c[0] + d.l[0] * (c[1] + d.l[1] * (c[2] + d.l[2] * c[3]));
}

// The face checkerboard index of the site at c on a face perpendicular to mu: the inverse
// of v3_face_site (the lexicographic index over the other directions, halved).
__device__ __forceinline__ int v3_face_cb(int mu, const int c[4], const Dims& d)
{
    int f = 0, stride = 1;
#pragma unroll
    for (int nu = 0; nu < 4; ++nu)
        if (nu != mu) {
            f += c[nu] * stride;
            stride *= d.l[nu];
        }
    return f >> 1;
}
