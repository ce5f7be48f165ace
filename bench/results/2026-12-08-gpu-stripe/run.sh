#!/usr/bin/env bash
# Issue 40: the stripe grid (`stripe_workgroups`, new in 93a7796) on the defaults' forms at batch
# 16 / 32 / 64 of the four shapes: G = 132 SMs x the workgroups an SM holds at the form's
# registers (nvcc 13.0 by `ab --no-gpu` on the build machine), so every SM gets the same share
# of the work; beside the defaults (same call) and Marlin, tinygemm, cuBLAS FP16.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-08-gpu-stripe/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
for shape in n17408 k17408 n4352 k4352; do
  run_ab "default-$shape" $shape "16 32 64" ""
done
run_ab "g660-n17408" n17408 "16 32" "stripe_workgroups=660"
run_ab "g792-n17408" n17408 "16" "stripe_workgroups=792"
run_ab "g396-n17408" n17408 "64" "stripe_workgroups=396"
run_ab "g792-k17408" k17408 "16" "stripe_workgroups=792"
run_ab "g660-k17408" k17408 "16 32" "stripe_workgroups=660"
run_ab "g396-k17408" k17408 "64" "stripe_workgroups=396"
run_ab "g792-n4352" n4352 "16" "stripe_workgroups=792"
run_ab "g660-n4352" n4352 "32" "stripe_workgroups=660"
run_ab "g396-n4352" n4352 "64" "stripe_workgroups=396"
run_ab "g792-k4352" k4352 "16" "stripe_workgroups=792"
run_ab "g660-k4352" k4352 "32" "stripe_workgroups=660"
run_ab "g264-k4352" k4352 "64" "stripe_workgroups=264"
run_others "16,32,64"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/*-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error|WRONG|regs" "$f" | cut -c1-160
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
