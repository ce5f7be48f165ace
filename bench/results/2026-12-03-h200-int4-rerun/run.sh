#!/usr/bin/env bash
# One device call (H200), issue 20, with the current defaults (the K-split rules of
# bench/results/2026-12-03-h200-k4352-units): (1) wavefuse `gemv_int4`, Marlin (IST-DASLab,
# symmetric, group 128) and `torch._weight_int4pack_mm` side by side in CUDA graphs, weights
# rotating over >= 4 x L2, at 5120 -> 17408 and 17408 -> 5120, batch 1/2/4/8, and one TP 4 rank
# alone at 5120 -> 4352, 4352 -> 5120, 1536 -> 5120, batch 1; wavefuse before and after the others
# (the commands of ../2026-12-03-h200-marlin/run.sh without its tune part). (2) The fused
# `gemv_int4_allreduce_rmsnorm` vs the unfused wavefuse chain, TP 4 and 2, ranks on one GPU
# (`mgpu-bench --same-device`), twice. (3) PyTorch's FFN-block chain (bench/torch/int4_baselines.py).
# Marlin's source travels in carry/marlin (not in the repository), patched and built as there.
# Usage, repository root: bash bench/results/2026-12-03-h200-int4-rerun/run.sh
# Writes $OUT/results.tgz, $OUT/summary.md, $OUT/log.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-03-h200-marlin
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
echo "cache_hint left after the patch: $(grep -c cache_hint $M/marlin_cuda_kernel.cu)"
(timeout 400 nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -shared -Xcompiler -fPIC -I$M \
    -o $M/libmarlin.so bench/torch/marlin_shim.cu > "$OUT/marlin-build.txt" 2>&1
    echo "nvcc exit $? at $(el) s" >> "$OUT/marlin-build.txt") &
BUILD=$!
ab() { # name, then ab arguments
    local name=$1; shift
    timeout 150 $W ab "$@" --timing graphs --iters 400 --json "$OUT/$name.json" --md "$OUT/$name.md" \
        > "$OUT/$name.txt" 2>&1
    echo "$name: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
}
B4=qwen27b-tp1-b1,qwen27b-tp1-b2,qwen27b-tp1-b4,qwen27b-tp1-b8
wavefuse_round() {
    ab wf-qwen-r$1 gemv_int4 --shapes $B4,qwen27b-tp4-b1
    ab wf-k17408-r$1 gemv_int4 --model-config $D/k17408-config.json --shapes $B4
    ab wf-k4352-r$1 gemv_int4 --model-config $D/k4352-config.json --shapes qwen27b-tp1-b1
    ab wf-k1536-r$1 gemv_int4 --model-config $D/k1536-config.json --shapes qwen27b-tp1-b1
}
wavefuse_round 1
wait $BUILD
tail -3 "$OUT/marlin-build.txt"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch/marlin_bench.py "$OUT/marlin.json" --lib $M/libmarlin.so \
    --marlin-dir carry/marlin --marlin-commit "$(cat carry/marlin/COMMIT)" > "$OUT/marlin.txt" 2>&1
echo "marlin_bench: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
wavefuse_round 2
for r in 1 2; do
    timeout 120 $W mgpu-bench --same-device --tp 4,2 --json "$OUT/samedev-r$r.json" --md "$OUT/samedev-r$r.md" \
        > "$OUT/samedev-r$r.txt" 2>&1
    echo "samedev-r$r: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
done
PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch/int4_baselines.py "$OUT/torch.json" > "$OUT/torch.txt" 2>&1
echo "int4_baselines: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
echo "total $(el) s"
python3 $D/table.py "$OUT" > "$OUT/summary.md" 2>&1
for r in 1 2; do cat "$OUT/samedev-r$r.md" >> "$OUT/summary.md" 2>/dev/null; done
cat "$OUT/torch.md" >> "$OUT/summary.md" 2>/dev/null
cat "$OUT/summary.md"
cp "$OUT/summary.md" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" --exclude=log.txt .
cp "$OUT/log.txt" "$FINAL/"
