#!/usr/bin/env bash
# One device call (H200): the one-launch FFN block with and without the L2 prefetch of the down
# GEMV's weights before the stage barrier (`prefetch_next_stage`, the same binary:
# WAVEFUSE_SCHEDULE_SM90 sets it), against the two-kernel chain, CUDA graphs, TP 1 and TP 4 with
# the four ranks on one GPU, three variants alternating twice; then compute-sanitizer memcheck
# on the TP 1 block with the prefetch. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
R=bench/results/2026-12-01-h200-ffn-one-launch
bench() { # name, then mgpu-bench flags
    local name=$1; shift
    timeout 120 $W mgpu-bench --same-device --samples 10 --calls 50 "$@" \
        --json "$OUT/$name.json" --md "$OUT/$name.md" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
PF=prefetch_next_stage=true
WAVEFUSE_SCHEDULE_SM90=$PF $W emit --kernel-file $R/ffn_block_tp1.wfir --target sm90 --placement same-device > "$OUT/ffn_block_tp1-prefetch.cu" 2>&1
for round in 1 2; do
    bench tp1-one-launch-$round --kernel-file $R/ffn_block_tp1.wfir
    WAVEFUSE_SCHEDULE_SM90=$PF bench tp1-prefetch-$round --kernel-file $R/ffn_block_tp1.wfir
    bench tp1-chain-$round --kernel-file $R/chain1_gate_up_silu_tp1.wfir --kernel-file $R/chain2_down_allreduce_norm_tp1.wfir
    bench tp4-one-launch-$round --kernel-file $R/ffn_block.wfir
    WAVEFUSE_SCHEDULE_SM90=$PF bench tp4-prefetch-$round --kernel-file $R/ffn_block.wfir
    bench tp4-chain-$round --kernel-file $R/chain1_gate_up_silu.wfir --kernel-file $R/chain2_down_allreduce_norm.wfir
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
WAVEFUSE_SCHEDULE_SM90=$PF timeout 90 "$CS" --tool memcheck --error-exitcode 86 --print-limit 20 \
    $W run --kernel-file $R/ffn_block_tp1.wfir --device gpu > "$OUT/sanitizer-memcheck.log" 2>&1
echo "sanitizer-memcheck (prefetch): exit $?" >> "$OUT/exits.txt"
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
grep -c "prefetch.global.L2" "$OUT/ffn_block_tp1-prefetch.cu"
for f in tp1-one-launch tp1-prefetch tp1-chain tp4-one-launch tp4-prefetch tp4-chain; do
    for round in 1 2; do echo "== $f-$round"; grep -E "^\| " "$OUT/$f-$round.md" | tail -1; done
done
tail -3 "$OUT/sanitizer-memcheck.log"
