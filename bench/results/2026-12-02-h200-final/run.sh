#!/usr/bin/env bash
# One device call (H200), the session's final binary: (1) the full GPU suite through the HIP
# path (`gpu-suite --runtime hip`, the test double of tests/hip-double on LD_LIBRARY_PATH);
# (2) `ab` at batch 8 in graphs, TP 1 and TP 4, where the parametric reference ABIs now give
# every kernel its hand-written side (the per-shape files covered batch 1 only); (3) the silu·mul
# prologue before the INT4 down GEMV at batch 8, which lowers since the static-LDS fix (the
# default: materialised, unstaged), twice. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
P=bench/results/2026-12-02-h200-prologue-batch
DBL=$(mktemp -d)
bash tests/hip-double/build.sh "$DBL" > "$OUT/double-build.txt" 2>&1
echo "double build: exit $?" >> "$OUT/exits.txt"
LD_LIBRARY_PATH=$DBL timeout 420 $W gpu-suite --runtime hip --deadline 330 --out "$OUT/suite-hip.json" > "$OUT/suite-hip.txt" 2> "$OUT/suite-hip.log"
echo "gpu-suite --runtime hip: exit $?" >> "$OUT/exits.txt"
timeout 120 $W ab --shapes qwen27b-tp1-b8,qwen27b-tp4-b8 --timing graphs --json "$OUT/ab-b8.json" --md "$OUT/ab-b8.md" > "$OUT/ab-b8.txt" 2>&1
echo "ab batch 8: exit $?" >> "$OUT/exits.txt"
for r in 1 2; do
    timeout 60 $W ab --kernel-file $P/silu_down_b8.wfir --timing graphs --json "$OUT/silu_down_b8-default-r$r.json" > "$OUT/silu_down_b8-default-r$r.txt" 2>&1
    echo "silu_down_b8 default r$r: exit $?" >> "$OUT/exits.txt"
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
tail -4 "$OUT/suite-hip.txt"
grep -E "generated|hand" "$OUT/ab-b8.txt" | head -40
grep -h "generated " "$OUT"/silu_down_b8-*.txt
