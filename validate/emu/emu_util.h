// emu_util.h: what the emulated checks (emu_check.cpp, emu_v3eo.cpp, emu_halo.cpp) share:
// the definitions of cuda_emu.h's globals (include in the one file with main), a check's
// report line (of a value against a tolerance, or of a condition), the relative difference of two fields, precision conversions, grid sizes
// and the header of the oracle dumps (magic, dims, antiperiodic mask, kappa).
#pragma once
#include "cuda_emu.h"
#include <cstdio>
#include <fstream>
#include <string>

thread_local emu_uint3 threadIdx, blockIdx, blockDim, gridDim;
char* emu_dynamic_shared = nullptr;
std::barrier<>* emu_barrier = nullptr;

static int failures = 0;
static int report_width = 52;
// One line per check of a condition (`detail` printed after the verdict).
[[maybe_unused]] static void check(const std::string& what, bool ok, const std::string& detail = "")
{
    if (!ok)
        ++failures;
    std::printf("%-72s %s %s\n", what.c_str(), ok ? "ok" : "FAIL", detail.c_str());
}

// One line per check; NaN fails.
static void report(const std::string& what, double value, double tol)
{
    const bool ok = value <= tol;
    if (!ok)
        ++failures;
    std::printf("%-*s %10.3e  %s\n", report_width, what.c_str(), value, ok ? "ok" : "FAIL");
}

// ||a - b|| / ||b||
static double rel_diff(const std::vector<double2>& a, const std::vector<double2>& b)
{
    double num = 0, den = 0;
    for (size_t k = 0; k < a.size(); ++k) {
        const double dx = a[k].x - b[k].x, dy = a[k].y - b[k].y;
        num += dx * dx + dy * dy;
        den += b[k].x * b[k].x + b[k].y * b[k].y;
    }
    return std::sqrt(num / den);
}

[[maybe_unused]] static double2 to_d(double2 z) { return z; }
[[maybe_unused]] static double2 to_d(float2 z) { return double2{z.x, z.y}; }

// |got - (y|o)| over the sum of the terms' magnitudes, (y|o) = sum conj(y[k]) o[k] over
// k in [off, off + n), summed here in double: a fused dot's error against the host's sum
// of the same stored fields (the two differ only in the order of additions; relative to
// the magnitudes, as g5 makes the dot itself cancel).
template <class A, class B>
[[maybe_unused]] static double dot_error(double got_re, double got_im, const A* y, const B* o, size_t off, size_t n)
{
    double re = 0, im = 0, mag = 0;
    for (size_t k = off; k < off + n; ++k) {
        const double2 a = to_d(y[k]), b = to_d(o[k]);
        re += a.x * b.x + a.y * b.y;
        im += a.x * b.y - a.y * b.x;
        mag += std::hypot(a.x, a.y) * std::hypot(b.x, b.y);
    }
    return std::hypot(got_re - re, got_im - im) / mag;
}
template <class T> static T from_d(double2 z);
template <> [[maybe_unused]] double2 from_d<double2>(double2 z) { return z; }
template <> [[maybe_unused]] float2 from_d<float2>(double2 z) { return float2{(float)z.x, (float)z.y}; }
[[maybe_unused]] static unsigned blocks(size_t n, size_t per) { return (unsigned)((n + per - 1) / per); }

// A lattice's geometry: dims, lexicographic index, parity, parity-major maps.
struct Geo {
    int l[4];
    int V, vh;
    int index(const int c[4]) const { return c[0] + l[0] * (c[1] + l[1] * (c[2] + l[2] * c[3])); }
    void coords(int s, int c[4]) const
    {
        for (int mu = 0; mu < 4; ++mu) {
            c[mu] = s % l[mu];
            s /= l[mu];
        }
    }
    int parity(int s) const
    {
        int c[4];
        coords(s, c);
        return (c[0] + c[1] + c[2] + c[3]) & 1;
    }
    // canonical [site][12] -> parity-major full field
    std::vector<double2> to_pm(const std::vector<double2>& c) const
    {
        std::vector<double2> pm((size_t)V * 12);
        for (int s = 0; s < V; ++s)
            for (int k = 0; k < 12; ++k)
                pm[(size_t)parity(s) * 12 * vh + (size_t)k * vh + s / 2] = c[(size_t)s * 12 + k];
        return pm;
    }
    // a parity-major field (full, or the half of parity p) -> canonical (zeros elsewhere)
    std::vector<double2> from_pm(const std::vector<double2>& pm, int p) const
    {
        std::vector<double2> c((size_t)V * 12, double2{0, 0});
        for (int s = 0; s < V; ++s) {
            const int q = parity(s);
            if (p >= 0 && q != p)
                continue;
            const size_t base = p >= 0 ? 0 : (size_t)q * 12 * vh;
            for (int k = 0; k < 12; ++k)
                c[(size_t)s * 12 + k] = pm[base + (size_t)k * vh + s / 2];
        }
        return c;
    }
    int face_sites(int mu) const { return V / l[mu]; }
};

[[maybe_unused]] static Geo make_geo(const int l[4])
{
    Geo g;
    for (int mu = 0; mu < 4; ++mu)
        g.l[mu] = l[mu];
    g.V = l[0] * l[1] * l[2] * l[3];
    g.vh = g.V / 2;
    return g;
}

