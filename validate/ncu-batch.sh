#!/usr/bin/env bash
# Runs ON the device machine (repository root; .device/ from validate/device.sh): Nsight
# Compute on version 3.0's full dslash (double r18, 32^3x64, `floor --batch-only
# --wilson`): the one-right-hand-side launch (stencil_v3) and the batch launches over 1, 4
# and 12 right-hand sides (stencil_v3_batch), each launch's DRAM and L2 bytes, hit rates,
# the L1, L2 and DRAM throughputs as a share of their peaks and the active warps; a table
# last, one line a launch (grid size names the batch: 12 x the blocks of one). SKIP and
# COUNT (default 0 and 40): the launches of those kernels skipped, then profiled.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/step.sh" # $bin $q $res $big $out, step NAME COMMAND...
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine" >&2; exit 2; }
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
metrics+=,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct
metrics+=,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,launch__grid_size,launch__registers_per_thread
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    echo "binary: $(cat "$bin/commit" 2>/dev/null); ncu: $("$ncu" --version | tail -1)"
    # The first form's launches: warm-up and 3 timed one-right-hand-side applies, then
    # each batch count's warm-up and 3 timed launches.
    # The full mode runs in columns along t at 32^3x64 (the _col entries), the Schur
    # operator's halves are parity launches.
    step ncu timeout 400 "$ncu" --kernel-name regex:'^stencil_v3(_batch)?(_col|_parity)?$' --launch-skip ${SKIP:-0} --launch-count ${COUNT:-40} \
        --metrics "$metrics" -f -o "$res/batch" "$q" floor --dims 32,32,32,64 --batch-only --wilson --repeat 3
    "$ncu" --import "$res/batch.ncu-rep" --csv --page raw >"$res/ncu.csv"
} 2>&1 | tee "$res/log.txt" "$out/log.txt"
cp "$res/ncu.csv" "$out/"
echo; echo "===== summary"
cat "$res/status.txt"
python3 - "$res/ncu.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = ["Kernel Name", "launch__grid_size", "launch__registers_per_thread", "gpu__time_duration.sum",
        "dram__bytes_read.sum", "lts__t_bytes.sum", "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
        "l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active"]
short = ["kernel", "grid", "regs", "time", "dram rd", "L2 bytes", "L1 hit%", "L2 hit%", "L1 %pk", "L2 %pk", "DRAM %pk", "warps%"]
print(" | ".join(short))
for r in rows[1:]:  # the first data row after the header holds the units
    print(" | ".join(str(r.get(k, "?")) for k in keys))
print("units:", " | ".join(str(rows[0].get(k, "?")) for k in keys) if rows else "none")
PY
