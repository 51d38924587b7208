// emu_gauge_fix.cpp: the gauge fixing kernels of kernels/gauge_fix.cu on the CPU through
// cuda_emu.h, against a plain sequential implementation written here with std::complex
// (site after site of one parity, each site's links updated at once: the textbook form of
// the checkerboard overrelaxation, the same mathematics as src/gauge_fix but none of its
// code). Landau and Coulomb gauge on 4^3x8, and Coulomb on 4^3x5 (an odd LT: the temporal
// links between two sites of one parity are multiplied on both sides in one half-sweep).
// The field is a random gauge transform of a field near 1 (reunitarised 1 + 0.2 noise).
// After each of 25 sweeps (reunitarised after the 10th and 20th, as REUNITARISE_EVERY):
//   - links and G of the kernels against the reference: max |difference| below 1e-12
//     (both round the same operations, in another association only where the odd-LT
//     temporal links take both factors);
//   - F and theta from the kernels' per-site sums against the reference's: 1e-13 in F,
//     1e-12 relative in theta;
//   - F never decreases (overrelaxation with 0 < omega < 2 never lowers a site's part of
//     F, and sites of one parity share no link): by at most 1e-14;
// and at the end theta fell by at least 1e3 from its start (a field this close to an orbit
// of 1 converges quickly), and the kernels' links are G U G^+ of the input with their G
// to 1e-12. Prints one line per check; exit 1 on failure.
#include "cuda_emu.h"
#include <complex>
#include <cstdio>
#include <random>
#include <string>

thread_local emu_uint3 threadIdx, blockIdx, blockDim, gridDim;
char* emu_dynamic_shared = nullptr;
std::barrier<>* emu_barrier = nullptr;

extern "C" {
void gauge_fix_site(const double*, double*, double*, int, int, int, int, int, int, double);
void gauge_fix_apply(double*, const double*, int, int, int, int, int);
void gauge_fix_quality(const double*, int, int, int, int, int, double*);
void reunitarise_links(double*, unsigned);
}

static int failures = 0;
static void check(const std::string& what, bool ok, const std::string& detail = "")
{
    if (!ok)
        ++failures;
    std::printf("%-64s %s %s\n", what.c_str(), ok ? "ok" : "FAIL", detail.c_str());
}

// ---------------------------------------------------------------- reference
using C = std::complex<double>;
struct M {
    C a[3][3];
};
static M unit()
{
    M m{};
    for (int i = 0; i < 3; ++i)
        m.a[i][i] = 1.0;
    return m;
}
static M operator*(const M& x, const M& y)
{
    M r{};
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 3; ++k)
                r.a[i][j] += x.a[i][k] * y.a[k][j];
    return r;
}
static M dag(const M& x)
{
    M r;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            r.a[i][j] = std::conj(x.a[j][i]);
    return r;
}
// Gram-Schmidt of rows 0 and 1, row 2 = conj(row0 x row1).
static M project(M m)
{
    auto norm = [](C* r) {
        double n = std::sqrt(std::norm(r[0]) + std::norm(r[1]) + std::norm(r[2]));
        for (int k = 0; k < 3; ++k)
            r[k] /= n;
    };
    norm(m.a[0]);
    C p = std::conj(m.a[0][0]) * m.a[1][0] + std::conj(m.a[0][1]) * m.a[1][1] + std::conj(m.a[0][2]) * m.a[1][2];
    for (int k = 0; k < 3; ++k)
        m.a[1][k] -= p * m.a[0][k];
    norm(m.a[1]);
    for (int k = 0; k < 3; ++k) {
        int a = (k + 1) % 3, b = (k + 2) % 3;
        m.a[2][k] = std::conj(m.a[0][a] * m.a[1][b] - m.a[0][b] * m.a[1][a]);
    }
    return m;
}
static double max_diff(const M& x, const double* p)
{
    double d = 0;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            d = std::max(d, std::abs(x.a[i][j] - C(p[(i * 3 + j) * 2], p[(i * 3 + j) * 2 + 1])));
    return d;
}

