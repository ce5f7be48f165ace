#!/usr/bin/env bash
# Issue 40, one device call: batch 16 with more K warps and the scale per unit at <= 64 registers
# (units of 4 K-words), after 2026-12-07-gpu-kwarps found the scale on the weights 23 % slower at
# 5120 -> 17408 and 6 K warps 10-13 % faster than 4. Beside the defaults; the two TP 1 shapes.
# Every row is checked against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-kwarps-units4/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
K5="workgroup_size=160,threads_per_column=5"
K6="workgroup_size=192,threads_per_column=6"
for shape in n17408 k17408; do
  run_ab "d-$shape" $shape 16 ""
  run_ab "u4-$shape" $shape 16 "k_unit_words=4"
  run_ab "u4k5-$shape" $shape 16 "k_unit_words=4,$K5"
  run_ab "u4k6-$shape" $shape 16 "k_unit_words=4,$K6,min_resident_per_cu=5"
  run_ab "k6m5-$shape" $shape 16 "$K6,min_resident_per_cu=5"
  run_ab "swk6-$shape" $shape 16 "mma_scale=weight,$K6"
done
run_ab u4k6s2-n17408 n17408 16 "k_unit_words=4,$K6,min_resident_per_cu=5,k_split=2"
run_ab u4k6s5-k17408 k17408 16 "k_unit_words=4,$K6,min_resident_per_cu=5,k_split=5"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[dusk]*-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused|error" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
