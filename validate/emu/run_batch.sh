#!/usr/bin/env bash
# Check version 3.0's batch entry points (kernels/stencil_v3.cu stencil_v3_batch,
# stencil_v3_batch_col, stencil_v3_batch_parity: one launch over several right-hand sides)
# on the CPU (no GPU, no CUDA): compile twelve builds (Wilson: double and single with 18
# and 12 reals per link, double r8, half r18 and r12; CLOVER=1: double and single r18 and
# r12, half r18) with g++ through cuda_emu.h, and check that every right-hand side of a
# batch is bit for bit its one-right-hand-side entry's result (emu_batch.cpp), on the links,
# clover arrays and psi of examples/emu_clover_dump.rs (awkward even lattices; mu 0 and
# 0.05), whose CPU reference the batch's first column is also compared with.
# Usage: validate/emu/run_batch.sh [LX LY LZ LT ...]   (default: 4 6 2 8 and 6 4 4 4)
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu_batch
source "$(dirname "$0")/common.sh"
compile layout layout.cu
# The builds compile in parallel (each alone ~4 s of CPU).
pids=()
for v in "d 0 0 0 0 0" "d12 1 0 0 0 0" "d8 0 1 0 0 0" "s 0 0 1 0 0" "s12 1 0 1 0 0" "h 0 0 0 1 0" "h12 1 0 0 1 0" \
    "cd 0 0 0 0 1" "cd12 1 0 0 0 1" "cs 0 0 1 0 1" "cs12 1 0 1 0 1" "ch 0 0 0 1 1"; do
    read -r name r12 r8 single half clover <<<"$v"
    compile "v3_$name" stencil_v3.cu -DCLOVER=$clover -DRECONSTRUCT_12=$r12 -DRECONSTRUCT_8=$r8 -DV3_SINGLE=$single \
        -DV3_HALF=$half $(v3_entries "$name") -Dstencil_v3_clover_inv=stencil_v3_clover_inv_$name &
    pids+=($!)
    objs+=("$build/v3_$name.o")
done
for p in "${pids[@]}"; do wait "$p"; done
$cxx -I "$root/validate/emu" -I "$root/kernels" "$root/validate/emu/emu_batch.cpp" "${objs[@]}" -o "$build/emu_batch"
(cd "$root" && cargo build --release --example emu_clover_dump -q)
examples=${CARGO_TARGET_DIR:-$root/target}/release/examples
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(4 6 2 8 6 4 4 4)
status=0
for ((k = 0; k < ${#sizes[@]}; k += 4)); do
    for mu in 0 0.05; do
        dump=$build/dump_${sizes[k]}x${sizes[k+1]}x${sizes[k+2]}x${sizes[k+3]}_mu$mu.bin
        "$examples/emu_clover_dump" "${sizes[@]:k:4}" "$mu" "$dump"
        "$build/emu_batch" "$dump" || status=1
    done
done
exit $status
