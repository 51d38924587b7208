#!/usr/bin/env bash
# Session 13, run 92 (issue 13 item 1): the hop order. Run 91's probe found the excess DRAM
# reads in the z and t hops, whose data other blocks read too. A block lives ~34 us in the
# full launch (32^3x64), while the GPU streams ~95 MB; the reader of a link or spinor in a
# later block comes later by its start offset plus the phase difference of the two hops in
# a thread. Doing the backward hop earlier than the forward one closes that gap. Orders
# (V3_ORDER_FULL / V3_ORDER_PARITY, hop 2 mu the forward hop of mu, 2 mu + 1 the backward;
# x 0 1, y 2 3, z 4 5, t 6 7), floor at 32x32x32x64 and 16x16x16x32, the present order
# first and last.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_PTX_CACHE=/tmp/ptx
rows='triad|dslash full (double|single) r1|schur even-odd (double|single) r1|iteration fused (even-odd )?(double|single) r1'
for dims in 32,32,32,64:50 16,16,16,32:200; do
    for pair in "6,7,0,1,2,3,4,5 6,7,0,1,2,3,4,5" "7,6,1,0,3,2,5,4 7,6,1,0,3,2,5,4" \
        "6,7,0,1,5,2,3,4 7,0,1,6,2,3,4,5" "7,6,0,1,5,2,3,4 7,0,1,2,6,3,4,5" \
        "6,7,0,5,1,2,3,4 7,0,6,1,2,3,4,5" "0,1,2,3,6,7,4,5 0,1,2,3,7,4,6,5" \
        "6,7,0,1,2,3,4,5 6,7,0,1,2,3,4,5"; do
        read -r full parity <<<"$pair"
        echo "===== floor ${dims%:*} full $full parity $parity"
        QCD_SOLVE_KERNEL_DEFINES="V3_ORDER_FULL=$full V3_ORDER_PARITY=$parity" timeout 200 $q floor -q --dims "${dims%:*}" --repeat "${dims#*:}" 2>&1 | grep -E "$rows|rror"
    done
done
date -u +%Y-%m-%dT%H:%M:%SZ
