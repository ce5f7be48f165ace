#!/usr/bin/env bash
# One device call (H200), issue 20 target 3 / issue 18 (b): the FFN block at TP 4 with the four
# ranks on one GPU — wavefuse's one launch per rank and its two-kernel chain (`mgpu-bench
# --same-device`, CUDA graphs, 10 samples of 50 calls) — and PyTorch's chain
# (bench/torch/int4_baselines.py: per rank torch INT4 gate/up + silu*mul + INT4 down, sum over
# ranks, residual, rms_norm; CUDA graph) in the same call, alternating twice.
# Usage, repository root: bash bench/results/2026-12-03-h200-ffn-vs-torch/run.sh
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
F=bench/results/2026-12-01-h200-ffn-one-launch
T0=$(date +%s)
for r in 1 2; do
    timeout 90 $W mgpu-bench --same-device --samples 10 --calls 50 --kernel-file $F/ffn_block.wfir \
        --json "$OUT/block-$r.json" --md "$OUT/block-$r.md" > "$OUT/block-$r.txt" 2>&1
    echo "block-$r: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
    timeout 90 $W mgpu-bench --same-device --samples 10 --calls 50 --kernel-file $F/chain1_gate_up_silu.wfir \
        --kernel-file $F/chain2_down_allreduce_norm.wfir --json "$OUT/chain-$r.json" --md "$OUT/chain-$r.md" > "$OUT/chain-$r.txt" 2>&1
    echo "chain-$r: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
    PYTHONUNBUFFERED=1 timeout 200 python3 bench/torch/int4_baselines.py "$OUT/torch-$r.json" > "$OUT/torch-$r.txt" 2>&1
    echo "torch-$r: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/gpu.csv" "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
for r in (1, 2):
    for n in ("block", "chain"):
        try:
            j = json.load(open(os.path.join(d, f"{n}-{r}.json")))
            for row in j["rows"]:
                p = row["per_call_us"]
                print(f"wavefuse {n}-{r}: p50 {p['p50']:.2f} us (p10 {p['p10']:.2f}, p90 {p['p90']:.2f}) rel L2 {row['rel_l2_worst']:.2e} error {row['error']}")
        except Exception as e:
            print(f"wavefuse {n}-{r}: no report ({e})")
    try:
        j = json.load(open(os.path.join(d, f"torch-{r}.json")))
        for c in j.get("chains", []) or []:
            print(f"torch-{r} {c.get('name', '?')}: {c.get('median_us')} us check {c.get('check_rel_l2')} {c.get('error', '')}")
        print(f"torch-{r} keys: {sorted(j.keys())}")
    except Exception as e:
        print(f"torch-{r}: no report ({e})")
PY
cat "$OUT/torch-1.md" 2>/dev/null | tail -5
cat "$OUT/torch-2.md" 2>/dev/null | tail -5