struct Lat {
    int d[4];
    int volume() const { return d[0] * d[1] * d[2] * d[3]; }
    void coords(int x, int c[4]) const
    {
        for (int mu = 0; mu < 4; ++mu) {
            c[mu] = x % d[mu];
            x /= d[mu];
        }
    }
    int index(const int c[4]) const { return c[0] + d[0] * (c[1] + d[1] * (c[2] + d[2] * c[3])); }
    int hop(int x, int mu, int step) const
    {
        int c[4];
        coords(x, c);
        c[mu] = (c[mu] + step + d[mu]) % d[mu];
        return index(c);
    }
    int parity(int x) const
    {
        int c[4];
        coords(x, c);
        return (c[0] + c[1] + c[2] + c[3]) & 1;
    }
};

// The SU(2) rotation of rows (i, j) maximising Re tr(r w), to the power omega: the unit
// quaternion along v, its angle phi scaled to omega phi.
static void subgroup(M& w, M& g, int i, int j, double omega)
{
    double v[4] = {w.a[i][i].real() + w.a[j][j].real(), -w.a[i][j].imag() - w.a[j][i].imag(),
                   w.a[j][i].real() - w.a[i][j].real(), w.a[j][j].imag() - w.a[i][i].imag()};
    double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]);
    if (!(n > 0))
        return;
    for (double& x : v)
        x /= n;
    double s = std::sqrt(v[1] * v[1] + v[2] * v[2] + v[3] * v[3]);
    if (s > 0) {
        double phi = std::atan2(s, v[0]), k = std::sin(omega * phi) / s;
        v[0] = std::cos(omega * phi);
        v[1] *= k;
        v[2] *= k;
        v[3] *= k;
    }
    M r = unit();
    r.a[i][i] = C(v[0], v[3]);
    r.a[i][j] = C(v[2], v[1]);
    r.a[j][i] = C(-v[2], v[1]);
    r.a[j][j] = C(v[0], -v[3]);
    w = r * w;
    g = r * g;
}

struct Ref {
    Lat l;
    std::vector<M> u, g; // u[4x + mu]
    // One sweep: the sites of parity 0 one after another, then parity 1.
    void sweep(int ndir, double omega)
    {
        for (int p = 0; p < 2; ++p)
            for (int x = 0; x < l.volume(); ++x) {
                if (l.parity(x) != p)
                    continue;
                M w{};
                for (int mu = 0; mu < ndir; ++mu) {
                    M down = dag(u[4 * l.hop(x, mu, -1) + mu]);
                    for (int i = 0; i < 3; ++i)
                        for (int j = 0; j < 3; ++j)
                            w.a[i][j] += u[4 * x + mu].a[i][j] + down.a[i][j];
                }
                M gx = unit();
                subgroup(w, gx, 0, 1, omega);
                subgroup(w, gx, 0, 2, omega);
                subgroup(w, gx, 1, 2, omega);
                for (int mu = 0; mu < 4; ++mu) {
                    u[4 * x + mu] = gx * u[4 * x + mu];
                    M& back = u[4 * l.hop(x, mu, -1) + mu];
                    back = back * dag(gx);
                }
                g[x] = gx * g[x];
            }
    }
    // F and theta (QUDA's normalisation; for Coulomb gauge the worst timeslice's).
    void quality(int ndir, double* f, double* theta) const
    {
        int v = l.volume(), vs = l.d[0] * l.d[1] * l.d[2];
        double tr = 0;
        std::vector<double> th(l.d[3], 0.0);
        for (int x = 0; x < v; ++x) {
            M delta{};
            for (int mu = 0; mu < ndir; ++mu) {
                const M& up = u[4 * x + mu];
                const M& down = u[4 * l.hop(x, mu, -1) + mu];
                tr += (up.a[0][0] + up.a[1][1] + up.a[2][2]).real();
                for (int i = 0; i < 3; ++i)
                    for (int j = 0; j < 3; ++j)
                        delta.a[i][j] += down.a[i][j] - up.a[i][j];
            }
            M m{};
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j)
                    m.a[i][j] = delta.a[i][j] - std::conj(delta.a[j][i]);
            C t = (m.a[0][0] + m.a[1][1] + m.a[2][2]) / 3.0;
            double s = 0;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j)
                    s += std::norm(m.a[i][j] - (i == j ? t : 0.0));
            th[x / vs] += s;
        }
        *f = tr / (3.0 * v * ndir);
        if (ndir == 4) {
            double all = 0;
            for (double s : th)
                all += s;
            *theta = all / (3.0 * v);
        } else {
            *theta = 0;
            for (double s : th)
                *theta = std::max(*theta, s / (3.0 * vs));
        }
    }
};

