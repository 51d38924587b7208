// gauge_fix.cu: Coulomb and Landau gauge fixing by overrelaxation on the GPU, the same
// algorithm and the same arithmetic as src/gauge_fix (CPU):
//   gauge_fix_site      the local update g(x) of every site x of one parity: the
//                       overrelaxed maximum of Re tr(g w(x)), w(x) = sum_{mu < ndir}
//                       [U_mu(x) + U_mu(x - mu)^+], through the three Cabibbo-Marinari
//                       SU(2) subgroups (su2.rs); g(x) into `local`, and G(x) -> g(x) G(x);
//                       V/2 threads.
//   gauge_fix_apply     U_mu(y) -> g(y) U_mu(y) g(y + mu)^+ for every link, g = 1 off the
//                       parity (sweep.rs apply_to_links); V threads, one a site's 4 links.
//   gauge_fix_quality   per site: sum_{mu < ndir} Re tr U_mu(x), and tr[M(x) M(x)^+] of the
//                       gauge condition's violation (measure.rs); the host adds them in
//                       the CPU's fixed order. V threads.
//   reunitarise_links   Su3::reunitarise of n matrices (the links, 4V, or G, V): su3.cuh's.
//
// A sweep is, for parity 0 then 1: gauge_fix_site, then gauge_fix_apply (two launches so
// that a link between two sites of the same parity, a temporal link of Coulomb gauge on an
// odd LT, is multiplied as the CPU does: left factor first). Field layout: su3.cuh (the
// canonical host order); G and `local` one matrix a site. Every extent the gauge condition
// couples is even, and LX always (`parity_site`).
//
// Compile with --fmad=false: + and * then round as on the CPU, so the per-site sums are
// the CPU's bit for bit on the same links. atan2, sin and cos may differ from the host
// libm by an ulp, so the fields differ at rounding level (tests/gpu_gauge_fix.rs holds
// F to 1e-12 and theta to 1e-9 relative after the same 50 sweeps).

#include "su3.cuh"

// The unit quaternion maximising Re tr(r w) on rows and columns (i, j) of w, raised to
// the power omega (su2.rs subgroup_step and power); false where the block gives no
// direction (v = 0 or not finite).
__device__ __forceinline__ bool subgroup_step(const su3& w, int i, int j, double omega, quat* r) {
    cplx a = w.m[i][i], b = w.m[i][j], c = w.m[j][i], d = w.m[j][j];
    double v[4] = {a.re + d.re, -b.im - c.im, c.re - b.re, d.im - a.im};
    double norm = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]);
    if (!(norm > 0.0 && isfinite(norm))) return false;
    double u[4] = {v[0] / norm, v[1] / norm, v[2] / norm, v[3] / norm};
    double s = sqrt(u[1] * u[1] + u[2] * u[2] + u[3] * u[3]);
    if (s == 0.0) {
        for (int k = 0; k < 4; ++k) r->q[k] = u[k];
        return true;
    }
    double phi = atan2(s, u[0]);
    double k = sin(omega * phi) / s;
    r->q[0] = cos(omega * phi);
    r->q[1] = u[1] * k;
    r->q[2] = u[2] * k;
    r->q[3] = u[3] * k;
    return true;
}

// su2.rs local_update: the product of the three overrelaxed subgroup steps, each on w as
// the steps before it left it.
__device__ su3 local_update(su3 w, double omega) {
    su3 g = su3_scalar(1.0);
    for (int sg = 0; sg < 3; ++sg) {
        int ri = SUBGROUP_ROWS[sg][0], rj = SUBGROUP_ROWS[sg][1];
        quat q;
        if (subgroup_step(w, ri, rj, omega, &q)) {
            left_multiply(w, ri, rj, q);
            left_multiply(g, ri, rj, q);
        }
    }
    return g;
}

// The coordinates of site x (x fastest).
__device__ __forceinline__ void site_coords(const geom& g, unsigned int x, int c[4]) {
    for (int mu = 0; mu < 4; ++mu) {
        c[mu] = (int)(x % (unsigned int)g.d[mu]);
        x /= (unsigned int)g.d[mu];
    }
}

