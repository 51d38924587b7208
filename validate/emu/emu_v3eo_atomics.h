// emu_v3eo_atomics.h: the CUDA built-ins cr_device.cuh needs that cuda_emu.h may lack
// (blocks run one after another in the emulation, so these are trivially correct). If
// cuda_emu.h gains them, it should define QCD_EMU_ATOMICS and this file does nothing.
#pragma once
#ifndef QCD_EMU_ATOMICS
#define QCD_EMU_ATOMICS 1
#include <mutex>
inline unsigned atomicInc(unsigned* p, unsigned limit)
{
    static std::mutex m;
    std::lock_guard<std::mutex> g(m);
    const unsigned old = *p;
    *p = old >= limit ? 0 : old + 1;
    return old;
}
inline void __threadfence() {}
template <class T> inline T __ldcg(const T* p) { return *p; }
using std::isfinite;
#endif
