// common.cuh: what every qcd-solve CUDA kernel shares, and nothing else.
//
// - complex helpers on double2 (x = re, y = im), and on float2 for single precision;
// - site indexing (x fastest: i = x + LX*(y + LY*(z + LZ*t))) and nearest neighbours with
//   the fermion boundary phase of a hop;
// - the seed's hop order and its link buffer (report 004, listing 2): hop h = 0..7 is
//   up t, x, y, z then down t, x, y, z; the seed buffer holds, per site, the 8 matrices
//   uup(x,mu) = U_mu(x) then udn(x,mu) = U_mu(x-mu)^+ in that order, each 3x3 row-major;
// - the spin products tmp1 = psi(n) * Li of one hop, in the general form (versions 1.0-1.2,
//   Li from constant memory) and hand-written for the sparse Li (versions 1.3 and later).
//
// Spinors stay in the canonical order [site][spin][colour]. Seen the seed's way, as a 3x4
// matrix with colour rows i and spin columns j, element (i, j) of a site is at offset
// j*3 + i: the 12 threads of a site that each own one element (fine grain) read and write
// 12 consecutive complex numbers.
//
// The sources are plain CUDA C++; validate/emu compiles the same text with a host C++
// compiler (it defines QCD_EMULATION and the CUDA built-ins) to check the kernels' logic
// without a GPU.
#pragma once

#ifndef QCD_EMULATION
#define QCD_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#define QCD_ANTIPERIODIC(mask, mu) (((mask) >> (mu)) & 1)

// Programmatic dependent launch (sm_90). The host may launch a kernel that calls
// qcd_pdl_wait first with the programmatic-serialisation attribute (timing.rs
// `launch_values!`; unless QCD_SOLVE_PDL=0): its blocks may then start while the previous kernel
// of the stream still runs (its launch and block scheduling overlap that kernel's last
// blocks). qcd_pdl_wait returns once that kernel has completed and its writes are
// visible, so nothing before it may touch memory another kernel writes. qcd_pdl_trigger
// lets the next such launch start before this kernel's blocks exit (they trigger it when
// they exit otherwise). Without the attribute both return at once; the emulation has none.
__device__ __forceinline__ void qcd_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void qcd_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// ---------------------------------------------------------------- complex numbers
// double2 (x = re, y = im) everywhere; float2 for the single-precision fields of version
// 3.0. The arithmetic helpers are templates over the complex type Z (deduced from the
// arguments, so mixing precisions does not compile); c_make and c_zero stay double2.
template <class Z> struct c_real_of;
template <> struct c_real_of<double2> {
    typedef double type;
};
template <> struct c_real_of<float2> {
    typedef float type;
};
template <class Z> using real_of = typename c_real_of<Z>::type;

