// emu_mg.cpp: kernels/mg_coarse.cu on the CPU (through cuda_emu.h) against the CPU
// reference of examples/emu_mg_dump.rs: the restriction and prolongation of a version 3.0
// fine field through a prolongator, the coarse operator on a full field and its even
// Schur complement (three launches, as src/backend/cuda/mg does it), the gather and
// scatter between full and half fields, the BLAS-1 update and the several-field dots and
// updates; in double (to 1e-12
// relative) and single (to 2e-5 relative) precision; and the Galerkin product of the fine
// operator (kernels/mg_galerkin.cu) against the host's, in double, and the prolongator
// made on the device from near-null vectors against the host's `Prolongator::new`.
// Usage: emu_mg DUMP
#include "emu_util.h"

#define DECLARE(Z, S)                                                                                             \
    extern "C" void coarse_apply_##S(Z*, const Z*, const Z*, const Z*, const Z*, const int*, const int*, int, int, \
                                     double);                                                                     \
    extern "C" void mg_restrict_##S(const Z*, Z*, const Z*, const long long*, long long, int, int, int, int);     \
    extern "C" void mg_prolong_##S(const Z*, Z*, const Z*, const long long*, long long, int, int, int, int);      \
    extern "C" void coarse_pick_##S(Z*, Z*, const int*, int, int, int);                                           \
    extern "C" void coarse_axpy_##S(const Z*, Z*, double, double, long long, int);                                \
    extern "C" void coarse_dots_##S(const Z*, const Z*, const Z*, const Z*, const Z*, const Z*, const Z*, const Z*, \
                                    const Z*, int, long long, double2*);                                          \
    extern "C" void coarse_axpys_##S(const Z*, const Z*, const Z*, const Z*, const Z*, const Z*, const Z*, const Z*, \
                                     Z*, double, double, double, double, double, double, double, double, double,   \
                                     double, double, double, double, double, double, double, int, long long);
DECLARE(double2, d)
DECLARE(float2, f)
extern "C" void coarse_dots_finish(const double2*, int, double2*);
extern "C" void mg_gather_vector(const double2*, double2*, const long long*, long long, int, int, int, long long);
extern "C" void mg_orthonormalise(double2*, int, int, int, int*);
extern "C" void mg_narrow(const double2*, float2*, long long);
extern "C" void mg_galerkin(const double2*, const int*, const int*, const int*, const double2*, const double2*,
                            const double2*, double, int, int, int, double2*, double2*);

struct Reader {
    std::ifstream in;
    long long count()
    {
        long long n = 0;
        in.read(reinterpret_cast<char*>(&n), 8);
        return n;
    }
    std::vector<long long> ints()
    {
        std::vector<long long> v(count());
        in.read(reinterpret_cast<char*>(v.data()), 8 * v.size());
        return v;
    }
    std::vector<double2> complex()
    {
        std::vector<double2> v(count());
        in.read(reinterpret_cast<char*>(v.data()), 16 * v.size());
        return v;
    }
};

template <class Z> std::vector<Z> as(const std::vector<double2>& v)
{
    std::vector<Z> out(v.size());
    for (size_t k = 0; k < v.size(); ++k)
        out[k] = from_d<Z>(v[k]);
    return out;
}

// ||got - want|| / ||want|| of a field of either precision.
template <class Z> double diff(const std::vector<Z>& got, const std::vector<double2>& want)
{
    std::vector<double2> g(got.size());
    for (size_t k = 0; k < got.size(); ++k)
        g[k] = to_d(got[k]);
    return rel_diff(g, want);
}

static void check(const char* what, const char* prec, double d, double tol)
{
    report(std::string(what) + " (" + prec + ")", d, tol);
}

