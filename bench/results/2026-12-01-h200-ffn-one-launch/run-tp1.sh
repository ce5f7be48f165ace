#!/usr/bin/env bash
# The same comparison at TP 1 (one rank: no other rank's grid shares the GPU): ffn_block_tp1.wfir
# (ffn_block.wfir at hidden 5120, FFN 17408, tp=1) vs chain*_tp1.wfir (the set's two kernels at
# TP 1), CUDA graphs, alternating twice. Writes $OUT/results-tp1.tgz and $OUT/summary-tp1.txt.
set -uo pipefail
FINAL=$OUT
OUT=$(mktemp -d)
W=carry/wavefuse
export WAVEFUSE_CACHE_DIR=$PWD/carry/cache
export WAVEFUSE_COMMIT=$(cat carry/COMMIT)
R=bench/results/2026-12-01-h200-ffn-one-launch
for round in 1 2; do
    $W mgpu-bench --same-device --kernel-file $R/ffn_block_tp1.wfir --samples 10 --calls 50 \
        --json "$OUT/tp1-one-launch-$round.json" --md "$OUT/tp1-one-launch-$round.md" > "$OUT/tp1-one-launch-$round.txt" 2>&1
    $W mgpu-bench --same-device --kernel-file $R/chain1_gate_up_silu_tp1.wfir \
        --kernel-file $R/chain2_down_allreduce_norm_tp1.wfir --samples 10 --calls 50 \
        --json "$OUT/tp1-chain-$round.json" --md "$OUT/tp1-chain-$round.md" > "$OUT/tp1-chain-$round.txt" 2>&1
done
tar czf "$FINAL/results-tp1.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary-tp1.txt")
for f in tp1-one-launch-1 tp1-chain-1 tp1-one-launch-2 tp1-chain-2; do echo "== $f"; grep -E "^\| " "$OUT/$f.md" | tail -1; done
