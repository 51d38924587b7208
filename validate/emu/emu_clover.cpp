// emu_clover.cpp: runs version 3.0's CLOVER=1 builds (kernels/stencil_v3.cu with
// kernels/clover.cuh; double, single and half spinors, 18, 12 and 8 reals per link) on the
// CPU through cuda_emu.h and compares with the CPU reference written by
// `cargo run --example emu_clover_dump`: the full D (one site a thread, in columns of 2
// along t, and with the fused (y|out) epilogue), the Schur operator M_ee from its two
// halves (A_oo^-1 H_oe psi_e, then A_ee psi_e - kappa^2 H_eo t_o), the reconstruction
// A_oo^-1 (b_o + kappa H_oe x_e) and the site kernel A^-1 b (full and odd). The clover
// arrays are the dump's device form (dirac::clover_pack) reordered here as
// clover_pack::to_parity_soa does; every precision is compared with the double reference.
// Prints one line per check; exit 1 on failure. Run by validate/emu/run_clover.sh.
#include "emu_util.h"
#include "emu_cr.h"

// S the stored spinor element, K the stored link element (the half build's 16-bit links
// with 18 or 12 reals: short2), L the clover arrays' element.
#define CLARGS(S, K, L)                                                                                               \
    (const S*, const S*, S*, const K*, double, int, int, int, int, int, int, int, int, int, int, double*, double2*,    \
     unsigned*, const float*, const float*, float*, const L*, const L*, double, int)
#define CLSITE(S, L) (const S*, S*, const L*, const L*, double, int, int, const float*, float*)
#define CLDECL(suf, S, K, L)                                                                                          \
    void stencil_v3_##suf CLARGS(S, K, L);                                                                            \
    void stencil_v3_parity_##suf CLARGS(S, K, L);                                                                     \
    void stencil_v3_full_dot_##suf CLARGS(S, K, L);                                                                   \
    void stencil_v3_col_##suf CLARGS(S, K, L);                                                                        \
    void stencil_v3_full_dot_col_##suf CLARGS(S, K, L);                                                               \
    void stencil_v3_clover_inv_##suf CLSITE(S, L);
extern "C" {
void to_half(const double2*, short2*, float*, long long, long long);
void from_half(const short2*, const float*, double2*, long long, long long);
void to_link16(const double2*, short2*, long long);
CLDECL(cd, double2, double2, double2)
CLDECL(cd12, double2, double2, double2)
CLDECL(cd8, double2, double2, double2)
CLDECL(cs, float2, float2, float2)
CLDECL(cs12, float2, float2, float2)
CLDECL(cs8, float2, float2, float2)
CLDECL(ch, short2, short2, float2)
CLDECL(ch12, short2, short2, float2)
CLDECL(ch8, short2, float2, float2)
}

