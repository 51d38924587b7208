#!/usr/bin/env bash
# Check version 3.0's clover term and twisted mass (CLOVER=1 builds of kernels/stencil_v3.cu
# with kernels/clover.cuh) on the CPU (no GPU, no CUDA): compile the nine builds (double,
# single and half spinors; 18, 12 and 8 reals per link) with g++ through cuda_emu.h, and
# compare every epilogue with the CPU reference (examples/emu_clover_dump.rs) on awkward
# even lattices, c_sw 1.17, mu 0 and 0.05 (emu_clover.cpp).
# Usage: validate/emu/run_clover.sh [LX LY LZ LT ...]   (default: 4 6 2 8 and 6 4 4 4)
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu_clover
source "$(dirname "$0")/common.sh"
compile layout layout.cu
# The builds compile in parallel (each alone ~4 s of CPU).
pids=()
for v in "cd 0 0 0 0" "cd12 1 0 0 0" "cd8 0 1 0 0" "cs 0 0 1 0" "cs12 1 0 1 0" "cs8 0 1 1 0" "ch 0 0 0 1" \
    "ch12 1 0 0 1" "ch8 0 1 0 1"; do
    read -r name r12 r8 single half <<<"$v"
    compile "v3_$name" stencil_v3.cu -DCLOVER=1 -DRECONSTRUCT_12=$r12 -DRECONSTRUCT_8=$r8 -DV3_SINGLE=$single \
        -DV3_HALF=$half $(v3_entries "$name") -Dstencil_v3_clover_inv=stencil_v3_clover_inv_$name &
    pids+=($!)
    objs+=("$build/v3_$name.o")
done
for p in "${pids[@]}"; do wait "$p"; done
$cxx -I "$root/validate/emu" -I "$root/kernels" "$root/validate/emu/emu_clover.cpp" "${objs[@]}" -o "$build/emu_clover"
(cd "$root" && cargo build --release --example emu_clover_dump -q)
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(4 6 2 8 6 4 4 4)
status=0
for ((k = 0; k < ${#sizes[@]}; k += 4)); do
    for mu in 0 0.05; do
        dump=$build/dump_${sizes[k]}x${sizes[k+1]}x${sizes[k+2]}x${sizes[k+3]}_mu$mu.bin
        "$root/target/release/examples/emu_clover_dump" "${sizes[@]:k:4}" "$mu" "$dump"
        "$build/emu_clover" "$dump" || status=1
    done
done
exit $status
