#!/usr/bin/env bash
# Builds Marlin's kernel (carry/marlin: IST-DASLab/marlin's source, not in this repository) with
# bench/torch/marlin_shim.cu into DIR/libmarlin.so on a GPU machine, for bench/torch/marlin_bench.py.
# Two edits first: the L2 cache-hint policy (createpolicy) and the hinted cp.async are replaced by
# the plain cp.async, which this CUDA's ptxas takes. The nvcc output and its exit go to LOG.
# Usage, repository root: bash bench/marlin-build.sh DIR LOG   (run scripts start it with & and wait)
set -uo pipefail
M=$1 LOG=$2
mkdir -p "$M"
cp carry/marlin/marlin/marlin_cuda_kernel.cu "$M/"
sed -i -e '/createpolicy\.fractional\.L2::evict_first/d' \
    -e 's/cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;/cp.async.cg.shared.global [%0], [%1], %2;/' \
    "$M/marlin_cuda_kernel.cu"
T0=$(date +%s)
timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I"$M" \
    -o "$M/libmarlin.so" bench/torch/marlin_shim.cu > "$LOG" 2>&1
echo "nvcc exit $? after $(($(date +%s) - T0)) s" >> "$LOG"
