#!/usr/bin/env bash
# Issue 40, one device call: the tensor-core GEMV's weights asked into L2 a few of a warp's units
# ahead (`l2_prefetch_units`), side by side with the defaults and Marlin. Every row is checked
# against the f64 reference before it is timed. In the order it runs (files kept as they run):
# A.  the defaults at 5120 -> 17408 and 17408 -> 5120, batch 1, 8, 16, 32, 64 (the baseline);
# P.  the same rows with l2_prefetch_units = 2, 4, 8;
# U.  batch 2 and 4 with the activations unstaged (x_in_lds=false) and the defaults there;
# C.  Marlin, tinygemm, cuBLAS FP16 (bench/torch/marlin_bench.py) at the two shapes, batch 1-64;
# T.  the TP 4 rank shapes, defaults and l2_prefetch_units=4, batch 1, 8, 16, 32, 64.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-l2-prefetch/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
B="1 8 16 32 64"
# MINI=1 (the device budget's last ~120 s): no Marlin, the defaults and D = 4 only.
if [ "${MINI:-0}" = 1 ]; then
  for shape in n17408 k17408; do
    run_ab "a-$shape" $shape "$B" ""
    run_ab "p4-$shape" $shape "$B" "l2_prefetch_units=4"
  done
  cp "$OUT/exits.txt" "$FINAL/"
  exit 0
fi
bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
for shape in n17408 k17408; do run_ab "a-$shape" $shape "$B" ""; done
for d in 4 2 8; do
  for shape in n17408 k17408; do run_ab "p$d-$shape" $shape "$B" "l2_prefetch_units=$d"; done
done
for shape in n17408 k17408; do
  run_ab "u-$shape" $shape "2 4" "x_in_lds=false"
  run_ab "a24-$shape" $shape "2 4" ""
done
wait $BUILD
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 120 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
tail -60 "$OUT/others.txt" > "$FINAL/others-tail.txt"; cp "$OUT/others.txt" "$OUT/others.json" "$FINAL/ab/" 2>/dev/null
for shape in n4352 k4352; do
  [ $(el) -gt 400 ] && continue # the call's limit
  run_ab "a-$shape" $shape "$B" ""
  run_ab "p4-$shape" $shape "$B" "l2_prefetch_units=4"
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[apu]*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
  tail -60 "$OUT/others.txt"
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
