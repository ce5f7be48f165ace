#!/usr/bin/env bash
# One device call (H200): issue 18's showcase (a) — RMSNorm + INT4 gate/up + silu·mul in one
# launch (norm_gate_up_b*.wfir, the default schedule: recomputed prologue at batch 1,
# materialised at batch 8) vs the two-kernel chain (rmsnorm_b*.wfir, then gate_up_b*.wfir reading
# its output), TP 1, 5120 → 2 × 17408, batch 1 and 8: `mgpu-bench --same-device` (CUDA graphs of
# 100 calls, the chain's last output checked against the f64 reference of the whole chain),
# alternating twice. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-02-h200-showcase-a
for r in 1 2; do
    for b in 1 8; do
        timeout 120 $W mgpu-bench --same-device --kernel-file $D/norm_gate_up_b$b.wfir --json "$OUT/r$r-fused-b$b.json" > "$OUT/r$r-fused-b$b.txt" 2>&1
        echo "r$r fused b$b: exit $?" >> "$OUT/exits.txt"
        timeout 120 $W mgpu-bench --same-device --kernel-file $D/rmsnorm_b$b.wfir --kernel-file $D/gate_up_b$b.wfir --json "$OUT/r$r-chain-b$b.json" > "$OUT/r$r-chain-b$b.txt" 2>&1
        echo "r$r chain b$b: exit $?" >> "$OUT/exits.txt"
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if f.endswith(".json"):
        j = json.load(open(os.path.join(d, f)))
        for r in j["rows"]:
            print(f"{f[:-5]:<16} p50 {r['per_call_us']['p50']:.2f} us  rel L2 {r['rel_l2_worst']}  error {r['error']}")
PY
