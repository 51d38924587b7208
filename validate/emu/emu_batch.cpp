// emu_batch.cpp: runs the batch entry points of version 3.0's stencil (kernels/stencil_v3.cu
// stencil_v3_batch, stencil_v3_batch_col, stencil_v3_batch_parity: one launch over nrhs
// right-hand sides) on the CPU through cuda_emu.h and checks that each right-hand side's
// output is bit for bit what its one-right-hand-side entry (stencil_v3, stencil_v3_col,
// stencil_v3_parity) writes when launched on that column alone, with the launch geometry
// of src/backend/cuda/core/stencil (batch.rs: nrhs times the blocks of one column), for
// nrhs = 1, 3, 12 and 16 (V3_BATCH_MAX), blocks of 32 and 128 threads, in every build
// run_batch.sh compiles (Wilson and CLOVER=1; double, single and half spinors; 18, 12 and 8
// reals per link). The forms: the full D and g5 D (one site a thread, and in columns of 2
// and 4 along t), the Schur operator's halves (tmp_o = [A_oo^-1] c H_oe x_e with y null,
// then [g5] ([A_ee] x_e + c H_eo tmp_o)) and the reconstruction's ([A_oo^-1] (b_o + c H_oe
// x_e), a y distinct from the input). The fields of the batch lie in one arena in reverse
// order with a canary between them, which must come out untouched (no write outside a
// column's own field). With the clover term the batch's first column (the dump's psi) is
// also compared with the CPU reference of examples/emu_clover_dump.rs (D and M_ee).
// Prints one line per check; exit 1 on failure. Run by validate/emu/run_batch.sh.
#include "emu_util.h"
#include <random>

// kernels/stencil_v3.cu V3_BATCH_MAX and struct V3Batch (the same layout: six arrays of
// V3_BATCH_MAX pointers; half: the norms, null in the other builds).
static constexpr int BATCH_MAX = 16;
template <class S>
struct Rhs {
    const S* inp[BATCH_MAX];
    const S* y[BATCH_MAX];
    S* out[BATCH_MAX];
    const float* inp_norm[BATCH_MAX];
    const float* y_norm[BATCH_MAX];
    float* out_norm[BATCH_MAX];
};

// The entry points' argument lists (V3_STENCIL_ARGS, V3_BATCH_ARGS; CLOVER=1: four more):
// S the stored spinor element, K the stored link element (the half build's 16-bit links:
// short2), L the clover arrays' element.
#define ONE(S, K, L)                                                                                                  \
    (const S*, const S*, S*, const K*, double, int, int, int, int, int, int, int, int, int, int, double*, double2*,    \
     unsigned*, const float*, const float*, float*)
#define ONE_CL(S, K, L)                                                                                               \
    (const S*, const S*, S*, const K*, double, int, int, int, int, int, int, int, int, int, int, double*, double2*,    \
     unsigned*, const float*, const float*, float*, const L*, const L*, double, int)
#define BAT(S, K, L) (Rhs<S>, int, const K*, double, int, int, int, int, int, int, int, int, int, int)
#define BAT_CL(S, K, L)                                                                                               \
    (Rhs<S>, int, const K*, double, int, int, int, int, int, int, int, int, int, int, const L*, const L*, double, int)
#define DECL(suf, S, K, L, A, B)                                                                                      \
    void stencil_v3_##suf A(S, K, L);                                                                                 \
    void stencil_v3_col_##suf A(S, K, L);                                                                             \
    void stencil_v3_parity_##suf A(S, K, L);                                                                          \
    void stencil_v3_batch_##suf B(S, K, L);                                                                           \
    void stencil_v3_batch_col_##suf B(S, K, L);                                                                       \
    void stencil_v3_batch_parity_##suf B(S, K, L);
extern "C" {
void to_half(const double2*, short2*, float*, long long, long long);
void from_half(const short2*, const float*, double2*, long long, long long);
void to_link16(const double2*, short2*, long long);
DECL(d, double2, double2, double2, ONE, BAT)
DECL(d12, double2, double2, double2, ONE, BAT)
DECL(d8, double2, double2, double2, ONE, BAT)
DECL(s, float2, float2, float2, ONE, BAT)
DECL(s12, float2, float2, float2, ONE, BAT)
DECL(h, short2, short2, float2, ONE, BAT)
DECL(h12, short2, short2, float2, ONE, BAT)
DECL(cd, double2, double2, double2, ONE_CL, BAT_CL)
DECL(cd12, double2, double2, double2, ONE_CL, BAT_CL)
DECL(cs, float2, float2, float2, ONE_CL, BAT_CL)
DECL(cs12, float2, float2, float2, ONE_CL, BAT_CL)
DECL(ch, short2, short2, float2, ONE_CL, BAT_CL)
}