// ---------------------------------------------------------------------------------------
// Entry points.

extern "C" __global__ void gauge_fix_site(const double* links, double* local, double* transform, int lx, int ly,
                                          int lz, int lt, int parity, int ndir, double omega) {
    geom g = {{lx, ly, lz, lt}};
    int c[4];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (!parity_site(g, parity, i, c)) return;
    unsigned int x = site_index(g, c);
    su3 w = su3_scalar(0.0);
    for (int mu = 0; mu < ndir; ++mu) {
        su3 up = load_link(links, x, mu);
        su3 down = load_link(links, shifted(g, c, mu, -1), mu);
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) w.m[a][b] = c_add(w.m[a][b], c_add(up.m[a][b], c_conj(down.m[b][a])));
    }
    su3 u = local_update(w, omega);
    store_link(local, x / 4, (int)(x % 4), u);
    store_link(transform, x / 4, (int)(x % 4), mul(u, load_link(transform, x / 4, (int)(x % 4))));
}

extern "C" __global__ void gauge_fix_apply(double* links, const double* local, int lx, int ly, int lz, int lt,
                                           int parity) {
    geom g = {{lx, ly, lz, lt}};
    unsigned int y = blockIdx.x * blockDim.x + threadIdx.x;
    if (y >= (unsigned int)lx * ly * lz * lt) return;
    int c[4];
    site_coords(g, y, c);
    bool left = ((c[0] + c[1] + c[2] + c[3]) & 1) == parity;
    su3 gy = {};
    if (left) gy = load_link(local, y / 4, (int)(y % 4));
    for (int mu = 0; mu < 4; ++mu) {
        int cz[4] = {c[0], c[1], c[2], c[3]};
        cz[mu] = (cz[mu] + 1 == g.d[mu]) ? 0 : cz[mu] + 1;
        unsigned int z = site_index(g, cz);
        su3 l = load_link(links, y, mu);
        if (left) l = mul(gy, l);
        if (((cz[0] + cz[1] + cz[2] + cz[3]) & 1) == parity) l = mul_adj(l, load_link(local, z / 4, (int)(z % 4)));
        store_link(links, y, mu, l);
    }
}

// out[2x] = sum_{mu < ndir} Re tr U_mu(x); out[2x+1] = tr[M(x) M(x)^+] with
// Delta(x) = sum_{mu < ndir} [U_mu(x - mu) - U_mu(x)], M = Delta - Delta^+ less tr/3.
extern "C" __global__ void gauge_fix_quality(const double* links, int lx, int ly, int lz, int lt, int ndir,
                                             double* out) {
    geom g = {{lx, ly, lz, lt}};
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (unsigned int)lx * ly * lz * lt) return;
    int c[4];
    site_coords(g, x, c);
    double trace = 0.0;
    su3 delta = su3_scalar(0.0);
    for (int mu = 0; mu < ndir; ++mu) {
        su3 up = load_link(links, x, mu);
        su3 down = load_link(links, shifted(g, c, mu, -1), mu);
        trace = trace + ((up.m[0][0].re + up.m[1][1].re) + up.m[2][2].re);
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) delta.m[a][b] = c_add(delta.m[a][b], c_sub(down.m[a][b], up.m[a][b]));
    }
    su3 m;
    for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) m.m[a][b] = c_sub(delta.m[a][b], c_conj(delta.m[b][a]));
    cplx tr = c_add(c_add(m.m[0][0], m.m[1][1]), m.m[2][2]);
    tr = c_make(tr.re / 3.0, tr.im / 3.0);
    for (int a = 0; a < 3; ++a) m.m[a][a] = c_sub(m.m[a][a], tr);
    double theta = 0.0;
    for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) theta = theta + (m.m[a][b].re * m.m[a][b].re + m.m[a][b].im * m.m[a][b].im);
    out[2 * x] = trace;
    out[2 * x + 1] = theta;
}
