// su3.cuh: the double-precision SU(3) device code of the gauge kernels (heatbath.cu,
// gauge_fix.cu), every operation in the CPU's order (src/field/su3.rs) so that, compiled
// with --fmad=false, + and * round as on the host:
// - complex numbers `cplx` (c_make, c_add, c_sub, c_mul, c_conj) and 3x3 matrices `su3`;
// - links in the canonical host order, links[(site*4 + mu)*18 + (row*3+col)*2 + re/im]
//   (a field of one matrix a site, such as a gauge transform, is the same with site*4+mu
//   read as its index): load_link, store_link;
// - products a b, a b^+, a^+ b, and the row-wise Gram-Schmidt of Su3::reunitarise;
// - SU(2) subgroup rotations of rows (i, j) by a unit quaternion
//   [[q0 + i q3, q2 + i q1], [-q2 + i q1, q0 - i q3]] (the Cabibbo-Marinari subgroups in
//   SUBGROUP_ROWS's order);
// - site indexing (x fastest), periodic shifts, and the i-th site of one parity;
// - the entry point reunitarise_links.
// Its own complex type, not common.cuh's double2 helpers: the two are not included together.
#pragma once

struct cplx {
    double re, im;
};

__device__ __forceinline__ cplx c_make(double re, double im) {
    cplx c;
    c.re = re;
    c.im = im;
    return c;
}
__device__ __forceinline__ cplx c_add(cplx a, cplx b) { return c_make(a.re + b.re, a.im + b.im); }
__device__ __forceinline__ cplx c_sub(cplx a, cplx b) { return c_make(a.re - b.re, a.im - b.im); }
__device__ __forceinline__ cplx c_mul(cplx a, cplx b) {
    return c_make(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
__device__ __forceinline__ cplx c_conj(cplx a) { return c_make(a.re, -a.im); }

struct su3 {
    cplx m[3][3];
};

struct quat {
    double q[4];
};

// s times the unit matrix (0: the zero matrix).
__device__ __forceinline__ su3 su3_scalar(double s) {
    su3 u;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) u.m[i][j] = c_make(i == j ? s : 0.0, 0.0);
    return u;
}

__device__ __forceinline__ su3 load_link(const double* links, unsigned int site, int mu) {
    const double* p = links + ((size_t)site * 4 + mu) * 18;
    su3 u;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) u.m[i][j] = c_make(p[(i * 3 + j) * 2], p[(i * 3 + j) * 2 + 1]);
    return u;
}

__device__ __forceinline__ void store_link(double* links, unsigned int site, int mu, const su3& u) {
    double* p = links + ((size_t)site * 4 + mu) * 18;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            p[(i * 3 + j) * 2] = u.m[i][j].re;
            p[(i * 3 + j) * 2 + 1] = u.m[i][j].im;
        }
}

// a b
__device__ __forceinline__ su3 mul(const su3& a, const su3& b) {
    su3 c;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            c.m[i][j] = c_add(c_add(c_mul(a.m[i][0], b.m[0][j]), c_mul(a.m[i][1], b.m[1][j])),
                              c_mul(a.m[i][2], b.m[2][j]));
    return c;
}

// a b^+
__device__ __forceinline__ su3 mul_adj(const su3& a, const su3& b) {
    su3 c;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            c.m[i][j] = c_add(c_add(c_mul(a.m[i][0], c_conj(b.m[j][0])), c_mul(a.m[i][1], c_conj(b.m[j][1]))),
                              c_mul(a.m[i][2], c_conj(b.m[j][2])));
    return c;
}

// a^+ b
__device__ __forceinline__ su3 adj_mul(const su3& a, const su3& b) {
    su3 c;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            c.m[i][j] = c_add(c_add(c_mul(c_conj(a.m[0][i]), b.m[0][j]), c_mul(c_conj(a.m[1][i]), b.m[1][j])),
                              c_mul(c_conj(a.m[2][i]), b.m[2][j]));
    return c;
}

__device__ __forceinline__ void add_to(su3& acc, const su3& m) {
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) acc.m[i][j] = c_add(acc.m[i][j], m.m[i][j]);
}

struct geom {
    int d[4];
};

