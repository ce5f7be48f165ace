#!/usr/bin/env bash
# Issue 40, one device call: more K warps per workgroup at batch 16 and 32, where the default's
# grid holds ~16 warps per SM (2026-12-07-gpu-new-defaults, Nsight Compute): 5 and 6 K warps
# (160 / 192 lanes), with the scale on the weights (64 registers) so that the grid still fits
# one round of resident workgroups; the scale on the weights alone as the control. Beside the
# defaults, in one call. Every row is checked against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-kwarps/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
SW=mma_scale=weight
K5="workgroup_size=160,threads_per_column=5"
K6="workgroup_size=192,threads_per_column=6"
for shape in n17408 k17408 n4352 k4352; do run_ab "d-$shape" $shape "16 32" ""; done
run_ab s-n17408 n17408 16 "$SW"
run_ab k5-n17408 n17408 16 "$SW,$K5"
run_ab k6-n17408 n17408 16 "$SW,$K6"
run_ab s-k17408 k17408 16 "$SW"
run_ab k5-k17408 k17408 16 "$SW,$K5"
run_ab k6-k17408 k17408 16 "$SW,$K6"
run_ab k6s8-k17408 k17408 16 "$SW,$K6,k_split=8"
for shape in n4352 k4352; do
  run_ab "k5-$shape" $shape 16 "$SW,$K5"
  run_ab "k6-$shape" $shape 16 "$SW,$K6"
done
run_ab u4k5-n17408 n17408 32 "k_unit_words=4,$K5"
run_ab k6-b32-k17408 k17408 32 "$K6"
run_ab u4k5-k17408 k17408 32 "k_unit_words=4,$K5"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dsku]*-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
