#!/usr/bin/env bash
# One device call (H200): the whole FFN block in one launch per rank (ffn_block.wfir: pre-norm,
# gate/up, silu·mul, grid barrier, down GEMV, allreduce, residual, next RMSNorm — issue 18's
# showcase (b)) against today's two-kernel chain (chain1 = gemv_int4_dual_silu, chain2 =
# gemv_int4_allreduce_rmsnorm; the first's output `h` feeds the second), Qwen 3.5 27B TP 4 shapes,
# all four ranks on the one GPU. Both in CUDA graphs (mgpu-bench --same-device), side by side in
# this run, twice, alternating; both checked against the f64 reference; then ab (CUDA events).
# Writes $OUT/results.tgz and $OUT/summary.txt.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-ffn-one-launch
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.csv"
for round in 1 2; do
    $W mgpu-bench --same-device --kernel-file $R/ffn_block.wfir --samples 10 --calls 50 \
        --json "$OUT/one-launch-$round.json" --md "$OUT/one-launch-$round.md" > "$OUT/one-launch-$round.txt" 2>&1
    $W mgpu-bench --same-device --kernel-file $R/chain1_gate_up_silu.wfir \
        --kernel-file $R/chain2_down_allreduce_norm.wfir --samples 10 --calls 50 \
        --json "$OUT/chain-$round.json" --md "$OUT/chain-$round.md" > "$OUT/chain-$round.txt" 2>&1
done
$W ab --kernel-file $R/ffn_block.wfir --json "$OUT/ab-one-launch.json" > "$OUT/ab-one-launch.txt" 2>&1
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
for f in one-launch-1 chain-1 one-launch-2 chain-2; do echo "== $f"; grep -E "^\| " "$OUT/$f.md" | tail -1; done
grep -E "µs|@own|verdict|error" "$OUT/ab-one-launch.txt" | head -8