// ---------------------------------------------------------------- kernels
static unsigned blocks(unsigned n, unsigned b) { return (n + b - 1) / b; }

static void flat(const std::vector<M>& m, std::vector<double>& out)
{
    out.resize(m.size() * 18);
    for (size_t k = 0; k < m.size(); ++k)
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
                out[k * 18 + (i * 3 + j) * 2] = m[k].a[i][j].real();
                out[k * 18 + (i * 3 + j) * 2 + 1] = m[k].a[i][j].imag();
            }
}

// The host's reading of the kernels' per-site sums (sequential sums: the CPU's chunked
// order agrees with it to rounding).
static void kernel_quality(const Lat& l, int ndir, const std::vector<double>& links, double* f, double* theta)
{
    int v = l.volume(), vs = l.d[0] * l.d[1] * l.d[2];
    std::vector<double> out(2 * v);
    emu_launch(blocks(v, 64), 64, 0, false,
               [&] { gauge_fix_quality(links.data(), l.d[0], l.d[1], l.d[2], l.d[3], ndir, out.data()); });
    double tr = 0;
    std::vector<double> th(l.d[3], 0.0);
    for (int x = 0; x < v; ++x) {
        tr += out[2 * x];
        th[x / vs] += out[2 * x + 1];
    }
    *f = tr / (3.0 * v * ndir);
    *theta = 0;
    if (ndir == 4) {
        for (double s : th)
            *theta += s;
        *theta /= 3.0 * v;
    } else {
        for (double s : th)
            *theta = std::max(*theta, s / (3.0 * vs));
    }
}