__device__ __forceinline__ unsigned int site_index(const geom& g, const int c[4]) {
    return (unsigned int)(c[0] + g.d[0] * (c[1] + g.d[1] * (c[2] + g.d[2] * c[3])));
}

// The site `c` shifted by +1 (dir = +1) or -1 in direction mu, periodic.
__device__ __forceinline__ unsigned int shifted(const geom& g, const int c[4], int mu, int dir) {
    int s[4] = {c[0], c[1], c[2], c[3]};
    s[mu] += dir;
    if (s[mu] == g.d[mu]) s[mu] = 0;
    if (s[mu] < 0) s[mu] = g.d[mu] - 1;
    return site_index(g, s);
}

// Row-wise Gram-Schmidt as Su3::reunitarise: rows 0 and 1 normalised and made orthogonal,
// row 2 = conj(row0 x row1).
__device__ __forceinline__ void reunitarise(su3& u) {
    cplx* r0 = u.m[0];
    cplx* r1 = u.m[1];
    double n0 = 0.0;
    for (int k = 0; k < 3; ++k) n0 = n0 + (r0[k].re * r0[k].re + r0[k].im * r0[k].im);
    n0 = sqrt(n0);
    for (int k = 0; k < 3; ++k) r0[k] = c_make(r0[k].re / n0, r0[k].im / n0);
    cplx proj = c_make(0.0, 0.0);
    for (int k = 0; k < 3; ++k) proj = c_add(proj, c_mul(c_conj(r0[k]), r1[k]));
    for (int k = 0; k < 3; ++k) r1[k] = c_sub(r1[k], c_mul(proj, r0[k]));
    double n1 = 0.0;
    for (int k = 0; k < 3; ++k) n1 = n1 + (r1[k].re * r1[k].re + r1[k].im * r1[k].im);
    n1 = sqrt(n1);
    for (int k = 0; k < 3; ++k) r1[k] = c_make(r1[k].re / n1, r1[k].im / n1);
    u.m[2][0] = c_conj(c_sub(c_mul(r0[1], r1[2]), c_mul(r0[2], r1[1])));
    u.m[2][1] = c_conj(c_sub(c_mul(r0[2], r1[0]), c_mul(r0[0], r1[2])));
    u.m[2][2] = c_conj(c_sub(c_mul(r0[0], r1[1]), c_mul(r0[1], r1[0])));
}

// U -> R U on rows (i, j).
__device__ __forceinline__ void left_multiply(su3& u, int i, int j, const quat& r) {
    cplx m00 = c_make(r.q[0], r.q[3]), m01 = c_make(r.q[2], r.q[1]);
    cplx m10 = c_make(-r.q[2], r.q[1]), m11 = c_make(r.q[0], -r.q[3]);
    for (int c = 0; c < 3; ++c) {
        cplx ui = u.m[i][c], uj = u.m[j][c];
        u.m[i][c] = c_add(c_mul(m00, ui), c_mul(m01, uj));
        u.m[j][c] = c_add(c_mul(m10, ui), c_mul(m11, uj));
    }
}

__constant__ int SUBGROUP_ROWS[3][2] = {{0, 1}, {0, 2}, {1, 2}};

// Thread i -> the i-th site of the given parity in lexicographic order (as the CPU's list).
__device__ __forceinline__ bool parity_site(const geom& g, int parity, unsigned int i, int c[4]) {
    unsigned int half_x = (unsigned int)g.d[0] / 2;
    unsigned int half_volume = half_x * g.d[1] * g.d[2] * g.d[3];
    if (i >= half_volume) return false;
    unsigned int r = i / half_x;
    c[1] = (int)(r % g.d[1]);
    r /= g.d[1];
    c[2] = (int)(r % g.d[2]);
    c[3] = (int)(r / g.d[2]);
    c[0] = 2 * (int)(i % half_x) + ((c[1] + c[2] + c[3] + parity) & 1);
    return true;
}

// Entry point: Su3::reunitarise of n matrices (a gauge field's 4V links, or one matrix a
// site: matrix k is load_link's (k/4, k%4) either way).
extern "C" __global__ void reunitarise_links(double* links, unsigned int n_links) {
    unsigned int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= n_links) return;
    su3 u = load_link(links, l / 4, (int)(l % 4));
    reunitarise(u);
    store_link(links, l / 4, (int)(l % 4), u);
}
