#!/usr/bin/env bash
# One device call (H200): the INT4/FP16 GEMVs of the set at Qwen 3.5 27B's TP 4 and TP 1 shapes
# through `wavefuse ab` — a kernel without an allreduce timed as one rank alone (the default,
# `--ranks alone`), with CUDA events and in CUDA graphs (`--timing graphs`); the same TP 4 cases
# with every rank on the GPU at once (`--ranks all`); batch 8; one rank of the row-parallel
# GEMVs (down_rank.wfir, o_proj_rank.wfir: no allreduce); PyTorch's INT4 and FP16 kernels at
# the same per-rank shapes (bench/torch/int4_baselines.py). Writes $OUT/results.tgz and
# $OUT/summary.txt.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-rank-alone-graphs
K="gemv_int4 gemv_int4_dual_silu gemv_int4_qkv gemv_f16 gemv_int4_allreduce_rmsnorm"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.csv"
ab() { # $1 = name, then flags
    local name=$1; shift
    timeout 170 $W ab "$@" --json "$OUT/$name.json" --md "$OUT/$name.md" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
ab ab-events $K --shapes qwen27b-tp4,qwen27b-tp1
ab ab-graphs $K --shapes qwen27b-tp4,qwen27b-tp1 --timing graphs
ab ab-all-graphs $K --shapes qwen27b-tp4 --timing graphs --ranks all
ab ab-b8-graphs gemv_int4 gemv_int4_dual_silu --shapes qwen27b-tp4-b8,qwen27b-tp1-b8 --timing graphs
for f in down_rank o_proj_rank; do
    ab ab-$f-events --kernel-file $R/$f.wfir
    ab ab-$f-graphs --kernel-file $R/$f.wfir --timing graphs
done
timeout 150 python3 bench/torch/int4_baselines.py "$OUT/torch.json" > "$OUT/torch.txt" 2>&1
echo "torch: exit $?" >> "$OUT/exits.txt"
ab ab-graphs-2 $K --shapes qwen27b-tp4,qwen27b-tp1 --timing graphs
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
for f in ab-events ab-graphs ab-all-graphs ab-b8-graphs ab-down_rank-events ab-down_rank-graphs ab-o_proj_rank-events ab-o_proj_rank-graphs ab-graphs-2; do
    echo "== $f"; grep -E "^[a-z_0-9]+@|error" "$OUT/$f.txt" | grep -v "sm90  \|gfx906" | head -40
done
cat "$OUT/torch.md" 2>/dev/null || tail -20 "$OUT/torch.txt"
