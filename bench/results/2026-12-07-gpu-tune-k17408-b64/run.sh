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
  tag="$shape-b$b" sh="$(pre $shape)-b$b"
  # shellcheck disable=SC2046
  timeout $((deadline + 40)) $W tune gemv_int4 $(cfg $shape) --shapes "$sh" --quick --budget 120 --min-occupancy 1 \
      --deadline $deadline --no-cache-store --store "$OUT/tuned-$tag.toml" --md "$OUT/tune-$tag.md" \
      > "$OUT/tune-$tag.txt" 2>&1
  echo "tune $tag: exit $? ($(el) s)" | tee -a "$OUT/exits.txt" "$FINAL/progress.txt"
  cp "$OUT/tune-$tag.md" "$FINAL/" 2>/dev/null
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
  for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |ERROR|schedule: tuned for" "$f" | cut -c1-150; done
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
cat "$OUT"/tuned-*.toml > "$FINAL/tuned-all.toml" 2>/dev/null
