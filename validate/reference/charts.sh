#!/usr/bin/env bash
# Draw the reference charts again from the CSV files beside them (no GPU): the device and
# date of each come from validate/RESULTS.md (the run that measured the CSV).
# Usage: bash validate/reference/charts.sh [path/to/qcd-solve]
set -euo pipefail
cd "$(dirname "$0")"
bin=${1:-${CARGO_TARGET_DIR:-../../target}/release/qcd-solve}
h100="NVIDIA H100 80GB HBM3"
h200="NVIDIA H200"
# ablate: run 36, 2026-11-23 (the CPU: the host's 16 threads).
"$bin" chart ablate ablate/ablation.csv --device "$h100" --date 2026-11-23 \
  --lattice 16x16x16x32 --cpu "16 threads"
"$bin" chart residuals ablate/residuals.csv --device "$h100" --date 2026-11-23 \
  --lattice 16x16x16x32
# scale --gpus 1,2,4: run 141, four H200, 2026-11-26.
for split in t zt; do
  "$bin" chart scale-ranks "scale-$split/scale-ranks.csv" --device "$h200" \
    --date 2026-11-26 --split "$split"
done
# kappa-scan: one H200, 2026-11-28 (host coarse levels: commit 9461b7b; GPU coarse levels:
# commit 11df458).
"$bin" chart kappa-scan multigrid/kappa-scan-host-coarse.csv --device "$h200" --date 2026-11-28 \
  --lattice 16x16x16x32
"$bin" chart kappa-scan multigrid/kappa-scan.csv --device "$h200" --date 2026-11-28 \
  --lattice 16x16x16x32
"$bin" chart kappa-scan multigrid/kappa-scan-32x32x32x64.csv --device "$h200" \
  --date 2026-11-28 --lattice 32x32x32x64
"$bin" chart kappa-scan multigrid/kappa-scan-32x32x32x64-krylov.csv --device "$h200" \
  --date 2026-11-28 --lattice 32x32x32x64
# generate: beta 6.0 16^4, cold start, H100 run 2, 2026-11-22.
"$bin" chart plaquette generate/b6.0_16x16x16x16.plaquette.csv --device "$h100" \
  --date 2026-11-22 --lattice 16x16x16x16
