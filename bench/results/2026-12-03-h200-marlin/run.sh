#!/usr/bin/env bash
# One device call (H200), issue 20: (1) wavefuse `gemv_int4`, Marlin (IST-DASLab, symmetric,
# group 128) and `torch._weight_int4pack_mm` side by side in CUDA graphs, weights rotating over
# >= 4 x L2: 5120 -> 17408 and 17408 -> 5120 at batch 1/2/4/8, and one TP 4 rank alone at
# 5120 -> 4352, 4352 -> 5120, 1536 -> 5120 at batch 1; wavefuse before and after the others.
# (2) `wavefuse tune` of the INT4 kernels at the committed store's shapes, then default vs tuned
# in graphs, alternating twice.
# Marlin's source travels in carry/marlin (not in the repository); it is compiled here with nvcc
# for sm_90, its L2 cache-hint cp.async replaced by the plain one (with the hint, ptxas 13.0 on
# sm_90 drops an instruction and the kernel faults).
# Usage, repository root: bash bench/results/2026-12-03-h200-marlin/run.sh
# Writes $OUT/results.tgz, $OUT/summary.md, $OUT/tuned.toml, $OUT/log.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-03-h200-marlin
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
BUDGET=${BUDGET:-540}
left() { echo $((BUDGET - $(el))); }
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
nvcc --version | tail -2
echo "wavefuse $(cat carry/COMMIT); marlin $(cat carry/marlin/COMMIT)"
if [ -z "${WAVEFUSE_NVRTC_LIB:-}" ] && ! ls /usr/local/cuda*/lib64/libnvrtc.so* >/dev/null 2>&1; then
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        lib=$(ls "$sp"/nvidia/*/lib/libnvrtc.so.* 2>/dev/null | grep -v alt | head -1)
        if [ -n "$lib" ]; then export WAVEFUSE_NVRTC_LIB="$lib"; break; fi
    done
fi
echo "WAVEFUSE_NVRTC_LIB=${WAVEFUSE_NVRTC_LIB:-}"

# Marlin, built in the background while wavefuse runs.
M=/tmp/marlin
mkdir -p $M
cp carry/marlin/marlin/marlin_cuda_kernel.cu $M/
sed -i -e '/createpolicy\.fractional\.L2::evict_first/d' \
    -e 's/cp\.async\.cg\.shared\.global\.L2::cache_hint \[%0\], \[%1\], %2, p;/cp.async.cg.shared.global [%0], [%1], %2;/' \
    $M/marlin_cuda_kernel.cu
diff carry/marlin/marlin/marlin_cuda_kernel.cu $M/marlin_cuda_kernel.cu > "$OUT/marlin-patch.diff"
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
tail -40 "$OUT/marlin.txt"
wavefuse_round 2

# The tuned store, re-run on the current kernels (the committed store's kernels and shapes).
tune() { # name, limit, then tune arguments
    local name=$1 limit=$2; shift 2
    if [ "$limit" -lt 40 ]; then echo "$name: skipped ($(el) s)" | tee -a "$OUT/exits.txt"; return; fi
    timeout "$limit" $W tune "$@" --budget 200 --min-occupancy 4 --deadline $((limit - 25)) --no-cache-store \
        --store "$OUT/tuned.toml" --json "$OUT/$name.json" --md "$OUT/$name.md" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $? ($(el) s)" | tee -a "$OUT/exits.txt"
    grep -E "winner|no winner|enumerated" "$OUT/$name.txt" | head -8
}
L=$(left); tune tune-gemv_int4 $(( L / 3 < 120 ? L / 3 : 120 )) gemv_int4 --shapes qwen27b-tp1,qwen27b-tp4
L=$(left); tune tune-fused $(( L / 2 < 150 ? L / 2 : 150 )) gemv_int4_dual_silu gemv_int4_allreduce_rmsnorm --shapes qwen27b-tp4
K="gemv_int4 gemv_int4_dual_silu gemv_int4_allreduce_rmsnorm"
for r in 1 2; do
    [ "$(left)" -gt 30 ] || break
    ab def-r$r $K --shapes qwen27b-tp1,qwen27b-tp4 --schedule default
    [ "$(left)" -gt 30 ] || break
    ab tuned-r$r $K --shapes qwen27b-tp1,qwen27b-tp4 --schedule tuned --tuned-store "$OUT/tuned.toml"
done
echo "total $(el) s"
python3 $D/table.py "$OUT" > "$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
cp "$OUT/tuned.toml" "$FINAL/" 2>/dev/null
cp "$OUT/summary.md" "$FINAL/"
tar czf "$FINAL/results.tgz" -C "$OUT" --exclude=log.txt .
cp "$OUT/log.txt" "$FINAL/"
