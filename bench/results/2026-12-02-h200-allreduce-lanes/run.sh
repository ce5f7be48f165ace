#!/usr/bin/env bash
# One device call (H200): the allreduce-only kernels' lane layout on sm_90 — the default (2
# features per lane, 512 per workgroup: carry/wavefuse) vs 4 features per lane (8-byte accesses,
# 1024 per workgroup, as the hand-written references: carry/wavefuse-exp, the experimental
# default), `ab allreduce_residual allreduce_residual_rmsnorm --timing graphs` at TP 1 and 4,
# batch 1 and 8, alternating twice. Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
for r in 1 2; do
    for bin in wavefuse wavefuse-exp; do
        timeout 120 carry/$bin ab allreduce_residual allreduce_residual_rmsnorm --shapes qwen27b-tp1,qwen27b-tp4,qwen27b-tp1-b8,qwen27b-tp4-b8 --timing graphs --json "$OUT/r$r-$bin.json" > "$OUT/r$r-$bin.txt" 2>&1
        echo "r$r $bin: exit $?" >> "$OUT/exits.txt"
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" <<'PY'
import json, os, sys
d = sys.argv[1]
t = {}
for f in sorted(os.listdir(d)):
    if f.endswith(".json"):
        r, b = f[:-5].split("-", 1)
        for row in json.load(open(os.path.join(d, f)))["rows"]:
            g = row["generated"]; m = row.get("manual") or {}
            us = lambda v: min(x["median_us"] for x in v["timing"]["repeats"]) if v.get("timing") else float("nan")
            t.setdefault((row["kernel"], row["shape"]), {}).setdefault(b, []).append((us(g), us(m), g["check"]["pass"]))
print(f"{'kernel':<28} {'shape':<16} {'default us':>16} {'exp us':>16} {'hand us':>8}  default/exp")
for (k, s), v in sorted(t.items()):
    a = [x[0] for x in v.get("wavefuse", [])]; e = [x[0] for x in v.get("wavefuse-exp", [])]
    h = min(x[1] for x in v.get("wavefuse", []) + v.get("wavefuse-exp", []))
    ok = all(x[2] for x in v.get("wavefuse", []) + v.get("wavefuse-exp", []))
    print(f"{k:<28} {s:<16} {str([round(x,2) for x in a]):>16} {str([round(x,2) for x in e]):>16} {h:>8.2f}  {min(a)/min(e):.3f} {'correct' if ok else 'CHECK FAILED'}")
PY
