// emu_cr.h: the fused CR scalar block the emulated stencil checks (emu_v3eo.cpp,
// emu_halo.cpp) hand to the dot epilogues, by kernels/cr_device.cuh's indices: active,
// rar = 1, nr = 1, max_iter = 10, split as asked (CR_SPLIT: the sums stay in
// CR_LOCAL_RE/IM for cr_global).
#pragma once
#include "cuda_emu.h"
#include "cr_device.cuh"
#include <vector>

[[maybe_unused]] static std::vector<double> active_cr_block(bool split)
{
    std::vector<double> s(CR_SCALARS, 0.0);
    s[CR_RAR_RE] = 1;
    s[CR_NR] = 1;
    s[CR_MAX_ITER] = 10;
    s[CR_ACTIVE] = 1;
    s[CR_SPLIT] = split ? 1 : 0;
    return s;
}
