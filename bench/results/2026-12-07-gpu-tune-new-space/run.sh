#!/usr/bin/env bash
# Issue 40, one device call: `wavefuse tune --quick --budget 120` at the rows behind Marlin whose
# quick space gained candidates today (6 K warps past batch 8; passes of 16 / 32 rows past batch
# 32): batch 32 and 64 at 5120 -> 17408 and 17408 -> 5120, batch 64 at the TP 4 rank shapes; then
# `ab --timing graphs` of each winner beside the default. Every candidate is checked against the
# f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-tune-new-space/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
ROWS="k4352:64 n4352:64 n17408:64 k17408:64 n17408:32 k17408:32"
for row in $ROWS; do
  [ $(el) -gt 470 ] && continue # the call's limit
  shape=${row%:*} b=${row#*:} tag="$shape-b$b"
  sh="$(pre $shape)-b$b"
  # shellcheck disable=SC2046
  timeout 70 $W tune gemv_int4 $(cfg $shape) --shapes "$sh" --quick --budget 120 --min-occupancy 1 \
      --deadline 45 --no-cache-store --store "$OUT/tuned-$tag.toml" --md "$OUT/tune-$tag.md" \
      > "$OUT/tune-$tag.txt" 2>&1
  echo "tune $tag: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
  for side in default tuned; do
    extra=(); [ $side = tuned ] && extra=(--schedule tuned --tuned-store "$OUT/tuned-$tag.toml")
    # shellcheck disable=SC2046
    timeout 40 $W ab gemv_int4 $(cfg $shape) --shapes "$sh" --timing graphs --iters 200 "${extra[@]}" \
        > "$OUT/ab-$side-$tag.txt" 2>&1
    echo "ab $side $tag: exit $? ($(el) s)" >> "$OUT/exits.txt"
    grep -E " generated " "$OUT/ab-$side-$tag.txt" | sed "s/^/$side /" | cut -c1-150 >> "$FINAL/progress.txt"
  done
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/tune-*.txt; do echo "== $(basename $f .txt)"; grep -E "winner|enumerated" "$f" | cut -c1-200; done
  for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
cat "$OUT"/tuned-*.toml > "$FINAL/tuned-all.toml" 2>/dev/null
tar czf "$FINAL/results.tgz" -C "$OUT" .
