#!/usr/bin/env bash
# Issue 40, one device call: the hand-written probe gemv_int4_pipe.cu (the block-wide cp.async
# pipeline with a persistent striped grid, on the unpermuted GPTQ layout; see its header) beside
# the generated default in one `wavefuse ab --manual` per shape (both checked against the f64
# reference before timing), three descriptions (64-row stages: 4 buffers, two workgroups per SM up
# to batch 32, or 6 buffers, one per SM; 128-row stages, 3 buffers), batch 16/32/64 at 5120 -> 17408 and 17408 -> 5120, 32/64 at the TP 4 rank
# shapes; Marlin, tinygemm and cuBLAS FP16 at the same rows in the same call.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-block-pipeline/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
start_marlin
P=bench/results/2026-12-07-gpu-block-pipeline
for shape in n17408 k17408; do
  run_manual "p4-$shape" $shape "16 32 64" $P/gemv_int4_pipe.cu.abi.toml
  run_manual "p6-$shape" $shape "16 32 64" $P/gemv_int4_pipe-s6.abi.toml
  run_manual "k128-$shape" $shape "16 32 64" $P/gemv_int4_pipe-k128.abi.toml
done
for shape in n4352 k4352; do
  run_manual "p4-$shape" $shape "32 64" $P/gemv_int4_pipe.cu.abi.toml
done
run_others "16,32,64"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/p*-*.txt "$OUT"/k128-*.txt; do
    echo "== $(basename $f .txt)"; grep -E " generated | hand-written |ERROR|refused|error|WRONG" "$f" | cut -c1-160
  done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
