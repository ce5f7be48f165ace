#!/usr/bin/env bash
# Issue 40, one device call: the tensor-core GEMV with its weights pipelined `pipeline_depth - 1`
# units ahead and the activations read per unit (mma.rs `mma_unphased`, this commit), depth 1-4,
# at batch 16 and 32 of the four shapes (default tile), batch 1 and 8 at the two TP 1 shapes, and
# at batch 64 on the unphased tile; the batch-64 defaults (the rows of ../2026-12-07-gpu-b64-defaults,
# which were prepared and not run) with `--schedule tuned` at 4352 -> 5120; Marlin, tinygemm and
# cuBLAS FP16 at batch 16, 32, 64 in the same call. Every wavefuse row is checked against the f64
# reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-weight-pipeline/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
for shape in n17408 k17408 n4352 k4352; do
  run_ab "d1-$shape" $shape "16 32" ""
  for d in 2 3 4; do run_ab "d$d-$shape" $shape "16 32" "pipeline_depth=$d"; done
  run_ab "d2r5-$shape" $shape "16 32" "pipeline_depth=2,min_resident_per_cu=5"
  run_ab "d3u4-$shape" $shape "16 32" "pipeline_depth=3,k_unit_words=4"
done
for shape in n17408 k17408; do
  for d in 1 2 3; do run_ab "lo$d-$shape" $shape "1 8" "pipeline_depth=$d"; done
done
UNPH="x_in_lds=false,x_phase_units=0,mma_scale=weight"
for shape in n17408 k17408 n4352 k4352; do
  run_ab "b64-$shape" $shape 64 ""
  for d in 1 2 3; do run_ab "u$d-$shape" $shape 64 "$UNPH,pipeline_depth=$d"; done
done
# shellcheck disable=SC2046
timeout 40 $W ab gemv_int4 $(cfg k4352) --shapes "$(pre k4352)-b64" --timing graphs --iters 200 --schedule tuned \
    > "$OUT/t-k4352.txt" 2>&1
echo "tuned k4352: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
run_others "16,32,64"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/*-*.txt; do
    case $f in *marlin*|*others*) continue ;; esac
    echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error|schedule: tuned for|^ +sm90" "$f" | cut -c1-150
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
