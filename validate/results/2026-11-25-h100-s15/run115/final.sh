#!/usr/bin/env bash
# Session 15, run 115 (the final code): sampled launch timing and programmatic dependent
# launch as the defaults (runs 109-113; prefetch of run 114 removed): every GPU test
# target, floor at 16x16x16x32 and 32x32x32x64 (every row; at 16 also with QCD_SOLVE_PDL=0), the
# seed problem (best options, and the fused CR), validate, floor --halo at 32x32x32x64.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
if [ -n "$nccl_lib" ]; then
    mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
    export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
for t in .device/gpu*-tests; do
    echo "===== $(basename "$t")"
    timeout 300 "$t" --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures|^    \""
done
for v in "" "QCD_SOLVE_PDL=0"; do
    echo "===== floor-16 ${v:-default}"
    env $v timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | tail -40
done
echo "===== floor-32 default"
timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 2>&1 | tail -40
echo "===== floor --halo 32 default"
timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 --halo 2>&1 | tail -8
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base >/dev/null 2>&1 # the tune cache
one() { # label, count, options...: main-job solves; the solve step's seconds and the result
    local label=$1 n=$2
    shift 2
    for rep in $(seq "$n"); do
        out=$(RUST_LOG=info $q $base "$@" 2>&1)
        echo "$label solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
echo "===== seed"
one bicgstab 5 --method bicgstab --reliable-delta 0.001
one cr 3
echo "===== validate"
timeout 300 $q validate configs/16x16x16x32.toml --kernel 3.0 2>&1 | grep -E "^3.0|versions pass|FAIL|fail"
date -u +%Y-%m-%dT%H:%M:%SZ
