// emu_v3eo.cpp: runs version 3.0's parity-major stencil family (kernels/stencil_v3.cu in
// double and single precision, 18, 12 and 8 reals per link; full and parity modes, the
// full mode also in columns of 2 and 4 sites along t, the xpay form, the fused (y|out)
// epilogue; and the half build V3_HALF) and to_single,
// to_double, to_half, from_half (layout.cu), xaxpy_h, xpay_h (blas1.cu) on the CPU
// through cuda_emu.h, with the launch geometry of src/cuda (stencil::launch_v3), and
// compares with the CPU backend's results written by `cargo run --example emu_v3eo_dump`.
// The link arrays are built here as src/backend/cuda/fast_layout.rs links_to_soa builds
// them (the 8-real form from the dump's Su3::pack8 values); the 8-real decoder
// (v3_core.cuh v3_unpack_8) is also checked link by link in both precisions.
// Prints one line per check; exit 1 on failure. Run by validate/emu/run_v3eo.sh.
#include "emu_util.h"
#include "emu_cr.h"
#define RECONSTRUCT_8 1
#include "v3_core.cuh"

#define V3D(name)                                                                                                     \
    void name(const double2*, const double2*, double2*, const double2*, double, int, int, int, int, int, int, int,    \
              int, int, int, double*, double2*, unsigned*, const float*, const float*, float*);
#define V3S(name)                                                                                                     \
    void name(const float2*, const float2*, float2*, const float2*, double, int, int, int, int, int, int, int, int,   \
              int, int, double*, double2*, unsigned*, const float*, const float*, float*);
#define V3H(name)                                                                                                     \
    void name(const short2*, const short2*, short2*, const short2*, double, int, int, int, int, int, int, int, int,   \
              int, int, double*, double2*, unsigned*, const float*, const float*, float*);
extern "C" {
void to_single(const double2*, float2*, long long);
void to_double(const float2*, double2*, long long);
void to_link16(const double2*, short2*, long long);
void to_half(const double2*, short2*, float*, long long, long long);
void from_half(const short2*, const float*, double2*, long long, long long);
void xaxpy_h(const short2*, const float*, short2*, float*, double, double, long long, long long);
void xpay_h(const short2*, const float*, short2*, float*, double, double, long long, long long);
V3D(stencil_v3_d) V3D(stencil_v3_d12) V3D(stencil_v3_d8) V3S(stencil_v3_s) V3S(stencil_v3_s12)
    V3S(stencil_v3_s8) V3H(stencil_v3_h) V3H(stencil_v3_h12)
V3D(stencil_v3_parity_d) V3D(stencil_v3_parity_d12) V3D(stencil_v3_parity_d8) V3S(stencil_v3_parity_s)
    V3S(stencil_v3_parity_s12) V3S(stencil_v3_parity_s8) V3H(stencil_v3_parity_h) V3H(stencil_v3_parity_h12)
V3D(stencil_v3_full_dot_d) V3D(stencil_v3_full_dot_d12) V3D(stencil_v3_full_dot_d8) V3S(stencil_v3_full_dot_s)
    V3S(stencil_v3_full_dot_s12) V3S(stencil_v3_full_dot_s8) V3H(stencil_v3_full_dot_h) V3H(stencil_v3_full_dot_h12)
V3D(stencil_v3_col_d) V3D(stencil_v3_col_d12) V3D(stencil_v3_col_d8) V3S(stencil_v3_col_s) V3S(stencil_v3_col_s12)
    V3S(stencil_v3_col_s8) V3H(stencil_v3_col_h) V3H(stencil_v3_col_h12)
V3D(stencil_v3_full_dot_col_d) V3D(stencil_v3_full_dot_col_d12) V3D(stencil_v3_full_dot_col_d8)
    V3S(stencil_v3_full_dot_col_s) V3S(stencil_v3_full_dot_col_s12) V3S(stencil_v3_full_dot_col_s8)
        V3H(stencil_v3_full_dot_col_h) V3H(stencil_v3_full_dot_col_h12)
}

