// heatbath.cu: the quenched SU(3) gauge generator on the GPU, the same algorithm and the
// same random numbers as src/gauge_gen (CPU):
//   heatbath_update   Cabibbo-Marinari heatbath (Kennedy-Pendleton / Creutz per SU(2)
//                     subgroup) of the links U_mu(x), x of one parity: one launch per
//                     (mu, parity), V/2 threads.
//   overrelax_update  Cabibbo-Marinari overrelaxation of the same link sets.
//   reunitarise_links Gram-Schmidt of rows 0, 1 and row 2 = conj(row0 x row1), all links
//                     (su3.cuh's entry point).
//   philox_probe      raw Philox4x32-10 blocks for given counters (CPU/GPU draw check).
//
// Launch order of a compound sweep (as Generator::sweep on the CPU): heatbath pass, then
// `overrelax` overrelaxation passes, each pass `for mu in 0..4 { for parity in 0..2 }`,
// then reunitarise_links. `sweep` is the 0-based compound-sweep index.
//
// Field layout: the canonical host order, double links[(site*4 + mu)*18 + (row*3+col)*2 + re/im],
// site = x + LX*(y + LY*(z + LZ*t)); every extent even; one process (site = global index).
//
// Random numbers (the contract of src/gauge_gen/draws.rs):
//   key     = (seed lo 32, seed hi 32)
//   counter = (site, sweep, 0x48420000 | subgroup << 2 | mu, step)
//   step 0: direction of the SU(2) element; trial t of the a0 sampler: blocks 1+2t, 2+2t.
//   block (w0..w3) -> u53(w0, w1), u53(w2, w3), u53(hi, lo) = ((hi>>5)*2^26 + (lo>>6) + 0.5)/2^53.
// The draws are bit-identical to the CPU's. Compile with --fmad=false to keep the CPU's
// rounding of + and *; log/cos/sin/log1p/expm1 may still differ from the host libm by an
// ulp, so fields agree with the CPU's to rounding after one sweep and drift apart
// (chaotically, as any Markov chain) over many: compare single sweeps, not long runs.

#include "su3.cuh"

#define HB_TAG 0x48420000u
#define TAU 6.283185307179586
#define CREUTZ_BELOW 1.7
#define FLAT_BELOW 1e-10

// ---------------------------------------------------------------------------------------
// Philox4x32-10 (Salmon et al., SC'11), as src/rng.rs.

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
    const unsigned int M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    const unsigned int W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k.x += W0;
            k.y += W1;
        }
        unsigned int hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
        unsigned int hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
        uint4 n;
        n.x = hi1 ^ c.y ^ k.x;
        n.y = lo1;
        n.z = hi0 ^ c.w ^ k.y;
        n.w = lo0;
        c = n;
    }
    return c;
}

__device__ __forceinline__ double u53(unsigned int hi, unsigned int lo) {
    unsigned long long bits = ((unsigned long long)(hi >> 5) << 26) | (unsigned long long)(lo >> 6);
    return ((double)bits + 0.5) / 9007199254740992.0;  // 2^53
}

struct su2_draws {
    uint2 key;
    unsigned int site, sweep, tag;
};

__device__ __forceinline__ void draw_pair(const su2_draws& d, unsigned int step, double* u0, double* u1) {
    uint4 w = philox4x32_10(make_uint4(d.site, d.sweep, d.tag, step), d.key);
    *u0 = u53(w.x, w.y);
    *u1 = u53(w.z, w.w);
}

// ---------------------------------------------------------------------------------------
// SU(2) as quaternions q0 + i q.sigma = [[q0 + i q3, q2 + i q1], [-q2 + i q1, q0 - i q3]].

__device__ __forceinline__ quat q_mul(const quat& a, const quat& b) {
    quat c;
    c.q[0] = a.q[0] * b.q[0] - a.q[1] * b.q[1] - a.q[2] * b.q[2] - a.q[3] * b.q[3];
    c.q[1] = a.q[0] * b.q[1] + b.q[0] * a.q[1] - (a.q[2] * b.q[3] - a.q[3] * b.q[2]);
    c.q[2] = a.q[0] * b.q[2] + b.q[0] * a.q[2] - (a.q[3] * b.q[1] - a.q[1] * b.q[3]);
    c.q[3] = a.q[0] * b.q[3] + b.q[0] * a.q[3] - (a.q[1] * b.q[2] - a.q[2] * b.q[1]);
    return c;
}

