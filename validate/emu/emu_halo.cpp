// emu_halo.cpp: version 3.0 on a decomposed lattice, run on the CPU through cuda_emu.h:
// each emulated rank holds its sub-lattice (local links laid out as links_to_soa does, in
// each of the 18-, 12- and 8-real forms, its own ghost links, fields, face buffers); an application is halo_pack on every rank, the
// "exchange" (face buffers copied on the host: recv_lo of a rank = send_hi of its backward
// neighbour, recv_hi = send_lo of its forward one), stencil_v3 with split_mask (interior;
// D also through stencil_v3_col, in columns of 2 and 4 along t) and halo_exterior per
// split direction, as src/backend/cuda (halo.rs) launches them. The gathered result is
// compared with the undecomposed kernel run here on the whole lattice (same code, so to
// rounding: 1e-15 double, 1e-6 single) and with the CPU backend's oracle of
// emu_v3eo_dump (1e-13 / 1e-6): D and g5D (full), M_ee and g5 M_ee (even; two exchanges
// each), both hop_xpay forms, double, single, 12- and 8-real links, over several
// process grids (2, 3 and 4 ranks; x and t split, whose global edges are antiperiodic in
// the dump, and y, z periodic). Exit 1 on failure. Run by validate/emu/run_halo.sh.
#include "emu_util.h"
#include "emu_cr.h"

#define V3(name, T)                                                                                                   \
    void name(const T*, const T*, T*, const T*, double, int, int, int, int, int, int, int, int, int, int, double*,    \
              double2*, unsigned*, const float*, const float*, float*);
#define PACK(name, T) void name(const T*, T*, T*, int, int, int, int, int, int, int);
#define EXT(name, T)                                                                                                  \
    void name(const T*, const T*, T*, const T*, const T*, double, int, int, int, int, int, int, int, int, int, int,     \
              const T*, double*, double2*, unsigned*);
extern "C" {
void to_single(const double2*, float2*, long long);
V3(stencil_v3_d, double2) V3(stencil_v3_d12, double2) V3(stencil_v3_d8, double2) V3(stencil_v3_s, float2)
V3(stencil_v3_s12, float2) V3(stencil_v3_s8, float2)
V3(stencil_v3_parity_d, double2) V3(stencil_v3_parity_d12, double2) V3(stencil_v3_parity_d8, double2)
V3(stencil_v3_parity_s, float2) V3(stencil_v3_parity_s12, float2) V3(stencil_v3_parity_s8, float2)
V3(stencil_v3_col_d, double2) V3(stencil_v3_col_d12, double2) V3(stencil_v3_col_d8, double2)
V3(stencil_v3_col_s, float2) V3(stencil_v3_col_s12, float2) V3(stencil_v3_col_s8, float2)
PACK(halo_pack_d, double2) PACK(halo_pack_d12, double2) PACK(halo_pack_d8, double2) PACK(halo_pack_s, float2)
PACK(halo_pack_s12, float2) PACK(halo_pack_s8, float2)
EXT(halo_exterior_d, double2) EXT(halo_exterior_d12, double2) EXT(halo_exterior_d8, double2)
EXT(halo_exterior_s, float2) EXT(halo_exterior_s12, float2) EXT(halo_exterior_s8, float2)
}

// The face-checkerboard index of a site on a face perpendicular to mu (v3_core.cuh).
static int face_cb(const Geo& g, int mu, const int c[4])
{
    int f = 0, stride = 1;
    for (int nu = 0; nu < 4; ++nu) {
        if (nu == mu)
            continue;
        f += c[nu] * stride;
        stride *= g.l[nu];
    }
    return f / 2;
}