// A build: its stencil entry points (V3Entry) and its site kernel.
template <class S, class K, class L>
struct Build {
    using Entry = void(*) CLARGS(S, K, L);
    const char* name;
    V3Entry<Entry> k;
    void(*site) CLSITE(S, L);
};
#define CLBUILD(name, suf)                                                                                            \
    {name,                                                                                                            \
     v3_entry(&stencil_v3_##suf, &stencil_v3_parity_##suf, &stencil_v3_full_dot_##suf, &stencil_v3_col_##suf,         \
              &stencil_v3_full_dot_col_##suf),                                                                        \
     &stencil_v3_clover_inv_##suf}

// A field of stored elements S (half: short2 with one norm a site), parity-major.
template <class S>
struct Field {
    std::vector<S> q;
    std::vector<float> n;
    S* at(size_t site) { return q.data() + 12 * site; }
    float* norm(size_t site) { return n.empty() ? nullptr : n.data() + site; }
};
static constexpr bool is_half(short2*) { return true; }
template <class S> static constexpr bool is_half(S*) { return false; }

// A parity-major double field of `sites` sites (a full field, or a half one) stored as S.
template <class S>
static Field<S> store(const std::vector<double2>& pm, size_t sites, int vh)
{
    Field<S> f;
    f.q.resize(sites * 12);
    if constexpr (is_half((S*)nullptr)) {
        f.n.resize(sites);
        emu_launch(blocks(sites, 64), 64, 0, false,
                   [&] { to_half(pm.data(), f.q.data(), f.n.data(), (long long)sites, vh); });
    } else {
        for (size_t k = 0; k < sites * 12; ++k)
            f.q[k] = from_d<S>(pm[k]);
    }
    return f;
}

// Back to a full-size parity-major double field (zeros past `sites`).
template <class S>
static std::vector<double2> widen(const Field<S>& f, size_t sites, int vh, size_t nf)
{
    std::vector<double2> d(nf, double2{0, 0});
    if constexpr (is_half((S*)nullptr)) {
        emu_launch(blocks(sites, 64), 64, 0, false,
                   [&] { from_half(f.q.data(), f.n.data(), d.data(), (long long)sites, vh); });
    } else {
        for (size_t k = 0; k < sites * 12; ++k)
            d[k] = to_d(f.q[k]);
    }
    return d;
}

// A packed [site][72] array in the parity-major structure of arrays (clover_pack::to_parity_soa):
// pair e of site (p, cb) at p*36*Vh + e*Vh + cb.
template <class L>
static std::vector<L> clover_soa(const Geo& g, const std::vector<double>& packed)
{
    std::vector<L> soa((size_t)g.V * 36);
    for (int s = 0; s < g.V; ++s)
        for (int e = 0; e < 36; ++e)
            soa[(size_t)g.parity(s) * 36 * g.vh + (size_t)e * g.vh + s / 2] =
                from_d<L>(double2{packed[(size_t)s * 72 + 2 * e], packed[(size_t)s * 72 + 2 * e + 1]});
    return soa;
}

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: emu_clover DUMP\n");
        return 2;
    }
    std::ifstream in(argv[1], std::ios::binary);
    const DumpHeader hd = read_header(in, "QCDCLOV1", "a clover dump");
    double twist;
    in.read((char*)&twist, 8);
    const Geo G = make_geo(hd.l);
    const int V = G.V, vh = G.vh, mask = hd.mask;
    const int lx = hd.l[0], ly = hd.l[1], lz = hd.l[2], lt = hd.l[3];
    const size_t nf = (size_t)V * 12;
    const double kappa = hd.kappa;
    std::vector<double2> canon(nf * 3), psi(nf), phi(nf), refs[7];
    std::vector<double> pack8((size_t)V * 32), clov((size_t)V * 72), clov_inv((size_t)V * 72);
    in.read((char*)canon.data(), canon.size() * 16);
    in.read((char*)pack8.data(), pack8.size() * 8);
    in.read((char*)psi.data(), nf * 16);
    in.read((char*)phi.data(), nf * 16);
    in.read((char*)clov.data(), clov.size() * 8);
    in.read((char*)clov_inv.data(), clov_inv.size() * 8);
    for (auto& r : refs) {
        r.resize(nf);
        in.read((char*)r.data(), nf * 16);
    }
    if (!in) {
        std::fprintf(stderr, "short dump\n");
        return 2;
    }
    std::printf("lattice %dx%dx%dx%d (V = %d), kappa %g, twist 2 kappa mu = %g, antiperiodic mask %d\n", lx, ly, lz,
                lt, V, kappa, twist, mask);
    report_width = 60;
    const std::vector<double2> psi_pm = G.to_pm(psi), phi_pm = G.to_pm(phi);
    // refs[6] (A^-1 phi, full) on the odd sites only, zeros on the even ones.
    std::vector<double2> ainv_odd = G.from_pm(G.to_pm(refs[6]), -1);
    for (int s = 0; s < V; ++s)
        if (G.parity(s) == 0)
            for (int k = 0; k < 12; ++k)
                ainv_odd[(size_t)s * 12 + k] = double2{0, 0};

    auto check = [&]<class S, class K, class L>(const Build<S, K, L>& b, const std::vector<K>& links,
                                                 const std::vector<L>& cl,
                                        const std::vector<L>& cl_inv, double tol) {
        const int block = 64;
        const std::string tag = std::string(b.name) + " ";
        Field<S> x = store<S>(psi_pm, V, vh), y = store<S>(phi_pm, V, vh);
        Field<S> out = store<S>(std::vector<double2>(nf, double2{NAN, NAN}), V, vh);
        Field<S> tmp = store<S>(std::vector<double2>(nf, double2{NAN, NAN}), vh, vh);
        // One stencil launch; inverse 0: out = [g5] (A y + c H inp), 1: [g5] A^-1 (y + c H inp).
        auto launch = [&](const S* inp, const float* in_n, const S* yy, const float* y_n, S* o, float* o_n, double c,
                          int g5, int par, int inverse, double* s = nullptr, double2* partials = nullptr,
                          unsigned* ticket = nullptr) {
            const size_t n = v3_threads(par, vh);
            const bool dot = partials != nullptr;
            emu_launch(blocks(n, block), block, dot ? block * 16 : 0, dot, [&] {
                b.k.of(par, dot)(inp, yy, o, links.data(), c, g5, par, V, lx, ly, lz, lt, 0, mask, mask, s, partials,
                                 ticket, in_n, y_n, o_n, cl.data(), cl_inv.data(), twist, inverse);
            });
        };
        auto full = [&](Field<S>& f) { return G.from_pm(widen(f, V, vh, nf), -1); };
        auto half = [&](Field<S>& f, int p) { return G.from_pm(widen(f, vh, vh, nf), p); };
        // D and g5 D over the full lattice, one site a thread and in columns of 2 along t.
        for (int par : {-1, -2}) {
            const std::string ctag = tag + (par < -1 ? "col2 " : "");
            for (int g5 = 0; g5 < 2; ++g5) {
                launch(x.at(0), x.norm(0), x.at(0), x.norm(0), out.at(0), out.norm(0), -kappa, g5, par, 0);
                report(ctag + (g5 ? "g5D full" : "D full") + " (A y + c hop)", rel_diff(full(out), refs[g5]), tol);
            }
        }
        {
            // g5 D with the fused dot: rar = (x|g5 D x) against the host's sum of the stored fields.
            std::vector<double> s = active_cr_block(false);
            std::vector<double2> partials(V / 32 + 1);
            unsigned ticket = 0;
            launch(x.at(0), x.norm(0), x.at(0), x.norm(0), out.at(0), out.norm(0), -kappa, 1, -1, 0, s.data(),
                   partials.data(), &ticket);
            report(tag + "g5D full (fused dot)", rel_diff(full(out), refs[1]), tol);
            const auto xw = widen(x, V, vh, nf), ow = widen(out, V, vh, nf);
            // Half: the kernel's loads scale in float, from_half in double (~1e-7 apart).
            report(tag + "  (x|g5 D x) vs host", dot_error(s[CR_RAR_RE], s[CR_RAR_IM], xw.data(), ow.data(), 0, nf),
                   is_half((S*)nullptr) ? 1e-6 : 1e-13);
            report(tag + "  ticket back to 0", ticket, 0);
        }
        // The Schur operator: t_o = A_oo^-1 H_oe x_e (y null, c 1), then
        // [g5] (A_ee x_e - kappa^2 H_eo t_o).
        for (int g5 = 0; g5 < 2; ++g5) {
            launch(x.at(0), x.norm(0), nullptr, nullptr, tmp.at(0), tmp.norm(0), 1.0, 0, 1, 1);
            if (!g5)
                report(tag + "A_oo^-1 H_oe x_e (A^-1 (c hop))", rel_diff(half(tmp, 1), refs[4]), tol);
            launch(tmp.at(0), tmp.norm(0), x.at(0), x.norm(0), out.at(0), out.norm(0), -kappa * kappa, g5, 0, 0);
            report(tag + (g5 ? "g5Mee even" : "Mee even") + " (A y + c hop)", rel_diff(half(out, 0), refs[2 + g5]),
                   tol);
        }
        // The reconstruction x_o = A_oo^-1 (b_o + kappa H_oe x_e).
        launch(x.at(0), x.norm(0), y.at(vh), y.norm(vh), out.at(0), out.norm(0), kappa, 0, 1, 1);
        report(tag + "A_oo^-1 (b_o + kappa H_oe x_e) (A^-1 (y + c hop))", rel_diff(half(out, 1), refs[5]), tol);
        // The site kernel A^-1 b: full fields, and the odd half.
        emu_launch(blocks(V, block), block, 0, false, [&] {
            b.site(y.at(0), out.at(0), cl.data(), cl_inv.data(), twist, -1, V, y.norm(0), out.norm(0));
        });
        report(tag + "A^-1 b full (site kernel)", rel_diff(full(out), refs[6]), tol);
        emu_launch(blocks(vh, block), block, 0, false, [&] {
            b.site(y.at(vh), out.at(0), cl.data(), cl_inv.data(), twist, 1, V, y.norm(vh), out.norm(0));
        });
        report(tag + "A_oo^-1 b_o (site kernel)", rel_diff(half(out, 1), ainv_odd), tol);
    };

    auto soa = [&](int E) { return soa_links(G, canon.data(), pack8.data(), E); };
    auto single = [](const std::vector<double2>& d) {
        std::vector<float2> f(d.size());
        for (size_t k = 0; k < d.size(); ++k)
            f[k] = from_d<float2>(d[k]);
        return f;
    };
    const std::vector<double2> ld[3] = {soa(9), soa(6), soa(4)};
    const std::vector<float2> ls[3] = {single(ld[0]), single(ld[1]), single(ld[2])};
    // The half build's 16-bit links (layout.cu to_link16; the 8-real form keeps float).
    auto link16 = [](const std::vector<double2>& d) {
        std::vector<short2> q(d.size());
        emu_launch(blocks(d.size(), 256), 256, 0, false, [&] { to_link16(d.data(), q.data(), (long long)d.size()); });
        return q;
    };
    const std::vector<short2> lh[2] = {link16(ld[0]), link16(ld[1])};
    const auto cd = clover_soa<double2>(G, clov), cd_inv = clover_soa<double2>(G, clov_inv);
    const auto cs = clover_soa<float2>(G, clov), cs_inv = clover_soa<float2>(G, clov_inv);
    // Tolerances against the double reference: double to rounding; single to float
    // rounding (~1e-7 a product, a few hundred terms); half: inputs and outputs rounded to
    // 1/32767 of each site's largest real (2 to 3 steps of the site norm in all).
    const double tol_d = 1e-13, tol_s = 1e-5, tol_h = 1e-3;
    const Build<double2, double2, double2> bd[3] = {CLBUILD("3.0 clover double", cd), CLBUILD("3.0 clover double r12", cd12),
                                           CLBUILD("3.0 clover double r8", cd8)};
    const Build<float2, float2, float2> bs[3] = {CLBUILD("3.0 clover single", cs), CLBUILD("3.0 clover single r12", cs12),
                                         CLBUILD("3.0 clover single r8", cs8)};
    const Build<short2, short2, float2> bh[2] = {CLBUILD("3.0 clover half", ch),
                                                 CLBUILD("3.0 clover half r12", ch12)};
    const Build<short2, float2, float2> bh8 = CLBUILD("3.0 clover half r8", ch8);
    for (int r = 0; r < 3; ++r)
        check(bd[r], ld[r], cd, cd_inv, tol_d);
    for (int r = 0; r < 3; ++r)
        check(bs[r], ls[r], cs, cs_inv, tol_s);
    for (int r = 0; r < 2; ++r)
        check(bh[r], lh[r], cs, cs_inv, tol_h);
    check(bh8, ls[2], cs, cs_inv, tol_h);
    std::printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
