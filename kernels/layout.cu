// layout.cu: set-up kernels that build each stencil version's device layout from the
// canonical gauge field (U_mu(x) row-major, [site][mu], mu = x, y, z, t), once per solve.
//
// - build_seed_links: the seed's doubled buffer (versions 1.0-1.5 and 2.0): per site the
//   8 matrices uup(t,x,y,z) = U_mu(x), then udn(t,x,y,z) = U_mu(x-mu)^+. Because every
//   site owns its 8 matrices, the fermion boundary phase of each hop (-1 across an
//   antiperiodic edge) is folded into that hop's matrix here, and the stencils need no
//   phase logic.
// - build_move_table: the seed's displacement table bufMove (versions 1.0-1.3):
//   move[site*8 + h] = the neighbour of `site` for hop h.
// - reorder_links_v16: the version 1.6 / 1.6.1 rearrangement of the seed buffer, as a tiled
//   transposition through shared memory (padded against bank conflicts).
// - links_from_sites: version 3.0's link array (fast_layout.rs) from a chunk of whole sites
//   of the canonical field, uploaded as it is (link_upload.rs, r18 and r12). With the
//   host upload (and always for r8) the array is built on the host instead
//   (fast_layout::links_chunk_to_soa) and uploaded in its final order.
// - to_single / to_double: element-wise precision conversion (3.0's single-precision links
//   and fields).
// - to_link16: 3.0's 16-bit links (v3_core.cuh V3_LINK16, the half build) from the double
//   links, element-wise.
// - to_half / from_half: site-wise conversion between double fields and half fields
//   (half.cuh), rounding in double exactly as the host does (src/linalg/half.rs), so that
//   a field converted here is the CPU's bit for bit.
#include "common.cuh"
#include "half.cuh"

// One thread per (site, hop, element): 72 complex per site.
extern "C" __global__ void build_seed_links(const double2* __restrict__ canonical, double2* __restrict__ seed,
                                            int volume, int lx, int ly, int lz, int lt, int antiperiodic_mask)
{
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)volume * 72)
        return;
    const int site = (int)(t / 72);
    const int r = (int)(t % 72);
    const int h = r / 9, e = r % 9, row = e / 3, col = e % 3;
    const Dims d = make_dims(lx, ly, lz, lt);
    int c[4];
    site_coords(site, d, c);
    const int mu = hop_mu(h);
    const bool fwd = hop_forward(h);
    const double phase = hop_phase(c[mu], mu, fwd, d, antiperiodic_mask);
    double2 v;
    if (fwd) {
        v = canonical[((size_t)site * 4 + mu) * 9 + row * 3 + col];
    } else {
        // U_mu(x-mu)^+ (row, col) = conj(U_mu(x-mu)(col, row)); links are periodic.
        const int dn = neighbour_index(site, c[mu], mu, false, d);
        const double2 u = canonical[((size_t)dn * 4 + mu) * 9 + col * 3 + row];
        v = c_make(u.x, -u.y);
    }
    seed[t] = c_scale(phase, v);
}

// One thread per (site, hop).
extern "C" __global__ void build_move_table(int* __restrict__ move, int volume, int lx, int ly, int lz, int lt)
{
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)volume * 8)
        return;
    const int site = (int)(t / 8);
    const int h = (int)(t % 8);
    const Dims d = make_dims(lx, ly, lz, lt);
    int c[4];
    site_coords(site, d, c);
    const int mu = hop_mu(h);
    move[t] = neighbour_index(site, c[mu], mu, hop_forward(h), d);
}

// The version 1.6 layout and its offset function v16_offset are described in common.cuh.

#define V16_TILE_SITES 32
#define V16_SITE_STRIDE 73 // 72 complex per site, +1 so that rows fall in different banks

// One block per tile of 32 sites, 256 threads: read the tile's 32*72 complex in the seed
// order (coalesced), then write them out per direction, where the tile is contiguous in
// the 1.6 layout (coalesced), reading the shared tile across sites.
extern "C" __global__ void reorder_links_v16(const double2* __restrict__ seed, double2* __restrict__ reordered,
                                             int volume)
{
    __shared__ double2 tile[V16_TILE_SITES * V16_SITE_STRIDE];
    const int s0 = blockIdx.x * V16_TILE_SITES;
    const int pairs = (volume + 1) / 2;
    const int nsites = min(V16_TILE_SITES, 2 * pairs - s0); // includes the odd volume's pad site
    for (int e = threadIdx.x; e < V16_TILE_SITES * 72; e += blockDim.x) {
        const int s = e / 72, r = e % 72;
        double2 v = c_zero();
        if (s0 + s < volume)
            v = seed[((size_t)(s0 + s)) * 72 + r];
        tile[s * V16_SITE_STRIDE + r] = v;
    }
    __syncthreads();
    // Per direction the tile's sites occupy nsites * 18 consecutive complex numbers,
    // ordered (pair, updown, k, site in pair, i).
    for (int dir = 0; dir < 4; ++dir) {
        const size_t base = v16_offset(dir, pairs, s0, 0, 0, 0);
        for (int e = threadIdx.x; e < nsites * 18; e += blockDim.x) {
            const int pair = e / 36, r = e % 36;
            const int updown = r / 18, k = (r / 6) % 3, q = (r / 3) % 2, i = r % 3;
            const int s = pair * 2 + q;
            const int h = updown * 4 + dir;
            reordered[base + e] = tile[s * V16_SITE_STRIDE + h * 9 + i * 3 + k];
        }
    }
}

