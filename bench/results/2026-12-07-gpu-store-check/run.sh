#!/usr/bin/env bash
# Issue 40, one device call: (1) the committed tuned store's H100 entries for gemv_int4 at
# 5120 -> 17408 (batch 2, 4, 8, 64; written 2026-12-06, before the whole-rounds defaults) timed
# beside the defaults they would replace: `ab --schedule tuned` against `ab` in one call, so an
# entry slower than today's default is found and dropped; (2) `wavefuse tune --quick` at 17408 ->
# 5120 batch 16, whose space now holds 5 and 6 K warps, and its winner by `ab`.
# Every row is checked against the f64 reference before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-store-check/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
S="$(shapes qwen27b-tp1 "2 4 8 64")"
for side in default tuned; do
  extra=(); [ $side = tuned ] && extra=(--schedule tuned)
  timeout 120 $W ab gemv_int4 --shapes "$S" --timing graphs --iters 200 "${extra[@]}" > "$OUT/ab-$side.txt" 2>&1
  echo "ab $side: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
done
sh="qwen27b-tp1-b16"
# shellcheck disable=SC2046
timeout 100 $W tune gemv_int4 $(cfg k17408) --shapes "$sh" --quick --budget 60 --min-occupancy 1 \
    --deadline 70 --no-cache-store --store "$OUT/tuned-k17408-b16.toml" --md "$OUT/tune-k17408-b16.md" \
    > "$OUT/tune-k17408-b16.txt" 2>&1
echo "tune k17408 b16: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
for side in default tuned; do
  extra=(); [ $side = tuned ] && extra=(--schedule tuned --tuned-store "$OUT/tuned-k17408-b16.toml")
  # shellcheck disable=SC2046
  timeout 40 $W ab gemv_int4 $(cfg k17408) --shapes "$sh" --timing graphs --iters 200 "${extra[@]}" \
      > "$OUT/ab-$side-k17408-b16.txt" 2>&1
  echo "ab $side k17408 b16: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|schedule|tuned" "$f" | cut -c1-160; done
  echo "== tune"; grep -E "winner|enumerated|candidates" "$OUT/tune-k17408-b16.txt" | cut -c1-200
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$OUT/tune-k17408-b16.md" "$FINAL/" 2>/dev/null
tar czf "$FINAL/results.tgz" -C "$OUT" .
