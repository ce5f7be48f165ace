#!/usr/bin/env bash
# Issue 36 item 1: what the device-side epoch (DESIGN.md §5.4) costs. The binary of the commit
# before it (carry/wavefuse-base, 10541be) and the one with it (carry/wavefuse) A/B the kernels it
# changes, in one call on one GPU, alternating old/new twice: `ab --timing graphs` (the new binary
# captures one graph and replays it for every sample; the old one captures a graph per replay).
# Run from the repository root on the device with carry/ (scripts/build-gpu-binary.sh).
source bench/device-prelude.sh
KERNELS="gemv_int4 gemv_int4_qkv gemv_int4_dual_silu allreduce_residual_rmsnorm gemv_int4_allreduce_rmsnorm"
nvidia-smi -L | tee "$OUT/device.txt"
for round in 1 2; do
    for side in base new; do
        bin=carry/wavefuse; [ "$side" = base ] && bin=carry/wavefuse-base
        WAVEFUSE_COMMIT=$( [ "$side" = base ] && echo 10541be || cat carry/COMMIT ) \
        timeout 200 "$bin" ab $KERNELS --shapes qwen27b-tp1,qwen27b-tp4 --timing graphs \
            --iters 200 --json "$OUT/ab-$side-$round.json" --md "$OUT/ab-$side-$round.md" \
            > "$OUT/ab-$side-$round.log" 2>&1
        echo "$side round $round: exit $?" | tee -a "$OUT/summary.txt"
    done
done
python3 bench/results/2026-12-05-device-epoch/table.py "$OUT" > "$OUT/table.md" 2>&1
cat "$OUT/table.md"
cp "$OUT"/*.md "$OUT"/*.txt "$FINAL"/ 2>/dev/null
mkdir -p "$FINAL/json"; cp "$OUT"/*.json "$FINAL/json/" 2>/dev/null
