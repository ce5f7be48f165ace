#!/usr/bin/env bash
# One device call (H200), issue 18 (a) and (b): the GEMV prologue's 1/rms computed once per
# workgroup in front of a looping stage (not once per tile part) and with 16-byte loads, and the
# sm_90 persistent grid at 6 workgroups per SM, against the binary of 357b08519558 (W_OLD: its
# sources of these kernels differ only there; both binaries' emitted sources of the TP 1 block and
# of (a) at batch 1 go into results.tgz), in CUDA graphs (`mgpu-bench --same-device`, 10 samples of 50
# calls, weights rotating over >= 4 x L2), alternating twice:
#   (b) the one-launch FFN block at TP 1 and TP 4 (ranks on one GPU), new / old / new on the old
#       grid (TP 1: max_grid=640 without the residency request), and the two-kernel chain;
#   (a) RMSNorm + INT4 gate/up + silu·mul in one launch, new / old, and the RMSNorm -> gate/up
#       chain, TP 1, batch 1 and 8.
# Usage, repository root: bash bench/results/2026-12-03-h200-ffn-hoist/run.sh
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
W_OLD=${W_OLD:-carry/wavefuse-357b085}
F=bench/results/2026-12-01-h200-ffn-one-launch
A=bench/results/2026-12-02-h200-showcase-a
T0=$(date +%s)
# name: binary, schedule override, kernel files
declare -A BIN=([block-old-tp1]=$W_OLD [block-old-tp4]=$W_OLD [a-old-b1]=$W_OLD [a-old-b8]=$W_OLD)
declare -A OV=([block-g640-tp1]="max_grid=640,min_resident_per_cu=0")
declare -A FILES=(
  [block-new-tp1]="$F/ffn_block_tp1.wfir"
  [block-old-tp1]="$F/ffn_block_tp1.wfir"
  [block-g640-tp1]="$F/ffn_block_tp1.wfir"
  [chain-tp1]="$F/chain1_gate_up_silu_tp1.wfir $F/chain2_down_allreduce_norm_tp1.wfir"
  [block-new-tp4]="$F/ffn_block.wfir"
  [block-old-tp4]="$F/ffn_block.wfir"
  [chain-tp4]="$F/chain1_gate_up_silu.wfir $F/chain2_down_allreduce_norm.wfir"
  [a-new-b1]="$A/norm_gate_up_b1.wfir"
  [a-old-b1]="$A/norm_gate_up_b1.wfir"
  [a-chain-b1]="$A/rmsnorm_b1.wfir $A/gate_up_b1.wfir"
  [a-new-b8]="$A/norm_gate_up_b8.wfir"
  [a-old-b8]="$A/norm_gate_up_b8.wfir"
  [a-chain-b8]="$A/rmsnorm_b8.wfir $A/gate_up_b8.wfir"
)
ORDER="block-new-tp1 block-old-tp1 block-g640-tp1 chain-tp1 block-new-tp4 block-old-tp4 chain-tp4 a-new-b1 a-old-b1 a-chain-b1 a-new-b8 a-old-b8 a-chain-b8"
for round in 1 2; do
  for n in $ORDER; do
    args=(); for f in ${FILES[$n]}; do args+=(--kernel-file "$f"); done
    WAVEFUSE_SCHEDULE_SM90=${OV[$n]:-} timeout 90 ${BIN[$n]:-$W} mgpu-bench --same-device --samples 10 --calls 50 \
        "${args[@]}" --json "$OUT/$n-$round.json" --md "$OUT/$n-$round.md" > "$OUT/$n-$round.txt" 2>&1
    echo "$n-$round: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
  done
done
# The GPU suite (f64 oracle, 10,000 back-to-back launches) on the multi-stage kernels, and
# compute-sanitizer on the TP 1 gate/up + down kernel and the TP 1 block (their first stages loop
# on the persistent grid; the block's hoisted 1/rms and the residency request are what changed).
S=bench/results/2026-12-01-h200-stages-suite
timeout 240 $W gpu-suite --deadline 180 --stress-launches 10000 \
    --kernel-file $S/gate_up_down.wfir --kernel-file $S/ffn_block_tp1.wfir \
    --kernel-file $S/ffn_block.wfir --kernel-file $S/decoder_layer.wfir \
    --out "$OUT/suite.json" > "$OUT/suite.txt" 2>&1
echo "gpu-suite: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for k in gate_up_down ffn_block_tp1; do for tool in memcheck racecheck synccheck; do
    [ $(( $(date +%s) - T0 )) -gt 480 ] && { echo "sanitizer-$k-$tool: skipped (time)" >> "$OUT/exits.txt"; continue; }
    timeout 60 "$CS" --tool $tool --error-exitcode 86 --print-limit 20 \
        $W run --kernel-file $S/$k.wfir --device gpu > "$OUT/sanitizer-$k-$tool.log" 2>&1
    echo "sanitizer-$k-$tool: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
done; done
# The emitted sources the two binaries time (the diff is the change under test).
for b in new old; do
  bin=$W; [ $b = old ] && bin=$W_OLD
  $bin emit --kernel-file $F/ffn_block_tp1.wfir --target sm90 > "$OUT/ffn_block_tp1-$b.cu" 2>&1
  $bin emit --kernel-file $A/norm_gate_up_b1.wfir --target sm90 > "$OUT/norm_gate_up_b1-$b.cu" 2>&1
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/gpu.csv" "$OUT/exits.txt"
grep -E "^\| |cases:" "$OUT/suite.txt" | tail -8
grep -h "ERROR SUMMARY" "$OUT"/sanitizer-*.log
python3 - "$OUT" $ORDER <<'PY'
import json, os, sys
d, order = sys.argv[1], sys.argv[2:]
for n in order:
    for r in (1, 2):
        f = os.path.join(d, f"{n}-{r}.json")
        try:
            j = json.load(open(f))
        except Exception as e:
            print(f"{n}-{r}: no report ({e})"); continue
        for row in j["rows"]:
            p = row["per_call_us"]
            print(f"{n}-{r:<3} p50 {p['p50']:.2f} us (p10 {p.get('p10', float('nan')):.2f}, p90 {p.get('p90', float('nan')):.2f})  rel L2 {row['rel_l2_worst']}  error {row['error']}")
PY
