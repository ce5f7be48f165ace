#!/usr/bin/env bash
# Session 5 experiment 4: bisect the lop3 decode and the B-select removal (env switches in
# carry/wavefuse-exp, built from the working tree) against dc68a2c (carry/wavefuse-base).
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
mkdir -p $OUT/x
K="gemv_int4 gemv_int4_allreduce_rmsnorm gemv_int4_dual_silu"
run() { # tag binary env...
  local tag=$1 bin=$2; shift 2
  env "$@" WAVEFUSE_COMMIT=$tag timeout 100 $bin mgpu-bench --same-device --tp 4 --md $OUT/x/sd-$tag-$i.md > /dev/null 2>&1
  env "$@" WAVEFUSE_COMMIT=$tag timeout 150 $bin ab $K --shapes qwen27b-tp4,qwen27b-tp1 --md $OUT/x/ab-$tag-$i.md > /dev/null 2>&1
}
for i in 1 2; do
  run base carry/wavefuse-base X=1
  run both carry/wavefuse-exp X=1
  run lop3only carry/wavefuse-exp WAVEFUSE_EXP_BSEL=1
  run noselonly carry/wavefuse-exp WAVEFUSE_EXP_NO_LOP3=1
done
for i in 1 2; do for t in base both lop3only noselonly; do
  echo "$t-$i: $(grep -E 'fused|unfused' $OUT/x/sd-$t-$i.md | awk -F'|' '{printf "%s ", $5}') | $(grep -E '^\| gemv' $OUT/x/ab-$t-$i.md | grep generated | awk -F'|' '{printf "%s ", $8}')"
done; done
tar czf $OUT/x.tgz -C $OUT x; rm -rf $OUT/x
