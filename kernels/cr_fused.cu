// cr_fused.cu: the element-wise kernels of the fused CR iteration (the operator with its
// (r|Ar) epilogue is stencil_v3.cu's). Each updates two fields, reduces a norm with the
// single-pass deterministic reduction of cr_device.cuh and lets its last block update the
// device scalar block; nothing is read by the host. See cr_device.cuh for the iteration.
//
// Fields are arrays of n complex numbers, double2 or float2 (one instantiation each:
// cr_xr_d, cr_xr_s, cr_p_d, cr_p_s; on a decomposed lattice cr_global ends a reduction
// over the ranks; the (r|Ar) there is the interior kernel's epilogue and the exterior
// kernels', kernels/halo.cu). Single fields are storage precision: values are
// loaded into double, computed in double and rounded on the store; the norms sum the
// stored (rounded) values, in double, as the CPU backend does.
//
// Launch (src/cuda/fused.rs): CR_BLOCK threads per block, a grid that depends only on n
// (cr_grid), dynamic shared memory blockDim.x * 16 bytes. A grid-stride loop gives every
// thread several elements, four at a time while it can: the same elements in the same
// order for every run, so the same bits. The program is compiled with --fmad=false: the
// updates round exactly as the CPU backend's y + a*x and x + a*y (no fused multiply-add).
#include "cr_device.cuh"

// CR_PDL_TRIGGER: when a pass lets the next launch start under programmatic dependent
// launch (common.cuh): 1 at its start, 2 after its elements (before its reduction), 0
// when its blocks exit. Measured (H100, 16^3x32): 2 is the best (the full fused CR
// iteration from 0.3% more to 1.6% less time than without PDL; 1 cost double r12 1.6%).
#ifndef CR_PDL_TRIGGER
#define CR_PDL_TRIGGER 2
#endif

// One element of xr: x += alpha p, r -= alpha Ap; returns |r_new|^2.
template <class T>
__device__ __forceinline__ double cr_xr_one(T* __restrict__ x, T* __restrict__ r, const T* __restrict__ p,
                                            const T* __restrict__ ap, double2 alpha, size_t i)
{
    const double2 xv = cr_load(x, i), rv = cr_load(r, i), pv = cr_load(p, i), av = cr_load(ap, i);
    cr_store(x, i, c_add(xv, c_mul(alpha, pv)));
    return cr_norm(cr_store(r, i, c_sub(rv, c_mul(alpha, av))));
}

// One element of p: p = r + beta p, Ap = Ar + beta Ap; returns |Ap_new|^2.
template <class T>
__device__ __forceinline__ double cr_p_one(T* __restrict__ p, T* __restrict__ ap, const T* __restrict__ r,
                                           const T* __restrict__ ar, double2 beta, size_t i)
{
    const double2 pv = cr_load(p, i), av = cr_load(ap, i), rv = cr_load(r, i), arv = cr_load(ar, i);
    cr_store(p, i, c_add(rv, c_mul(beta, pv)));
    return cr_norm(cr_store(ap, i, c_add(arv, c_mul(beta, av))));
}

template <class T>
__device__ __forceinline__ void cr_xr(T* __restrict__ x, T* __restrict__ r, const T* __restrict__ p,
                                      const T* __restrict__ ap, int n, double* s, double* hist,
                                      double2* partials, unsigned* tickets)
{
    qcd_pdl_wait();
    if (CR_PDL_TRIGGER == 1)
        qcd_pdl_trigger();
    if (!cr_active(s))
        return;
    QCD_DYNAMIC_SHARED(double2, cr_sh);
    const double2 alpha = c_make(s[CR_ALPHA_RE], s[CR_ALPHA_IM]);
    const double acc = cr_stride_sum((size_t)n, 0.0, [&](size_t i) { return cr_xr_one(x, r, p, ap, alpha, i); });
    double2 total;
    if (CR_PDL_TRIGGER == 2)
        qcd_pdl_trigger();
    if (cr_reduce_last(c_make(acc, 0.0), cr_sh, partials, tickets + CR_TICKET_XR, &total) && threadIdx.x == 0 &&
        !cr_keep_local_nr(s, total.x))
        cr_finish_xr(s, hist, total.x);
}

