// blas1.cu: the seed's fine-grain BLAS-1 kernels (report 004, IV.2): one thread per
// complex element, consecutive threads on consecutive elements (coalesced). The seed
// calls them xMult (xscal) and xMultAdd (xaxpy). Also the streaming triad that measures
// the device's memory bandwidth in the same run as a solve.
#include "common.cuh"

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

// a = b + s c over doubles. 2 flops, 24 bytes per element. Grid-stride so any size fits.
extern "C" __global__ void triad(double* __restrict__ a, const double* __restrict__ b,
                                 const double* __restrict__ c, double s, long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride)
        a[k] = b[k] + s * c[k];
}