int main(int argc, char** argv)
{
    if (argc < 6 || (argc - 2) % 4 != 0) {
        std::fprintf(stderr, "usage: emu_halo DUMP GX GY GZ GT [GX GY GZ GT ...]\n");
        return 2;
    }
    report_width = 64;
    const V3eoDump dump = read_v3eo_dump(argv[1]);
    const DumpHeader& hd = dump.h;
    const double kappa = hd.kappa;
    const int gl[4] = {hd.l[0], hd.l[1], hd.l[2], hd.l[3]};
    const Geo G = make_geo(gl);
    const int V = G.V;
    const int mask = hd.mask;
    const size_t nf = (size_t)V * 12;
    const std::vector<double2>&canon = dump.canon, &psi = dump.psi, &phi = dump.phi;
    // Complex elements stored per link of variant v: 18, 12 and 8 reals.
    const int elems[3] = {9, 6, 4};
    auto single = [&](const std::vector<double2>& d) {
        std::vector<float2> f(d.size());
        emu_launch(blocks(d.size(), 256), 256, 0, false, [&] { to_single(d.data(), f.data(), (long long)d.size()); });
        return f;
    };
    const auto& refs = dump.refs;
    std::printf("global lattice %dx%dx%dx%d, kappa %g, antiperiodic mask %d\n", gl[0], gl[1], gl[2], gl[3], kappa,
                mask);

    for (int a = 2; a + 3 < argc; a += 4) {
        int grid[4], ll[4];
        bool ok = true;
        for (int mu = 0; mu < 4; ++mu) {
            grid[mu] = std::atoi(argv[a + mu]);
            ok = ok && grid[mu] >= 1 && gl[mu] % grid[mu] == 0;
            ll[mu] = ok ? gl[mu] / grid[mu] : 0;
            ok = ok && ll[mu] % 2 == 0;
        }
        if (!ok) {
            std::fprintf(stderr, "grid %s %s %s %s does not split the lattice into even extents\n", argv[a],
                         argv[a + 1], argv[a + 2], argv[a + 3]);
            return 2;
        }
        const Geo L = make_geo(ll);
        const int ranks = grid[0] * grid[1] * grid[2] * grid[3];
        int split_mask = 0;
        for (int mu = 0; mu < 4; ++mu)
            if (grid[mu] > 1)
                split_mask |= 1 << mu;
        struct Rank {
            int coords[4], offset[4];
            int anti_lo = 0, anti_hi = 0;
            int fwd[4], bwd[4];
            // [variant][mu]: 18, 12, 8 reals per link.
            std::vector<double2> links_d[3], ghost_d[3][4];
            std::vector<float2> links_s[3], ghost_s[3][4];
            std::vector<double2> canon;
            std::vector<double> pack8;
        };
        std::vector<Rank> R(ranks);
        auto rank_of = [&](const int c[4]) { return c[0] + grid[0] * (c[1] + grid[1] * (c[2] + grid[2] * c[3])); };
        // The global site of local site s of rank r.
        auto global_site = [&](const Rank& rk, int s) {
            int c[4];
            L.coords(s, c);
            for (int mu = 0; mu < 4; ++mu)
                c[mu] += rk.offset[mu];
            return G.index(c);
        };
        for (int r = 0; r < ranks; ++r) {
            Rank& rk = R[r];
            int x = r;
            for (int mu = 0; mu < 4; ++mu) {
                rk.coords[mu] = x % grid[mu];
                x /= grid[mu];
                rk.offset[mu] = rk.coords[mu] * ll[mu];
            }
            for (int mu = 0; mu < 4; ++mu) {
                int c[4];
                std::copy(rk.coords, rk.coords + 4, c);
                c[mu] = (rk.coords[mu] + 1) % grid[mu];
                rk.fwd[mu] = rank_of(c);
                c[mu] = (rk.coords[mu] + grid[mu] - 1) % grid[mu];
                rk.bwd[mu] = rank_of(c);
                if ((mask >> mu) & 1) {
                    if (rk.coords[mu] == 0)
                        rk.anti_lo |= 1 << mu;
                    if (rk.coords[mu] == grid[mu] - 1)
                        rk.anti_hi |= 1 << mu;
                }
            }
            rk.canon.resize((size_t)L.V * 36);
            rk.pack8.resize((size_t)L.V * 32);
            for (int s = 0; s < L.V; ++s) {
                std::copy_n(&canon[(size_t)global_site(rk, s) * 36], 36, &rk.canon[(size_t)s * 36]);
                std::copy_n(&dump.pack8[(size_t)global_site(rk, s) * 32], 32, &rk.pack8[(size_t)s * 32]);
            }
            for (int v = 0; v < 3; ++v) {
                rk.links_d[v] = soa_links(L, rk.canon.data(), rk.pack8.data(), elems[v]);
                rk.links_s[v] = single(rk.links_d[v]);
            }
        }
        // Ghost links (host side, as halo.rs upper_face_links): for split mu, the backward
        // neighbour's U_mu on its upper face, its E stored elements at q*E*Fh + e*Fh + fcb.
        for (int r = 0; r < ranks; ++r)
            for (int mu = 0; mu < 4; ++mu) {
                if (grid[mu] == 1)
                    continue;
                const Rank& nb = R[R[r].bwd[mu]];
                const int fh = L.face_sites(mu) / 2;
                for (int v = 0; v < 3; ++v) {
                    const int E = elems[v];
                    std::vector<double2> g((size_t)fh * 2 * E);
                    for (int s = 0; s < L.V; ++s) {
                        int c[4];
                        L.coords(s, c);
                        if (c[mu] != ll[mu] - 1)
                            continue;
                        const int q = L.parity(s);
                        for (int e = 0; e < E; ++e)
                            g[(size_t)q * E * fh + (size_t)e * fh + face_cb(L, mu, c)] =
                                stored_link(nb.canon.data(), nb.pack8.data(), s, mu, E, e);
                    }
                    R[r].ghost_d[v][mu] = g;
                    R[r].ghost_s[v][mu].resize(g.size());
                    for (size_t k = 0; k < g.size(); ++k)
                        R[r].ghost_s[v][mu][k] = from_d<float2>(g[k]);
                }
            }
        char gname[64];
        std::snprintf(gname, sizeof gname, "grid %dx%dx%dx%d ", grid[0], grid[1], grid[2], grid[3]);

        auto run = [&](const char* name, auto stencil, auto pack, auto exterior, auto zero, int prec,
                       bool single, int v, auto* whole_links) {
            using T = decltype(zero);
            const double tol = prec == 0 ? 1e-13 : 1e-6;
            const double tol_same = prec == 0 ? 1e-15 : 1e-6;
            const int block = 64;
            // Per-rank fields (parity-major, full) of the global psi and phi.
            auto scatter = [&](const std::vector<double2>& global) {
                std::vector<std::vector<T>> out(ranks);
                for (int r = 0; r < ranks; ++r) {
                    std::vector<double2> c((size_t)L.V * 12);
                    for (int s = 0; s < L.V; ++s)
                        std::copy_n(&global[(size_t)global_site(R[r], s) * 12], 12, &c[(size_t)s * 12]);
                    const auto pm = L.to_pm(c);
                    out[r].resize(pm.size());
                    for (size_t k = 0; k < pm.size(); ++k)
                        out[r][k] = from_d<T>(pm[k]);
                }
                return out;
            };
            // Rank fields (full, or half of parity p) back to a global canonical field.
            auto gather = [&](const std::vector<std::vector<T>>& f, int p) {
                std::vector<double2> g(nf, double2{0, 0});
                for (int r = 0; r < ranks; ++r) {
                    std::vector<double2> pm(f[r].size());
                    for (size_t k = 0; k < pm.size(); ++k)
                        pm[k] = to_d(f[r][k]);
                    if (p >= 0)
                        pm.resize((size_t)L.V * 12, double2{0, 0});
                    const auto c = L.from_pm(pm, p);
                    for (int s = 0; s < L.V; ++s)
                        std::copy_n(&c[(size_t)s * 12], 12, &g[(size_t)global_site(R[r], s) * 12]);
                }
                return g;
            };
            // One decomposed application on every rank: out = [g5] (y + c H inp), offsets
            // into the rank fields (half fields: a parity's half of a full field). With
            // `dots` (a fused CR scalar block per rank: active, CR_SPLIT set) also the
            // fused (y|out): the interior's epilogue and the exterior kernels leave the
            // rank's sum in CR_LOCAL_RE/IM (cr_device.cuh), their tickets
            // back at 0 after each launch (`tickets_ok`).
            bool tickets_ok = true;
            auto apply = [&](std::vector<std::vector<T>>& out, size_t out_off, const std::vector<std::vector<T>>& inp,
                             size_t inp_off, const std::vector<std::vector<T>>* y, size_t y_off, double c, int g5,
                             int par, int col = 1, std::vector<std::vector<double>>* dots = nullptr) {
                const bool full = par < 0;
                // The interior kernel's parity: -col in columns of col sites along t.
                const int ipar = full && col > 1 ? -col : par;
                std::vector<std::vector<std::vector<T>>> send_lo(ranks, std::vector<std::vector<T>>(4)),
                    send_hi = send_lo;
                for (int r = 0; r < ranks; ++r)
                    for (int mu = 0; mu < 4; ++mu) {
                        if (grid[mu] == 1)
                            continue;
                        const int fh = L.face_sites(mu) / 2;
                        const size_t n = (size_t)(full ? 2 : 1) * fh * 6;
                        send_lo[r][mu].assign(n, from_d<T>(double2{NAN, NAN}));
                        send_hi[r][mu].assign(n, from_d<T>(double2{NAN, NAN}));
                        const size_t threads = 2 * (n / 6);
                        // pack: the input's parity (1 - output parity) in half mode
                        emu_launch(blocks(threads, block), block, 0, false, [&] {
                            pack(inp[r].data() + inp_off, send_lo[r][mu].data(), send_hi[r][mu].data(), mu,
                                 full ? -1 : 1 - par, L.V, ll[0], ll[1], ll[2], ll[3]);
                        });
                    }
                for (int r = 0; r < ranks; ++r) {
                    const size_t nthreads = v3_threads(ipar, L.vh);
                    const T* links = single ? (const T*)R[r].links_s[v].data() : (const T*)R[r].links_d[v].data();
                    const bool dot = dots != nullptr;
                    double* sc = dot ? (*dots)[r].data() : nullptr;
                    std::vector<double2> partials(dot ? (size_t)L.V / 32 + 64 : 0);
                    double2* pp = dot ? partials.data() : nullptr;
                    unsigned ticket = 0;
                    unsigned* tk = dot ? &ticket : nullptr;
                    const T* yr = y ? (*y)[r].data() + y_off : nullptr;
                    emu_launch(blocks(nthreads, block), block, dot ? block * 16 : 0, dot, [&] {
                        stencil.of(ipar)(inp[r].data() + inp_off, yr, out[r].data() + out_off,
                                links, c, g5, ipar, L.V, ll[0], ll[1], ll[2], ll[3], split_mask, R[r].anti_lo,
                                R[r].anti_hi, sc, pp, tk, nullptr, nullptr, nullptr);
                    });
                    tickets_ok = tickets_ok && ticket == 0;
                    // Rank r's split directions (ascending mu): the received faces (its
                    // neighbours' sends) and ghost links, as halo.rs passes them.
                    for (int mu = 0; mu < 4; ++mu) {
                        if (grid[mu] == 1)
                            continue;
                        const T* recv_lo = send_hi[R[r].bwd[mu]][mu].data();
                        const T* recv_hi = send_lo[R[r].fwd[mu]][mu].data();
                        const T* ghost = single ? (const T*)R[r].ghost_s[v][mu].data()
                                                : (const T*)R[r].ghost_d[v][mu].data();
                        const size_t threads = 2 * (send_lo[R[r].fwd[mu]][mu].size() / 6);
                        emu_launch(blocks(threads, block), block, dot ? block * 16 : 0, dot, [&] {
                            exterior(recv_lo, recv_hi, out[r].data() + out_off, links, ghost, c, g5, par, mu,
                                     R[r].anti_lo, R[r].anti_hi, L.V, ll[0], ll[1], ll[2], ll[3], yr, sc, pp, tk);
                        });
                        tickets_ok = tickets_ok && ticket == 0;
                    }
                }
            };
            // The undecomposed kernel on the whole lattice (same launch as emu_v3eo).
            auto whole = [&](const std::vector<double2>& inp_c, const std::vector<double2>* y_c, double c, int g5,
                             int par) {
                const auto ip = G.to_pm(inp_c);
                std::vector<T> x(nf), yy(nf), o(nf, from_d<T>(double2{NAN, NAN}));
                for (size_t k = 0; k < nf; ++k)
                    x[k] = from_d<T>(ip[k]);
                if (y_c) {
                    const auto yp = G.to_pm(*y_c);
                    for (size_t k = 0; k < nf; ++k)
                        yy[k] = from_d<T>(yp[k]);
                }
                const size_t half = (size_t)12 * G.vh;
                const size_t in_off = par < 0 ? 0 : (size_t)(1 - par) * half;
                const size_t y_off = par < 0 ? 0 : (size_t)par * half;
                const size_t nthreads = par < 0 ? 2 * ((G.vh + 31) / 32 * 32) : G.vh;
                emu_launch(blocks(nthreads, 96), 96, 0, false, [&] {
                    stencil.of(par)(x.data() + in_off, y_c ? yy.data() + y_off : nullptr, o.data(), whole_links, c, g5, par, V,
                            gl[0], gl[1], gl[2], gl[3], 0, mask, mask, nullptr, nullptr, nullptr, nullptr, nullptr,
                            nullptr);
                });
                std::vector<double2> w(nf);
                for (size_t k = 0; k < nf; ++k)
                    w[k] = to_d(o[k]);
                if (par >= 0) {
                    w.resize(half);
                    w.resize(nf, double2{0, 0});
                }
                return G.from_pm(w, par);
            };
            auto x = scatter(psi), yv = scatter(phi);
            const size_t half = (size_t)12 * L.vh;
            std::vector<std::vector<T>> out(ranks, std::vector<T>((size_t)L.V * 12)), tmp = out;
            auto poison = [&](std::vector<std::vector<T>>& f) {
                for (auto& v : f)
                    std::fill(v.begin(), v.end(), from_d<T>(double2{NAN, NAN}));
            };
            const std::string tag = std::string(gname) + name + " ";
            // The fused (y|out) of every rank against the host's sum over the rank's sites
            // of y and the stored output (n complex numbers from offset off), relative to
            // the sum of the terms' magnitudes (g5 makes the dot cancel).
            auto fresh_dots = [&] { return std::vector<std::vector<double>>(ranks, active_cr_block(true)); };
            auto check_dots = [&](const std::string& what, const std::vector<std::vector<double>>& d,
                                  const std::vector<std::vector<T>>& yf, const std::vector<std::vector<T>>& of,
                                  size_t off, size_t n) {
                double worst = 0;
                for (int r = 0; r < ranks; ++r)
                    worst = std::max(worst, dot_error(d[r][CR_LOCAL_RE], d[r][CR_LOCAL_IM], yf[r].data(), of[r].data(), off, n));
                report(tag + what, worst, prec == 0 ? 1e-13 : 1e-7);
                report(tag + what + " tickets back to 0", tickets_ok ? 0 : 1, 0);
                tickets_ok = true;
            };
            // D, g5D (full): y = inp
            for (int g5 = 0; g5 < 2; ++g5) {
                poison(out);
                apply(out, 0, x, 0, &x, 0, -kappa, g5, -1);
                const auto got = gather(out, -1);
                report(tag + (g5 ? "g5D full vs CPU" : "D full vs CPU"), rel_diff(got, refs[prec][g5]), tol);
                report(tag + (g5 ? "g5D full vs undecomposed" : "D full vs undecomposed"),
                       rel_diff(got, whole(psi, &psi, -kappa, g5, -1)), tol_same);
            }
            // The interior kernel in columns along t (stencil_v3_col) of 2 and 4 sites (the
            // host's lengths in single and double, src/backend/cuda/stencil.rs
            // full_column), where they divide the local LT.
            for (int col : {2, 4}) {
                if (ll[3] % col)
                    continue;
                for (int g5 = 0; g5 < 2; ++g5) {
                    poison(out);
                    apply(out, 0, x, 0, &x, 0, -kappa, g5, -1, col);
                    const auto got = gather(out, -1);
                    report(tag + "col" + std::to_string(col) + (g5 ? " g5D full vs CPU" : " D full vs CPU"),
                           rel_diff(got, refs[prec][g5]), tol);
                }
            }
            // The full g5 D with the fused (x|g5 D x), one site a thread and in columns.
            for (int col : {1, 2, 4}) {
                if (ll[3] % col)
                    continue;
                auto d = fresh_dots();
                poison(out);
                apply(out, 0, x, 0, &x, 0, -kappa, 1, -1, col, &d);
                report(tag + "col" + std::to_string(col) + " g5D full (fused dot) vs CPU", rel_diff(gather(out, -1), refs[prec][1]),
                       tol);
                check_dots("col" + std::to_string(col) + "   (x|g5 D x) split vs host", d, x, out, 0, (size_t)L.V * 12);
            }
            // Schur (even): tmp_o = H x_e, out_e = [g5] (x_e - kappa^2 H tmp_o); the
            // rank fields are full, half fields at offsets 0 (even) and half (odd).
            for (int g5 = 0; g5 < 2; ++g5) {
                poison(out);
                poison(tmp);
                apply(tmp, half, x, 0, nullptr, 0, 1.0, 0, 1);
                apply(out, 0, tmp, half, &x, 0, -kappa * kappa, g5, 0);
                for (auto& v : out)
                    std::fill(v.begin() + half, v.end(), from_d<T>(double2{0, 0}));
                report(tag + (g5 ? "g5Mee even vs CPU" : "Mee even vs CPU"), rel_diff(gather(out, -1), refs[prec][2 + g5]),
                       tol);
            }
            {
                // g5 Mee with the fused (x_e|g5 Mee x_e) on its second hop (the fused CR's
                // even-odd apply).
                auto d = fresh_dots();
                poison(out);
                poison(tmp);
                apply(tmp, half, x, 0, nullptr, 0, 1.0, 0, 1);
                apply(out, 0, tmp, half, &x, 0, -kappa * kappa, 1, 0, 1, &d);
                check_dots("  (x|g5 Mee x) split vs host", d, x, out, 0, half);
                for (auto& v : out)
                    std::fill(v.begin() + half, v.end(), from_d<T>(double2{0, 0}));
                report(tag + "g5Mee even (fused dot) vs CPU", rel_diff(gather(out, -1), refs[prec][3]), tol);
                // Inactive: neither the interior nor the exterior writes.
                for (auto& b : d)
                    b[CR_ACTIVE] = 0;
                std::vector<std::vector<T>> untouched(ranks, std::vector<T>((size_t)L.V * 12, from_d<T>(double2{7, 7})));
                apply(untouched, 0, tmp, half, &x, 0, -kappa * kappa, 1, 0, 1, &d);
                double moved = 0;
                for (auto& v : untouched)
                    for (auto& z : v)
                        moved = std::max(moved, std::abs(to_d(z).x - 7) + std::abs(to_d(z).y - 7));
                report(tag + "  inactive: nothing written", moved, 0.0);
            }
            // hop_xpay even: [g5] (phi_e + 0.37 H psi_o); odd: phi_o - 0.21 H psi_e
            poison(out);
            apply(out, 0, x, half, &yv, 0, 0.37, 1, 0);
            for (auto& v : out)
                std::fill(v.begin() + half, v.end(), from_d<T>(double2{0, 0}));
            {
                const auto got = gather(out, -1);
                report(tag + "hop_xpay even (c 0.37, g5) vs CPU", rel_diff(got, refs[prec][4]), tol);
                report(tag + "hop_xpay even vs undecomposed", rel_diff(got, whole(psi, &phi, 0.37, 1, 0)), tol_same);
            }
            poison(out);
            apply(out, half, x, 0, &yv, half, -0.21, 0, 1);
            for (auto& v : out)
                std::fill(v.begin(), v.begin() + half, from_d<T>(double2{0, 0}));
            {
                const auto got = gather(out, -1);
                report(tag + "hop_xpay odd (c -0.21) vs CPU", rel_diff(got, refs[prec][5]), tol);
                report(tag + "hop_xpay odd vs undecomposed", rel_diff(got, whole(psi, &phi, -0.21, 0, 1)), tol_same);
            }
        };
        // Whole-lattice links for the undecomposed reference run, per variant.
        std::vector<double2> wl_d[3];
        std::vector<float2> wl_s[3];
        for (int v = 0; v < 3; ++v) {
            wl_d[v] = soa_links(G, canon.data(), dump.pack8.data(), elems[v]);
            wl_s[v] = single(wl_d[v]);
        }
        run("double", v3_entry(stencil_v3_d, stencil_v3_parity_d, decltype(&stencil_v3_d)(), stencil_v3_col_d), halo_pack_d, halo_exterior_d, double2{}, 0, false, 0, wl_d[0].data());
        run("double r12", v3_entry(stencil_v3_d12, stencil_v3_parity_d12, decltype(&stencil_v3_d12)(), stencil_v3_col_d12), halo_pack_d12, halo_exterior_d12, double2{}, 0, false, 1, wl_d[1].data());
        run("double r8", v3_entry(stencil_v3_d8, stencil_v3_parity_d8, decltype(&stencil_v3_d8)(), stencil_v3_col_d8), halo_pack_d8, halo_exterior_d8, double2{}, 0, false, 2, wl_d[2].data());
        run("single", v3_entry(stencil_v3_s, stencil_v3_parity_s, decltype(&stencil_v3_s)(), stencil_v3_col_s), halo_pack_s, halo_exterior_s, float2{}, 1, true, 0, wl_s[0].data());
        run("single r12", v3_entry(stencil_v3_s12, stencil_v3_parity_s12, decltype(&stencil_v3_s12)(), stencil_v3_col_s12), halo_pack_s12, halo_exterior_s12, float2{}, 1, true, 1, wl_s[1].data());
        run("single r8", v3_entry(stencil_v3_s8, stencil_v3_parity_s8, decltype(&stencil_v3_s8)(), stencil_v3_col_s8), halo_pack_s8, halo_exterior_s8, float2{}, 1, true, 2, wl_s[2].data());
    }
    std::printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
