// mg_galerkin.cu: multigrid's set-up on the GPU: the Galerkin product D_c = P^dag D P of
// the fine Wilson(-clover, twisted) operator, in double (src/backend/cuda/mg/galerkin.rs; the host form
// and its formulas are src/dirac/coarse/galerkin.rs). On aggregate a,
//
//   X_c(a)   = sum_{x in a} P(x)^dag [ A(x) P(x) + sum_{d: x + e_d in a} Y_d(x) P(x + e_d) ]
//   Y_c,d(a) = sum_{x in a, x + e_d not in a} P(x)^dag Y_d(x) P(x + e_d)
//
// with A(x) the site term (two 6 x 6 chiral blocks, or 1), Y_mu(x) = -kappa (1 - g_mu)
// U_mu(x) and Y_{4+mu}(x) = -kappa (1 + g_mu) U_mu(x - mu)^dag, each times its hop's
// fermion phase. A fine index is spin * 3 + colour; chirality s holds spins 2s and 2s + 1.
//
// One block of GAL_BLOCK threads per (aggregate, output matrix, tile): output matrix 0 is
// X_c(a), 1 + d is Y_c,d(a); a tile is GAL_BLOCK * GAL_PER of its cd x cd numbers (cd =
// 2 nvec), one accumulator each in the threads' registers. For each member x that feeds the
// output, the block forms T = (what multiplies P there) P, 12 x cd, in shared memory, then
// each thread adds its numbers' P(x)^dag T.
//
// The prolongator itself is made here too when the near-null vectors are on the device
// (the end of this file): gathered from the fine fields, orthonormalised per aggregate
// and chirality, and narrowed to single precision for the transfer.
#include "common.cuh"

#define GAL_BLOCK 256 // the host launches mg_galerkin with this many threads
#define GAL_PER 16    // numbers of the output a thread accumulates (the host's tile size / GAL_BLOCK)

// The hop's contribution to T[i][(half, w)]: sum over the fine numbers j of chirality `half`
// of Y_d(x)[i][j] V(y)[j][w], y = x + e_d.
__device__ __forceinline__ double2 gal_hop(const double2* __restrict__ V, const double2* __restrict__ links,
                                           const double2* __restrict__ proj, double kappa, int x, int code,
                                           long long vy, int d, int i, int half, int w, int nvec)
{
    const int y = code >> 1;
    const double f = (code & 1) ? kappa : -kappa;
    const int mu = d & 3, s = i / 3, c = i % 3;
    double2 acc = c_zero();
    for (int t = 2 * half; t < 2 * half + 2; ++t) {
        const double2 g = proj[(d * 4 + s) * 4 + t];
        if (g.x == 0.0 && g.y == 0.0)
            continue;
        double2 uv = c_zero();
        for (int e = 0; e < 3; ++e) {
            // U_mu(x)[c][e] forward; U_mu(y)^dag[c][e] = conj(U_mu(y)[e][c]) backward.
            const double2 v = V[vy + (long long)(3 * t + e) * nvec + w];
            if (d < 4)
                uv = c_madd(uv, links[((long long)x * 4 + mu) * 9 + c * 3 + e], v);
            else
                uv = c_add(uv, c_conj_mul(links[((long long)y * 4 + mu) * 9 + e * 3 + c], v));
        }
        acc = c_madd(acc, g, uv);
    }
    return c_scale(f, acc);
}

