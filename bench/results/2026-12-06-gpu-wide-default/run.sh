#!/usr/bin/env bash
# Issue 40, one device call: the new sm_90 default of a GEMV alone at batch 33-64 (the 128-column
# tile sharing a phased activation stage, 3ab6f0a) against the previous default (binary 50280d1,
# carry/wavefuse-old), side by side, then Marlin at the same rows, then Nsight Compute of the
# async ring (bench/results/2026-12-06-gpu-async-ring/ncu.sh) if time is left.
# 1. `wavefuse ab --timing graphs --iters 200` of `gemv_int4` at 5120 -> 17408 (qwen27b-tp1),
#    one TP 4 rank (5120 -> 4352, qwen27b-tp4) and 17408 -> 5120 (the k17408 model config) at
#    batch 33, 48, 64, with each binary's default schedule, two rounds.
# 2. Marlin, tinygemm and cuBLAS FP16 at the same rows (bench/torch/marlin_bench.py).
# Usage, repository root, carry/ from scripts/build-gpu-binary.sh plus carry/wavefuse-old and
# carry/marlin:
#   bash bench/results/2026-12-06-gpu-wide-default/run.sh
source bench/device-prelude.sh
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv
echo "wavefuse $WAVEFUSE_COMMIT (new) and 50280d10b298 (old); marlin $(cat carry/marlin/COMMIT)"
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
for round in 1 2; do
  for bin in new old; do
    B=carry/wavefuse; [ $bin = old ] && B=carry/wavefuse-old
    for shape in n17408 k17408; do
      cfg=(); SH=qwen27b-tp1-b33,qwen27b-tp1-b48,qwen27b-tp1-b64,qwen27b-tp4-b33,qwen27b-tp4-b64
      [ $shape = k17408 ] && cfg=(--model-config $C/k17408-config.json) && SH=qwen27b-tp1-b33,qwen27b-tp1-b48,qwen27b-tp1-b64
      tag="r$round-$bin-$shape"
      timeout 120 $B ab gemv_int4 "${cfg[@]}" --shapes $SH --timing graphs --iters 200 \
          --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1
      echo "$tag: exit $? ($(el) s)" >> "$OUT/exits.txt"
      { tail -1 "$OUT/exits.txt"; grep -E " generated |error" "$OUT/$tag.txt" | cut -c1-160; } >> "$FINAL/progress.txt"
    done
  done
done
wait $BUILD
tail -1 "$OUT/marlin-build.txt"
timeout 150 python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352 --batches 33,48,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" >> "$OUT/exits.txt"
{
  cat "$OUT/exits.txt"
  for f in "$OUT"/r*.txt; do echo "== $(basename $f .txt)"; grep -E " generated |error" "$f" | cut -c1-160; done
  grep -E "marlin" "$OUT/others.txt" | tail -12
} > "$FINAL/summary.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
rm -f "$FINAL/progress.txt"
