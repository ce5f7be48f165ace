#!/usr/bin/env bash
# Issue 40, one short device call (what the session's device time had left): `wavefuse tune
# --quick --budget 80 --min-occupancy 1` (without it the floor is the default's occupancy, which the
# depth-2 phased tiles are below) of `gemv_int4` at 5120 -> 17408 (qwen27b-tp1) batch 16, whose space now
# holds the phased wide tensor-core tiles (f0b8dfb); then `ab --timing graphs` of the default and
# of the tuned schedule (--schedule tuned --tuned-store the tuner's store) at that row.
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh:
#   bash bench/results/2026-12-06-h100-phased-tune/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
echo "wavefuse $WAVEFUSE_COMMIT"
SH=qwen27b-tp1-b16
timeout 140 $W tune gemv_int4 --shapes $SH --quick --budget 80 --min-occupancy 1 --deadline 110 --no-cache-store \
    --store "$OUT/tuned.toml" --json "$OUT/tune.json" --md "$OUT/tune.md" > "$OUT/tune.txt" 2>&1
echo "tune: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
for side in default tuned; do
  extra=(); [ $side = tuned ] && extra=(--schedule tuned --tuned-store "$OUT/tuned.toml")
  timeout 40 $W ab gemv_int4 --shapes $SH --timing graphs --iters 200 "${extra[@]}" \
      --json "$OUT/ab-$side.json" --md "$OUT/ab-$side.md" > "$OUT/ab-$side.txt" 2>&1
  echo "ab $side: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
done
for f in "$OUT"/ab-*.txt; do echo "== $(basename $f .txt)"; grep -E " generated " "$f" | cut -c1-150; done > "$OUT/summary.txt"
cat "$OUT/summary.txt"
# Two files back (the device returns a few files per call): the summary and everything in a tarball.
cp "$OUT/summary.txt" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
