#!/usr/bin/env bash
# Fourth device call (binary b85cdcb: no stream-order prologue in kernels whose workgroups wait
# for each other; dependent graphs replayed behind a fill). (1) the three runtime GPU tests of
# the dependent launch; (2) `ab` of the whole set in graphs at TP 1 and TP 4, batch 1 and 8,
# `--launch stream` and `--launch dependent` alternating twice; (3) the quick GPU suite with
# `--launch dependent`.
source bench/device-prelude.sh
timeout 120 carry/gpu-tests --ignored --test-threads=1 --nocapture dependent_launch launches_behind > "$OUT/pdl-tests.txt" 2>&1
echo "pdl tests: exit $?" >> "$OUT/exits.txt"
for r in 1 2; do
    for v in stream dependent; do
        timeout 120 $W ab --shapes qwen27b-tp1,qwen27b-tp4,qwen27b-tp1-b8,qwen27b-tp4-b8 --timing graphs --launch $v \
            --json "$OUT/ab-$v-r$r.json" --md "$OUT/ab-$v-r$r.md" > "$OUT/ab-$v-r$r.txt" 2>&1
        echo "ab $v r$r: exit $?" >> "$OUT/exits.txt"
    done
done
timeout 150 $W gpu-suite --quick --launch dependent --deadline 120 --out "$OUT/suite-dependent.json" > "$OUT/suite-dependent.txt" 2>&1
echo "gpu-suite --quick --launch dependent: exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
grep -E "stale|host time|test result|panicked|replayed" "$OUT/pdl-tests.txt"
tail -3 "$OUT/suite-dependent.txt"
