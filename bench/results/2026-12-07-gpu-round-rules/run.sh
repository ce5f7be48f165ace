#!/usr/bin/env bash
# Issue 40, one device call: candidate default rules drawn from the tuner's winners of
# 2026-12-07-gpu-tune-rows, as overrides at every row they would change, beside the defaults at
# all 28 rows of the table and Marlin, tinygemm and cuBLAS FP16 at the same rows.
# Every wavefuse row is checked against the f64 reference before it is timed.
#   R1  batch 2, 4 at 5120 -> 17408: 5 K parts instead of 2;
#   R2  batch 16 at 5120 -> 17408: no K split instead of 2 parts;
#   R3  batch 32: units of 8 K-words, the scale on the weights, the most K parts that keep the
#       grid within one round of 5 workgroups per SM (n17408 1, k17408 4, n4352 4, k4352 4);
#       and the tuner's winners at the TP 4 rows (n4352 units of 16 in 2 parts, k4352 8 K warps);
#   R4  batch 64: 64-column tiles (2 K warps), units of 8, the scale on the weights, phases of
#       one unit per K warp, the most K parts within one round of 3 per SM and an even count of
#       phases (n17408 1, k17408 4, n4352 5, k4352 2); and k17408's winner (128 columns, units of 16).
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-round-rules/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
B="1 2 4 8 16 32 64"
for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "$B" ""; done
run_ab r1-n17408 n17408 "2 4" "k_split=5"
run_ab r2-n17408 n17408 "16" "k_split=1"
B32="k_unit_words=8,mma_scale=weight"
run_ab r3-n17408 n17408 32 "$B32,k_split=1"
for shape in k17408 n4352 k4352; do run_ab "r3-$shape" $shape 32 "$B32,k_split=4"; done
run_ab w3-n4352 n4352 32 "k_unit_words=16,k_split=2"
run_ab w3-k4352 k4352 32 "workgroup_size=256,threads_per_column=8,k_unit_words=8,k_split=1"
B64="columns_per_workgroup=64,threads_per_column=2,workgroup_size=128,k_unit_words=8,mma_scale=weight,x_in_lds=true,x_phase_units=2,pipeline_depth=1"
run_ab r4-n17408 n17408 64 "$B64,k_split=1"
run_ab r4-k17408 k17408 64 "$B64,k_split=4"
run_ab r4-n4352 n4352 64 "$B64,k_split=5"
run_ab r4-k4352 k4352 64 "$B64,k_split=2"
run_ab w4-k17408 k17408 64 "columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,k_unit_words=16,mma_scale=weight,x_in_lds=true,x_phase_units=1,k_split=8"
rm -rf "$FINAL/ab" # at most 8 files come back: the reports go in the tarball
wait $BUILD
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 120 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
cp "$OUT/others.txt" "$FINAL/"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[arw]*-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