template <class T>
__device__ __forceinline__ void cr_p(T* __restrict__ p, T* __restrict__ ap, const T* __restrict__ r,
                                     const T* __restrict__ ar, int n, double* s, double2* partials,
                                     unsigned* tickets)
{
    qcd_pdl_wait();
    if (CR_PDL_TRIGGER == 1)
        qcd_pdl_trigger();
    if (!cr_active(s))
        return;
    QCD_DYNAMIC_SHARED(double2, cr_sh);
    const double2 beta = c_make(s[CR_BETA_RE], s[CR_BETA_IM]);
    const double acc = cr_stride_sum((size_t)n, 0.0, [&](size_t i) { return cr_p_one(p, ap, r, ar, beta, i); });
    double2 total;
    if (CR_PDL_TRIGGER == 2)
        qcd_pdl_trigger();
    if (cr_reduce_last(c_make(acc, 0.0), cr_sh, partials, tickets + CR_TICKET_P, &total) && threadIdx.x == 0 &&
        !cr_keep_local(s, total))
        cr_finish_p(s, total.x);
}

// If active: x += alpha p, r -= alpha Ap; nr = (r|r); iter += 1, hist[iter] = nr.
extern "C" __global__ void cr_xr_d(double2* __restrict__ x, double2* __restrict__ r, const double2* __restrict__ p,
                                   const double2* __restrict__ ap, int n, double* s, double* hist,
                                   double2* partials, unsigned* tickets)
{
    cr_xr(x, r, p, ap, n, s, hist, partials, tickets);
}

extern "C" __global__ void cr_xr_s(float2* __restrict__ x, float2* __restrict__ r, const float2* __restrict__ p,
                                   const float2* __restrict__ ap, int n, double* s, double* hist,
                                   double2* partials, unsigned* tickets)
{
    cr_xr(x, r, p, ap, n, s, hist, partials, tickets);
}

// If active: p = r + beta p, Ap = Ar + beta Ap; apap = (Ap|Ap), alpha = conj(rar)/apap,
// active = nr > eps && iter < max_iter && nr finite.
extern "C" __global__ void cr_p_d(double2* __restrict__ p, double2* __restrict__ ap, const double2* __restrict__ r,
                                  const double2* __restrict__ ar, int n, double* s, double2* partials,
                                  unsigned* tickets)
{
    cr_p(p, ap, r, ar, n, s, partials, tickets);
}

extern "C" __global__ void cr_p_s(float2* __restrict__ p, float2* __restrict__ ap, const float2* __restrict__ r,
                                  const float2* __restrict__ ar, int n, double* s, double2* partials,
                                  unsigned* tickets)
{
    cr_p(p, ap, r, ar, n, s, partials, tickets);
}

// The start of a run's fields (src/solver/cr.rs DeviceEngine::load): r = rhs, x = p = Ap = 0,
// one pass instead of a copy and three zeroings. Not gated on `active` (no scalars).
template <class T>
__device__ __forceinline__ void cr_load(const T* __restrict__ rhs, T* __restrict__ r, T* __restrict__ x,
                                        T* __restrict__ p, T* __restrict__ ap, int n)
{
    const T zero = c_of<T>(0, 0);
    cr_for_each((size_t)n, [&](size_t i) {
        r[i] = rhs[i];
        x[i] = zero;
        p[i] = zero;
        ap[i] = zero;
    });
}

extern "C" __global__ void cr_load_d(const double2* __restrict__ rhs, double2* __restrict__ r, double2* __restrict__ x,
                                     double2* __restrict__ p, double2* __restrict__ ap, int n)
{
    cr_load(rhs, r, x, p, ap, n);
}

extern "C" __global__ void cr_load_s(const float2* __restrict__ rhs, float2* __restrict__ r, float2* __restrict__ x,
                                     float2* __restrict__ p, float2* __restrict__ ap, int n)
{
    cr_load(rhs, r, x, p, ap, n);
}

