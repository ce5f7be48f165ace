#!/usr/bin/env bash
# One device call (H200), issue 18 (a): what bounds RMSNorm + INT4 gate/up + silu·mul in one
# launch against the RMSNorm -> gate/up chain — the one launch, the chain, and each chain kernel
# alone (the gate/up kernel alone is the one launch with its pre-norm left out), TP 1, batch 1 and
# 8, `mgpu-bench --same-device` (CUDA graphs, 10 samples of 50 calls), alternating twice.
# Usage, repository root: bash bench/results/2026-12-03-h200-showcase-a-bound/run.sh
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
A=bench/results/2026-12-02-h200-showcase-a
T0=$(date +%s)
for r in 1 2; do
  for b in 1 8; do
    for n in one chain gate_up rmsnorm; do
      case $n in
        one) files="$A/norm_gate_up_b$b.wfir" ;;
        chain) files="$A/rmsnorm_b$b.wfir $A/gate_up_b$b.wfir" ;;
        gate_up) files="$A/gate_up_b$b.wfir" ;;
        rmsnorm) files="$A/rmsnorm_b$b.wfir" ;;
      esac
      args=(); for f in $files; do args+=(--kernel-file "$f"); done
      timeout 60 $W mgpu-bench --same-device --samples 10 --calls 50 "${args[@]}" \
          --json "$OUT/$n-b$b-$r.json" --md "$OUT/$n-b$b-$r.md" > "$OUT/$n-b$b-$r.txt" 2>&1
      echo "$n-b$b-$r: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
    done
  done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/gpu.csv" "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
for b in (1, 8):
    for n in ("one", "chain", "gate_up", "rmsnorm"):
        cells = []
        for r in (1, 2):
            try:
                row = json.load(open(os.path.join(d, f"{n}-b{b}-{r}.json")))["rows"][0]
                cells.append(f"{row['per_call_us']['p50']:.2f} (rel L2 {row['rel_l2_worst']:.1e}, {row['error']})")
            except Exception as e:
                cells.append(f"no report ({e})")
        print(f"b{b} {n:<8} " + " | ".join(cells))
PY
