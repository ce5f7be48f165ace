#!/usr/bin/env bash
# Fifth device call: the signal to the successor (`griddepcontrol.launch_dependents`) moved from
# the start to the end of the kernel (run 4: at the start the dependent GEMVs were 2–14 % slower
# than in stream order). The four GEMV kernels in graphs at TP 1 and TP 4, batch 1 and 8,
# `--launch stream` and `--launch dependent` alternating twice.
source bench/device-prelude.sh
for r in 1 2; do
    for v in stream dependent; do
        timeout 120 $W ab gemv_f16 gemv_int4 gemv_int4_dual_silu gemv_int4_qkv --shapes qwen27b-tp1,qwen27b-tp4,qwen27b-tp1-b8,qwen27b-tp4-b8 \
            --timing graphs --launch $v --json "$OUT/ab-$v-r$r.json" --md "$OUT/ab-$v-r$r.md" > "$OUT/ab-$v-r$r.txt" 2>&1
        echo "ab $v r$r: exit $?" >> "$OUT/exits.txt"
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
