// cr_check.cpp: the fused CR kernels of kernels/cr_fused.cu (with cr_device.cuh's
// single-pass reduction) on the CPU through cuda_emu.h, against a plain host computation:
// the field updates (bit for bit: the host does the same operations in the same order),
// the norm (bit for bit against a host sum in the kernels' tree order, and to rounding
// against a sequential sum), the scalar-block updates (nr, iter, history, apap, alpha,
// active with each stop condition), the ticket counters back at 0 after every launch,
// and that an inactive block changes nothing. Double and single fields, several grids
// and block sizes (including grids of 1 and blocks that are not powers of two), blocks
// run first to last and last to first (another block sums the partials: same bits).
// Prints one line per check; exit 1 on failure.
#include "emu_util.h"
#include <random>
#include <string>

// The indices of kernels/cr_device.cuh.
#include "cr_device.cuh"

extern "C" {
void cr_xr_d(double2*, double2*, const double2*, const double2*, int, double*, double*, double2*, unsigned*);
void cr_xr_s(float2*, float2*, const float2*, const float2*, int, double*, double*, double2*, unsigned*);
void cr_p_d(double2*, double2*, const double2*, const double2*, int, double*, double2*, unsigned*);
void cr_p_s(float2*, float2*, const float2*, const float2*, int, double*, double2*, unsigned*);
void cr_global(int, double*, double*, const double*, int);
void cr_peer_sum(int, double*, double*, const unsigned long long*, int, int);
}

// ---------------------------------------------------------------- host side
struct H {
    double x, y;
};
static H hmul(H a, H b) { return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; }
static H hadd(H a, H b) { return {a.x + b.x, a.y + b.y}; }
static H hsub(H a, H b) { return {a.x - b.x, a.y - b.y}; }

template <class T> struct Field;
template <> struct Field<double2> {
    static H get(double2 z) { return {z.x, z.y}; }
    static double2 put(H z) { return {z.x, z.y}; }
};
template <> struct Field<float2> {
    static H get(float2 z) { return {(double)z.x, (double)z.y}; }
    static float2 put(H z) { return {(float)z.x, (float)z.y}; }
};

// cr_block_sum's tree over n values.
static double tree(std::vector<double> v)
{
    const unsigned n = v.size();
    unsigned half = 1;
    while (half < n)
        half <<= 1;
    for (half >>= 1; half > 0; half >>= 1)
        for (unsigned t = 0; t < half; ++t)
            if (t + half < n)
                v[t] = v[t] + v[t + half];
    return v[0];
}

// The kernels' sum of w[i] over i < n: per thread the grid-stride order (four at a time
// while four are left), per block the tree, then the last block's strided sums of the
// partials and the tree again.
static double kernel_order_sum(const std::vector<double>& w, unsigned grid, unsigned block)
{
    const size_t n = w.size(), stride = (size_t)grid * block;
    std::vector<double> partial(grid);
    for (unsigned b = 0; b < grid; ++b) {
        std::vector<double> acc(block, 0.0);
        for (unsigned t = 0; t < block; ++t) {
            size_t i = (size_t)b * block + t;
            double a = 0.0;
            for (; i + 3 * stride < n; i += 4 * stride) {
                a += w[i];
                a += w[i + stride];
                a += w[i + 2 * stride];
                a += w[i + 3 * stride];
            }
            for (; i < n; i += stride)
                a += w[i];
            acc[t] = a;
        }
        partial[b] = tree(acc);
    }
    std::vector<double> acc(block, 0.0);
    for (unsigned t = 0; t < block; ++t)
        for (unsigned i = t; i < grid; i += block)
            acc[t] = acc[t] + partial[i];
    return tree(acc);
}

static std::mt19937_64 rng(12345);
template <class T>
static std::vector<T> random_field(size_t n)
{
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<T> f(n);
    for (auto& z : f)
        z = Field<T>::put({u(rng), u(rng)});
    return f;
}