// V: the prolongator as [aggregate][member][row][vector] (row < 12, vector < nvec); site_of:
// each [aggregate][member]'s fine site; slot: each fine site's [aggregate][member] index;
// nb: [x][d] = 2 (x + e_d) + (the hop's phase is -1); links: U_mu(x) as [x][mu][row][col];
// blocks: A(x) as [x][chirality][6][6] (null: A = 1); proj: the spin matrices of Y_d as
// [d][4][4]; out_site [a][cd][cd] and out_hops [a][d][cd][cd], row-major. The grid is
// aggregates * 9 * tiles blocks.
extern "C" __global__ void __launch_bounds__(GAL_BLOCK)
    mg_galerkin(const double2* __restrict__ V, const int* __restrict__ site_of, const int* __restrict__ slot,
                const int* __restrict__ nb, const double2* __restrict__ links, const double2* __restrict__ blocks,
                const double2* __restrict__ proj, double kappa, int members, int nvec, int tiles,
                double2* __restrict__ out_site, double2* __restrict__ out_hops)
{
    const int tile = blockIdx.x % tiles;
    const int kind = (blockIdx.x / tiles) % 9;
    const int a = blockIdx.x / tiles / 9;
    const int cd = 2 * nvec, nel = cd * cd, n = 12 * nvec;
    QCD_DYNAMIC_SHARED(double2, sh);
    double2* T = sh;         // 12 x cd
    double2* Vx = sh + 12 * cd; // 12 x nvec: P(x)
    double2 acc[GAL_PER];
    for (int q = 0; q < GAL_PER; ++q)
        acc[q] = c_zero();
    for (int m = 0; m < members; ++m) {
        const long long am = (long long)a * members + m;
        const int x = site_of[am];
        // Whether x feeds this output: the same for every thread of the block.
        if (kind > 0 && slot[nb[x * 8 + kind - 1] >> 1] / members == a)
            continue;
        __syncthreads(); // the previous member's T and Vx are read
        for (int e = threadIdx.x; e < n; e += blockDim.x)
            Vx[e] = V[am * n + e];
        for (int e = threadIdx.x; e < 12 * cd; e += blockDim.x) {
            const int i = e / cd, col = e % cd, half = col / nvec, w = col % nvec;
            double2 t = c_zero();
            if (kind == 0) {
                if (i / 6 == half) {
                    if (blocks) {
                        const double2* row = blocks + ((long long)x * 2 + half) * 36 + (i % 6) * 6;
                        for (int j = 0; j < 6; ++j)
                            t = c_madd(t, row[j], V[am * n + (long long)(6 * half + j) * nvec + w]);
                    } else {
                        t = V[am * n + (long long)i * nvec + w];
                    }
                }
                for (int d = 0; d < 8; ++d) {
                    const int code = nb[x * 8 + d];
                    const long long sy = slot[code >> 1];
                    if (sy / members == a)
                        t = c_add(t, gal_hop(V, links, proj, kappa, x, code, sy * n, d, i, half, w, nvec));
                }
            } else {
                const int d = kind - 1, code = nb[x * 8 + d];
                t = gal_hop(V, links, proj, kappa, x, code, (long long)slot[code >> 1] * n, d, i, half, w, nvec);
            }
            T[e] = t;
        }
        __syncthreads();
        for (int q = 0; q < GAL_PER; ++q) {
            const int el = (tile * GAL_PER + q) * blockDim.x + threadIdx.x;
            if (el >= nel)
                break;
            const int r = el / cd, col = el % cd, s = r / nvec, v = r % nvec;
            double2 sum = acc[q];
            for (int k = 6 * s; k < 6 * s + 6; ++k)
                sum = c_add(sum, c_conj_mul(Vx[k * nvec + v], T[k * cd + col]));
            acc[q] = sum;
        }
    }
    double2* out = kind == 0 ? out_site + (long long)a * nel : out_hops + ((long long)a * 8 + kind - 1) * nel;
    for (int q = 0; q < GAL_PER; ++q) {
        const int el = (tile * GAL_PER + q) * blockDim.x + threadIdx.x;
        if (el >= nel)
            break;
        out[el] = acc[q];
    }
}

// The prolongator made on the device from near-null vectors that live there (the host's
// form is src/dirac/coarse/transfer.rs, `Prolongator::new`).

