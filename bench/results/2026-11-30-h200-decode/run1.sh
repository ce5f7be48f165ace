#!/usr/bin/env bash
# Session 5 experiment 1: read-pattern diagnostic; fused kernel with more K parts at 48 registers.
set -u
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache WAVEFUSE_COMMIT=$(cat carry/COMMIT)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/device.txt
(cd bench/proto && nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/rp read_pattern.cu 2>/dev/null && timeout 120 /tmp/rp) > $OUT/read-pattern.md 2>&1
for v in k2s k2lb; do
  timeout 120 carry/wavefuse ab gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp4 --manual carry/exp/$v/gemv_int4_allreduce_rmsnorm.cu --abi carry/exp/$v/gemv_int4_allreduce_rmsnorm.abi.toml --md $OUT/fused-$v.md > $OUT/fused-$v.txt 2>&1
done
for v in k4s2 k4lb2; do
  timeout 120 carry/wavefuse ab gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp2 --manual carry/exp/$v/gemv_int4_allreduce_rmsnorm.cu --abi carry/exp/$v/gemv_int4_allreduce_rmsnorm.abi.toml --md $OUT/fused-$v.md > $OUT/fused-$v.txt 2>&1
done
timeout 200 carry/wavefuse ab gemv_int4 allreduce_residual_rmsnorm gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp4,qwen27b-tp2 --md $OUT/chain.md > $OUT/chain.txt 2>&1
echo done
