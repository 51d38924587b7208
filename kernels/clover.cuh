// clover.cuh: the clover term and twisted mass of version 3.0 (CLOVER=1 builds of
// stencil_v3.cu): a site's A psi and A^-1 psi from the device clover arrays, and the
// epilogue that turns the hopping term into D, the Schur operator's halves and the
// reconstruction (docs/gpu.md, "The clover term on the GPU").
//
// Operator (docs/conventions.md): D = A - kappa H, A = H_clov + 2 i kappa mu g5, block
// diagonal in the DeGrand-Rossi basis: block b holds spins 2b, 2b + 1, a 6-vector indexed by
// (spin - 2b) * 3 + colour, A_b = H_b + i s_b c with H_b Hermitian, c = 2 kappa mu (the
// `twist` argument) and s_0 = +1, s_1 = -1.
//
// Layout (src/dirac/clover_pack.rs builds it on the host): two arrays of real2 (double2,
// float2 for the single and half builds), each 36 pairs a site in the parity-major
// structure of arrays: pair e of site (p, cb) at p*36*Vh + e*Vh + cb. Pair e = 18 b + k of
// block b: k = 0, 1, 2 the real diagonal (d0, d1), (d2, d3), (d4, d5); k = 3 .. 17 the 15
// entries below the diagonal, row > col row-major, as (re, im) (clover::pack's order).
// - `clover`: H_b, the clover part of A.
// - `clover_inv`: P_b = (H_b^2 + c^2)^-1 (QUDA's twisted-clover form), applied as
//   A_b^-1 = (H_b - i s_b c) P_b, which reads both arrays; with c = 0, P_b = H_b^-1 and
//   only this array is read.
//
// Counts per site: a Hermitian 6x6 product is 6 x 2 (diagonal) + 15 x 2 x 8 (each entry
// below the diagonal, and its conjugate, a complex multiply-add) = 252 flops, two blocks 504
// (QUDA's clover count), reading 72 reals; the twist adds 2 x 24 = 48 flops where applied.
// So the epilogue out = A y + c hop adds 504 (+ 48 with a twist) flops and 72 reals read
// per site to the fused dslash (1368 flops), out = A^-1 (y + c hop) 504 and 72 reals
// without a twist, 1008 + 48 and 144 reals with one; the site kernel out = A^-1 in reads
// 24 + 72 (144 with a twist) reals and writes 24.
#pragma once
#include "v3_core.cuh"

// Pairs (real2) of a site in each clover array.
#define CLOVER_PAIRS 36

// A CLOVER build's epilogue arguments (the arrays already offset to the output parity's
// block): `inverse` 0: out = A y + c hop, 1: out = A^-1 (y + c hop). `a` null: the Wilson
// epilogue (A = 1).
struct V3Clover {
    const real2* __restrict__ a;
    const real2* __restrict__ inv;
    real twist;
    int inverse;
};

// The arrays of parity p.
__device__ __forceinline__ V3Clover v3_clover_at(V3Clover cl, int p, size_t vh)
{
    if (cl.a)
        cl.a += (size_t)p * CLOVER_PAIRS * vh;
    if (cl.inv)
        cl.inv += (size_t)p * CLOVER_PAIRS * vh;
    return cl;
}

// out = M v for the packed Hermitian block M at m (pairs at m + k vh), 252 flops.
__device__ __forceinline__ void clover_block_mul(const real2* __restrict__ m, size_t vh, const real2 v[6],
                                                 real2 out[6])
{
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        const real2 d = m[k * vh];
        out[2 * k] = c_scale(d.x, v[2 * k]);
        out[2 * k + 1] = c_scale(d.y, v[2 * k + 1]);
    }
    int k = 3;
#pragma unroll
    for (int i = 1; i < 6; ++i)
#pragma unroll
        for (int j = 0; j < i; ++j, ++k) {
            const real2 l = m[k * vh];
            out[i] = c_madd(out[i], l, v[j]);            // M_ij v_j
            out[j] = c_add(out[j], c_conj_mul(l, v[i])); // M_ji v_i = conj(M_ij) v_i
        }
}

// out += i st v (st = s_b c), 24 flops.
__device__ __forceinline__ void clover_add_twist(real st, const real2 v[6], real2 out[6])
{
#pragma unroll
    for (int i = 0; i < 6; ++i)
        out[i] = c_of<real2>(out[i].x - st * v[i].y, out[i].y + st * v[i].x);
}

