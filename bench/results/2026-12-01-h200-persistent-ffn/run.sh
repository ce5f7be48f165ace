#!/usr/bin/env bash
# One device call (H200): the one-launch FFN block on its persistent grid (Schedule::max_grid,
# set by the co-residency fit) against the two-kernel chain, CUDA graphs, alternating twice, at
# TP 1 and at TP 4 with the four ranks on one GPU; then the GPU suite and compute-sanitizer on
# the multi-stage kernels (a stage loop is new synchronisation structure). Writes
# $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
R=bench/results/2026-12-01-h200-ffn-one-launch
S=bench/results/2026-12-01-h200-stages-suite
bench() { # name, then mgpu-bench flags
    local name=$1; shift
    timeout 120 $W mgpu-bench --same-device --samples 10 --calls 50 "$@" \
        --json "$OUT/$name.json" --md "$OUT/$name.md" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
$W emit --kernel-file $R/ffn_block_tp1.wfir --target sm90 --placement same-device > "$OUT/ffn_block_tp1.cu" 2>&1
for round in 1 2; do
    bench tp1-one-launch-$round --kernel-file $R/ffn_block_tp1.wfir
    bench tp1-chain-$round --kernel-file $R/chain1_gate_up_silu_tp1.wfir --kernel-file $R/chain2_down_allreduce_norm_tp1.wfir
    bench tp4-one-launch-$round --kernel-file $R/ffn_block.wfir
    bench tp4-chain-$round --kernel-file $R/chain1_gate_up_silu.wfir --kernel-file $R/chain2_down_allreduce_norm.wfir
done
timeout 300 $W gpu-suite --deadline ${SUITE_DEADLINE:-240} --stress-launches 10000 \
    --kernel-file $S/gate_up_down.wfir --kernel-file $S/ffn_block_tp1.wfir \
    --kernel-file $S/ffn_block.wfir --kernel-file $S/o_proj_qkv.wfir \
    --kernel-file $S/decoder_layer.wfir --out "$OUT/suite.json" > "$OUT/suite.txt" 2>&1
echo "gpu-suite: exit $?" >> "$OUT/exits.txt"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck synccheck; do
    # gate_up_down at TP 1 loops its first stage on the persistent grid.
    timeout 60 "$CS" --tool $tool --error-exitcode 86 --print-limit 20 \
        $W run --kernel-file $S/gate_up_down.wfir --device gpu > "$OUT/sanitizer-$tool.log" 2>&1
    echo "sanitizer-$tool: exit $?" >> "$OUT/exits.txt"
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"; sed -n 2,3p "$OUT/ffn_block_tp1.cu"
for f in tp1-one-launch-1 tp1-chain-1 tp1-one-launch-2 tp1-chain-2 tp4-one-launch-1 tp4-chain-1 tp4-one-launch-2 tp4-chain-2; do
    echo "== $f"; grep -E "^\| " "$OUT/$f.md" | tail -1
done
grep -E "^\| |cases:" "$OUT/suite.txt" | tail -8
grep -h "ERROR SUMMARY" "$OUT"/sanitizer-*.log
