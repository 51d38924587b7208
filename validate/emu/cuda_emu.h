// cuda_emu.h: just enough of CUDA's built-ins for the kernels of kernels/*.cu to compile
// with a host C++ compiler and run on the CPU, so that their logic (indexing, layouts,
// products, barriers) can be checked without a GPU. Blocks run one after another; the
// threads of a block run as OS threads meeting at a std::barrier for __syncthreads (or
// sequentially for kernels without barriers); emu_reverse_blocks runs them last to first.
// Shared memory is per block; dynamic shared
// memory starts filled with NaN bytes so that a read before a write shows up.
// Not a performance model, not a race detector beyond what the barriers order.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#define QCD_EMULATION 1
#define __global__
#define __device__ static
#define __forceinline__ inline
#define __constant__
#define __shared__ static
#define __launch_bounds__(...)

struct double2 {
    double x, y;
};
struct float2 {
    float x, y;
};
struct short2 {
    short x, y;
};
struct emu_uint3 {
    unsigned x = 0, y = 0, z = 0;
};

extern thread_local emu_uint3 threadIdx, blockIdx, blockDim, gridDim;
extern char* emu_dynamic_shared;
extern std::barrier<>* emu_barrier;

inline void __syncthreads() { emu_barrier->arrive_and_wait(); }
using std::isfinite;
// CUDA's sin(pi a) and cos(pi a) (the emulation rounds pi a first; CUDA does not).
inline void sincospi(double a, double* s, double* c)
{
    *s = std::sin(M_PI * a);
    *c = std::cos(M_PI * a);
}
inline void sincospif(float a, float* s, float* c)
{
    double sd, cd;
    sincospi((double)a, &sd, &cd);
    *s = (float)sd;
    *c = (float)cd;
}
using std::max;
using std::min;

// Blocks run one after another and one thread per block does the atomics of the kernels
// here, so these need no atomicity; the fence is a plain memory fence.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
// CUDA's atomicInc: old = *a; *a = old >= limit ? 0 : old + 1; returns old.
inline unsigned atomicInc(unsigned* a, unsigned limit)
{
    const unsigned old = *a;
    *a = old >= limit ? 0u : old + 1u;
    return old;
}
template <class T>
inline T __ldcg(const T* p)
{
    return *p;
}

#define QCD_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(emu_dynamic_shared)

// Run the blocks last to first (a different block arrives last at a reduction's ticket).
inline bool emu_reverse_blocks = false;

template <class F>
void emu_launch(unsigned grid, unsigned block, size_t shared_bytes, bool barriers, F kernel)
{
    std::vector<char> shared(shared_bytes + 16);
    for (unsigned k = 0; k < grid; ++k) {
        const unsigned b = emu_reverse_blocks ? grid - 1 - k : k;
        std::memset(shared.data(), 0xff, shared.size());
        emu_dynamic_shared = shared.data();
        auto run = [&](unsigned t) {
            threadIdx.x = t;
            blockIdx.x = b;
            blockDim.x = block;
            gridDim.x = grid;
            threadIdx.y = threadIdx.z = blockIdx.y = blockIdx.z = 0;
            blockDim.y = blockDim.z = gridDim.y = gridDim.z = 1;
            kernel();
        };
        if (!barriers) {
            for (unsigned t = 0; t < block; ++t)
                run(t);
            continue;
        }
        std::barrier<> bar((std::ptrdiff_t)block);
        emu_barrier = &bar;
        std::vector<std::thread> threads;
        threads.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            threads.emplace_back([&, t] {
                run(t);
                bar.arrive_and_drop();
            });
        for (auto& th : threads)
            th.join();
    }
}
