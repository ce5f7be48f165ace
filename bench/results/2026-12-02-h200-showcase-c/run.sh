#!/usr/bin/env bash
# One device call (H200): issue 18's showcase (c) — the attention output path of Qwen 3.5 27B at
# TP 4 (O projection 12288 → 5120, 3072 per rank, INT4 GPTQ; allreduce; residual; RMSNorm) as
# one kernel (o_proj_fused.wfir) vs the two-kernel chain (o_proj.wfir → partial →
# allreduce_residual_rmsnorm.wfir), all four ranks on the one GPU, `mgpu-bench --same-device`
# (CUDA graphs of 100 calls; the chain's last outputs checked against the f64 reference of the
# whole chain), alternating twice. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-02-h200-showcase-c
for r in 1 2; do
    timeout 120 $W mgpu-bench --same-device --kernel-file $D/o_proj_fused.wfir --json "$OUT/r$r-fused.json" > "$OUT/r$r-fused.txt" 2>&1
    echo "r$r fused: exit $?" >> "$OUT/exits.txt"
    timeout 120 $W mgpu-bench --same-device --kernel-file $D/o_proj.wfir --kernel-file $D/allreduce_residual_rmsnorm.wfir --json "$OUT/r$r-chain.json" > "$OUT/r$r-chain.txt" 2>&1
    echo "r$r chain: exit $?" >> "$OUT/exits.txt"
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if f.endswith(".json"):
        for r in json.load(open(os.path.join(d, f)))["rows"]:
            print(f"{f[:-5]:<10} TP {r['tp']} p50 {r['per_call_us']['p50']:.2f} us  rel L2 {r['rel_l2_worst']}  error {r['error']}  ({r['timed_ranks']})")
PY
