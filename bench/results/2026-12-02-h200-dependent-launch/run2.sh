#!/usr/bin/env bash
# Second device call, after run 1's dependent `ab` runs timed out (100 s each, no row): graphs of
# dependent launches are now timed behind a fill of a 2 × L2 buffer instead of the host-function
# gate. (1) both runtime GPU tests of the dependent launch (the stale-read test; the host time of
# a launch behind a held or busy stream); (2) `ab` in graphs, the same five kernels at TP 1 and
# TP 4, this binary `--launch stream` (host gate) and `--launch dependent` (fill gate; its
# hand-written rows are stream-launched behind the same fill: the control for the gate),
# alternating twice.
source bench/device-prelude.sh
KERNELS="gemv_int4 gemv_int4_dual_silu gemv_int4_qkv allreduce_residual_rmsnorm gemv_int4_allreduce_rmsnorm"
timeout 120 carry/gpu-tests --ignored --test-threads=1 --nocapture dependent_launch launches_behind > "$OUT/pdl-tests.txt" 2>&1
echo "pdl tests: exit $?" >> "$OUT/exits.txt"
for r in 1 2; do
    for v in stream dependent; do
        timeout 150 $W ab $KERNELS --shapes qwen27b-tp1,qwen27b-tp4 --timing graphs --launch $v \
            --json "$OUT/ab-$v-r$r.json" --md "$OUT/ab-$v-r$r.md" > "$OUT/ab-$v-r$r.txt" 2>&1
        echo "ab $v r$r: exit $?" >> "$OUT/exits.txt"
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
grep -E "stale|host time|test result|panicked" "$OUT/pdl-tests.txt"
for f in "$OUT"/ab-*-r*.txt; do echo "== $(basename "$f")"; grep -E "generated|hand-written" "$f" | awk '{print $1, $2, $6}'; done