template <class Z> __device__ __forceinline__ Z c_of(real_of<Z> re, real_of<Z> im)
{
    Z z;
    z.x = re;
    z.y = im;
    return z;
}
__device__ __forceinline__ double2 c_make(double re, double im) { return c_of<double2>(re, im); }
__device__ __forceinline__ double2 c_zero() { return c_make(0.0, 0.0); }
// Widening to double2 (exact for float2).
__device__ __forceinline__ double2 c_dbl(double2 z) { return z; }
__device__ __forceinline__ double2 c_dbl(float2 z) { return c_make(z.x, z.y); }
template <class Z> __device__ __forceinline__ Z c_add(Z a, Z b) { return c_of<Z>(a.x + b.x, a.y + b.y); }
template <class Z> __device__ __forceinline__ Z c_sub(Z a, Z b) { return c_of<Z>(a.x - b.x, a.y - b.y); }
template <class Z> __device__ __forceinline__ Z c_neg(Z a) { return c_of<Z>(-a.x, -a.y); }
template <class Z> __device__ __forceinline__ Z c_scale(real_of<Z> s, Z a) { return c_of<Z>(s * a.x, s * a.y); }
template <class Z> __device__ __forceinline__ Z c_mul(Z a, Z b)
{
    return c_of<Z>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
// conj(a) * b
template <class Z> __device__ __forceinline__ Z c_conj_mul(Z a, Z b)
{
    return c_of<Z>(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}
// acc + a * b (one complex multiply-add: 8 flops)
template <class Z> __device__ __forceinline__ Z c_madd(Z acc, Z a, Z b)
{
    return c_of<Z>(acc.x + a.x * b.x - a.y * b.y, acc.y + a.x * b.y + a.y * b.x);
}
// a + i b and a - i b: one complex addition (2 flops), the factor i is a swap and a sign.
template <class Z> __device__ __forceinline__ Z c_add_i(Z a, Z b) { return c_of<Z>(a.x - b.y, a.y + b.x); }
template <class Z> __device__ __forceinline__ Z c_sub_i(Z a, Z b) { return c_of<Z>(a.x + b.y, a.y - b.x); }

// i^K z for a compile-time K: a swap and signs, no flops.
template <int K, class Z>
__device__ __forceinline__ Z c_ipow(Z z)
{
    return (K & 3) == 0 ? z : (K & 3) == 1 ? c_of<Z>(-z.y, z.x) : (K & 3) == 2 ? c_neg(z) : c_of<Z>(z.y, -z.x);
}

// ---------------------------------------------------------------- SU(3)
// Two-row compression: for U in SU(3), row 2 = conj(row0 x row1). Fills u[2] from u[0], u[1].
template <class Z> __device__ __forceinline__ void su3_third_row(Z u[3][3])
{
#pragma unroll
    for (int k = 0; k < 3; ++k) {
        const int a = (k + 1) % 3, b = (k + 2) % 3;
        const Z x = c_sub(c_mul(u[0][a], u[1][b]), c_mul(u[0][b], u[1][a]));
        u[2][k] = c_of<Z>(x.x, -x.y);
    }
}

// ---------------------------------------------------------------- lattice geometry
struct Dims {
    int l[4]; // LX, LY, LZ, LT
};

__device__ __forceinline__ Dims make_dims(int lx, int ly, int lz, int lt)
{
    Dims d;
    d.l[0] = lx;
    d.l[1] = ly;
    d.l[2] = lz;
    d.l[3] = lt;
    return d;
}

__device__ __forceinline__ void site_coords(int site, const Dims& d, int c[4])
{
    c[0] = site % d.l[0];
    site /= d.l[0];
    c[1] = site % d.l[1];
    site /= d.l[1];
    c[2] = site % d.l[2];
    c[3] = site / d.l[2];
}

// Distance in the site index between neighbours in direction mu.
__device__ __forceinline__ int site_stride(int mu, const Dims& d)
{
    int s = 1;
    for (int nu = 0; nu < mu; ++nu)
        s *= d.l[nu];
    return s;
}

// The neighbour of `site` (coordinate c_mu in direction mu) one step forward or backward,
// from the coordinates alone (no table; versions 1.4 and later, and the set-up kernels).
__device__ __forceinline__ int neighbour_index(int site, int c_mu, int mu, bool forward, const Dims& d)
{
    const int stride = site_stride(mu, d);
    const int l = d.l[mu];
    if (forward)
        return (c_mu == l - 1) ? site - (l - 1) * stride : site + stride;
    return (c_mu == 0) ? site + (l - 1) * stride : site - stride;
}

// The fermion phase of that hop: -1 when it crosses an antiperiodic edge, else +1.
__device__ __forceinline__ double hop_phase(int c_mu, int mu, bool forward, const Dims& d, int antiperiodic_mask)
{
    const bool crosses = forward ? (c_mu == d.l[mu] - 1) : (c_mu == 0);
    return (crosses && QCD_ANTIPERIODIC(antiperiodic_mask, mu)) ? -1.0 : 1.0;
}

// ---------------------------------------------------------------- the seed's hops
// Hop h = 0..7: up t, x, y, z, then down t, x, y, z. Direction numbers mu are the
// project's (0..3 = x, y, z, t).
__device__ __forceinline__ int hop_mu(int h) { return ((h & 3) + 3) & 3; }
__device__ __forceinline__ bool hop_forward(int h) { return h < 4; }

// The 3x3 link of hop h at `site` in the seed buffer (9 complex, row-major).
__device__ __forceinline__ const double2* seed_link(const double2* links, int site, int h)
{
    return links + ((size_t)site * 8 + h) * 9;
}

// Version 1.6 layout (complex units), with P = (volume + 1) / 2 site pairs:
//   ((((dir * P + s/2) * 2 + updown) * 3 + k) * 2 + s%2) * 3 + i   holds U_h(s)(i, k),
// dir = h % 4 in the seed's order t, x, y, z and updown = h / 4. So the uup/udn pair of a
// direction is contiguous, each 3x3 matrix is stored transposed (column k contiguous in
// the row i), and column k of the matrices of two neighbouring sites are interleaved,
// "deux a deux". An odd volume leaves the second half of the last pair as zeros.
__device__ __forceinline__ size_t v16_offset(int dir, int pairs, int s, int updown, int k, int i)
{
    return ((((size_t)dir * pairs + s / 2) * 2 + updown) * 3 + k) * 6 + (s & 1) * 3 + i;
}

// ---------------------------------------------------------------- tmp1 = psi(n) * Li
// General xgemm34x44 element (i, j) (versions 1.0-1.2): sum_k psi_n(i, k) Li(k, j) with
// Li (4x4, row-major) in constant memory. 4 complex products and 3 additions: 30 flops.
__device__ __forceinline__ double2 li_general(const double2* psi_n, const double2* li, int i, int j)
{
    double2 acc = c_mul(psi_n[i], li[j]);
    for (int k = 1; k < 4; ++k)
        acc = c_madd(acc, psi_n[k * 3 + i], li[k * 4 + j]);
    return acc;
}

// Hand-written sparse xgemm34x44 element (i, j) (version 1.3 and later). Li of hop h is
// the transpose of (1 -/+ g_mu) (DeGrand-Rossi), so column j of the product is
// psi(:, j) -/+ g_mu[j][p] psi(:, p), the single off-diagonal entry g_mu[j][p] being
// +-1 or +-i: one complex addition, 2 flops. p and the entries, per direction:
//   t: p = 2,3,0,1  entries  1, 1, 1, 1
//   x: p = 3,2,1,0  entries  i, i,-i,-i
//   y: p = 3,2,1,0  entries -1, 1, 1,-1
//   z: p = 2,3,0,1  entries  i,-i,-i, i
// Up hops use 1 - g_mu, down hops 1 + g_mu.
__device__ __forceinline__ double2 li_sparse(const double2* psi_n, int h, int i, int j)
{
#define S(k) psi_n[(k) * 3 + i]
    switch (h) {
    case 0: // up t: 1 - g_t
        switch (j) {
        case 0: return c_sub(S(0), S(2));
        case 1: return c_sub(S(1), S(3));
        case 2: return c_sub(S(2), S(0));
        default: return c_sub(S(3), S(1));
        }
    case 1: // up x: 1 - g_x
        switch (j) {
        case 0: return c_sub_i(S(0), S(3));
        case 1: return c_sub_i(S(1), S(2));
        case 2: return c_add_i(S(2), S(1));
        default: return c_add_i(S(3), S(0));
        }
    case 2: // up y: 1 - g_y
        switch (j) {
        case 0: return c_add(S(0), S(3));
        case 1: return c_sub(S(1), S(2));
        case 2: return c_sub(S(2), S(1));
        default: return c_add(S(3), S(0));
        }
    case 3: // up z: 1 - g_z
        switch (j) {
        case 0: return c_sub_i(S(0), S(2));
        case 1: return c_add_i(S(1), S(3));
        case 2: return c_add_i(S(2), S(0));
        default: return c_sub_i(S(3), S(1));
        }
    case 4: // down t: 1 + g_t
        switch (j) {
        case 0: return c_add(S(0), S(2));
        case 1: return c_add(S(1), S(3));
        case 2: return c_add(S(2), S(0));
        default: return c_add(S(3), S(1));
        }
    case 5: // down x: 1 + g_x
        switch (j) {
        case 0: return c_add_i(S(0), S(3));
        case 1: return c_add_i(S(1), S(2));
        case 2: return c_sub_i(S(2), S(1));
        default: return c_sub_i(S(3), S(0));
        }
    case 6: // down y: 1 + g_y
        switch (j) {
        case 0: return c_sub(S(0), S(3));
        case 1: return c_add(S(1), S(2));
        case 2: return c_add(S(2), S(1));
        default: return c_sub(S(3), S(0));
        }
    default: // down z: 1 + g_z
        switch (j) {
        case 0: return c_add_i(S(0), S(2));
        case 1: return c_sub_i(S(1), S(3));
        case 2: return c_sub_i(S(2), S(0));
        default: return c_add_i(S(3), S(1));
        }
    }
#undef S
}

// ---------------------------------------------------------------- tmp2 += U * tmp1
// xgemm33x34 element (i, j) accumulated: acc + sum_k U(i, k) tmp1(k, j), with U(i, k) at
// u[i*ui + k*uk] (row-major: ui = 3, uk = 1; transposed: ui = 1, uk = 3 or the 1.6 stride)
// and tmp1(k, j) at t1[j*3 + k]. 3 complex multiply-adds: 24 flops.
__device__ __forceinline__ double2 link_times_column(double2 acc, const double2* u, int ui, int uk,
                                                     const double2* t1, int i, int j)
{
    for (int k = 0; k < 3; ++k)
        acc = c_madd(acc, u[i * ui + k * uk], t1[j * 3 + k]);
    return acc;
}

// The output element: psi - kappa * hop, with the sign of g5 = diag(1,1,-1,-1) when asked
// (Operator G5D: the sign is fused here, no extra kernel). 4 flops.
__device__ __forceinline__ double2 dslash_output(double2 psi, double2 hop, double kappa, int g5, int j)
{
    double2 v = c_make(psi.x - kappa * hop.x, psi.y - kappa * hop.y);
    return (g5 && j >= 2) ? c_neg(v) : v;
}
