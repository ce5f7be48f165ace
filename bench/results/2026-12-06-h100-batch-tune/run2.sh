#!/usr/bin/env bash
# Second call: is the batch 2-4 winner at 5120 -> 17408 (5 K parts instead of the default's 2) a
# rule or a point? `wavefuse tune gemv_int4 --quick` at batch 2 and 4 for the other shapes of issue
# 40's table (17408 -> 5120, 4352 -> 5120, 1536 -> 5120 as models; one TP 4 rank 5120 -> 4352),
# then `ab --timing graphs` of the default and the tuned schedule at those rows.
# Usage, repository root: bash bench/results/2026-12-06-h100-batch-tune/run2.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log2.txt") 2>&1
date -u; nvidia-smi -L; echo "wavefuse $WAVEFUSE_COMMIT"
C=bench/results/2026-12-03-h200-marlin
one() { # name, shapes, then --model-config args
    local name=$1 shapes=$2; shift 2
    timeout 90 $W tune gemv_int4 "$@" --shapes "$shapes" --quick --deadline 40 --no-cache-store \
        --store "$OUT/tuned2.toml" --md "$OUT/tune-$name.md" > "$OUT/tune-$name.txt" 2>&1
    echo "tune $name: exit $? ($(el) s)"; grep -E "winner|no winner" "$OUT/tune-$name.txt"
    for side in default tuned; do
        extra=""; [ $side = tuned ] && extra="--schedule tuned --tuned-store $OUT/tuned2.toml"
        timeout 60 $W ab gemv_int4 "$@" --shapes "$shapes" --timing graphs --iters 400 $extra \
            --md "$OUT/ab-$name-$side.md" > "$OUT/ab-$name-$side.txt" 2>&1
        echo "ab $name $side: exit $? ($(el) s)"; grep -E " generated " "$OUT/ab-$name-$side.txt"
    done
}
one k17408 qwen27b-tp1-b2,qwen27b-tp1-b4 --model-config $C/k17408-config.json
one k4352 qwen27b-tp1-b2,qwen27b-tp1-b4 --model-config $C/k4352-config.json
one k1536 qwen27b-tp1-b2,qwen27b-tp1-b4 --model-config $C/k1536-config.json
one tp4 qwen27b-tp4-b2,qwen27b-tp4-b4
cp "$OUT/log2.txt" "$OUT/tuned2.toml" "$FINAL/"
tar czf "$FINAL/results2.tgz" -C "$OUT" .
