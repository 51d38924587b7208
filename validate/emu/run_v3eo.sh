#!/usr/bin/env bash
# Check version 3.0's parity-major stencil family on the CPU (no GPU, no CUDA): compile
# kernels/stencil_v3.cu with g++ through cuda_emu.h in its four define sets (double or
# single, 18 or 12 reals per link, as src/cuda/stencil.rs compiles them) and layout.cu,
# and compare with the CPU backend (examples/emu_v3eo_dump.rs) on even lattices.
# Usage: validate/emu/run_v3eo.sh [LX LY LZ LT ...]   (default: 4 4 4 8 and 6 4 8 4)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/target/emu_v3eo
mkdir -p "$build"
cxx="g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-unused-variable -Wno-unused-function -Wno-unused-but-set-variable"
inc="-include $root/validate/emu/cuda_emu.h -I $root/kernels -x c++"
objs=()
compile() { # name source defines...
    local name=$1 src=$2
    shift 2
    $cxx $inc "$@" -c "$root/kernels/$src" -o "$build/$name.o"
    objs+=("$build/$name.o")
}
compile layout layout.cu
compile v3_d stencil_v3.cu -DRECONSTRUCT_12=0 -DV3_SINGLE=0 -Dstencil_v3=stencil_v3_d
compile v3_d12 stencil_v3.cu -DRECONSTRUCT_12=1 -DV3_SINGLE=0 -Dstencil_v3=stencil_v3_d12
compile v3_s stencil_v3.cu -DRECONSTRUCT_12=0 -DV3_SINGLE=1 -Dstencil_v3=stencil_v3_s
compile v3_s12 stencil_v3.cu -DRECONSTRUCT_12=1 -DV3_SINGLE=1 -Dstencil_v3=stencil_v3_s12
$cxx -I "$root/validate/emu" "$root/validate/emu/emu_v3eo.cpp" "${objs[@]}" -o "$build/emu_v3eo"
(cd "$root" && cargo build --release --example emu_v3eo_dump -q)
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(4 4 4 8 6 4 8 4)
status=0
for ((k = 0; k < ${#sizes[@]}; k += 4)); do
    dump=$build/dump_${sizes[k]}x${sizes[k+1]}x${sizes[k+2]}x${sizes[k+3]}.bin
    "$root/target/release/examples/emu_v3eo_dump" "${sizes[@]:k:4}" "$dump"
    "$build/emu_v3eo" "$dump" || status=1
done
exit $status
