#!/usr/bin/env bash
# Check the gauge fixing kernels (kernels/gauge_fix.cu) on the CPU (no GPU, no CUDA):
# compile them with g++ through cuda_emu.h and run 25 sweeps of Landau and Coulomb gauge
# fixing on small lattices against the sequential reference of emu_gauge_fix.cpp (links,
# G, F and theta after every sweep; F never decreasing; the links G U G^+ of the input).
# Usage: validate/emu/run_gauge_fix.sh
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu_gauge_fix
source "$(dirname "$0")/common.sh"
compile gauge_fix gauge_fix.cu
$cxx -I "$root/validate/emu" "$root/validate/emu/emu_gauge_fix.cpp" "${objs[@]}" -o "$build/emu_gauge_fix"
"$build/emu_gauge_fix"
