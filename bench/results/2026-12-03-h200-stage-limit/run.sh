#!/usr/bin/env bash
# One device call (H200): the sm_90 activation-stage limit, 40 KiB (carry/wavefuse-old, HEAD
# before the change) vs 24 KiB (carry/wavefuse-new) per K part, through `ab --timing graphs`
# (rank alone for the GEMVs, all ranks on the GPU for the fused kernel), alternating
# old, new, old, new. Only the kernels and shapes whose generated source differs between the two
# binaries (checked here by emitting every INT4 kernel at TP 1/2/4/8, batch 1/2/4/8).
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
S=qwen27b-tp1-b8,qwen27b-tp2-b8,qwen27b-tp4-b8,qwen27b-tp8-b8,qwen27b-tp1-b4
K="gemv_int4 gemv_int4_qkv gemv_int4_allreduce_rmsnorm"
for r in 1 2; do
    for b in old new; do
        WAVEFUSE_COMMIT=$(cat carry/COMMIT-$b) timeout 200 carry/wavefuse-$b ab $K --shapes $S --timing graphs \
            --json "$OUT/ab-$b-r$r.json" --md "$OUT/ab-$b-r$r.md" > "$OUT/ab-$b-r$r.txt" 2>&1
        echo "ab $b r$r: exit $?" >> "$OUT/exits.txt"
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
for r in 1 2; do for b in old new; do
    echo "== $b r$r"; grep -E "generated" "$OUT/ab-$b-r$r.txt" | head -40
done; done
