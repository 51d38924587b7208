// half.cuh: the half-precision spinor format (QUDA's "half"; the host side and its
// promises are src/linalg/half.rs): a site's 24 reals as signed 16-bit integers q,
// value = q / 32767 * norm, norm = the site's largest |real| as a float, one per site.
// Fields keep the stencil's structure of arrays: element k (spin*3 + colour) of site n at
// k*vh + n as a short2 (re, im), the norm at norm[n]. Arithmetic here is in float (the
// conversions from double in layout.cu round in double, as the host does).
#pragma once

#define HALF_MAX_SHORT 32767.0f

// The value one integer step stands for at a site of norm `norm`.
__device__ __forceinline__ float half_step(float norm) { return norm / HALF_MAX_SHORT; }

// Element k of site n, as float2.
__device__ __forceinline__ float2 half_load(const short2* __restrict__ q, size_t vh, int k, size_t n, float step)
{
    const short2 s = q[(size_t)k * vh + n];
    float2 v;
    v.x = (float)s.x * step;
    v.y = (float)s.y * step;
    return v;
}

// Round to the nearest integer, ties to even (the host's round_ties_even), clamped.
__device__ __forceinline__ short half_short(float v)
{
    return (short)fminf(fmaxf(rintf(v), -HALF_MAX_SHORT), HALF_MAX_SHORT);
}

// Store a site's 12 complex values v (elements at k*vh + n) with their norm (the largest
// |real|, into *norm), and replace v by what is stored, so that a caller reducing over
// the written field sees the stored values.
__device__ __forceinline__ void half_store_site(float2 v[12], short2* __restrict__ q, size_t vh, size_t n,
                                                float* __restrict__ norm)
{
    float m = 0.0f;
#pragma unroll
    for (int k = 0; k < 12; ++k)
        m = fmaxf(m, fmaxf(fabsf(v[k].x), fabsf(v[k].y)));
    const float scale = m > 0.0f ? HALF_MAX_SHORT / m : 0.0f;
    const float step = half_step(m);
#pragma unroll
    for (int k = 0; k < 12; ++k) {
        short2 s;
        s.x = half_short(v[k].x * scale);
        s.y = half_short(v[k].y * scale);
        q[(size_t)k * vh + n] = s;
        v[k].x = (float)s.x * step;
        v[k].y = (float)s.y * step;
    }
    *norm = m;
}

// The structure-of-arrays index of site s of a field of n sites in parity blocks of vh
// (a full field: [even vh][odd vh]; a half field: one block): element 0's index, the
// norm's index being s itself.
__device__ __forceinline__ size_t half_base(size_t s, size_t vh) { return (s / vh) * 12 * vh + s % vh; }
