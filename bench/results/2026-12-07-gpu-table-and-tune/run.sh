#!/usr/bin/env bash
# Issue 40, one device call: the whole table side by side — wavefuse's defaults and
# Marlin, tinygemm and cuBLAS FP16 at 5120 -> 17408, 17408 -> 5120 and the TP 4 rank shapes
# 5120 -> 4352 and 4352 -> 5120, batch 1, 2, 4, 8, 16, 32, 64 — then `wavefuse tune --quick` of
# the TP 4 rank rows at batch 32 (the closest to Marlin behind it) and `ab` of the tuned
# schedules. Every wavefuse row is checked against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT) plus carry/marlin:
#   bash bench/results/2026-12-07-gpu-table-and-tune/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
M=/tmp/marlin
bash bench/marlin-build.sh $M "$OUT/marlin-build.txt" &
BUILD=$!
B="1 2 4 8 16 32 64"
for shape in n17408 k17408 n4352 k4352; do run_ab "a-$shape" $shape "$B" ""; done
wait $BUILD
tail -1 "$OUT/marlin-build.txt" | tee -a "$FINAL/progress.txt"
timeout 120 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
cp "$OUT/others.txt" "$FINAL/"
for shape in n4352 k4352; do
  [ $(el) -gt 330 ] && continue # the call's limit
  # shellcheck disable=SC2046
  timeout 100 $W tune gemv_int4 $(cfg $shape) --shapes "$(pre $shape)-b32" --quick --budget 60 \
      --min-occupancy 1 --deadline 80 --no-cache-store --store "$OUT/tuned-$shape.toml" \
      --md "$OUT/tune-$shape.md" > "$OUT/tune-$shape.txt" 2>&1
  echo "tune $shape: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
  # shellcheck disable=SC2046
  timeout 40 $W ab gemv_int4 $(cfg $shape) --shapes "$(pre $shape)-b32" --timing graphs --iters 200 \
      --schedule tuned --tuned-store "$OUT/tuned-$shape.toml" > "$OUT/t-$shape.txt" 2>&1
  echo "ab tuned $shape: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/[at]-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|refused" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
# At most 8 files come back: everything else in one tarball (not committed; the run regenerates it).
rm -rf "$FINAL/ab"
tar czf "$FINAL/results.tgz" -C "$OUT" .
