#!/usr/bin/env bash
# Issue 40, one device call: what the existing schedule space reaches at batch 2-64 for
# `gemv_int4` 5120 -> 17408 (the shape where wavefuse trails Marlin from batch 2), against Marlin in
# the same call. 1. `wavefuse tune --quick` at batch 2, 4, 8, 16, 32, 64 (candidates compiled on the
# build machine into carry/cache; the tuner times with events); 2. `ab --timing graphs` of the
# default and of the tuned schedule (--schedule tuned --tuned-store the tuner's store) at batch
# 1-64; 3. Marlin, tinygemm and cuBLAS FP16 at the same rows (bench/torch/marlin_bench.py, CUDA
# graphs behind a sleep kernel, as ab's graphs now are).
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh plus carry/marlin:
#   bash bench/results/2026-12-06-h100-batch-tune/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
echo "wavefuse $WAVEFUSE_COMMIT; marlin $(cat carry/marlin/COMMIT)"
M=/tmp/marlin
mkdir -p $M
cp carry/marlin/marlin/marlin_cuda_kernel.cu $M/
sed -i -e '/createpolicy\.fractional\.L2::evict_first/d' \
    -e 's/cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;/cp.async.cg.shared.global [%0], [%1], %2;/' \
    $M/marlin_cuda_kernel.cu
(timeout 300 nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I$M \
    -o $M/libmarlin.so bench/torch/marlin_shim.cu > "$OUT/marlin-build.txt" 2>&1
    echo "nvcc exit $? at $(el) s" >> "$OUT/marlin-build.txt") &
BUILD=$!
bs() { local s=""; for b in "$@"; do s="$s,qwen27b-tp1-b$b"; done; echo "${s#,}"; }
timeout 260 $W tune gemv_int4 --shapes "$(bs 2 4 8 16 32 64)" --quick --deadline 200 --no-cache-store \
    --store "$OUT/tuned.toml" --json "$OUT/tune.json" --md "$OUT/tune.md" > "$OUT/tune.txt" 2>&1
echo "tune: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
for side in default tuned; do
    extra=""; [ $side = tuned ] && extra="--schedule tuned --tuned-store $OUT/tuned.toml"
    timeout 120 $W ab gemv_int4 --shapes "$(bs 1 2 4 8 16 32 64)" --timing graphs --iters 400 $extra \
        --json "$OUT/ab-$side.json" --md "$OUT/ab-$side.md" > "$OUT/ab-$side.txt" 2>&1
    echo "ab $side: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
done
wait $BUILD
tail -2 "$OUT/marlin-build.txt"
timeout $((560 - $(el))) python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
grep -E "generated|qwen27b" "$OUT/ab-default.txt" "$OUT/ab-tuned.txt" | grep -E " generated " | head -20
tail -20 "$OUT/others.md" 2>/dev/null || tail -20 "$OUT/others.txt"
cp "$OUT"/*.md "$OUT"/*.txt "$OUT/tuned.toml" "$FINAL/" 2>/dev/null
tar czf "$FINAL/results.tgz" -C "$OUT" --exclude=log.txt .