// A build's entry points, [full, col, parity] each: the Wilson ones or the CLOVER ones.
template <class S, class K, class L>
struct Build {
    using One = void(*) ONE(S, K, L);
    using Bat = void(*) BAT(S, K, L);
    using OneCl = void(*) ONE_CL(S, K, L);
    using BatCl = void(*) BAT_CL(S, K, L);
    const char* name;
    One one[3];
    Bat bat[3];
    OneCl one_cl[3];
    BatCl bat_cl[3];
    bool clover() const { return one_cl[0] != nullptr; }
};
#define WILSON(name, suf)                                                                                             \
    Build<S, K, L>                                                                                                    \
    {                                                                                                                 \
        name, {&stencil_v3_##suf, &stencil_v3_col_##suf, &stencil_v3_parity_##suf},                                  \
            {&stencil_v3_batch_##suf, &stencil_v3_batch_col_##suf, &stencil_v3_batch_parity_##suf}, {}, {}           \
    }
#define CLOVER(name, suf)                                                                                             \
    Build<S, K, L>                                                                                                    \
    {                                                                                                                 \
        name, {}, {}, {&stencil_v3_##suf, &stencil_v3_col_##suf, &stencil_v3_parity_##suf},                          \
            {&stencil_v3_batch_##suf, &stencil_v3_batch_col_##suf, &stencil_v3_batch_parity_##suf}                   \
    }

static constexpr bool is_half(short2*) { return true; }
template <class S> static constexpr bool is_half(S*) { return false; }

// Fields of `sites` sites of stored elements S (half: and one norm a site), `count` of them
// in one arena in reverse order (field 0 last), each followed by a canary of PAD elements
// (and PAD norms), so that a write past a field's end or into another field shows.
template <class S>
struct Arena {
    static constexpr size_t PAD = 64;
    size_t sites, stride;
    std::vector<S> q;
    std::vector<float> n;
    Arena(size_t count, size_t sites_) : sites(sites_), stride(sites_ * 12 + PAD)
    {
        q.resize(count * stride);
        std::memset((void*)q.data(), 0x5a, q.size() * sizeof(S));
        if (is_half((S*)nullptr)) {
            n.resize(count * (sites + PAD));
            std::memset((void*)n.data(), 0x5a, n.size() * sizeof(float));
        }
    }
    size_t count() const { return q.size() / stride; }
    size_t slot(size_t k) const { return count() - 1 - k; }
    S* at(size_t k) { return q.data() + slot(k) * stride; }
    float* norm(size_t k) { return n.empty() ? nullptr : n.data() + slot(k) * (sites + PAD); }
    // Field k's values from a parity-major double field of `sites` sites (half: to_half).
    void store(size_t k, const std::vector<double2>& pm, int vh)
    {
        if constexpr (is_half((S*)nullptr)) {
            emu_launch(blocks(sites, 64), 64, 0, false,
                       [&] { to_half(pm.data(), at(k), norm(k), (long long)sites, vh); });
        } else {
            for (size_t e = 0; e < sites * 12; ++e)
                at(k)[e] = from_d<S>(pm[e]);
        }
    }
    // Field k widened to a parity-major double field of nf complex numbers (zeros past it).
    std::vector<double2> widen(size_t k, int vh, size_t nf)
    {
        std::vector<double2> d(nf, double2{0, 0});
        if constexpr (is_half((S*)nullptr)) {
            emu_launch(blocks(sites, 64), 64, 0, false,
                       [&] { from_half(at(k), norm(k), d.data(), (long long)sites, vh); });
        } else {
            for (size_t e = 0; e < sites * 12; ++e)
                d[e] = to_d(at(k)[e]);
        }
        return d;
    }
    // Field k's bits equal field k of `o` (elements and norms).
    bool same(size_t k, Arena& o)
    {
        const bool q_same = std::memcmp(at(k), o.at(k), sites * 12 * sizeof(S)) == 0;
        return q_same && (n.empty() || std::memcmp(norm(k), o.norm(k), sites * sizeof(float)) == 0);
    }
    // Every canary as filled.
    bool canaries() const
    {
        auto clean = [](const unsigned char* p, size_t bytes) {
            for (size_t b = 0; b < bytes; ++b)
                if (p[b] != 0x5a)
                    return false;
            return true;
        };
        for (size_t j = 0; j < count(); ++j) {
            if (!clean((const unsigned char*)(q.data() + j * stride + sites * 12), PAD * sizeof(S)))
                return false;
            if (!n.empty() && !clean((const unsigned char*)(n.data() + j * (sites + PAD) + sites), PAD * sizeof(float)))
                return false;
        }
        return true;
    }
};

// A packed [site][72] array in the parity-major structure of arrays (emu_clover.cpp's).
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
        std::fprintf(stderr, "usage: emu_batch DUMP (examples/emu_clover_dump.rs)\n");
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
    std::printf("lattice %dx%dx%dx%d (V = %d), kappa %g, twist %g, antiperiodic mask %d\n", lx, ly, lz, lt, V, kappa,
                twist, mask);
    report_width = 64;
    // The right-hand sides: column 0 the dump's psi (and phi as the reconstruction's y),
    // the others random fields of the same size (a fixed seed).
    std::mt19937_64 rng(20261127);
    std::uniform_real_distribution<double> uni(-1, 1);
    std::vector<std::vector<double2>> cols(BATCH_MAX), ys(BATCH_MAX);
    for (int k = 0; k < BATCH_MAX; ++k) {
        cols[k] = G.to_pm(psi);
        ys[k] = G.to_pm(phi);
        if (k > 0)
            for (size_t e = 0; e < nf; ++e) {
                cols[k][e] = double2{uni(rng), uni(rng)};
                ys[k][e] = double2{uni(rng), uni(rng)};
            }
    }

    auto check = [&]<class S, class K, class L>(const Build<S, K, L>& b, const std::vector<K>& links,
                                                 const std::vector<L>& cl,
                                        const std::vector<L>& cl_inv, double tol) {
        const bool clover = b.clover();
        // One launch of entry e (0 full, 1 col, 2 parity) of one right-hand side.
        auto one = [&](int e, int par, int block, const S* inp, const float* in_n, const S* y, const float* y_n, S* o,
                       float* o_n, double c, int g5, int inverse) {
            const size_t n = v3_threads(par, vh);
            emu_launch(blocks(n, block), block, 0, false, [&] {
                if (clover)
                    b.one_cl[e](inp, y, o, links.data(), c, g5, par, V, lx, ly, lz, lt, 0, mask, mask, nullptr,
                                nullptr, nullptr, in_n, y_n, o_n, cl.data(), cl_inv.data(), twist, inverse);
                else
                    b.one[e](inp, y, o, links.data(), c, g5, par, V, lx, ly, lz, lt, 0, mask, mask, nullptr, nullptr,
                             nullptr, in_n, y_n, o_n);
            });
        };
        // The batch launch of entry e over nrhs right-hand sides: nrhs times the blocks.
        auto batch = [&](int e, int par, int block, const Rhs<S>& r, int nrhs, double c, int g5, int inverse) {
            const size_t n = v3_threads(par, vh);
            emu_launch(blocks(n, block) * nrhs, block, 0, false, [&] {
                if (clover)
                    b.bat_cl[e](r, nrhs, links.data(), c, g5, par, V, lx, ly, lz, lt, 0, mask, mask, cl.data(),
                                cl_inv.data(), twist, inverse);
                else
                    b.bat[e](r, nrhs, links.data(), c, g5, par, V, lx, ly, lz, lt, 0, mask, mask);
            });
        };
        const std::string tag = std::string(b.name) + " ";
        for (int nrhs : {1, 3, 12, BATCH_MAX}) {
            // Inputs: full fields x_k, even halves x_k (of x_k), odd halves b_k of y_k.
            Arena<S> x(nrhs, V), xe(nrhs, vh), bo(nrhs, vh);
            for (int k = 0; k < nrhs; ++k) {
                x.store(k, cols[k], vh);
                xe.store(k, std::vector<double2>(cols[k].begin(), cols[k].begin() + 12 * vh), vh);
                bo.store(k, std::vector<double2>(ys[k].begin() + 12 * vh, ys[k].end()), vh);
            }
            // Mismatching columns and spoilt canaries, over every form, geometry and column.
            int full_bad = 0, parity_bad = 0;
            const int cols_t = lt % 4 == 0 ? 4 : 2;
            for (int block : {32, 128}) {
                // The full D and g5 D (y = inp, c = -kappa; clover: A y + c H inp).
                for (int par : {-1, -2, -cols_t}) {
                    const int e = par < -1 ? 1 : 0;
                    for (int g5 = 0; g5 < 2; ++g5) {
                        Arena<S> want(nrhs, V), got(nrhs, V);
                        Rhs<S> r{};
                        for (int k = 0; k < nrhs; ++k) {
                            one(e, par, block, x.at(k), x.norm(k), x.at(k), x.norm(k), want.at(k), want.norm(k),
                                -kappa, g5, 0);
                            r.inp[k] = r.y[k] = x.at(k);
                            r.inp_norm[k] = r.y_norm[k] = x.norm(k);
                            r.out[k] = got.at(k);
                            r.out_norm[k] = got.norm(k);
                        }
                        batch(e, par, block, r, nrhs, -kappa, g5, 0);
                        for (int k = 0; k < nrhs; ++k)
                            full_bad += !got.same(k, want);
                        full_bad += !got.canaries() + !want.canaries();
                        if (clover && block == 32 && par == -1) {
                            // Column 0 against the CPU reference (emu_clover.cpp's tolerances).
                            const auto d = G.from_pm(got.widen(0, vh, nf), -1);
                            report(tag + "batch " + std::to_string(nrhs) + (g5 ? ", g5D" : ", D") +
                                       " column 0 vs CPU",
                                   rel_diff(d, refs[g5]), tol);
                        }
                    }
                }
                // Parity launches: the Schur operator's halves and the reconstruction's.
                for (int g5 = 0; g5 < 2; ++g5) {
                    Arena<S> tmp_want(nrhs, vh), tmp_got(nrhs, vh), want(nrhs, vh), got(nrhs, vh);
                    Rhs<S> r{};
                    // tmp_o = [A_oo^-1] H_oe x_e: y null, c 1.
                    for (int k = 0; k < nrhs; ++k) {
                        one(2, 1, block, xe.at(k), xe.norm(k), nullptr, nullptr, tmp_want.at(k), tmp_want.norm(k), 1.0,
                            0, 1);
                        r.inp[k] = xe.at(k);
                        r.inp_norm[k] = xe.norm(k);
                        r.out[k] = tmp_got.at(k);
                        r.out_norm[k] = tmp_got.norm(k);
                    }
                    batch(2, 1, block, r, nrhs, 1.0, 0, 1);
                    for (int k = 0; k < nrhs; ++k)
                        parity_bad += !tmp_got.same(k, tmp_want);
                    // out_e = [g5] ([A_ee] x_e - kappa^2 H_eo tmp_o), both from the same tmp_o.
                    for (int k = 0; k < nrhs; ++k) {
                        one(2, 0, block, tmp_want.at(k), tmp_want.norm(k), xe.at(k), xe.norm(k), want.at(k),
                            want.norm(k), -kappa * kappa, g5, 0);
                        r.inp[k] = tmp_want.at(k);
                        r.inp_norm[k] = tmp_want.norm(k);
                        r.y[k] = xe.at(k);
                        r.y_norm[k] = xe.norm(k);
                        r.out[k] = got.at(k);
                        r.out_norm[k] = got.norm(k);
                    }
                    batch(2, 0, block, r, nrhs, -kappa * kappa, g5, 0);
                    for (int k = 0; k < nrhs; ++k)
                        parity_bad += !got.same(k, want);
                    parity_bad += !tmp_got.canaries() + !got.canaries();
                    if (clover && block == 32) {
                        const auto d = G.from_pm(got.widen(0, vh, nf), 0);
                        report(tag + "batch " + std::to_string(nrhs) + (g5 ? ", g5Mee" : ", Mee") +
                                   " column 0 vs CPU",
                               rel_diff(d, refs[2 + g5]), tol);
                    }
                }
                {
                    // The reconstruction's form: out_o = [A_oo^-1] (b_o + kappa H_oe x_e).
                    Arena<S> want(nrhs, vh), got(nrhs, vh);
                    Rhs<S> r{};
                    for (int k = 0; k < nrhs; ++k) {
                        one(2, 1, block, xe.at(k), xe.norm(k), bo.at(k), bo.norm(k), want.at(k), want.norm(k), kappa, 0,
                            1);
                        r.inp[k] = xe.at(k);
                        r.inp_norm[k] = xe.norm(k);
                        r.y[k] = bo.at(k);
                        r.y_norm[k] = bo.norm(k);
                        r.out[k] = got.at(k);
                        r.out_norm[k] = got.norm(k);
                    }
                    batch(2, 1, block, r, nrhs, kappa, 0, 1);
                    for (int k = 0; k < nrhs; ++k)
                        parity_bad += !got.same(k, want);
                    parity_bad += !got.canaries();
                }
            }
            // Inputs untouched too.
            full_bad += !x.canaries();
            parity_bad += !xe.canaries() + !bo.canaries();
            report(tag + "batch " + std::to_string(nrhs) + " full D, g5D (cols 1, 2, " + std::to_string(cols_t) +
                       "): columns differing",
                   full_bad, 0);
            report(tag + "batch " + std::to_string(nrhs) + " parity (Schur halves, reconstruction)", parity_bad, 0);
        }
    };

    auto soa = [&](int E) { return soa_links(G, canon.data(), pack8.data(), E); };
    auto single = [](const std::vector<double2>& d) {
        std::vector<float2> f(d.size());
        for (size_t k = 0; k < d.size(); ++k)
            f[k] = from_d<float2>(d[k]);
        return f;
    };
    const std::vector<double2> ld[3] = {soa(9), soa(6), soa(4)};
    const std::vector<float2> ls[2] = {single(ld[0]), single(ld[1])};
    // The half build's 16-bit links (layout.cu to_link16).
    auto link16 = [](const std::vector<double2>& d) {
        std::vector<short2> q(d.size());
        emu_launch(blocks(d.size(), 256), 256, 0, false, [&] { to_link16(d.data(), q.data(), (long long)d.size()); });
        return q;
    };
    const std::vector<short2> lh[2] = {link16(ld[0]), link16(ld[1])};
    const auto cd = clover_soa<double2>(G, clov), cd_inv = clover_soa<double2>(G, clov_inv);
    const auto cs = clover_soa<float2>(G, clov), cs_inv = clover_soa<float2>(G, clov_inv);
    const std::vector<double2> none_d;
    const std::vector<float2> none_s;
    // The CPU comparison's tolerances (emu_clover.cpp's): double, single, half.
    const double tol_d = 1e-13, tol_s = 1e-5, tol_h = 1e-3;
    {
        using S = double2;
        using K = double2;
        using L = double2;
        check(WILSON("3.0 double", d), ld[0], none_d, none_d, tol_d);
        check(WILSON("3.0 double r12", d12), ld[1], none_d, none_d, tol_d);
        check(WILSON("3.0 double r8", d8), ld[2], none_d, none_d, tol_d);
        check(CLOVER("3.0 clover double", cd), ld[0], cd, cd_inv, tol_d);
        check(CLOVER("3.0 clover double r12", cd12), ld[1], cd, cd_inv, tol_d);
    }
    {
        using S = float2;
        using K = float2;
        using L = float2;
        check(WILSON("3.0 single", s), ls[0], none_s, none_s, tol_s);
        check(WILSON("3.0 single r12", s12), ls[1], none_s, none_s, tol_s);
        check(CLOVER("3.0 clover single", cs), ls[0], cs, cs_inv, tol_s);
        check(CLOVER("3.0 clover single r12", cs12), ls[1], cs, cs_inv, tol_s);
    }
    {
        using S = short2;
        using K = short2;
        using L = float2;
        check(WILSON("3.0 half", h), lh[0], none_s, none_s, tol_h);
        check(WILSON("3.0 half r12", h12), lh[1], none_s, none_s, tol_h);
        check(CLOVER("3.0 clover half", ch), lh[0], cs, cs_inv, tol_h);
    }
    std::printf("%s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