static void run(const char* name, Lat l, int ndir, double omega, unsigned seed)
{
    const int v = l.volume(), sweeps = 25, reunitarise_every = 10;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> gauss;
    auto random_su3 = [&](double eps) {
        M m = unit();
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j)
                m.a[i][j] = (eps < 0 ? 0.0 : m.a[i][j]) + std::abs(eps) * C(gauss(rng), gauss(rng));
        return project(m);
    };
    Ref ref{l, std::vector<M>(4 * v), std::vector<M>(v, unit())};
    std::vector<M> rot(v);
    for (int x = 0; x < v; ++x)
        rot[x] = random_su3(-1.0); // Haar-like: a projected Gaussian matrix
    for (int x = 0; x < v; ++x)
        for (int mu = 0; mu < 4; ++mu)
            ref.u[4 * x + mu] = rot[x] * random_su3(0.2) * dag(rot[l.hop(x, mu, 1)]);
    const std::vector<M> input = ref.u;
    std::vector<double> links, g, local(18 * v, 0.0);
    flat(ref.u, links);
    flat(ref.g, g);

    double f0, theta0, f_prev;
    kernel_quality(l, ndir, links, &f0, &theta0);
    f_prev = f0;
    double worst_link = 0, worst_f = 0, worst_theta = 0, worst_drop = 0, theta = theta0;
    for (int s = 1; s <= sweeps; ++s) {
        for (int p = 0; p < 2; ++p) {
            emu_launch(blocks(v / 2, 64), 64, 0, false, [&] {
                gauge_fix_site(links.data(), local.data(), g.data(), l.d[0], l.d[1], l.d[2], l.d[3], p, ndir, omega);
            });
            emu_launch(blocks(v, 64), 64, 0, false,
                       [&] { gauge_fix_apply(links.data(), local.data(), l.d[0], l.d[1], l.d[2], l.d[3], p); });
        }
        ref.sweep(ndir, omega);
        if (s % reunitarise_every == 0) {
            emu_launch(blocks(4 * v, 64), 64, 0, false, [&] { reunitarise_links(links.data(), 4 * v); });
            emu_launch(blocks(v, 64), 64, 0, false, [&] { reunitarise_links(g.data(), v); });
            for (M& m : ref.u)
                m = project(m);
            for (M& m : ref.g)
                m = project(m);
        }
        for (int k = 0; k < 4 * v; ++k)
            worst_link = std::max(worst_link, max_diff(ref.u[k], &links[18 * k]));
        for (int x = 0; x < v; ++x)
            worst_link = std::max(worst_link, max_diff(ref.g[x], &g[18 * x]));
        double f, fr, thr;
        kernel_quality(l, ndir, links, &f, &theta);
        ref.quality(ndir, &fr, &thr);
        worst_f = std::max(worst_f, std::abs(f - fr));
        worst_theta = std::max(worst_theta, std::abs(theta - thr) / std::max(thr, 1e-300));
        worst_drop = std::max(worst_drop, f_prev - f);
        f_prev = f;
    }
    char d[160];
    std::snprintf(d, sizeof d, "(%.1e)", worst_link);
    check(std::string(name) + ": links and G as the reference's, 25 sweeps", worst_link < 1e-12, d);
    std::snprintf(d, sizeof d, "(F %.1e, theta %.1e relative)", worst_f, worst_theta);
    check(std::string(name) + ": F and theta as the reference's", worst_f < 1e-13 && worst_theta < 1e-12, d);
    std::snprintf(d, sizeof d, "(F %.12f -> %.12f, largest drop %.1e)", f0, f_prev, worst_drop);
    check(std::string(name) + ": F never decreases", worst_drop <= 1e-14 && f_prev > f0, d);
    std::snprintf(d, sizeof d, "(theta %.2e -> %.2e)", theta0, theta);
    check(std::string(name) + ": theta falls by 1e3 or more", theta < theta0 * 1e-3, d);
    double cov = 0;
    for (int x = 0; x < v; ++x) {
        M gx;
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j)
                gx.a[i][j] = C(g[18 * x + (i * 3 + j) * 2], g[18 * x + (i * 3 + j) * 2 + 1]);
        for (int mu = 0; mu < 4; ++mu) {
            int y = l.hop(x, mu, 1);
            M gy;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j)
                    gy.a[i][j] = C(g[18 * y + (i * 3 + j) * 2], g[18 * y + (i * 3 + j) * 2 + 1]);
            cov = std::max(cov, max_diff(gx * input[4 * x + mu] * dag(gy), &links[18 * (4 * x + mu)]));
        }
    }
    std::snprintf(d, sizeof d, "(%.1e)", cov);
    check(std::string(name) + ": links = G U G^+ of the input", cov < 1e-12, d);
}

int main()
{
    run("Landau 4x4x4x8", Lat{{4, 4, 4, 8}}, 4, 1.7, 11);
    run("Coulomb 4x4x4x8", Lat{{4, 4, 4, 8}}, 3, 1.7, 12);
    run("Coulomb 4x4x4x5 (odd LT)", Lat{{4, 4, 4, 5}}, 3, 1.5, 13);
    run("Landau 6x4x2x4, omega 1", Lat{{6, 4, 2, 4}}, 4, 1.0, 14);
    return failures ? 1 : 0;
}
