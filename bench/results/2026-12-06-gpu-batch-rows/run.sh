#!/usr/bin/env bash
# Issue 40, one device call: the defaults at every row of the issue's table — gemv_int4 at
# 5120 -> 17408 and 17408 -> 5120 (TP 1) and the TP 4 rank shapes 5120 -> 4352 and 4352 -> 5120,
# batch 1, 2, 4, 8, 16, 32, 64 (plus 48 and 57, the edges of the batch-57 rule) — with Marlin,
# tinygemm and cuBLAS FP16 at the same rows in the same call.
# 1. `wavefuse ab gemv_int4 --timing graphs --iters 200` per shape (each row checked against the
#    f64 reference first), two rounds.
# 2. bench/torch/marlin_bench.py at the same shapes and batches.
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh plus carry/marlin:
#   bash bench/results/2026-12-06-gpu-batch-rows/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$FINAL/gpu.txt"
echo "wavefuse $WAVEFUSE_COMMIT; marlin $(cat carry/marlin/COMMIT)" | tee -a "$FINAL/gpu.txt"
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
C=bench/results/2026-12-03-h200-marlin
B="1 2 4 8 16 32 48 57 64"
sh() { local p=$1; local s=""; for b in $B; do s="$s,$p-b$b"; done; echo "${s#,}"; }
# name | shape prefix | extra ab arguments
CASES=(
  "n17408|qwen27b-tp1|"
  "k17408|qwen27b-tp1|--model-config $C/k17408-config.json"
  "n4352|qwen27b-tp4|"
  "k4352|qwen27b-tp1|--model-config $C/k4352-config.json"
)
for round in 1 2; do
  for c in "${CASES[@]}"; do
    IFS='|' read -r name pre extra <<< "$c"
    tag="r$round-$name"
    # shellcheck disable=SC2086
    timeout 150 $W ab gemv_int4 $extra --shapes "$(sh $pre)" --timing graphs --iters 200 \
        --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
    echo "$tag: exit $? ($(el) s)" >> "$OUT/exits.txt"
    { tail -1 "$OUT/exits.txt"; grep -E " generated |error|refused|LDS" "$OUT/$tag.txt" | cut -c1-160; } >> "$FINAL/progress.txt"
  done
done
wait $BUILD
tail -1 "$OUT/marlin-build.txt"
timeout 300 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120 --batches 1,2,4,8,16,32,48,57,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
{
  cat "$FINAL/gpu.txt" "$OUT/exits.txt"
  for f in "$OUT"/r*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |error|refused|LDS" "$f" | cut -c1-160; done
  tail -45 "$OUT/others.txt"
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