// out = A_b v on block b of one site (cl offset to the site's parity; v and out 6-vectors
// that may not alias).
__device__ __forceinline__ void clover_block_apply(const V3Clover& cl, size_t vh, size_t cb, int b,
                                                   const real2 v[6], real2 out[6])
{
    clover_block_mul(cl.a + (size_t)b * 18 * vh + cb, vh, v, out);
    if (cl.twist != (real)0)
        clover_add_twist(b ? -cl.twist : cl.twist, v, out);
}

// out = A_b^-1 v on block b of one site: P v, then (H - i s c) (P v) with a twist.
__device__ __forceinline__ void clover_block_apply_inv(const V3Clover& cl, size_t vh, size_t cb, int b,
                                                       const real2 v[6], real2 out[6])
{
    if (cl.twist == (real)0) {
        clover_block_mul(cl.inv + (size_t)b * 18 * vh + cb, vh, v, out);
    } else {
        real2 w[6];
        clover_block_mul(cl.inv + (size_t)b * 18 * vh + cb, vh, v, w);
        clover_block_mul(cl.a + (size_t)b * 18 * vh + cb, vh, w, out);
        clover_add_twist(b ? cl.twist : -cl.twist, w, out);
    }
}

// The CLOVER epilogue of a site (stencil_v3.cu v3_finish_site with cl.a non-null): acc
// (H inp at site cb) becomes out = [g5] (A y + c acc) (cl.inverse 0; y_h null: [g5] c acc)
// or [g5] A^-1 (y + c acc) (cl.inverse 1; y_h null: [g5] A^-1 c acc), stored whole (half:
// with its norm); with `partials`, (y|out) is added to dot as the Wilson epilogue does.
// A is block diagonal, so the work goes block by block, in place in acc: a block's y and
// temporary are live only while it is done (half the registers of a whole site's y and
// result beside acc).
__device__ __forceinline__ void v3_clover_finish_site(real2 acc[4][3], const v3_spinor* __restrict__ y_h,
                                                      const float* __restrict__ y_n, v3_spinor* __restrict__ out_h,
                                                      float* __restrict__ out_n, int vh, int cb, double c, int g5,
                                                      const double2* __restrict__ partials, double2& dot,
                                                      const V3Clover& cl)
{
    const real cr = (real)c;
    const real y_step = y_h ? v3_site_step(y_n, cb) : (real)0;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
        real2* a = &acc[2 * b][0];
        real2 y[6], t[6];
        if (y_h)
#pragma unroll
            for (int k = 0; k < 6; ++k)
                y[k] = v3_load(y_h, vh, 6 * b + k, cb, y_step);
        if (!cl.inverse) {
            if (y_h) {
                clover_block_apply(cl, vh, cb, b, y, t);
#pragma unroll
                for (int k = 0; k < 6; ++k)
                    a[k] = c_of<real2>(t[k].x + cr * a[k].x, t[k].y + cr * a[k].y);
            } else {
#pragma unroll
                for (int k = 0; k < 6; ++k)
                    a[k] = c_scale(cr, a[k]);
            }
        } else {
#pragma unroll
            for (int k = 0; k < 6; ++k)
                t[k] = y_h ? c_of<real2>(y[k].x + cr * a[k].x, y[k].y + cr * a[k].y) : c_scale(cr, a[k]);
            clover_block_apply_inv(cl, vh, cb, b, t, a);
        }
        if (g5 && b == 1)
#pragma unroll
            for (int k = 0; k < 6; ++k)
                a[k] = c_neg(a[k]);
        // The dot of what is stored (half: before its rounding, as the Wilson epilogue).
        if (partials && y_h)
#pragma unroll
            for (int k = 0; k < 6; ++k)
                dot = c_add(dot, c_conj_mul(c_dbl(y[k]), c_dbl(a[k])));
    }
    v3_store_site(out_h, out_n, vh, cb, acc);
}

// The site kernel out = A^-1 inp (stencil_v3_clover_inv) for the thread's site: parity p,
// checkerboard index cb; inp and out offset to the parity's half field.
__device__ __forceinline__ void v3_clover_inv_site(const v3_spinor* __restrict__ inp, const float* __restrict__ in_n,
                                                   v3_spinor* __restrict__ out, float* __restrict__ out_n, int vh,
                                                   int cb, const V3Clover& cl)
{
    const real step = v3_site_step(in_n, cb);
    real2 x[4][3], v[4][3];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 3; ++i)
            x[j][i] = v3_load(inp, vh, j * 3 + i, cb, step);
#pragma unroll
    for (int b = 0; b < 2; ++b)
        clover_block_apply_inv(cl, vh, cb, b, &x[2 * b][0], &v[2 * b][0]);
    v3_store_site(out, out_n, vh, cb, v);
}
