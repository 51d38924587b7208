#!/usr/bin/env bash
# Session 20, run 146 (nvidia-h100-x1): what run 145's filters left out: the fused CR and
# solver GPU tests' results, and floor's full tables (the CR and BiCGStab rows too) once at
# 16^3x32 and once at 32^3x64, with edd4ce5's binaries.
set -uo pipefail
date -u +%Y-%m-%dT%H:%M:%SZ
for t in gpu-fused gpu-solvers; do
    echo "== $t"
    timeout 200 .device/$t-tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|FAILED"
done
echo "== floor 16"
.device/qcd-solve floor -q --dims 16,16,16,32 --repeat 200 2>&1 | tee $OUT/floor-16.txt
echo "== floor 32"
.device/qcd-solve floor -q --dims 32,32,32,64 --repeat 50 2>&1 | tee $OUT/floor-32.txt
date -u +%Y-%m-%dT%H:%M:%SZ
