#!/usr/bin/env bash
# One device call (H200): the row-spread elementwise stages vs the HEAD before
# (carry/wavefuse-a = ee95c33; the candidate carry/wavefuse-$1: run 1 `b`, the split-K partial
# store and finish row-spread; run 2 `c`, the finish only), `ab --timing graphs` of every GEMV
# kernel of the set at batch 2/4/8, TP 1 and one TP 4 rank alone (the fused kernel: all ranks on
# the GPU), alternating a, candidate, a, candidate. Usage: bash run.sh b|c
# Writes $OUT/results.tgz and $OUT/summary.txt.
source bench/device-prelude.sh
V=${1:-c}
S=qwen27b-tp1-b2,qwen27b-tp1-b4,qwen27b-tp1-b8,qwen27b-tp4-b2,qwen27b-tp4-b4,qwen27b-tp4-b8
K="gemv_int4 gemv_int4_qkv gemv_int4_dual_silu gemv_int4_allreduce_rmsnorm gemv_f16"
for r in 1 2; do
    for b in a $V; do
        WAVEFUSE_COMMIT=$(cat carry/COMMIT-$b) timeout 250 carry/wavefuse-$b ab $K --shapes $S --timing graphs \
            --json "$OUT/ab-$b-r$r.json" --md "$OUT/ab-$b-r$r.md" > "$OUT/ab-$b-r$r.txt" 2>&1
        echo "ab $b r$r: exit $?" >> "$OUT/exits.txt"
    done
done
tar czf "$FINAL/results.tgz" -C "$OUT" .
exec > >(tee "$FINAL/summary.txt")
cat "$OUT/exits.txt"
python3 - "$OUT" "$V" <<'PY'
import json, sys
out = sys.argv[1]
rows = {}
for b in ("a", sys.argv[2]):
    for r in (1, 2):
        for x in json.load(open(f"{out}/ab-{b}-r{r}.json"))["rows"]:
            t = x["generated"].get("timing")
            ok = x["generated"]["check"]["pass"]
            med = t["repeats"][0]["median_us"] if t else float("nan")
            rows.setdefault((x["kernel"], x["shape"]), {}).setdefault(b, []).append((med, ok))
print(f"| kernel | shape | a r1, r2 | {sys.argv[2]} r1, r2 | {sys.argv[2]} / a |")
for (k, s), v in rows.items():
    a, b = v.get("a", []), v.get(sys.argv[2], [])
    f = lambda l: ", ".join(f"{m:.2f}{'' if ok else ' (FAILED)'}" for m, ok in l)
    ratio = sum(m for m, _ in b) / sum(m for m, _ in a) if a and b else float("nan")
    print(f"| `{k}` | {s} | {f(a)} | {f(b)} | {ratio:.2f}× |")
PY
