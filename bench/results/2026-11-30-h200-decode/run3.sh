#!/usr/bin/env bash
# Session 5 experiment 3: lop3 decode + no B selects (carry/wavefuse) vs dc68a2c (carry/wavefuse-base),
# alternating, the INT4 kernels at TP 4 and TP 1; then same-device graphs with the new binary.
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
mkdir -p $OUT/x
K="gemv_int4 gemv_int4_allreduce_rmsnorm gemv_int4_dual_silu gemv_int4_qkv"
for i in 1 2; do
  WAVEFUSE_COMMIT=dc68a2c01812 timeout 200 carry/wavefuse-base ab $K --shapes qwen27b-tp4,qwen27b-tp1 --md $OUT/x/base-$i.md > $OUT/x/base-$i.txt 2>&1
  timeout 200 carry/wavefuse ab $K --shapes qwen27b-tp4,qwen27b-tp1 --md $OUT/x/new-$i.md > $OUT/x/new-$i.txt 2>&1
done
timeout 200 carry/wavefuse mgpu-bench --same-device --tp 4,2 --md $OUT/x/samedev-new.md > $OUT/x/samedev-new.txt 2>&1
for f in base-1 new-1 base-2 new-2; do echo "== $f"; grep -E "^\| gemv" $OUT/x/$f.md | grep generated | awk -F'|' '{print $2,$3,$8}'; done
grep -E "fused|unfused" $OUT/x/samedev-new.md
tar czf $OUT/x.tgz -C $OUT x