// One thread per (stored row, checkerboard index) of a chunk of the canonical field: the
// sites first_cb*2 .. (first_cb + pairs)*2 (an even start and count, so each checkerboard
// index cb of the chunk holds one site of each parity), in `sites` as [site][mu][stride]
// complex (stride 9: whole links; 6: rows 0 and 1 only, as the host copies them for r12).
// Element e of U_mu of the site of (p, cb) goes to soa[p*4E*vh + (mu*E + e)*vh + cb], E =
// elems (9 or 6: row-major elements of the first E/3 rows). The site of (p, cb) is
// Lattice::checkerboard_site: 2 cb when its parity (x+y+z+t plus the parity of the
// lattice's offset) is p, else 2 cb + 1. Reads and writes are copies: bit for bit the host
// layout. Writes are coalesced (consecutive threads, consecutive cb).
extern "C" __global__ void links_from_sites(const double2* __restrict__ sites, double2* __restrict__ soa,
                                            long long vh, long long first_cb, int pairs, int elems, int stride,
                                            int lx, int ly, int lz, int lt, int parity_offset)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)pairs * 4 * elems)
        return;
    const int row = (int)(t / pairs); // mu * elems + e
    const int j = (int)(t % pairs);
    const int mu = row / elems, e = row % elems;
    const long long cb = first_cb + j;
    const Dims d = make_dims(lx, ly, lz, lt);
    int c[4];
    site_coords((int)(2 * cb), d, c);
    const int q = (c[0] + c[1] + c[2] + c[3] + parity_offset) & 1; // parity of site 2 cb
#pragma unroll
    for (int p = 0; p < 2; ++p) {
        const int local = 2 * j + ((q + p) & 1); // the site of (p, cb), from the chunk's start
        const double2 v = sites[((size_t)local * 4 + mu) * stride + e];
        soa[(size_t)p * 4 * elems * vh + (size_t)row * vh + cb] = v;
    }
}

// Precision conversions of n complex numbers (element-wise, same layout): the fast path's
// single-precision links and field conversions. 16 + 8 bytes per element.
extern "C" __global__ void to_single(const double2* __restrict__ src, float2* __restrict__ dst, long long n)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        dst[k] = c_of<float2>((float)src[k].x, (float)src[k].y);
}

extern "C" __global__ void to_double(const float2* __restrict__ src, double2* __restrict__ dst, long long n)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        dst[k] = c_dbl(src[k]);
}

// 3.0's 16-bit links from n double link elements (same layout): each real times 32767 in
// double, rounded to the nearest integer (ties to even), clamped to +-32767. 16 + 4 bytes
// per element.
extern "C" __global__ void to_link16(const double2* __restrict__ src, short2* __restrict__ dst, long long n)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n) {
        short2 q;
        q.x = (short)fmin(fmax(rint(src[k].x * 32767.0), -32767.0), 32767.0);
        q.y = (short)fmin(fmax(rint(src[k].y * 32767.0), -32767.0), 32767.0);
        dst[k] = q;
    }
}

// Half fields: one thread per site of n sites in parity blocks of vh (the double field in
// the same structure of arrays). norm = the largest |real| rounded to float; q = the
// value times 32767 / norm (in double), rounded to the nearest integer, ties to even.
// 192 + 52 bytes per site.
extern "C" __global__ void to_half(const double2* __restrict__ src, short2* __restrict__ q,
                                   float* __restrict__ norm, long long n, long long vh)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n)
        return;
    const size_t b = half_base(s, vh);
    double m = 0.0;
#pragma unroll
    for (int k = 0; k < 12; ++k) {
        const double2 z = src[(size_t)k * vh + b];
        m = fmax(m, fmax(fabs(z.x), fabs(z.y)));
    }
    const float nf = (float)m;
    const double scale = nf > 0.0f ? 32767.0 / (double)nf : 0.0;
#pragma unroll
    for (int k = 0; k < 12; ++k) {
        const double2 z = src[(size_t)k * vh + b];
        short2 h;
        h.x = (short)fmin(fmax(rint(z.x * scale), -32767.0), 32767.0);
        h.y = (short)fmin(fmax(rint(z.y * scale), -32767.0), 32767.0);
        q[(size_t)k * vh + b] = h;
    }
    norm[s] = nf;
}

// value = q * (norm / 32767), in double (the host's dequantize).
extern "C" __global__ void from_half(const short2* __restrict__ q, const float* __restrict__ norm,
                                     double2* __restrict__ dst, long long n, long long vh)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n)
        return;
    const size_t b = half_base(s, vh);
    const double step = (double)norm[s] / 32767.0;
#pragma unroll
    for (int k = 0; k < 12; ++k) {
        const short2 h = q[(size_t)k * vh + b];
        dst[(size_t)k * vh + b] = c_make((double)h.x * step, (double)h.y * step);
    }
}
