#!/usr/bin/env bash
# Issue 40, one device call: `wavefuse tune --quick --budget 120` at 17408 -> 5120 batch 64 with a
# deadline long enough for its slow-compiling 128-column candidates (the 2026-12-07-gpu-tune-new-space
# run stopped it at 70 s), then at 5120 -> 17408 batch 16; `ab --timing graphs` of each winner
# beside the default in the same call. Every candidate is checked against the f64 reference
# before it is timed.
# Usage, repository root, carry/ (the release binary, its COMMIT):
#   bash bench/results/2026-12-07-gpu-tune-k17408-b64/run.sh
source bench/device-prelude.sh
source bench/ab-rows.sh
for row in k17408:64:240 n17408:16:60; do
  IFS=: read -r shape b deadline <<< "$row"
  [ $(el) -gt 420 ] && continue # the call's limit
  tune_row "$shape" "$b" "$deadline"
done
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/tune-*.txt; do echo "== $(basename $f .txt)"; grep -E "winner|enumerated" "$f" | cut -c1-200; done
  for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|schedule: tuned for" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
cat "$OUT"/tuned-*.toml > "$FINAL/tuned-all.toml" 2>/dev/null
