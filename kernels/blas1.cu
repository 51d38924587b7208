// blas1.cu: the seed's fine-grain BLAS-1 kernels (report 004, IV.2): one thread per
// complex element, consecutive threads on consecutive elements (coalesced). The seed
// calls them xMult (xscal) and xMultAdd (xaxpy). Also the streaming triad that measures
// the device's memory bandwidth in the same run as a solve.
#include "common.cuh"
#include "half.cuh"

// y = a y. 6 flops, 32 bytes per element.
extern "C" __global__ void xscal(double2* __restrict__ y, double a_re, double a_im, int n)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        y[k] = c_mul(c_make(a_re, a_im), y[k]);
}

// y = y + a x. 8 flops, 48 bytes per element.
extern "C" __global__ void xaxpy(const double2* __restrict__ x, double2* __restrict__ y, double a_re,
                                 double a_im, int n)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        y[k] = c_madd(y[k], c_make(a_re, a_im), x[k]);
}

// Version 3.0's single-precision fields (float2; the coefficient rounded to float).
// y = y + a x: 8 flops, 24 bytes per element.
extern "C" __global__ void xaxpy_f(const float2* __restrict__ x, float2* __restrict__ y, double a_re,
                                   double a_im, int n)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        y[k] = c_madd(y[k], c_of<float2>((float)a_re, (float)a_im), x[k]);
}

// y = x + a y in one pass: 8 flops, 24 bytes per element.
extern "C" __global__ void xpay_f(const float2* __restrict__ x, float2* __restrict__ y, double a_re, double a_im,
                                  int n)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        y[k] = c_madd(x[k], c_of<float2>((float)a_re, (float)a_im), y[k]);
}

// y = y + (double) x for a float2 x and a double2 y: the reliable update's x_d += x_s
// (src/solver/mixed.rs, Space::add_converted) in one pass; the same bits as widening x into
// a double field and adding it with xaxpy (1 x is exact, the sum rounds once). 2 flops,
// 40 bytes per element.
extern "C" __global__ void add_widened(const float2* __restrict__ x, double2* __restrict__ y, int n)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k < n)
        y[k] = c_add(y[k], c_dbl(x[k]));
}

// Half fields (half.cuh): one thread per site of n sites in parity blocks of vh, the
// site's 12 complex read, combined in float and stored with the new site norm.
// XPAY = false: y = y + a x; true: y = x + a y. 96 flops (8 per complex) + the rounding,
// 2 x 52 + 52 bytes per site.
template <bool XPAY>
__device__ __forceinline__ void half_combine(const short2* __restrict__ xq, const float* __restrict__ xn,
                                             short2* __restrict__ yq, float* __restrict__ yn, double a_re,
                                             double a_im, long long n, long long vh)
{
    const long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n)
        return;
    const size_t b = half_base(s, vh);
    const float xs = half_step(xn[s]), ys = half_step(yn[s]);
    const float2 a = c_of<float2>((float)a_re, (float)a_im);
    float2 v[12];
#pragma unroll
    for (int k = 0; k < 12; ++k) {
        const float2 xk = half_load(xq, vh, k, b, xs), yk = half_load(yq, vh, k, b, ys);
        v[k] = XPAY ? c_madd(xk, a, yk) : c_madd(yk, a, xk);
    }
    half_store_site(v, yq, vh, b, yn + s);
}

extern "C" __global__ void xaxpy_h(const short2* __restrict__ xq, const float* __restrict__ xn,
                                   short2* __restrict__ yq, float* __restrict__ yn, double a_re, double a_im,
                                   long long n, long long vh)
{
    half_combine<false>(xq, xn, yq, yn, a_re, a_im, n, vh);
}

extern "C" __global__ void xpay_h(const short2* __restrict__ xq, const float* __restrict__ xn,
                                  short2* __restrict__ yq, float* __restrict__ yn, double a_re, double a_im,
                                  long long n, long long vh)
{
    half_combine<true>(xq, xn, yq, yn, a_re, a_im, n, vh);
}

// a = b + s c over doubles. 2 flops, 24 bytes per element. Grid-stride so any size fits.
extern "C" __global__ void triad(double* __restrict__ a, const double* __restrict__ b,
                                 const double* __restrict__ c, double s, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride)
        a[k] = b[k] + s * c[k];
}

// a[k] = v: the triad's inputs, made on the device (uploading them from the host took
// longer than the measurement).
extern "C" __global__ void fill(double* __restrict__ a, double v, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride)
        a[k] = v;
}
