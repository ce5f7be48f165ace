#!/usr/bin/env bash
# One device call (H200), issue 18 (a) at batch 8: the pre-norm materialised behind a grid barrier
# (the cost rule's choice, fitted before the pre-norm read x with 16-byte loads) vs recomputed by
# every workgroup (`materialise_prologue=false`), vs the chain, `mgpu-bench --same-device` (CUDA
# graphs, 10 samples of 50 calls), alternating twice.
# Usage, repository root: bash bench/results/2026-12-03-h200-prologue-b8/run.sh
source bench/device-prelude.sh
A=bench/results/2026-12-02-h200-showcase-a
T0=$(date +%s)
for r in 1 2; do
  for n in materialised recomputed chain; do
    case $n in
      materialised) ov="materialise_prologue=true"; files="$A/norm_gate_up_b8.wfir" ;;
      recomputed) ov="materialise_prologue=false"; files="$A/norm_gate_up_b8.wfir" ;;
      chain) ov=""; files="$A/rmsnorm_b8.wfir $A/gate_up_b8.wfir" ;;
    esac
    args=(); for f in $files; do args+=(--kernel-file "$f"); done
    WAVEFUSE_SCHEDULE_SM90=$ov timeout 60 $W mgpu-bench --same-device --samples 10 --calls 50 "${args[@]}" \
        --json "$OUT/$n-$r.json" --md "$OUT/$n-$r.md" > "$OUT/$n-$r.txt" 2>&1
    echo "$n-$r: exit $? ($(( $(date +%s) - T0 )) s)" >> "$OUT/exits.txt"
  done
done
for n in materialised recomputed; do
  ov="materialise_prologue=true"; [ $n = recomputed ] && ov="materialise_prologue=false"
  WAVEFUSE_SCHEDULE_SM90=$ov $W emit --kernel-file $A/norm_gate_up_b8.wfir --target sm90 --placement same-device > "$OUT/$n.cu" 2>&1
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/gpu.csv" "$OUT/exits.txt"
for n in materialised recomputed; do sed -n 2,3p "$OUT/$n.cu"; done
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
for n in ("materialised", "recomputed", "chain"):
    cells = []
    for r in (1, 2):
        try:
            row = json.load(open(os.path.join(d, f"{n}-{r}.json")))["rows"][0]
            cells.append(f"{row['per_call_us']['p50']:.2f} (rel L2 {row['rel_l2_worst']:.1e}, {row['error']})")
        except Exception as e:
            cells.append(f"no report ({e})")
    print(f"{n:<13} " + " | ".join(cells))
PY