// v / |v| (identity for v = 0); returns |v|.
__device__ __forceinline__ double q_unit(const quat& v, quat* vhat) {
    double k = sqrt(v.q[0] * v.q[0] + v.q[1] * v.q[1] + v.q[2] * v.q[2] + v.q[3] * v.q[3]);
    if (k > 0.0) {
        double inv = 1.0 / k;
        for (int i = 0; i < 4; ++i) vhat->q[i] = v.q[i] * inv;
        return k;
    }
    vhat->q[0] = 1.0;
    vhat->q[1] = vhat->q[2] = vhat->q[3] = 0.0;
    return 0.0;
}

// a0 with density sqrt(1 - a0^2) exp(alpha a0): KP for alpha >= 1.7, Creutz below.
__device__ double sample_a0(double alpha, const su2_draws& d) {
    unsigned int t = 0;
    double u0, u1, u2, u3;
    if (alpha >= CREUTZ_BELOW) {
        for (;;) {
            draw_pair(d, 1u + 2u * t, &u0, &u1);
            draw_pair(d, 2u + 2u * t, &u2, &u3);
            double c = cos(TAU * u1);
            double delta = -(log(u0) + c * c * log(u2)) / alpha;
            if (u3 * u3 <= 1.0 - 0.5 * delta) return 1.0 - delta;
            ++t;
        }
    } else {
        double span = -expm1(-2.0 * alpha);
        for (;;) {
            draw_pair(d, 1u + 2u * t, &u0, &u1);
            double a0 = (alpha < FLAT_BELOW) ? 2.0 * u0 - 1.0 : 1.0 + log1p(-u0 * span) / alpha;
            if (u1 * u1 <= 1.0 - a0 * a0) return a0;
            ++t;
        }
    }
}

__device__ quat sample_su2(double alpha, const su2_draws& d) {
    double a0 = sample_a0(alpha, d);
    double u0, u1;
    draw_pair(d, 0u, &u0, &u1);
    double cos_theta = 2.0 * u0 - 1.0;
    double sin_theta = sqrt(fmax(1.0 - cos_theta * cos_theta, 0.0));
    double phi = TAU * u1;
    double r = sqrt(fmax(1.0 - a0 * a0, 0.0));
    quat a;
    a.q[0] = a0;
    a.q[1] = r * sin_theta * cos(phi);
    a.q[2] = r * sin_theta * sin(phi);
    a.q[3] = r * cos_theta;
    return a;
}

// ---------------------------------------------------------------------------------------
// The staple and the subgroup projection (SU(3) pieces: su3.cuh).

// The staple sum A of U_mu(x): sum over nu != mu (increasing) of
// U_nu(x+mu) U_mu(x+nu)^+ U_nu(x)^+  +  (U_mu(x-nu) U_nu(x-nu+mu))^+ U_nu(x-nu).
__device__ su3 staple(const double* links, const geom& g, const int c[4], int mu) {
    su3 a;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) a.m[i][j] = c_make(0.0, 0.0);
    unsigned int x = site_index(g, c);
    unsigned int xpmu = shifted(g, c, mu, +1);
    int cpmu[4] = {c[0], c[1], c[2], c[3]};
    cpmu[mu] = (cpmu[mu] + 1 == g.d[mu]) ? 0 : cpmu[mu] + 1;
    for (int nu = 0; nu < 4; ++nu) {
        if (nu == mu) continue;
        unsigned int xpnu = shifted(g, c, nu, +1);
        unsigned int xmnu = shifted(g, c, nu, -1);
        unsigned int xpmu_mnu = shifted(g, cpmu, nu, -1);
        su3 up = mul_adj(mul_adj(load_link(links, xpmu, nu), load_link(links, xpnu, mu)), load_link(links, x, nu));
        add_to(a, up);
        su3 down = adj_mul(mul(load_link(links, xmnu, mu), load_link(links, xpmu_mnu, nu)), load_link(links, xmnu, nu));
        add_to(a, down);
    }
    return a;
}

// The (i, j) block of U A projected on quaternions: Re Tr(r w) = r . v.
__device__ __forceinline__ quat project_block(const su3& u, const su3& a, int i, int j) {
    int idx[2] = {i, j};
    cplx w[2][2];
    for (int ra = 0; ra < 2; ++ra)
        for (int cb = 0; cb < 2; ++cb) {
            int r = idx[ra], col = idx[cb];
            w[ra][cb] = c_add(c_add(c_mul(u.m[r][0], a.m[0][col]), c_mul(u.m[r][1], a.m[1][col])),
                              c_mul(u.m[r][2], a.m[2][col]));
        }
    quat v;
    v.q[0] = w[0][0].re + w[1][1].re;
    v.q[1] = -w[0][1].im - w[1][0].im;
    v.q[2] = w[1][0].re - w[0][1].re;
    v.q[3] = w[1][1].im - w[0][0].im;
    return v;
}