// V[(am * fine_dof + k) * nvec + w] = fine[base[am] + k * stride] for every [aggregate]
// [member] am < n_am and row k: vector w of the prolongator gathered from a fine field
// (one thread a number).
extern "C" __global__ void mg_gather_vector(const double2* __restrict__ fine, double2* __restrict__ V,
                                            const long long* __restrict__ base, long long stride, int fine_dof,
                                            int nvec, int w, long long n_am)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_am * fine_dof)
        return;
    const long long am = t / fine_dof;
    const int k = (int)(t % fine_dof);
    V[t * nvec + w] = fine[base[am] + k * stride];
}

// The sum over the block's threads of each one's z (every thread gets it). `red`: shared
// memory of blockDim.x numbers, blockDim.x a power of two.
__device__ double2 gal_block_sum(double2* red, double2 z)
{
    red[threadIdx.x] = z;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            red[threadIdx.x] = c_add(red[threadIdx.x], red[threadIdx.x + half]);
        __syncthreads();
    }
    const double2 sum = red[0];
    __syncthreads(); // red is reused by the next sum
    return sum;
}

// The vectors of V (as mg_gather_vector leaves them) orthonormalised on each aggregate
// and chirality: block b is aggregate b / 2, chirality b % 2 (rows 6 s .. 6 s + 5 of
// fine_dof = 12), by modified Gram-Schmidt, two passes, as the host's
// `Prolongator::orthonormalise` does it: for each pass and vector v, v -= (w | v) w for
// each w < v, then v /= |v|. A vector whose norm falls below 1e-12 stops the block, and
// failed[b] records it (v + 1; 0: none). Each thread keeps to its own rows (r = thread,
// thread + blockDim.x, ...), so only the sums need the block. Shared memory: blockDim.x
// double2.
extern "C" __global__ void mg_orthonormalise(double2* __restrict__ V, int members, int fine_dof, int nvec,
                                             int* __restrict__ failed)
{
    QCD_DYNAMIC_SHARED(double2, red);
    const int a = blockIdx.x / 2, s = blockIdx.x % 2, h = fine_dof / 2;
    const int rows = members * h;
    double2* P = V + (long long)a * members * fine_dof * nvec;
    // Row r of this chirality: member r / h, fine number s h + r % h.
#define GAL_AT(r, w) P[((long long)((r) / h) * fine_dof + s * h + (r) % h) * nvec + (w)]
    if (threadIdx.x == 0)
        failed[blockIdx.x] = 0;
    for (int pass = 0; pass < 2; ++pass) {
        for (int v = 0; v < nvec; ++v) {
            for (int w = 0; w < v; ++w) {
                double2 part = c_zero();
                for (int r = threadIdx.x; r < rows; r += blockDim.x)
                    part = c_add(part, c_conj_mul(GAL_AT(r, w), GAL_AT(r, v)));
                const double2 dot = gal_block_sum(red, part);
                for (int r = threadIdx.x; r < rows; r += blockDim.x)
                    GAL_AT(r, v) = c_sub(GAL_AT(r, v), c_mul(dot, GAL_AT(r, w)));
            }
            double2 part = c_zero();
            for (int r = threadIdx.x; r < rows; r += blockDim.x) {
                const double2 z = GAL_AT(r, v);
                part.x += z.x * z.x + z.y * z.y;
            }
            const double norm = sqrt(gal_block_sum(red, part).x);
            if (!(norm >= 1e-12)) {
                if (threadIdx.x == 0)
                    failed[blockIdx.x] = v + 1;
                return;
            }
            const double inv = 1.0 / norm;
            for (int r = threadIdx.x; r < rows; r += blockDim.x)
                GAL_AT(r, v) = c_scale(inv, GAL_AT(r, v));
        }
    }
#undef GAL_AT
}

// out[i] = in[i] in single precision, n complex numbers (the transfer's prolongator).
extern "C" __global__ void mg_narrow(const double2* __restrict__ in, float2* __restrict__ out, long long n)
{
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n)
        out[t] = c_of<float2>((float)in[t].x, (float)in[t].y);
}
