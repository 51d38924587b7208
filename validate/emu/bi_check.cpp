// bi_check.cpp: the fused BiCGStab kernels of kernels/bicgstab_fused.cu on a decomposed
// lattice, on the CPU through cuda_emu.h. One iteration (start, alpha, s, omega, update,
// p; random stand-ins for the operator's v = A p and t = A s) runs once on the whole
// vectors with BI_SPLIT 0, as one GPU runs it, and on 2 and 3 ranks, each holding a
// contiguous piece with its own scalar block (BI_SPLIT 1): after each reducing kernel the
// ranks' BI_LOCAL sums are gathered in rank order and bi_global finishes the reduction on
// every rank. Checked: every rank's scalar block and history are the same bits; the
// scalars equal the one-GPU run's to rounding (the sums are added in another order) and a
// host computation's; each rank's field pieces equal the one-GPU run's to rounding; a
// zero (r0|v) breaks the iteration on every rank; an inactive block is left as it is; the
// start is not gated; the tickets are back at 0. Double and single fields. Prints one
// line per check; exit 1 on failure.
#include "emu_util.h"
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <random>
#include <string>

// The kernels themselves (their BI_* indices with them), emulated in this unit.
#include "bicgstab_fused.cu"

// Kernel entry points by field type.
struct D {
    using T = double2;
    static constexpr auto start = bi_start_d;
    static constexpr auto alpha = bi_alpha_d;
    static constexpr auto s = bi_s_d;
    static constexpr auto omega = bi_omega_d;
    static constexpr auto update = bi_update_d;
    static constexpr auto p = bi_p_d;
    static constexpr const char* name = "double";
};
struct S {
    using T = float2;
    static constexpr auto start = bi_start_s;
    static constexpr auto alpha = bi_alpha_s;
    static constexpr auto s = bi_s_s;
    static constexpr auto omega = bi_omega_s;
    static constexpr auto update = bi_update_s;
    static constexpr auto p = bi_p_s;
    static constexpr const char* name = "single";
};

// One device's state: its scalar block, history, partials and tickets, and its pieces of
// the fields rhs, x, r, r0, p, v, t.
template <class K> struct Rank {
    using T = typename K::T;
    std::vector<double> s = std::vector<double>(BI_SCALARS, 0.0), hist = std::vector<double>(11, -7.0);
    std::vector<double2> partials = std::vector<double2>(64);
    std::vector<unsigned> tickets = std::vector<unsigned>(BI_TICKETS, 0);
    std::vector<T> rhs, x, r, r0, p, v, t;
};

static const unsigned GRID = 3, BLOCK = 64;
template <class F> static void launch(F f) { emu_launch(GRID, BLOCK, BLOCK * 16, true, f); }

// The ranks' BI_LOCAL sums gathered in rank order, then bi_global(which) on every rank.
template <class K> static void global(std::vector<Rank<K>>& ranks, int which)
{
    if (ranks.size() == 1)
        return;
    std::vector<double> g;
    for (auto& q : ranks)
        g.insert(g.end(), q.s.begin() + BI_LOCAL, q.s.begin() + BI_LOCAL + BI_GATHERED);
    for (auto& q : ranks)
        emu_launch(1, 32, 0, false,
                   [&] { bi_global(which, q.s.data(), q.hist.data(), g.data(), (int)ranks.size()); });
}

