#!/usr/bin/env bash
# Issue 40, one device call: `wavefuse tune --quick --budget 80` of `gemv_int4` at 5120 -> 17408
# (qwen27b-tp1) and 17408 -> 5120 (the k17408 model config) at batch 16 and 32, whose space now
# holds the phased wide tensor-core tiles (f0b8dfb); then `ab --timing graphs` of the default and
# of the tuned schedule (--schedule tuned --tuned-store the tuner's store) at the same rows.
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh:
#   bash bench/results/2026-12-06-h100-phased-tune/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
echo "wavefuse $WAVEFUSE_COMMIT"
C=bench/results/2026-12-03-h200-marlin/k17408-config.json
SH=qwen27b-tp1-b16,qwen27b-tp1-b32
for shape in n17408 k17408; do
  cfg=(); [ $shape = k17408 ] && cfg=(--model-config $C)
  timeout 150 $W tune gemv_int4 "${cfg[@]}" --shapes $SH --quick --budget 80 --deadline 110 --no-cache-store \
      --store "$OUT/tuned.toml" --json "$OUT/tune-$shape.json" --md "$OUT/tune-$shape.md" > "$OUT/tune-$shape.txt" 2>&1
  echo "tune $shape: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
done
for side in default tuned; do
  for shape in n17408 k17408; do
    cfg=(); [ $shape = k17408 ] && cfg=(--model-config $C)
    extra=(); [ $side = tuned ] && extra=(--schedule tuned --tuned-store "$OUT/tuned.toml")
    timeout 60 $W ab gemv_int4 "${cfg[@]}" --shapes $SH --timing graphs --iters 200 "${extra[@]}" \
        --json "$OUT/ab-$side-$shape.json" --md "$OUT/ab-$side-$shape.md" > "$OUT/ab-$side-$shape.txt" 2>&1
    echo "ab $side $shape: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
  done
done
for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated " "$f" | cut -c1-150; done > "$OUT/summary.txt"
cat "$OUT/summary.txt"
# Two files back (the device returns a few files per call): the summary and everything in a tarball.
cp "$OUT/summary.txt" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
