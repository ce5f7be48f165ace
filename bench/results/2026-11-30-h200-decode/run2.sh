#!/usr/bin/env bash
# Session 5 experiment 2: read-pattern diagnostic; fused TP 2 with 4 K parts at 48 registers;
# fused vs unfused chain with every rank on the one GPU, in CUDA graphs.
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
mkdir -p $OUT/x
(cd bench/proto && nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/rp read_pattern.cu 2>/dev/null && timeout 120 /tmp/rp) > $OUT/read-pattern.md 2>&1
for v in k4s2 k4lb2; do
  timeout 120 carry/wavefuse ab gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp2 --manual carry/exp/$v/gemv_int4_allreduce_rmsnorm.cu --abi carry/exp/$v/gemv_int4_allreduce_rmsnorm.abi.toml --md $OUT/x/fused-$v.md > $OUT/x/fused-$v.txt 2>&1
done
timeout 300 carry/wavefuse mgpu-bench --same-device --tp 4,2 --md $OUT/samedev.md --json $OUT/x/samedev.json > $OUT/x/samedev.txt 2>&1
tar czf $OUT/x.tgz -C $OUT x && rm -rf $OUT/x
echo done