// One iteration on `nranks` ranks holding contiguous pieces of the n-element fields; v
// and t (the operator's applications) are the given stand-ins.
template <class K>
static std::vector<Rank<K>> iterate(int nranks, const std::vector<typename K::T>& rhs,
                                    const std::vector<typename K::T>& v, const std::vector<typename K::T>& t,
                                    double max_iter = 10)
{
    using T = typename K::T;
    const size_t n = rhs.size();
    std::vector<Rank<K>> ranks(nranks);
    for (int q = 0; q < nranks; ++q) {
        auto& k = ranks[q];
        const size_t lo = n * q / nranks, hi = n * (q + 1) / nranks;
        k.rhs.assign(rhs.begin() + lo, rhs.begin() + hi);
        k.v.assign(v.begin() + lo, v.begin() + hi);
        k.t.assign(t.begin() + lo, t.begin() + hi);
        k.x = k.r = k.r0 = k.p = std::vector<T>(hi - lo);
        k.s[BI_EPS] = 1e-30;
        k.s[BI_MAX_ITER] = max_iter;
        k.s[BI_ACTIVE] = 1.0;
        k.s[BI_SPLIT] = nranks > 1 ? 1.0 : 0.0;
    }
    auto each = [&](auto f) {
        for (auto& k : ranks)
            launch([&] { f(k, (int)k.rhs.size()); });
    };
    each([](Rank<K>& k, int m) {
        K::start(k.rhs.data(), k.x.data(), k.r.data(), k.r0.data(), k.p.data(), m, k.s.data(), k.partials.data(),
                 k.tickets.data());
    });
    global(ranks, 0);
    each([](Rank<K>& k, int m) { K::alpha(k.r0.data(), k.v.data(), m, k.s.data(), k.partials.data(), k.tickets.data()); });
    global(ranks, 1);
    each([](Rank<K>& k, int m) { K::s(k.r.data(), k.v.data(), m, k.s.data()); });
    each([](Rank<K>& k, int m) { K::omega(k.t.data(), k.r.data(), m, k.s.data(), k.partials.data(), k.tickets.data()); });
    global(ranks, 2);
    each([](Rank<K>& k, int m) {
        K::update(k.x.data(), k.r.data(), k.p.data(), k.t.data(), k.r0.data(), m, k.s.data(), k.hist.data(),
                  k.partials.data(), k.tickets.data());
    });
    global(ranks, 3);
    each([](Rank<K>& k, int m) { K::p(k.p.data(), k.r.data(), k.v.data(), m, k.s.data()); });
    return ranks;
}

static std::mt19937_64 rng(2026);
template <class T> static std::vector<T> random_field(size_t n)
{
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<T> f(n);
    for (auto& z : f) {
        z.x = u(rng);
        z.y = u(rng);
    }
    return f;
}

static bool near(double a, double b, double tol) { return std::fabs(a - b) <= tol * std::max(1.0, std::fabs(b)); }

