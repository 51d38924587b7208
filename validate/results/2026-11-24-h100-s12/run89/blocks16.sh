#!/usr/bin/env bash
# Session 12, run 89 (issue 13 item 1): floor at 16x16x16x32 with blocks of 64, 128, 256
# (the default) and 512 threads: whether the small lattice's single-precision Schur rows
# (1.21-1.38x) are a matter of the launch geometry.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for b in 64 128 256 512 256; do
    echo "===== floor 16,16,16,32 block $b"
    timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 --block $b 2>&1 | grep -E "$rows|rror"
done
date -u +%Y-%m-%dT%H:%M:%SZ