// The ranks' sums in rank order and the update of reduction `which` (cr_global and
// cr_peer_sum): rank r's CR_LOCAL_RE, CR_LOCAL_IM, CR_LOCAL_NR at g + stride r + 0, 1, 2.
// 1, apply, with xr's (nr, iter, hist) when an xr left its nr (CR_LOCAL_NR is CR_NO_NR
// after this and at creation: a run's start applies the operator with no xr before it);
// 2, p. Every rank holds the same values, so every rank computes the same bits.
template <class D>
__device__ __forceinline__ void cr_sum_ranks(int which, double* s, double* hist, D* g, int stride, int ranks)
{
    double2 total = c_make(g[0], g[1]);
    double nr = g[2];
    for (int r = 1; r < ranks; ++r) {
        D* q = g + stride * r;
        total = c_add(total, c_make(q[0], q[1]));
        nr += q[2];
    }
    if (which == 1) {
        // Every rank ran the same kernels: all or none left an nr.
        if (g[2] != CR_NO_NR) {
            cr_finish_xr(s, hist, nr);
            s[CR_LOCAL_NR] = CR_NO_NR;
        }
        cr_finish_apply(s, total);
    } else {
        cr_finish_p(s, total.x);
    }
}

// The end of a reducing kernel on a decomposed lattice, one thread: if active, add the
// ranks' sums (gathered[CR_GATHERED r ..] from rank r: its CR_LOCAL_RE, CR_LOCAL_IM,
// CR_LOCAL_NR, at the offsets they had in its scalar block) in rank order and make the
// update of kernel `which` (cr_sum_ranks).
extern "C" __global__ void cr_global(int which, double* s, double* hist, const double* __restrict__ gathered,
                                     int ranks)
{
    qcd_pdl_wait();
    if (threadIdx.x != 0 || blockIdx.x != 0 || !cr_active(s))
        return;
    cr_sum_ranks(which, s, hist, gathered, CR_GATHERED, ranks);
}

// cr_global with its own all-gather over peer memory, for ranks that are threads of one
// process, each on its own GPU with access to the others' memory (src/backend/cuda/
// halo.rs PeerSums): no NCCL collective and no second kernel. slots[q] is rank q's slot
// buffer: two generations (the parity of the reduction's sequence number) of `ranks`
// slots of CR_PEER_SLOT doubles (a rank's CR_LOCAL_RE, CR_LOCAL_IM, CR_LOCAL_NR, then the
// sequence number; CR_PEER_SLOT, cr_device.cuh), and at CR_PEER_SLOT * 2 * ranks the
// owner's last sequence number.
// Thread q < ranks writes this rank's three values into rank q's buffer, fences, then
// writes the sequence number; then waits until rank q's slot in this rank's buffer holds
// the same sequence number. A generation is written again two reductions later, when
// every rank has finished reading it (each finished the reduction in between, which
// needed this rank's values of it). One block of 32 threads (ranks <= 32); inactive: no
// rank writes, waits or counts, as every rank holds the same `active`.
extern "C" __global__ void cr_peer_sum(int which, double* s, double* hist, const unsigned long long* __restrict__ slots,
                                       int rank, int ranks)
{
    qcd_pdl_wait();
    if (blockIdx.x != 0 || !cr_active(s))
        return;
    double* mine = (double*)slots[rank];
    double* last = mine + CR_PEER_SLOT * 2 * ranks;
    const double seq = *last + 1.0;
    const int gen = ((long long)seq) & 1;
    const int q = threadIdx.x;
    if (q < ranks) {
        volatile double* dst = (volatile double*)slots[q] + (size_t)CR_PEER_SLOT * (gen * ranks + rank);
        dst[0] = s[CR_LOCAL_RE];
        dst[1] = s[CR_LOCAL_IM];
        dst[2] = s[CR_LOCAL_NR];
        __threadfence_system();
        dst[3] = seq;
        volatile double* src = (volatile double*)mine + (size_t)CR_PEER_SLOT * (gen * ranks + q);
        while (src[3] != seq) {
        }
    }
    __syncthreads();
    __threadfence_system();
    if (q == 0) {
        cr_sum_ranks(which, s, hist, (volatile double*)mine + (size_t)CR_PEER_SLOT * gen * ranks, CR_PEER_SLOT,
                     ranks);
        *last = seq;
    }
}
