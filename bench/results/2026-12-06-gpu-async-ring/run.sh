#!/usr/bin/env bash
# Issue 40, one device call: the tensor-core GEMV past batch 8 with its packed weights, scales
# and zero words copied into a per-warp LDS ring by cp.async (`async_stages`, 7504125), units
# ahead of the one computed, against the same tiles with register loads, the default and Marlin.
# 1. `wavefuse ab --timing graphs --iters 200` of `gemv_int4` at 5120 -> 17408 (qwen27b-tp1) and
#    17408 -> 5120 (the k17408 model config) at batch 1, 8, 16, 32, 64, once per schedule override
#    (WAVEFUSE_SCHEDULE_SM90; each checked against the f64 reference first).
# 2. Marlin, tinygemm and cuBLAS FP16 at the same rows (bench/torch/marlin_bench.py).
# Everything goes into one tarball and summary.txt (the device returns few files).
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh plus carry/marlin:
#   bash bench/results/2026-12-06-gpu-async-ring/run.sh
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
C=bench/results/2026-12-03-h200-marlin
SH=qwen27b-tp1-b1,qwen27b-tp1-b8,qwen27b-tp1-b16,qwen27b-tp1-b32,qwen27b-tp1-b64
# W64: 64 columns = 2 column warps sharing the phased activation stage, one K warp, 64 lanes;
# W128: 4 column warps, 128 lanes. K parts: 4 at 5120 -> 17408, 8 at 17408 -> 5120.
W64="columns_per_workgroup=64,threads_per_column=1,workgroup_size=64,x_in_lds=true,x_phase_units=1"
W128="columns_per_workgroup=128,threads_per_column=1,workgroup_size=128,x_in_lds=true,x_phase_units=1"
OVS=(
  ""
  "k_unit_words=8,mma_scale=weight,async_stages=2"
  "k_unit_words=8,mma_scale=weight"
  "k_unit_words=4,mma_scale=weight,async_stages=3"
  "$W64,k_unit_words=8,mma_scale=weight,async_stages=4"
  "$W64,k_unit_words=8,mma_scale=weight"
  "$W128,k_unit_words=8,mma_scale=weight,async_stages=2"
  "$W128,k_unit_words=8,mma_scale=weight"
  "$W64,k_unit_words=8,mma_scale=weight,async_stages=2"
  "async_stages=4"
  "async_stages=3,k_unit_words=8"
)
split() { [ "$1" = n17408 ] && echo 4 || echo 8; }
for round in 1 2; do
  for i in "${!OVS[@]}"; do
    for shape in n17408 k17408; do
      cfg=(); [ $shape = k17408 ] && cfg=(--model-config $C/k17408-config.json)
      ov="${OVS[$i]}"; [ -n "$ov" ] && ov="$ov,k_split=$(split $shape)"
      tag="r$round-c$i-$shape"
      WAVEFUSE_SCHEDULE_SM90="$ov" timeout 90 $W ab gemv_int4 "${cfg[@]}" --shapes $SH \
          --timing graphs --iters 200 --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
      echo "$tag [$ov]: exit $? ($(el) s)" >> "$OUT/exits.txt"
      # Progressively into the returned folder (a call cut short still returns what ran).
      { tail -1 "$OUT/exits.txt"; grep -E " generated |error|refused|LDS" "$OUT/$tag.txt" | cut -c1-160; } >> "$FINAL/progress.txt"
    done
  done
  [ $(el) -gt 150 ] && break # a second round only if the first was quick
done
wait $BUILD
tail -1 "$OUT/marlin-build.txt"
timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120 --batches 1,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
{
  cat "$OUT/exits.txt"
  for f in "$OUT"/r*-c*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |error|refused|LDS" "$f" | cut -c1-160; done
  tail -12 "$OUT/others.txt"
} > "$OUT/summary.txt"
cp "$OUT/summary.txt" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" .
