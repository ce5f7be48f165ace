#!/usr/bin/env bash
# One device call (H200): a GEMV prologue recomputed by every workgroup (the default) vs
# materialised once behind a grid barrier (`materialise_prologue=true`), at batch 1, 2, 4, 8, for
# two prologues: RMSNorm before INT4 gate/up + silu·mul (5120 → 2 × 17408) and silu·mul before the
# INT4 down GEMV (17408 → 5120), TP 1, `ab --timing graphs`, alternating twice.
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
D=bench/results/2026-12-02-h200-prologue-batch
ab() { # name, kernel file, override
    local name=$1 file=$2 ov=$3
    WAVEFUSE_SCHEDULE_SM90=$ov timeout 120 $W ab --kernel-file "$file" --timing graphs \
        --json "$OUT/$name.json" > "$OUT/$name.txt" 2>&1
    echo "$name: exit $?" >> "$OUT/exits.txt"
}
for round in 1 2; do
    for k in norm_gate_up silu_down; do
        for b in 1 2 4 8; do
            ab r$round-$k-b$b-recompute $D/${k}_b$b.wfir ""
            ab r$round-$k-b$b-materialise $D/${k}_b$b.wfir materialise_prologue=true
        done
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
rows = {}
for f in sorted(os.listdir(d)):
    if not f.endswith(".json"):
        continue
    r, k, b, mode = f[:-5].split("-")
    try:
        row = json.load(open(os.path.join(d, f)))["rows"][0]["generated"]
        us = min(x["median_us"] for x in row["timing"]["repeats"])
        ok = row["check"]["pass"]
    except Exception as e:
        us, ok = float("nan"), f"error {e}"
    rows.setdefault((k, b), {}).setdefault(mode, []).append((us, ok))
print(f"{'kernel':<14} {'batch':<5} {'recompute us':>24} {'materialise us':>24} {'recompute/materialise':>22}")
for (k, b), m in sorted(rows.items()):
    rc = [u for u, _ in m.get("recompute", [])]
    ma = [u for u, _ in m.get("materialise", [])]
    oks = all(ok is True for _, ok in m.get("recompute", []) + m.get("materialise", []))
    ratio = min(rc) / min(ma) if rc and ma else float("nan")
    print(f"{k:<14} {b:<5} {str([round(x, 2) for x in rc]):>24} {str([round(x, 2) for x in ma]):>24} {ratio:>22.3f} {'correct' if oks else 'CHECK FAILED'}")
PY