struct Dump {
    int fine_dof, nvec, members, aggregates, dof;
    // vectors: the near-null vectors in 3.0's fine order, one after the other.
    std::vector<double2> V, vectors, fine, restricted, c, prolonged, site, hops, inverse, inp, out, in_e, schur;
    std::vector<long long> base;
    long long vh;
    std::vector<int> full_nb, sites[2], nb[2];
    // The Galerkin product's inputs and the host's result, with the clover term [0] and
    // without a site term [1].
    struct Galerkin {
        std::vector<int> site_of, slot, nb;
        std::vector<double2> links, blocks, proj, site, hops;
        double kappa;
    } gal[2];
};

// kernels/mg_galerkin.cu with `threads` a block (the host's 256, and a few to have the
// output in several tiles) against the host's product, to 1e-12 relative.
static void run_galerkin(const Dump& d)
{
    const int per = 16; // the kernel's GAL_PER
    const char* names[2] = {"Galerkin product P^dag D P, clover (device kernel)",
                            "Galerkin product P^dag D P, Wilson (device kernel)"};
    for (int k = 0; k < 2; ++k) {
        const auto& g = d.gal[k];
        for (int threads : {256, 2}) {
            const int nel = d.dof * d.dof, tiles = (nel + threads * per - 1) / (threads * per);
            std::vector<double2> site(g.site.size()), hops(g.hops.size());
            const size_t shared = 16 * (12 * (size_t)d.dof + 12 * (size_t)d.nvec);
            emu_launch((unsigned)(d.aggregates * 9 * tiles), threads, shared, true, [&] {
                mg_galerkin(d.V.data(), g.site_of.data(), g.slot.data(), g.nb.data(), g.links.data(),
                            g.blocks.empty() ? nullptr : g.blocks.data(), g.proj.data(), g.kappa, d.members,
                            d.nvec, tiles, site.data(), hops.data());
            });
            char what[160];
            std::snprintf(what, sizeof what, "%s, %d threads, %d tile(s): site", names[k], threads, tiles);
            report(what, rel_diff(site, g.site), 1e-12);
            std::snprintf(what, sizeof what, "%s, %d threads, %d tile(s): hops", names[k], threads, tiles);
            report(what, rel_diff(hops, g.hops), 1e-12);
        }
    }
}

// The prolongator made on the device (mg_gather_vector, mg_orthonormalise, mg_narrow)
// against the host's `Prolongator::new` (d.V), with 256 and 32 threads a block; then
// with vector 1 a copy of vector 0, which every block must flag (2: vector 1).
static void run_prolongator(const Dump& d)
{
    const long long n_am = (long long)d.aggregates * d.members, per = (long long)d.fine_dof * d.vh * 2;
    auto gathered = [&](bool dependent) {
        std::vector<double2> V(d.V.size());
        for (int w = 0; w < d.nvec; ++w) {
            const double2* f = d.vectors.data() + (dependent && w == 1 ? 0 : w) * per;
            emu_launch(blocks(n_am * d.fine_dof, 128), 128, 0, false, [&] {
                mg_gather_vector(f, V.data(), d.base.data(), d.vh, d.fine_dof, d.nvec, w, n_am);
            });
        }
        return V;
    };
    for (int threads : {256, 32}) {
        auto V = gathered(false);
        std::vector<int> failed(2 * d.aggregates, -1);
        emu_launch(2 * d.aggregates, threads, 16 * (size_t)threads, true,
                   [&] { mg_orthonormalise(V.data(), d.members, d.fine_dof, d.nvec, failed.data()); });
        int flagged = 0;
        for (int f : failed)
            flagged += f != 0;
        char what[120];
        std::snprintf(what, sizeof what, "prolongator on the device, %d threads: against Prolongator::new", threads);
        report(what, rel_diff(V, d.V), 1e-12);
        std::snprintf(what, sizeof what, "prolongator on the device, %d threads: blocks flagged", threads);
        report(what, flagged, 0.5);
        if (threads == 256) {
            std::vector<float2> single(V.size());
            emu_launch(blocks((long long)V.size(), 128), 128, 0, false,
                       [&] { mg_narrow(V.data(), single.data(), (long long)V.size()); });
            report("prolongator narrowed to single precision", diff(single, d.V), 1e-7);
        }
    }
    auto V = gathered(true);
    std::vector<int> failed(2 * d.aggregates, -1);
    emu_launch(2 * d.aggregates, 256, 16 * 256, true,
               [&] { mg_orthonormalise(V.data(), d.members, d.fine_dof, d.nvec, failed.data()); });
    int wrong = 0;
    for (int f : failed)
        wrong += f != 2;
    report("a dependent vector flagged on every block (blocks not flagged 2)", wrong, 0.5);
}

