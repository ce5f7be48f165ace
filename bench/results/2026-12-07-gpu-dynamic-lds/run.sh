#!/usr/bin/env bash
# Issue 40, one device call: the tensor-core GEMV's asynchronous rings at tile sizes that need
# dynamic shared memory (past 48 KiB: new in this commit) — 256/512-lane workgroups of 64/128
# columns, 3-4 phase buffers of activations and weights through `cp.async` — beside the defaults
# at batch 16, 32, 64 of 5120 -> 17408 and 17408 -> 5120, and Marlin/tinygemm/cuBLAS FP16 at the
# same rows in the same call. Every wavefuse row is checked against the f64 reference before it
# is timed (the first GPU run of a generated kernel with dynamic shared memory).
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-dynamic-lds/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
M="mma_scale=weight,x_in_lds=true"
R1="$M,workgroup_size=256,columns_per_workgroup=128,threads_per_column=2,k_unit_words=8,x_phase_units=2,async_stages=3"
R2="$M,workgroup_size=256,columns_per_workgroup=128,threads_per_column=2,k_unit_words=8,x_phase_units=2,async_stages=4"
R3="$M,workgroup_size=256,columns_per_workgroup=64,threads_per_column=4,k_unit_words=8,x_phase_units=4,async_stages=3"
R4="$M,workgroup_size=512,columns_per_workgroup=128,threads_per_column=4,k_unit_words=8,x_phase_units=4,async_stages=3"
R5="$M,workgroup_size=256,columns_per_workgroup=128,threads_per_column=2,k_unit_words=16,x_phase_units=2,async_stages=3"
for shape in n17408 k17408; do
  run_ab "d-$shape" $shape "16 32 64" ""
  run_ab "r1-$shape" $shape "16 32 64" "$R1"
  run_ab "r2-$shape" $shape "16 32 64" "$R2"
  run_ab "r3-$shape" $shape "16 32 64" "$R3"
  run_ab "r4-$shape" $shape "16 32" "$R4"
  run_ab "r5-$shape" $shape "16 32 64" "$R5"
done
run_others "16,32,64"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dr]*-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error|WRONG" "$f" | cut -c1-150
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
