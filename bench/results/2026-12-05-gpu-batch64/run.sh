#!/usr/bin/env bash
# One device call, issue 40's GPU table: wavefuse `gemv_int4` (default schedule: the FMA GEMV at
# batch <= 8, the sm_90 mma.sync GEMM above) vs Marlin (IST-DASLab, symmetric, group 128), PyTorch's
# tinygemm (`torch._weight_int4pack_mm`) and cuBLAS FP16 (`F.linear`), side by side in CUDA graphs,
# weights rotating over >= 4 x L2, at 5120 -> 17408, 17408 -> 5120 and the TP 4 rank shapes
# (5120 -> 4352, 4352 -> 5120, 1536 -> 5120), batch 1, 2, 4, 8, 16, 32, 64. wavefuse before and
# after the others (two rounds).
# Marlin's source travels in carry/marlin (not in the repository), compiled here with nvcc for
# sm_90 with the L2 cache-hint cp.async replaced by the plain one (bench/results/2026-12-03-h200-marlin).
# Usage, repository root: bash bench/results/2026-12-05-gpu-batch64/run.sh
source bench/device-prelude.sh
D=bench/results/2026-12-05-gpu-batch64
C=bench/results/2026-12-03-h200-marlin # the K -> N model configs (hidden = K, intermediate = N)
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "wavefuse $(cat carry/COMMIT); marlin $(cat carry/marlin/COMMIT)"
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
ab() { # name, then ab arguments
    local name=$1; shift
    timeout 150 $W ab "$@" --timing graphs --iters 400 --json "$OUT/$name.json" --md "$OUT/$name.md" \
        > "$OUT/$name.txt" 2>&1
    echo "$name: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
}
bs() { local s=""; for b in 1 2 4 8 16 32 64; do s="$s,$1-b$b"; done; echo "${s#,}"; }
round() {
    ab wf-5120x17408-r$1 gemv_int4 --shapes "$(bs qwen27b-tp1)"
    ab wf-5120x4352-r$1 gemv_int4 --shapes "$(bs qwen27b-tp4)"
    ab wf-17408x5120-r$1 gemv_int4 --model-config $C/k17408-config.json --shapes "$(bs qwen27b-tp1)"
    ab wf-4352x5120-r$1 gemv_int4 --model-config $C/k4352-config.json --shapes "$(bs qwen27b-tp1)"
    ab wf-1536x5120-r$1 gemv_int4 --model-config $C/k1536-config.json --shapes "$(bs qwen27b-tp1)"
}
round 1
wait $BUILD
tail -3 "$OUT/marlin-build.txt"
timeout $((420 - $(el))) python3 bench/torch/marlin_bench.py "$OUT/others.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" \
    --shapes 5120x17408,17408x5120,5120x4352,4352x5120,1536x5120 --batches 1,2,4,8,16,32,64 > "$OUT/others.txt" 2>&1
echo "others: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
if [ "$(el)" -lt 380 ]; then round 2; else echo "round 2 skipped at $(el) s (call budget)" | tee -a "$OUT/exits.txt"; fi
python3 $D/table.py "$OUT" > "$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
cp "$OUT/summary.md" "$OUT/others.md" "$OUT/exits.txt" "$FINAL/" 2>/dev/null
tar czf "$FINAL/results.tgz" -C "$OUT" --exclude=log.txt .
cp "$OUT/log.txt" "$FINAL/"