// Stored element e (of E) of link (s, mu), as src/backend/cuda/fast_layout.rs stored_link:
// E = 9 or 6: element e = row*3 + col of canon ([site][mu][9]); E = 4: real pair e of the
// 8-real form pack8 ([site][mu][8], Su3::pack8).
[[maybe_unused]] static double2 stored_link(const double2* canon, const double* pack8, size_t s, int mu, int E,
                                            int e)
{
    const size_t link = s * 4 + mu;
    return E == 4 ? double2{pack8[link * 8 + 2 * e], pack8[link * 8 + 2 * e + 1]} : canon[link * 9 + e];
}

// 3.0's link array of a lattice (fast_layout::links_to_soa): element e of the E stored of
// U_mu at (p, cb) at p*4E*Vh + (mu*E + e)*Vh + cb.
[[maybe_unused]] static std::vector<double2> soa_links(const Geo& g, const double2* canon, const double* pack8, int E)
{
    std::vector<double2> soa((size_t)g.V * 4 * E);
    for (int s = 0; s < g.V; ++s)
        for (int mu = 0; mu < 4; ++mu)
            for (int e = 0; e < E; ++e)
                soa[(size_t)g.parity(s) * 4 * E * g.vh + (size_t)(mu * E + e) * g.vh + s / 2] =
                    stored_link(canon, pack8, s, mu, E, e);
    return soa;
}

// The header of an oracle dump: 8 magic bytes, dims (u64 x 4), antiperiodic mask (u64),
// kappa (f64). Exits 2 on a wrong file.
struct DumpHeader {
    int l[4];
    int mask;
    double kappa;
};
static DumpHeader read_header(std::ifstream& in, const char* magic_want, const char* what)
{
    char magic[8];
    in.read(magic, 8);
    if (!in || std::string(magic, 8) != magic_want) {
        std::fprintf(stderr, "not %s\n", what);
        std::exit(2);
    }
    uint64_t dims64[4], mask64;
    in.read((char*)dims64, 32);
    in.read((char*)&mask64, 8);
    DumpHeader h;
    in.read((char*)&h.kappa, 8);
    for (int mu = 0; mu < 4; ++mu)
        h.l[mu] = (int)dims64[mu];
    h.mask = (int)mask64;
    return h;
}

// The oracle of examples/emu_v3eo_dump.rs: header, canonical links, psi, phi, the CPU
// backend's refs[precision: double, single, half][D, g5D, Mee, g5Mee, hop even, hop odd]
// (full canonical fields, zeros off a half field's parity), (psi_e | g5 M_ee psi_e) and
// every link's 8-real form (Su3::pack8, [site][mu][8]). Exits 2 on a wrong file.
struct V3eoDump {
    DumpHeader h;
    std::vector<double2> canon, psi, phi, refs[3][6];
    double rar_re, rar_im;
    std::vector<double> pack8;
};
[[maybe_unused]] static V3eoDump read_v3eo_dump(const char* path)
{
    std::ifstream in(path, std::ios::binary);
    V3eoDump d;
    d.h = read_header(in, "QCDV3EO1", "a v3eo dump");
    const size_t nf = (size_t)d.h.l[0] * d.h.l[1] * d.h.l[2] * d.h.l[3] * 12;
    d.canon.resize(nf * 3);
    d.psi.resize(nf);
    d.phi.resize(nf);
    in.read((char*)d.canon.data(), d.canon.size() * 16);
    in.read((char*)d.psi.data(), nf * 16);
    in.read((char*)d.phi.data(), nf * 16);
    for (auto& r : d.refs)
        for (auto& f : r) {
            f.resize(nf);
            in.read((char*)f.data(), nf * 16);
        }
    in.read((char*)&d.rar_re, 8);
    in.read((char*)&d.rar_im, 8);
    d.pack8.resize(nf / 12 * 4 * 8);
    in.read((char*)d.pack8.data(), d.pack8.size() * 8);
    if (!in) {
        std::fprintf(stderr, "short dump\n");
        std::exit(2);
    }
    return d;
}

// A build's entry points (kernels/stencil_v3.cu): the full mode, a parity launch, the full
// mode with the dot epilogue, and both full ones in columns along t (parity -T, T >= 2)
// (those given), picked by the launch's parity and epilogue as src/backend/cuda/stencil.rs
// V3Kernels::of does.
template <class K>
struct V3Entry {
    K full, parity, full_dot, full_col, full_dot_col;
    K of(int par, bool dot = false) const
    {
        if (par >= 0)
            return parity;
        if (par < -1)
            return dot ? full_dot_col : full_col;
        return dot && full_dot ? full_dot : full;
    }
};
template <class K>
V3Entry<K> v3_entry(K full, K parity, K full_dot = K(), K full_col = K(), K full_dot_col = K())
{
    return {full, parity, full_dot, full_col, full_dot_col};
}
// Threads of a launch: a full-mode launch covers both halves in whole warps, one thread
// per column of -par sites (src/backend/cuda/stencil.rs launch_v3).
inline size_t v3_threads(int par, size_t vh)
{
    const size_t col = par < -1 ? (size_t)-par : 1;
    return par < 0 ? 2 * ((vh / col + 31) / 32 * 32) : vh;
}