// ---------------------------------------------------------------------------------------
// Entry points.

extern "C" __global__ void heatbath_update(double* links, int lx, int ly, int lz, int lt, int mu, int parity,
                                           double beta, unsigned int seed_lo, unsigned int seed_hi,
                                           unsigned int sweep) {
    geom g = {{lx, ly, lz, lt}};
    int c[4];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (!parity_site(g, parity, i, c)) return;
    unsigned int x = site_index(g, c);
    su3 a = staple(links, g, c, mu);
    su3 u = load_link(links, x, mu);
    for (int sg = 0; sg < 3; ++sg) {
        int ri = SUBGROUP_ROWS[sg][0], rj = SUBGROUP_ROWS[sg][1];
        quat v = project_block(u, a, ri, rj);
        quat vhat;
        double k = q_unit(v, &vhat);
        su2_draws d;
        d.key = make_uint2(seed_lo, seed_hi);
        d.site = x;
        d.sweep = sweep;
        d.tag = HB_TAG | ((unsigned int)sg << 2) | (unsigned int)mu;
        quat r = q_mul(sample_su2(beta / 3.0 * k, d), vhat);
        left_multiply(u, ri, rj, r);
    }
    store_link(links, x, mu, u);
}

extern "C" __global__ void overrelax_update(double* links, int lx, int ly, int lz, int lt, int mu, int parity) {
    geom g = {{lx, ly, lz, lt}};
    int c[4];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (!parity_site(g, parity, i, c)) return;
    unsigned int x = site_index(g, c);
    su3 a = staple(links, g, c, mu);
    su3 u = load_link(links, x, mu);
    for (int sg = 0; sg < 3; ++sg) {
        int ri = SUBGROUP_ROWS[sg][0], rj = SUBGROUP_ROWS[sg][1];
        quat v = project_block(u, a, ri, rj);
        quat vhat;
        q_unit(v, &vhat);
        left_multiply(u, ri, rj, q_mul(vhat, vhat));
    }
    store_link(links, x, mu, u);
}

// out[4n..4n+4] = philox4x32_10(counters[4n..4n+4], key): the CPU/GPU draw check.
extern "C" __global__ void philox_probe(const unsigned int* counters, unsigned int key_lo, unsigned int key_hi,
                                        unsigned int* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint4 c = make_uint4(counters[4 * i], counters[4 * i + 1], counters[4 * i + 2], counters[4 * i + 3]);
    uint4 w = philox4x32_10(c, make_uint2(key_lo, key_hi));
    out[4 * i] = w.x;
    out[4 * i + 1] = w.y;
    out[4 * i + 2] = w.z;
    out[4 * i + 3] = w.w;
}

// Per-site plaquette sums for the measurement after every sweep: out[2x] = sum of
// Re Tr U_p over the 3 spatial planes at x, out[2x+1] over the 3 planes containing t.
// The host adds the V pairs in a fixed order (deterministic) and normalises.
extern "C" __global__ void plaquette_sites(const double* links, int lx, int ly, int lz, int lt, double* out) {
    geom g = {{lx, ly, lz, lt}};
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int v = (unsigned int)lx * ly * lz * lt;
    if (x >= v) return;
    int c[4];
    unsigned int r = x;
    for (int mu = 0; mu < 4; ++mu) {
        c[mu] = (int)(r % (unsigned int)g.d[mu]);
        r /= (unsigned int)g.d[mu];
    }
    double s[2] = {0.0, 0.0};
    for (int mu = 0; mu < 4; ++mu) {
        for (int nu = mu + 1; nu < 4; ++nu) {
            unsigned int xpmu = shifted(g, c, mu, 1);
            unsigned int xpnu = shifted(g, c, nu, 1);
            su3 a = mul(load_link(links, x, mu), load_link(links, xpmu, nu));
            su3 b = mul(load_link(links, x, nu), load_link(links, xpnu, mu));
            su3 p = mul_adj(a, b);
            s[nu == 3] += p.m[0][0].re + p.m[1][1].re + p.m[2][2].re;
        }
    }
    out[2 * x] = s[0];
    out[2 * x + 1] = s[1];
}