template <class K> static void run(size_t n)
{
    using T = typename K::T;
    const std::string tag = std::string(K::name) + ", n " + std::to_string(n);
    const auto rhs = random_field<T>(n), v = random_field<T>(n), t = random_field<T>(n);
    const auto one = iterate<K>(1, rhs, v, t);
    // The host's scalars in double from the same inputs (rounded as the fields are).
    auto cd = [](T z) { return std::complex<double>(z.x, z.y); };
    std::complex<double> rho = 0, r0v = 0;
    for (size_t i = 0; i < n; ++i) {
        rho += std::conj(cd(rhs[i])) * cd(rhs[i]);
        r0v += std::conj(cd(rhs[i])) * cd(v[i]);
    }
    const std::complex<double> alpha = rho / r0v;
    const double field_tol = sizeof(T) == 8 ? 1e-5 : 1e-12;
    check("one GPU: alpha = rho / (r0|v) (" + tag + ")",
          near(one[0].s[BI_ALPHA_RE], alpha.real(), 1e-12) && near(one[0].s[BI_ALPHA_RE + 1], alpha.imag(), 1e-12));
    for (int nranks : {2, 3}) {
        const auto split = iterate<K>(nranks, rhs, v, t);
        const std::string w = tag + ", " + std::to_string(nranks) + " ranks";
        bool same = true, tickets = true;
        for (const auto& k : split) {
            for (int i = 0; i < BI_LOCAL; ++i)
                same = same && std::memcmp(&k.s[i], &split[0].s[i], 8) == 0;
            same = same && std::memcmp(k.hist.data(), split[0].hist.data(), 8 * k.hist.size()) == 0;
            for (unsigned c : k.tickets)
                tickets = tickets && c == 0;
        }
        check("every rank holds the same scalars and history (" + w + ")", same);
        check("the tickets are back at 0 (" + w + ")", tickets);
        bool scalars = true;
        for (int i : {BI_RHO_RE, BI_RHO_RE + 1, BI_ALPHA_RE, BI_ALPHA_RE + 1, BI_OMEGA_RE, BI_OMEGA_RE + 1, BI_BETA_RE,
                      BI_BETA_RE + 1, BI_NR})
            scalars = scalars && near(split[0].s[i], one[0].s[i], 1e-12);
        scalars = scalars && split[0].s[BI_ITER] == 1 && split[0].s[BI_ACTIVE] == 1.0 && split[0].s[BI_BROKEN] == 0.0 &&
                  near(split[0].hist[1], one[0].hist[1], 1e-12);
        check("the scalars are one GPU's to rounding (" + w + ")", scalars);
        // The fields: each rank's pieces against the one-GPU fields.
        double worst = 0.0, scale = 0.0;
        for (const auto& f : {one[0].x, one[0].r, one[0].p})
            for (const T& z : f)
                scale = std::max({scale, std::fabs((double)z.x), std::fabs((double)z.y)});
        size_t at = 0;
        for (const auto& k : split) {
            for (size_t i = 0; i < k.x.size(); ++i, ++at) {
                for (auto [a, b] : {std::pair{k.x[i], one[0].x[at]}, std::pair{k.r[i], one[0].r[at]},
                                    std::pair{k.p[i], one[0].p[at]}})
                    worst = std::max({worst, std::fabs((double)a.x - (double)b.x), std::fabs((double)a.y - (double)b.y)});
            }
        }
        // Relative to the fields' largest number (p = r + beta p can be large here).
        char d[32];
        std::snprintf(d, sizeof d, "%.2e", worst / scale);
        check("x, r and p are one GPU's to rounding (" + w + ")", worst <= field_tol * scale, d);
    }
    // A zero (r0|v): broken on every rank, nothing after it changed.
    const std::vector<T> zero(n);
    const auto broken = iterate<K>(3, rhs, zero, t);
    bool all = true;
    for (const auto& k : broken)
        all = all && k.s[BI_ACTIVE] == 0.0 && k.s[BI_BROKEN] == 1.0 && k.s[BI_ITER] == 0 && k.hist[1] == -7.0;
    check("a zero (r0|v) breaks the iteration on every rank (" + tag + ")", all);
    // The last iteration allowed (max_iter 1): the update ends it on every rank.
    const auto last = iterate<K>(2, rhs, v, t, 1);
    all = true;
    for (const auto& k : last)
        all = all && k.s[BI_ACTIVE] == 0.0 && k.s[BI_BROKEN] == 0.0 && k.s[BI_ITER] == 1;
    check("max_iter stops every rank (" + tag + ")", all);
}

// bi_global alone: inactive, nothing changes but the start (not gated) sets rho.
static void gating()
{
    std::vector<double> s(BI_SCALARS, 0.0), hist(11, -7.0), g = {1.0, 2.0, 0.0, 0.0, 3.0, -1.0, 0.0, 0.0};
    s[BI_SPLIT] = 1.0;
    const std::vector<double> before = s;
    for (int which : {1, 2, 3})
        emu_launch(1, 32, 0, false, [&] { bi_global(which, s.data(), hist.data(), g.data(), 2); });
    check("bi_global inactive: alpha, omega and update change nothing", s == before && hist[1] == -7.0);
    emu_launch(1, 32, 0, false, [&] { bi_global(0, s.data(), hist.data(), g.data(), 2); });
    check("bi_global start: rho = the ranks' sum, though inactive", s[BI_RHO_RE] == 4.0 && s[BI_RHO_RE + 1] == 1.0);
}

int main()
{
    for (size_t n : {7, 1000, 4099}) {
        run<D>(n);
        run<S>(n);
    }
    gating();
    std::printf("%s\n", failures ? "bi_check: FAILED" : "bi_check: all passed");
    return failures ? 1 : 0;
}
