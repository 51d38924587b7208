#!/usr/bin/env bash
# Session 20, run 145 (nvidia-h100-x1): the full dslash's link hints as tuned variants
# (edd4ce5). The GPU tests of the fast path (every hint against the CPU and the default),
# the fused CR and the solvers; floor at 16^3x32 three times and 32^3x64 twice (each full
# dslash row sweeps the three hints and times the fastest in a batch of its own); the main
# job on the full lattice with kernel 3.0 and an empty tune cache, twice (sweep, then reuse).
set -uo pipefail
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export QCD_SOLVE_TUNE_CACHE=$OUT/tune.tsv
for t in gpu-fast gpu-fused gpu-solvers; do
    echo "== $t"
    timeout 200 .device/$t-tests --test-threads=1 >$OUT/$t.txt 2>&1
    grep -E "test result|panicked|FAILED|hint [0-9]" $OUT/$t.txt | tail -40
done
rows="triad|dslash full|schur|CR iteration fused"
for i in 1 2 3; do
    echo "== floor 16 #$i"
    .device/qcd-solve floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror" | tee $OUT/floor-16-$i.txt
done
for i in 1 2; do
    echo "== floor 32 #$i"
    .device/qcd-solve floor -q --dims 32,32,32,64 --repeat 50 2>&1 | grep -E "$rows|rror" | tee $OUT/floor-32-$i.txt
done
sed -e 's/^kernel = .*/kernel = "3.0"/' -e '/^multiple/d' -e 's#^report = .*#report = "'$OUT'/full.json"#' \
    -e 's#^solution = .*#solution = "'$OUT'/full.npy"#' -e 's/^device = .*/device = "cuda"/' configs/16x16x16x32.toml >$OUT/full.toml
for i in 1 2; do
    echo "== main job, full lattice, kernel 3.0 #$i"
    RUST_LOG=qcd_solve=info .device/qcd-solve $OUT/full.toml 2>&1 | grep -E "launch geometry|tuned on the live|iterations|rror" | cut -c1-400
done
cat $OUT/tune.tsv
date -u +%Y-%m-%dT%H:%M:%SZ
