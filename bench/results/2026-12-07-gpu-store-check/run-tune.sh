#!/usr/bin/env bash
# The second call of this folder: the quick tune at 17408 -> 5120 batch 16 again, with the 5/6-K-warp
# forms right after the neighbours (712c592; in the first call the budget of 60 cut them), and
# its winner by `ab` beside the default. Usage, repository root, carry/ (the release binary):
#   bash bench/results/2026-12-07-gpu-store-check/run-tune.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
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
  for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|schedule: tuned for" "$f" | cut -c1-160; done
  echo "== tune"; grep -E "winner|enumerated" "$OUT/tune-k17408-b16.txt" | cut -c1-200
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$OUT/tune-k17408-b16.md" "$OUT/tuned-k17408-b16.toml" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
