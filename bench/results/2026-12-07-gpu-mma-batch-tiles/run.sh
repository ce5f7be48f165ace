#!/usr/bin/env bash
# Issue 40, one device call: batch 64 on the tensor cores as passes of 32 rows (`batch_tile=32`,
# new in the tensor-core path), each pass the batch-32 default's form (32 columns, 4 K warps,
# units of 8, the scale on the weights, activations unstaged; that form's K parts at batch 32),
# beside the batch-64 and batch-32 defaults and Marlin/tinygemm/cuBLAS at batch 32 and 64, in one
# call. Every wavefuse row is checked against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-mma-batch-tiles/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
F32="columns_per_workgroup=32,threads_per_column=4,workgroup_size=128,x_in_lds=false,x_phase_units=0,pipeline_depth=1,k_unit_words=8,mma_scale=weight"
for shape in n17408 k17408 n4352 k4352; do run_ab "d-$shape" $shape "32 64" ""; done
run_ab t32-n17408 n17408 64 "$F32,k_split=1,batch_tile=32"
for shape in k17408 n4352 k4352; do run_ab "t32-$shape" $shape 64 "$F32,k_split=4,batch_tile=32"; done
run_ab t16-n17408 n17408 64 "$F32,mma_scale=unit,k_split=1,batch_tile=16"
run_ab t16-k4352 k4352 64 "$F32,mma_scale=unit,k_split=4,batch_tile=16"
wait $BUILD
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 120 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
grep -E "^\|" "$OUT/others.txt" > "$FINAL/others.md"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dt]*-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