template <class T>
static bool same_bits(const std::vector<T>& a, const std::vector<T>& b)
{
    return std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Device {
    std::vector<double> s = std::vector<double>(CR_SCALARS, 0.0);
    std::vector<double> hist;
    std::vector<double2> partials;
    std::vector<unsigned> tickets = std::vector<unsigned>(CR_TICKETS, 0);
    Device(unsigned grid, unsigned max_iter) : hist(max_iter + 1, -1.0), partials(grid + 3) {}
};

static void xr(double2* x, double2* r, const double2* p, const double2* ap, int n, Device& d)
{
    cr_xr_d(x, r, p, ap, n, d.s.data(), d.hist.data(), d.partials.data(), d.tickets.data());
}
static void xr(float2* x, float2* r, const float2* p, const float2* ap, int n, Device& d)
{
    cr_xr_s(x, r, p, ap, n, d.s.data(), d.hist.data(), d.partials.data(), d.tickets.data());
}
static void pp(double2* p, double2* ap, const double2* r, const double2* ar, int n, Device& d)
{
    cr_p_d(p, ap, r, ar, n, d.s.data(), d.partials.data(), d.tickets.data());
}
static void pp(float2* p, float2* ap, const float2* r, const float2* ar, int n, Device& d)
{
    cr_p_s(p, ap, r, ar, n, d.s.data(), d.partials.data(), d.tickets.data());
}

static bool tickets_zero(const Device& d)
{
    for (unsigned t : d.tickets)
        if (t != 0)
            return false;
    return true;
}

template <class T>
static void run_case(const char* prec, size_t n, unsigned grid, unsigned block)
{
    using F = Field<T>;
    char tag[128];
    std::snprintf(tag, sizeof tag, "%s n=%zu grid=%u block=%u%s", prec, n, grid, block,
                  emu_reverse_blocks ? " reversed" : "");
    rng.seed(n * 7919 + grid * 31 + block);
    const unsigned max_iter = 9;
    auto x = random_field<T>(n), r = random_field<T>(n), p = random_field<T>(n), ap = random_field<T>(n),
         ar = random_field<T>(n);
    Device d(grid, max_iter);
    const H alpha = {0.37, -1.25}, beta = {-0.61, 0.44}, rar = {2.5, -0.75};
    d.s[CR_ALPHA_RE] = alpha.x;
    d.s[CR_ALPHA_IM] = alpha.y;
    d.s[CR_BETA_RE] = beta.x;
    d.s[CR_BETA_IM] = beta.y;
    d.s[CR_RAR_RE] = rar.x;
    d.s[CR_RAR_IM] = rar.y;
    d.s[CR_NR] = 1e9;
    d.s[CR_EPS] = 1e-20;
    d.s[CR_ITER] = 3;
    d.s[CR_MAX_ITER] = max_iter;
    d.s[CR_ACTIVE] = 1.0;
    const size_t shared = (size_t)block * 16;

    // ---- xr
    auto xw = x, rw = r;
    std::vector<double> w(n);
    for (size_t i = 0; i < n; ++i) {
        xw[i] = F::put(hadd(F::get(x[i]), hmul(alpha, F::get(p[i]))));
        rw[i] = F::put(hsub(F::get(r[i]), hmul(alpha, F::get(ap[i]))));
        const H z = F::get(rw[i]);
        w[i] = z.x * z.x + z.y * z.y;
    }
    double seq = 0.0;
    for (double v : w)
        seq += v;
    const double nr = kernel_order_sum(w, grid, block);
    const auto before = d.s;
    emu_launch(grid, block, shared, true, [&] { xr(x.data(), r.data(), p.data(), ap.data(), (int)n, d); });
    check(std::string("cr_xr fields ") + tag, same_bits(x, xw) && same_bits(r, rw));
    check(std::string("cr_xr nr in tree order ") + tag, d.s[CR_NR] == nr);
    char buf[64];
    std::snprintf(buf, sizeof buf, "(rel %.1e)", std::fabs(d.s[CR_NR] - seq) / seq);
    check(std::string("cr_xr nr vs sequential ") + tag, std::fabs(d.s[CR_NR] - seq) <= 1e-12 * seq, buf);
    bool others = true;
    for (int k = 0; k < CR_SCALARS; ++k)
        if (k != CR_NR && k != CR_ITER && d.s[k] != before[k])
            others = false;
    check(std::string("cr_xr iter, history, other scalars ") + tag,
          d.s[CR_ITER] == 4.0 && d.hist[4] == nr && d.hist[3] == -1.0 && d.hist[5] == -1.0 && others);
    check(std::string("cr_xr tickets back at 0 ") + tag, tickets_zero(d));

    // ---- p
    auto pw = p, apw = ap;
    for (size_t i = 0; i < n; ++i) {
        pw[i] = F::put(hadd(F::get(r[i]), hmul(beta, F::get(p[i]))));
        apw[i] = F::put(hadd(F::get(ar[i]), hmul(beta, F::get(ap[i]))));
        const H z = F::get(apw[i]);
        w[i] = z.x * z.x + z.y * z.y;
    }
    const double apap = kernel_order_sum(w, grid, block);
    emu_launch(grid, block, shared, true, [&] { pp(p.data(), ap.data(), r.data(), ar.data(), (int)n, d); });
    check(std::string("cr_p fields ") + tag, same_bits(p, pw) && same_bits(ap, apw));
    check(std::string("cr_p apap, alpha, active ") + tag,
          d.s[CR_APAP] == apap && d.s[CR_ALPHA_RE] == rar.x / apap && d.s[CR_ALPHA_IM] == -rar.y / apap &&
              d.s[CR_ACTIVE] == 1.0 && d.s[CR_ITER] == 4.0 && d.s[CR_NR] == nr);
    check(std::string("cr_p tickets back at 0 ") + tag, tickets_zero(d));

    // ---- inactive: nothing changes
    d.s[CR_ACTIVE] = 0.0;
    const auto s0 = d.s;
    const auto h0 = d.hist;
    const auto x0 = x, r0 = r, p0 = p, ap0 = ap;
    emu_launch(grid, block, shared, true, [&] { xr(x.data(), r.data(), p.data(), ap.data(), (int)n, d); });
    emu_launch(grid, block, shared, true, [&] { pp(p.data(), ap.data(), r.data(), ar.data(), (int)n, d); });
    check(std::string("inactive: no change ") + tag, same_bits(x, x0) && same_bits(r, r0) && same_bits(p, p0) &&
                                                         same_bits(ap, ap0) && d.s == s0 && d.hist == h0 &&
                                                         tickets_zero(d));
}

// The stop conditions of cr_p's last block: nr <= eps, iter == max_iter, nr not finite.
static void stop_conditions()
{
    const size_t n = 100;
    auto p = random_field<double2>(n), ap = random_field<double2>(n), r = random_field<double2>(n),
         ar = random_field<double2>(n);
    struct Case {
        const char* what;
        double nr, eps, iter, max_iter, active;
    };
    const Case cases[] = {
        {"nr > eps, iter < max_iter: active", 1.0, 0.5, 3, 4, 1.0},
        {"nr == eps: stop", 0.5, 0.5, 3, 4, 0.0},
        {"nr < eps: stop", 0.25, 0.5, 3, 4, 0.0},
        {"iter == max_iter: stop", 1.0, 0.5, 4, 4, 0.0},
        {"nr NaN: stop", std::nan(""), 0.5, 3, 4, 0.0},
        {"nr inf: stop", INFINITY, 0.5, 3, 4, 0.0},
    };
    for (const Case& c : cases) {
        Device d(2, 4);
        d.s[CR_RAR_RE] = 1.0;
        d.s[CR_NR] = c.nr;
        d.s[CR_EPS] = c.eps;
        d.s[CR_ITER] = c.iter;
        d.s[CR_MAX_ITER] = c.max_iter;
        d.s[CR_ACTIVE] = 1.0;
        emu_launch(2, 32, 32 * 16, true, [&] { pp(p.data(), ap.data(), r.data(), ar.data(), (int)n, d); });
        check(std::string("cr_p stop condition: ") + c.what, d.s[CR_ACTIVE] == c.active && tickets_zero(d));
    }
    // xr at the last iteration: iter reaches max_iter, the history's last entry is written.
    Device d(3, 4);
    d.s[CR_ITER] = 3;
    d.s[CR_MAX_ITER] = 4;
    d.s[CR_ACTIVE] = 1.0;
    emu_launch(3, 32, 32 * 16, true, [&] { xr(r.data(), p.data(), ap.data(), ar.data(), (int)n, d); });
    check("cr_xr fills the last history entry", d.s[CR_ITER] == 4.0 && d.hist[4] == d.s[CR_NR] && tickets_zero(d));
}

// An active scalar block of a decomposed lattice: rar (2, 0.5), iter 3 of 10, nr 1.
static std::vector<double> split_block()
{
    std::vector<double> s(CR_SCALARS, 0.0);
    s[CR_RAR_RE] = 2.0;
    s[CR_RAR_IM] = 0.5;
    s[CR_ITER] = 3;
    s[CR_MAX_ITER] = 10;
    s[CR_EPS] = 1e-20;
    s[CR_NR] = 1.0;
    s[CR_ACTIVE] = 1.0;
    s[CR_SPLIT] = 1.0;
    return s;
}

// cr_global on 3 ranks' gathered (CR_LOCAL_RE, CR_LOCAL_IM, CR_LOCAL_NR): apply's end
// with xr's nr (sums in rank order, the same bits as the host's left-to-right sums), with
// no nr left (the start of a run: iter and history untouched), and p's end.
static void global_checks()
{
    const int ranks = 3;
    std::vector<double> g(CR_GATHERED * ranks);
    for (int r = 0; r < ranks; ++r) {
        g[CR_GATHERED * r + 0] = 0.5 + r;          // re
        g[CR_GATHERED * r + 1] = -0.25 * (r + 1);  // im
        g[CR_GATHERED * r + 2] = 1e-3 * (r + 2);   // nr
    }
    const double re = (g[0] + g[3]) + g[6], im = (g[1] + g[4]) + g[7], nr = (g[2] + g[5]) + g[8];
    std::vector<double> hist(11, -7.0);
    auto one = [](int which, std::vector<double>& s, std::vector<double>& h, const std::vector<double>& gg) {
        emu_launch(1, 32, 0, false, [&] { cr_global(which, s.data(), h.data(), gg.data(), 3); });
    };
    // Apply with xr's nr: beta = (re, im) / rar, rar = (re, im), nr, iter + 1, history.
    std::vector<double> s = split_block();
    one(1, s, hist, g);
    const double d = 2.0 * 2.0 + 0.5 * 0.5;
    const double br = (re * 2.0 + im * 0.5) / d, bi = (im * 2.0 - re * 0.5) / d;
    // The sums are exact (the same additions in the same order); beta's complex division
    // to rounding (the compiler may contract its products into fused multiply-adds).
    const auto near = [](double a, double b) { return std::fabs(a - b) <= 4e-16 * std::fabs(b); };
    check("cr_global apply: rar, beta in rank order",
          s[CR_RAR_RE] == re && s[CR_RAR_IM] == im && near(s[CR_BETA_RE], br) && near(s[CR_BETA_IM], bi));
    check("cr_global apply: xr's nr, iter, history; no nr left",
          s[CR_NR] == nr && s[CR_ITER] == 4 && hist[4] == nr && s[CR_LOCAL_NR] == CR_NO_NR);
    // Apply at a run's start: no xr left an nr.
    std::vector<double> g0 = g;
    for (int r = 0; r < ranks; ++r)
        g0[CR_GATHERED * r + 2] = CR_NO_NR;
    s = split_block();
    std::fill(hist.begin(), hist.end(), -7.0);
    one(1, s, hist, g0);
    check("cr_global apply without an nr: iter, nr, history kept",
          s[CR_ITER] == 3 && s[CR_NR] == 1.0 && hist[4] == -7.0 && s[CR_RAR_RE] == re);
    // p: apap = the real parts' sum, alpha = conj(rar) / apap, active (nr 1 > eps).
    s = split_block();
    one(2, s, hist, g);
    check("cr_global p: apap, alpha, active",
          s[CR_APAP] == re && s[CR_ALPHA_RE] == 2.0 / re && s[CR_ALPHA_IM] == -0.5 / re && s[CR_ACTIVE] == 1.0);
    // Inactive: nothing changes.
    s = split_block();
    s[CR_ACTIVE] = 0.0;
    const std::vector<double> before = s;
    one(1, s, hist, g);
    check("cr_global inactive: no change", s == before);
}

// cr_peer_sum as rank 0 of 3, its peers played by the check: ranks 1 and 2 have already
// written their slots (sequence number 1, generation 1; then 2, generation 0) into rank
// 0's buffer. Rank 0 must write its own three values and the sequence number into every
// rank's buffer (its own included) at slot 0 of the generation, add the three ranks' in
// rank order as cr_global does (the same bits for the same values), and count the
// reduction. Peer memory, its fences and a real wait need GPUs (tests/gpu_nccl.rs).
static void peer_sum_checks()
{
    const int ranks = 3, slot = CR_PEER_SLOT;
    const size_t len = (size_t)slot * 2 * ranks + 1;
    std::vector<std::vector<double>> buf(ranks, std::vector<double>(len, 0.0));
    std::vector<unsigned long long> table(ranks);
    for (int q = 0; q < ranks; ++q)
        table[q] = (unsigned long long)(uintptr_t)buf[q].data();
    const double vals[3][3] = {{0.5, -0.25, 2e-3}, {1.5, -0.5, 3e-3}, {2.5, -0.75, 4e-3}};
    for (int seq = 1; seq <= 2; ++seq) {
        const int gen = seq & 1;
        for (int q = 1; q < ranks; ++q) {
            double* v = buf[0].data() + (size_t)slot * (gen * ranks + q);
            v[0] = vals[q][0];
            v[1] = vals[q][1];
            v[2] = vals[q][2];
            v[3] = seq;
        }
        std::vector<double> s = split_block(), hist(11, -7.0);
        s[CR_LOCAL_RE] = vals[0][0];
        s[CR_LOCAL_IM] = vals[0][1];
        s[CR_LOCAL_NR] = vals[0][2];
        emu_launch(1, 32, 0, true, [&] { cr_peer_sum(1, s.data(), hist.data(), table.data(), 0, ranks); });
        // cr_global on the same values gathered.
        std::vector<double> g(CR_GATHERED * ranks), s2 = split_block(), hist2(11, -7.0);
        for (int q = 0; q < ranks; ++q)
            for (int k = 0; k < 3; ++k)
                g[CR_GATHERED * q + k] = vals[q][k];
        s2[CR_LOCAL_RE] = vals[0][0];
        s2[CR_LOCAL_IM] = vals[0][1];
        s2[CR_LOCAL_NR] = vals[0][2];
        emu_launch(1, 32, 0, false, [&] { cr_global(1, s2.data(), hist2.data(), g.data(), ranks); });
        check("cr_peer_sum apply: cr_global's scalars and history, bit for bit", s == s2 && hist == hist2);
        bool written = true;
        for (int q = 0; q < ranks; ++q) {
            const double* v = buf[q].data() + (size_t)slot * (gen * ranks + 0);
            written = written && v[0] == vals[0][0] && v[1] == vals[0][1] && v[2] == vals[0][2] && v[3] == seq;
        }
        check("cr_peer_sum: its slot written into every rank's buffer", written);
        check("cr_peer_sum: the reduction counted", buf[0][len - 1] == seq);
    }
    // Inactive: nothing written, nothing counted.
    std::vector<double> s = split_block(), hist(11, -7.0);
    s[CR_ACTIVE] = 0.0;
    const std::vector<double> before = s;
    const std::vector<std::vector<double>> bufs = buf;
    emu_launch(1, 32, 0, true, [&] { cr_peer_sum(2, s.data(), hist.data(), table.data(), 0, ranks); });
    check("cr_peer_sum inactive: no change, no write", s == before && buf == bufs);
}

int main()
{
    struct Geo {
        size_t n;
        unsigned grid, block;
    };
    const Geo geos[] = {{1, 1, 32}, {972, 1, 64}, {972, 3, 96}, {5000, 7, 64}, {4096, 4, 256}, {777, 40, 32}};
    // Blocks in launch order, then last to first: the same data and the same bits (the
    // tree-order checks are exact), whichever block arrives last and sums the partials.
    for (bool reverse : {false, true}) {
        emu_reverse_blocks = reverse;
        for (const Geo& g : geos) {
            run_case<double2>("double", g.n, g.grid, g.block);
            run_case<float2>("single", g.n, g.grid, g.block);
        }
    }
    emu_reverse_blocks = false;
    stop_conditions();
    global_checks();
    peer_sum_checks();
    std::printf("%s\n", failures ? "cr_check: FAILED" : "cr_check: all passed");
    return failures ? 1 : 0;
}