// A build's five entry points (run_v3eo.sh names them with the build's suffix).
#define V3E(suf)                                                                                                      \
    v3_entry(&stencil_v3_##suf, &stencil_v3_parity_##suf, &stencil_v3_full_dot_##suf, &stencil_v3_col_##suf,          \
             &stencil_v3_full_dot_col_##suf)

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: emu_v3eo DUMP\n");
        return 2;
    }
    const V3eoDump dump = read_v3eo_dump(argv[1]);
    const DumpHeader& hd = dump.h;
    const double kappa = hd.kappa;
    const int lx = hd.l[0], ly = hd.l[1], lz = hd.l[2], lt = hd.l[3];
    const int V = lx * ly * lz * lt, vh = V / 2;
    const int mask = hd.mask;
    const size_t nf = (size_t)V * 12;
    const std::vector<double2>&canon = dump.canon, &psi = dump.psi, &phi = dump.phi;
    const auto& refs = dump.refs;
    const double rar_re = dump.rar_re, rar_im = dump.rar_im;
    std::printf("lattice %dx%dx%dx%d (V = %d), kappa %g, antiperiodic mask %d\n", lx, ly, lz, lt, V, kappa, mask);

    // Host mirror of src/cuda/backend/fast.rs: the parity-major maps.
    const Geo G = make_geo(hd.l);
    auto to_pm = [&](const std::vector<double2>& c) { return G.to_pm(c); };
    auto from_pm = [&](const std::vector<double2>& pm, int p) { return G.from_pm(pm, p); };

    auto soa = [&](int E) { return soa_links(G, canon.data(), dump.pack8.data(), E); };
    auto single = [&](const std::vector<double2>& d) {
        std::vector<float2> f(d.size());
        emu_launch(blocks(d.size(), 256), 256, 0, false,
                   [&] { to_single(d.data(), f.data(), (long long)d.size()); });
        return f;
    };
    const std::vector<double2> links_d = soa(9), links_d12 = soa(6), links_d8 = soa(4);
    const std::vector<float2> links_s = single(links_d), links_s12 = single(links_d12), links_s8 = single(links_d8);
    // The half build's 16-bit links (layout.cu to_link16, v3_core.cuh V3_LINK16).
    auto link16 = [&](const std::vector<double2>& d) {
        std::vector<short2> q(d.size());
        emu_launch(blocks(d.size(), 256), 256, 0, false,
                   [&] { to_link16(d.data(), q.data(), (long long)d.size()); });
        return q;
    };
    const std::vector<short2> links_h = link16(links_d), links_h12 = link16(links_d12);
    {
        // to_link16 rounds each real to the nearest multiple of 1/32767: within half a step.
        double worst = 0;
        for (size_t k = 0; k < links_d.size(); ++k)
            worst = std::max({worst, std::abs(links_h[k].x / 32767.0 - links_d[k].x),
                              std::abs(links_h[k].y / 32767.0 - links_d[k].y)});
        report("to_link16: max |error| (bound half a step, 0.5 / 32767 = 1.53e-5)", worst, 0.5 / 32767);
    }
    {
        // v3_unpack_8 on every link against the canonical matrix, as the ratio of the
        // error to the bound of src/field/su3.rs's round-trip tests: 8 eps (1 + 1/|U00| +
        // 1/|U20|) (eps 1.2e-16 double, 6e-8 single; these links are SU(3) to 1e-15).
        double worst[2] = {0, 0}, err[2] = {0, 0};
        int degenerate = 0;
        for (size_t link = 0; link < (size_t)V * 4; ++link) {
            const double* r = &dump.pack8[link * 8];
            degenerate += r[7] > 4;
            double2 sd[4], ud[3][3];
            float2 sf[4], uf[3][3];
            for (int e = 0; e < 4; ++e) {
                sd[e] = double2{r[2 * e], r[2 * e + 1]};
                sf[e] = float2{(float)r[2 * e], (float)r[2 * e + 1]};
            }
            v3_unpack_8(sd, ud);
            v3_unpack_8(sf, uf);
            const double2* u = &canon[link * 9];
            const double inv = 1 + 1 / std::hypot(u[0].x, u[0].y) + 1 / std::hypot(u[6].x, u[6].y);
            for (int k = 0; k < 9; ++k) {
                const double ed = std::hypot(ud[k / 3][k % 3].x - u[k].x, ud[k / 3][k % 3].y - u[k].y);
                const double ef = std::hypot(uf[k / 3][k % 3].x - u[k].x, uf[k / 3][k % 3].y - u[k].y);
                err[0] = std::max(err[0], ed);
                err[1] = std::max(err[1], ef);
                worst[0] = std::max(worst[0], ed / (8 * 1.2e-16 * inv));
                worst[1] = std::max(worst[1], ef / (8 * 6e-8 * inv));
            }
        }
        std::printf("v3_unpack_8: %d links (%d degenerate), max element error %.2e double, %.2e single\n",
                    V * 4, degenerate, err[0], err[1]);
        report("v3_unpack_8 double (error / bound)", worst[0], 1);
        report("v3_unpack_8 single (error / bound)", worst[1], 1);
        report("degenerate links in the dump (>= 4 wanted)", degenerate >= 4 ? 0 : 1, 0);
    }
    {
        std::vector<double2> back((size_t)V * 36);
        emu_launch(blocks((size_t)V * 36, 256), 256, 0, false,
                   [&] { to_double(links_s.data(), back.data(), (long long)V * 36); });
        double worst = 0;
        for (size_t k = 0; k < back.size(); ++k)
            worst = std::max(worst, std::abs(back[k].x - links_d[k].x) + std::abs(back[k].y - links_d[k].y));
        report("to_single / to_double links (max abs diff)", worst, 1e-6);
    }

    const std::vector<double2> psi_pm = to_pm(psi), phi_pm = to_pm(phi);

    auto run = [&](const char* name, auto kernel, auto* links, auto zero, int prec, int block) {
        using T = decltype(zero);
        const double tol = prec == 0 ? 1e-13 : 1e-6;
        std::vector<T> x(nf), y(nf), out(nf), tmp((size_t)vh * 12);
        for (size_t k = 0; k < nf; ++k) {
            x[k] = from_d<T>(psi_pm[k]);
            y[k] = from_d<T>(phi_pm[k]);
        }
        auto widen = [&](const std::vector<T>& f, size_t n) {
            std::vector<double2> d(nf, double2{0, 0});
            for (size_t k = 0; k < n; ++k)
                d[k] = to_d(f[k]);
            return d;
        };
        const T* xe = x.data();
        const T* xo = x.data() + (size_t)12 * vh;
        auto launch = [&](const T* inp, const T* yy, T* o, double c, int g5, int par, double* s, double2* partials,
                          unsigned* ticket) {
            const size_t n = v3_threads(par, vh);
            const bool dot = partials != nullptr;
            emu_launch(blocks(n, block), block, dot ? block * 16 : 0, dot, [&] {
                kernel.of(par, dot)(inp, yy, o, links, c, g5, par, V, lx, ly, lz, lt, 0, mask, mask, s, partials, ticket, nullptr,
                       nullptr, nullptr);
            });
        };
        const std::string tag = std::string(name) + " b" + std::to_string(block) + " ";
        // The full mode one site a thread (par -1) and in columns of 2 and 4 along t (the
        // _col entry points; columns divide LT).
        for (int par : {-1, -2, -4}) {
            if (lt % -par)
                continue;
            const std::string ctag = tag + (par < -1 ? "col" + std::to_string(-par) + " " : "");
            for (int g5 = 0; g5 < 2; ++g5) {
                std::fill(out.begin(), out.end(), from_d<T>(double2{NAN, NAN}));
                launch(x.data(), x.data(), out.data(), -kappa, g5, par, nullptr, nullptr, nullptr);
                report(ctag + (g5 ? "g5D full" : "D full"), rel_diff(from_pm(widen(out, nf), -1), refs[prec][g5]), tol);
            }
            {
                // The full mode with the dot epilogue (stencil_v3_full_dot): g5 D x, and
                // rar = (x|g5 D x) against the host's sum over the two stored fields. The
                // sums differ only in order: the error is bounded relative to the sum of the
                // terms' magnitudes (g5 makes the dot itself cancel on larger lattices).
                std::vector<double> s = active_cr_block(false);
                std::vector<double2> partials(V / 32 + 1);
                unsigned ticket = 0;
                std::fill(out.begin(), out.end(), from_d<T>(double2{NAN, NAN}));
                launch(x.data(), x.data(), out.data(), -kappa, 1, par, s.data(), partials.data(), &ticket);
                report(ctag + "g5D full (fused dot)", rel_diff(from_pm(widen(out, nf), -1), refs[prec][1]), tol);
                const auto xw = widen(x, nf), ow = widen(out, nf);
                report(ctag + "  (x|g5 D x) vs host", dot_error(s[CR_RAR_RE], s[CR_RAR_IM], xw.data(), ow.data(), 0, nf), 1e-13);
                report(ctag + "  ticket back to 0", ticket, 0);
            }
        }
        for (int g5 = 0; g5 < 2; ++g5) {
            std::fill(out.begin(), out.end(), from_d<T>(double2{NAN, NAN}));
            launch(xe, nullptr, tmp.data(), 1.0, 0, 1, nullptr, nullptr, nullptr);
            // The fused epilogue on the g5 Mee launch: scalars active, rar = 1.
            std::vector<double> s = active_cr_block(false);
            std::vector<double2> partials(V / 32 + 1);
            unsigned ticket = 0;
            launch(tmp.data(), xe, out.data(), -kappa * kappa, g5, 0, g5 ? s.data() : nullptr,
                   g5 ? partials.data() : nullptr, g5 ? &ticket : nullptr);
            report(tag + (g5 ? "g5Mee even (fused dot)" : "Mee even"),
                   rel_diff(from_pm(widen(out, (size_t)12 * vh), 0), refs[prec][2 + g5]), tol);
            if (g5) {
                // Relative to the sum of the terms' magnitudes (the dot cancels on larger
                // lattices; single: the stored output is rounded to single first).
                const size_t ne = (size_t)12 * vh;
                const auto xw = widen(x, ne), ow = widen(out, ne);
                double mag = 0;
                for (size_t k = 0; k < ne; ++k)
                    mag += std::hypot(xw[k].x, xw[k].y) * std::hypot(ow[k].x, ow[k].y);
                const double d = std::hypot(s[CR_RAR_RE] - rar_re, s[CR_RAR_IM] - rar_im) / mag;
                report(tag + "  (r|g5 Mee r) vs CPU", d, prec == 0 ? 1e-13 : 1e-7);
                report(tag + "  beta = rar_new / 1", std::hypot(s[CR_BETA_RE] - s[CR_RAR_RE], s[CR_BETA_IM] - s[CR_RAR_IM]), 0.0);
                report(tag + "  ticket back to 0", ticket, 0);
                // Inactive: nothing is written.
                s[CR_ACTIVE] = 0;
                std::vector<T> untouched(nf, from_d<T>(double2{7, 7}));
                launch(tmp.data(), xe, untouched.data(), -kappa * kappa, 1, 0, s.data(), partials.data(), &ticket);
                double moved = 0;
                for (auto& z : untouched)
                    moved += std::abs(to_d(z).x - 7) + std::abs(to_d(z).y - 7);
                report(tag + "  inactive launch writes nothing", moved, 0);
            }
        }
        std::fill(out.begin(), out.end(), from_d<T>(double2{NAN, NAN}));
        launch(xo, y.data(), out.data(), 0.37, 1, 0, nullptr, nullptr, nullptr);
        report(tag + "hop_xpay even (c 0.37, g5)", rel_diff(from_pm(widen(out, (size_t)12 * vh), 0), refs[prec][4]),
               tol);
        std::fill(out.begin(), out.end(), from_d<T>(double2{NAN, NAN}));
        launch(xe, y.data() + (size_t)12 * vh, out.data(), -0.21, 0, 1, nullptr, nullptr, nullptr);
        report(tag + "hop_xpay odd (c -0.21)", rel_diff(from_pm(widen(out, (size_t)12 * vh), 1), refs[prec][5]), tol);
    };
    for (int block : {32, 96}) {
        run("3.0 double", V3E(d), links_d.data(), double2{}, 0, block);
        run("3.0 double r12", V3E(d12), links_d12.data(), double2{}, 0, block);
        run("3.0 double r8", V3E(d8), links_d8.data(), double2{}, 0, block);
        run("3.0 single", V3E(s), links_s.data(), float2{}, 1, block);
        run("3.0 single r12", V3E(s12), links_s12.data(), float2{}, 1, block);
        run("3.0 single r8", V3E(s8), links_s8.data(), float2{}, 1, block);
    }
    // Half spinors (V3_HALF, 16-bit links) against the CPU backend's half fields (double
    // links): inputs converted by to_half (which rounds in double as the host does, so
    // both sides start from the same integers), outputs each rounded once per site by
    // either side. The two differ by the float arithmetic (~1e-7), by the links' rounding
    // (at most half of 1/32767 a real, to_link16 below: times |h| and |c| summed over the
    // hops, a fraction of a step of the site norm on these fields), and where that moves
    // a real across a rounding boundary: at most one step, 1/32767 = 3.1e-5 of the site's
    // norm per real; 1e-4 relative in the norm (sites' rms below their largest real)
    // bounds it.
    // The Schur form rounds its odd temporary on the GPU (the CPU's stays double): one
    // more half step, times kappa^2 |H| < 1.
    {
        const double tol = 1e-4;
        // A full half field: integers (12 short2 per site) and norms, parity blocks of vh.
        struct Half {
            std::vector<short2> q;
            std::vector<float> n;
        };
        auto to_h = [&](const std::vector<double2>& pm, size_t sites) {
            Half h{std::vector<short2>(sites * 12), std::vector<float>(sites)};
            emu_launch(blocks(sites, 64), 64, 0, false,
                       [&] { to_half(pm.data(), h.q.data(), h.n.data(), (long long)sites, vh); });
            return h;
        };
        auto widen = [&](const Half& h, size_t sites) {
            std::vector<double2> d(nf, double2{0, 0});
            emu_launch(blocks(sites, 64), 64, 0, false,
                       [&] { from_half(h.q.data(), h.n.data(), d.data(), (long long)sites, vh); });
            return d;
        };
        // The conversion round trip on the host's rounding: psi -> half -> double is the
        // CPU's half rounding of psi (the same operations in double: equal bits).
        {
            const Half x = to_h(psi_pm, V);
            const std::vector<double2> back = from_pm(widen(x, V), -1);
            double worst = 0;
            for (int s = 0; s < V; ++s) {
                double m = 0;
                for (int k = 0; k < 12; ++k)
                    m = std::max({m, std::abs(psi[12 * s + k].x), std::abs(psi[12 * s + k].y)});
                for (int k = 0; k < 12; ++k) {
                    const double2 a = psi[12 * s + k], b = back[12 * s + k];
                    worst = std::max(worst, std::max(std::abs(a.x - b.x), std::abs(a.y - b.y)) / m);
                }
            }
            report("to_half / from_half: max |error| / site norm (bound 1/32767 = 3.05e-5)", worst, 1.0 / 32767);
        }
        // xaxpy_h / xpay_h against the same operation in double on the stored values,
        // rounded: within one step of the site norm per real (float arithmetic).
        for (int xp = 0; xp < 2; ++xp) {
            const Half x = to_h(psi_pm, V);
            Half y = to_h(phi_pm, V);
            const std::vector<double2> xd = widen(x, V), yd = widen(y, V);
            const double ar = 0.3, ai = -1.7;
            emu_launch(blocks(V, 64), 64, 0, false, [&] {
                (xp ? xpay_h : xaxpy_h)(x.q.data(), x.n.data(), y.q.data(), y.n.data(), ar, ai, V, vh);
            });
            const std::vector<double2> got = widen(y, V);
            double worst = 0;
            for (int s = 0; s < V; ++s) {
                const size_t b = (size_t)(s / vh) * 12 * vh + s % vh;
                double2 want[12];
                double m = 0;
                for (int k = 0; k < 12; ++k) {
                    const double2 a = xd[b + k * vh], c = yd[b + k * vh];
                    const double2 u = xp ? a : c, w = xp ? c : a; // u + (ar + i ai) w
                    want[k] = double2{u.x + ar * w.x - ai * w.y, u.y + ar * w.y + ai * w.x};
                    m = std::max({m, std::abs(want[k].x), std::abs(want[k].y)});
                }
                for (int k = 0; k < 12; ++k) {
                    const double2 g = got[b + k * vh];
                    worst = std::max(worst, std::max(std::abs(g.x - want[k].x), std::abs(g.y - want[k].y)) / m);
                }
            }
            report(std::string(xp ? "xpay_h" : "xaxpy_h") + ": max |error| / site norm (bound 1/32767)", worst,
                   1.0 / 32767);
        }
        struct HalfBuild {
            const char* name;
            V3Entry<decltype(&stencil_v3_h)> kernel;
            const short2* links;
        };
        const HalfBuild builds[] = {
            {"3.0 half", V3E(h), links_h.data()},
            {"3.0 half r12", V3E(h12), links_h12.data()}};
        // The largest |a - b| of a real in steps of b's site norm (sites of parity p, or all
        // with p < 0): the per-site measure of tests/gpu_half.rs, here against the CPU's
        // rounded result (which adds its own half step), so bounded by 2 + 0.5 steps.
        auto steps = [&](const std::vector<double2>& a, const std::vector<double2>& b, int p) {
            double worst = 0;
            for (int s = 0; s < V; ++s) {
                int c[4] = {s % lx, (s / lx) % ly, (s / (lx * ly)) % lz, s / (lx * ly * lz)};
                if (p >= 0 && ((c[0] + c[1] + c[2] + c[3]) & 1) != p)
                    continue;
                double m = 0;
                for (int k = 0; k < 12; ++k)
                    m = std::max({m, std::abs(b[12 * s + k].x), std::abs(b[12 * s + k].y)});
                for (int k = 0; k < 12; ++k)
                    worst = std::max(worst, std::max(std::abs(a[12 * s + k].x - b[12 * s + k].x),
                                                     std::abs(a[12 * s + k].y - b[12 * s + k].y)) *
                                                32767 / m);
            }
            return worst;
        };
        for (auto [name, kernel, links] : builds) {
            const Half x = to_h(psi_pm, V), y = to_h(phi_pm, V);
            Half out{std::vector<short2>(nf), std::vector<float>(V)};
            Half tmp{std::vector<short2>((size_t)vh * 12), std::vector<float>(vh)};
            auto launch = [&](const short2* inp, const float* in_n, const short2* yy, const float* y_n, short2* o,
                              float* o_n, double c, int g5, int par) {
                const size_t n = v3_threads(par, vh);
                emu_launch(blocks(n, 64), 64, 0, false, [&] {
                    kernel.of(par)(inp, yy, o, links, c, g5, par, V, lx, ly, lz, lt, 0, mask, mask, nullptr, nullptr,
                           nullptr, in_n, y_n, o_n);
                });
            };
            const std::string tag = std::string(name) + " ";
            const short2* xe = x.q.data();
            const short2* xo = x.q.data() + (size_t)12 * vh;
            for (int g5 = 0; g5 < 2; ++g5) {
                launch(x.q.data(), x.n.data(), x.q.data(), x.n.data(), out.q.data(), out.n.data(), -kappa, g5, -1);
                report(tag + (g5 ? "g5D full" : "D full"), rel_diff(from_pm(widen(out, V), -1), refs[2][g5]), tol);
                report(tag + "  worst steps of the site norm", steps(from_pm(widen(out, V), -1), refs[2][g5], -1),
                       2.5);
                // In columns of 2 along t (stencil_v3_col; the hops add in another order).
                Half col{std::vector<short2>(nf), std::vector<float>(V)};
                launch(x.q.data(), x.n.data(), x.q.data(), x.n.data(), col.q.data(), col.n.data(), -kappa, g5, -2);
                report(tag + "col2 " + (g5 ? "g5D full" : "D full"), rel_diff(from_pm(widen(col, V), -1), refs[2][g5]),
                       tol);
                report(tag + "col2   worst steps of the site norm",
                       steps(from_pm(widen(col, V), -1), refs[2][g5], -1), 2.5);
                launch(xe, x.n.data(), nullptr, nullptr, tmp.q.data(), tmp.n.data(), 1.0, 0, 1);
                launch(tmp.q.data(), tmp.n.data(), xe, x.n.data(), out.q.data(), out.n.data(), -kappa * kappa, g5, 0);
                report(tag + (g5 ? "g5Mee even" : "Mee even"), rel_diff(from_pm(widen(out, vh), 0), refs[2][2 + g5]),
                       tol);
                report(tag + "  worst steps of the site norm", steps(from_pm(widen(out, vh), 0), refs[2][2 + g5], 0),
                       2.5);
            }
            launch(xo, x.n.data() + vh, y.q.data(), y.n.data(), out.q.data(), out.n.data(), 0.37, 1, 0);
            report(tag + "hop_xpay even (c 0.37, g5)", rel_diff(from_pm(widen(out, vh), 0), refs[2][4]), tol);
            launch(xe, x.n.data(), y.q.data() + (size_t)12 * vh, y.n.data() + vh, out.q.data(), out.n.data(), -0.21,
                   0, 1);
            report(tag + "hop_xpay odd (c -0.21)", rel_diff(from_pm(widen(out, vh), 1), refs[2][5]), tol);
        }
    }
    std::printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