static std::vector<int> narrow(const std::vector<long long>& v) { return std::vector<int>(v.begin(), v.end()); }

template <class Z>
void run(const Dump& d, const char* prec, double tol,
         decltype(&coarse_apply_d) apply_d, decltype(&coarse_apply_f) apply_f)
{
    const unsigned B = 128;
    auto V = as<Z>(d.V);
    auto fine = as<Z>(d.fine);
    // Restriction.
    std::vector<Z> rc(d.restricted.size());
    const long long nr = (long long)d.aggregates * 2 * d.nvec;
    emu_launch(blocks(nr, B), B, 0, false, [&] {
        if constexpr (std::is_same_v<Z, double2>)
            mg_restrict_d(fine.data(), rc.data(), V.data(), d.base.data(), d.vh, d.members, d.fine_dof, d.nvec,
                          d.aggregates);
        else
            mg_restrict_f(fine.data(), rc.data(), V.data(), d.base.data(), d.vh, d.members, d.fine_dof, d.nvec,
                          d.aggregates);
    });
    check("restriction P^dag f (3.0 fine order)", prec, diff(rc, d.restricted), tol);
    // Prolongation.
    auto c = as<Z>(d.c);
    std::vector<Z> pf(d.prolonged.size());
    const long long np = (long long)d.aggregates * d.members * d.fine_dof;
    emu_launch(blocks(np, B), B, 0, false, [&] {
        if constexpr (std::is_same_v<Z, double2>)
            mg_prolong_d(c.data(), pf.data(), V.data(), d.base.data(), d.vh, d.members, d.fine_dof, d.nvec,
                         d.aggregates);
        else
            mg_prolong_f(c.data(), pf.data(), V.data(), d.base.data(), d.vh, d.members, d.fine_dof, d.nvec,
                         d.aggregates);
    });
    check("prolongation P c (3.0 fine order)", prec, diff(pf, d.prolonged), tol);
    // The coarse operator.
    auto site = as<Z>(d.site), hops = as<Z>(d.hops), inverse = as<Z>(d.inverse);
    auto stencil = [&](Z* out, const Z* in_site, const Z* in_hop, const Z* sm, const int* rows, const int* nb, int n,
                       double a_hop) {
        emu_launch(blocks((long long)n * d.dof, B), B, 0, false, [&] {
            if constexpr (std::is_same_v<Z, double2>)
                apply_d(out, in_site, in_hop, sm, hops.data(), rows, nb, n, d.dof, a_hop);
            else
                apply_f(out, in_site, in_hop, sm, hops.data(), rows, nb, n, d.dof, a_hop);
        });
    };
    auto inp = as<Z>(d.inp);
    std::vector<Z> out(d.out.size());
    stencil(out.data(), inp.data(), inp.data(), site.data(), nullptr, d.full_nb.data(), d.aggregates, 1.0);
    check("coarse operator D_c (full)", prec, diff(out, d.out), tol);
    // The even Schur complement: a = Y_oe in, b = X_oo^-1 a, out = X_ee in - Y_eo b.
    const int h = d.aggregates / 2;
    auto in_e = as<Z>(d.in_e);
    std::vector<Z> a(in_e.size()), b(in_e.size()), s(in_e.size());
    stencil(a.data(), nullptr, in_e.data(), nullptr, d.sites[1].data(), d.nb[1].data(), h, 1.0);
    stencil(b.data(), a.data(), nullptr, inverse.data(), d.sites[1].data(), d.nb[1].data(), h, 0.0);
    stencil(s.data(), in_e.data(), b.data(), site.data(), d.sites[0].data(), d.nb[0].data(), h, -1.0);
    check("coarse Schur complement X_ee - Y_eo X_oo^-1 Y_oe", prec, diff(s, d.schur), tol);
    // Gather the even half of the full input and scatter it back into a zero field; then
    // y = y + a x and y = x + a y against the host.
    std::vector<Z> half(in_e.size()), back(inp.size(), Z{0, 0});
    for (int to_half : {1, 0})
        emu_launch(blocks((long long)h * d.dof, B), B, 0, false, [&] {
            if constexpr (std::is_same_v<Z, double2>)
                coarse_pick_d(to_half ? inp.data() : back.data(), half.data(), d.sites[0].data(), h, d.dof, to_half);
            else
                coarse_pick_f(to_half ? inp.data() : back.data(), half.data(), d.sites[0].data(), h, d.dof, to_half);
        });
    std::vector<double2> expect(d.inp.size(), double2{0, 0});
    for (int i = 0; i < h; ++i)
        for (int j = 0; j < d.dof; ++j)
            expect[(size_t)d.sites[0][i] * d.dof + j] = d.inp[(size_t)d.sites[0][i] * d.dof + j];
    check("gather and scatter of the even half", prec, diff(back, expect), tol);
    for (int xpay : {0, 1}) {
        auto y = as<Z>(d.out);
        const double ar = 0.3, ai = -1.25;
        emu_launch(blocks((long long)y.size(), B), B, 0, false, [&] {
            if constexpr (std::is_same_v<Z, double2>)
                coarse_axpy_d(inp.data(), y.data(), ar, ai, (long long)y.size(), xpay);
            else
                coarse_axpy_f(inp.data(), y.data(), ar, ai, (long long)y.size(), xpay);
        });
        std::vector<double2> e(y.size());
        for (size_t k = 0; k < y.size(); ++k) {
            const double2 x = d.inp[k], yy = d.out[k];
            const double2 m = xpay ? double2{ar * yy.x - ai * yy.y, ar * yy.y + ai * yy.x}
                                   : double2{ar * x.x - ai * x.y, ar * x.y + ai * x.x};
            e[k] = xpay ? double2{x.x + m.x, x.y + m.y} : double2{yy.x + m.x, yy.y + m.y};
        }
        check(xpay ? "y = x + a y" : "y = y + a x", prec, diff(y, e), tol);
    }
    // Several fields at once (GCR's Gram-Schmidt): x_j[k] = inp[(k + 7 j) % n] for
    // m = 5 fields, (x_j | y) against the host's double sums of the same (rounded)
    // numbers, then y += sum_j a_j x_j against the host's.
    const int m = 5;
    const long long n = (long long)inp.size();
    std::vector<std::vector<Z>> xs(m, std::vector<Z>(n));
    for (int j = 0; j < m; ++j)
        for (long long k = 0; k < n; ++k)
            xs[j][k] = inp[(k + 7 * j) % n];
    const Z* xp[8] = {};
    for (int j = 0; j < m; ++j)
        xp[j] = xs[j].data();
    auto y = as<Z>(d.out);
    const unsigned grid = std::min(blocks(n, B), 256u);
    std::vector<double2> partial((size_t)m * grid), got(m);
    emu_launch(grid, B, 0, true, [&] {
        if constexpr (std::is_same_v<Z, double2>)
            coarse_dots_d(xp[0], xp[1], xp[2], xp[3], xp[4], xp[5], xp[6], xp[7], y.data(), m, n, partial.data());
        else
            coarse_dots_f(xp[0], xp[1], xp[2], xp[3], xp[4], xp[5], xp[6], xp[7], y.data(), m, n, partial.data());
    });
    emu_launch(m, B, 0, true, [&] { coarse_dots_finish(partial.data(), (int)grid, got.data()); });
    std::vector<double2> want(m, double2{0, 0});
    for (int j = 0; j < m; ++j)
        for (long long k = 0; k < n; ++k) {
            const double2 a = to_d(xs[j][k]), b = to_d(y[k]);
            want[j].x += a.x * b.x + a.y * b.y;
            want[j].y += a.x * b.y - a.y * b.x;
        }
    check("(x_j | y) for 5 fields at once", prec, rel_diff(got, want), 1e-12);
    const double re[8] = {0.5, -1.0, 0.25, 2.0, -0.75}, im[8] = {1.0, 0.5, -0.5, 0.0, 0.125};
    std::vector<double2> ey(n);
    for (long long k = 0; k < n; ++k) {
        double2 acc = to_d(y[k]);
        for (int j = 0; j < m; ++j) {
            const double2 x = to_d(xs[j][k]);
            acc.x += re[j] * x.x - im[j] * x.y;
            acc.y += re[j] * x.y + im[j] * x.x;
        }
        ey[k] = acc;
    }
    emu_launch(blocks(n, B), B, 0, false, [&] {
        if constexpr (std::is_same_v<Z, double2>)
            coarse_axpys_d(xp[0], xp[1], xp[2], xp[3], xp[4], xp[5], xp[6], xp[7], y.data(), re[0], re[1], re[2],
                           re[3], re[4], re[5], re[6], re[7], im[0], im[1], im[2], im[3], im[4], im[5], im[6], im[7], m,
                           n);
        else
            coarse_axpys_f(xp[0], xp[1], xp[2], xp[3], xp[4], xp[5], xp[6], xp[7], y.data(), re[0], re[1], re[2],
                           re[3], re[4], re[5], re[6], re[7], im[0], im[1], im[2], im[3], im[4], im[5], im[6], im[7], m,
                           n);
    });
    check("y = y + sum_j a_j x_j for 5 fields", prec, diff(y, ey), tol);
}

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: emu_mg DUMP\n");
        return 2;
    }
    Reader r{std::ifstream(argv[1], std::ios::binary)};
    if (!r.in) {
        std::fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    Dump d;
    auto head = r.ints();
    d.fine_dof = (int)head[0];
    d.nvec = (int)head[1];
    d.members = (int)head[2];
    d.aggregates = (int)head[3];
    d.dof = (int)head[4];
    d.V = r.complex();
    d.base = r.ints();
    d.vh = r.ints()[0];
    d.fine = r.complex();
    d.restricted = r.complex();
    d.c = r.complex();
    d.prolonged = r.complex();
    d.site = r.complex();
    d.hops = r.complex();
    d.inverse = r.complex();
    d.full_nb = narrow(r.ints());
    for (int p = 0; p < 2; ++p) {
        d.sites[p] = narrow(r.ints());
        d.nb[p] = narrow(r.ints());
    }
    d.inp = r.complex();
    d.out = r.complex();
    d.in_e = r.complex();
    d.schur = r.complex();
    for (auto& g : d.gal) {
        g.site_of = narrow(r.ints());
        g.slot = narrow(r.ints());
        g.nb = narrow(r.ints());
        g.links = r.complex();
        g.blocks = r.complex();
        g.proj = r.complex();
        g.kappa = r.complex().at(0).x;
        g.site = r.complex();
        g.hops = r.complex();
    }
    d.vectors = r.complex();
    if (!r.in) {
        std::fprintf(stderr, "%s: truncated\n", argv[1]);
        return 2;
    }
    run<double2>(d, "double", 1e-12, coarse_apply_d, coarse_apply_f);
    run<float2>(d, "single", 2e-5, coarse_apply_d, coarse_apply_f);
    run_galerkin(d);
    run_prolongator(d);
    return failures ? 1 : 0;
}
