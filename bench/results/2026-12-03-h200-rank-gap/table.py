#!/usr/bin/env python3
"""This folder's table from x/*-rep{1,2}.jsonl (gap_bench's lines; first `mkdir x && git show 10541be:bench/results/2026-12-03-h200-rank-gap/results.tgz | tar xz -C x`):
per variant and shape, p50 µs of pass 1 / pass 2 (the second in reversed order), and pass 1's p50 over
the linear read (8 x 256 lanes per SM) of the same process; registers / WGs per SM; the check."""
import json, os, re
here = os.path.dirname(os.path.abspath(__file__))
SH = [("k4352", "4352 → 5120"), ("k1536", "1536 → 5120"), ("tp4b1", "5120 → 4352 (control)")]
ROWS = ["full", "full_again", "noepi", "loadsonly", "noglobal", "noload", "nosz", "nodecode", "nomma", "noloop", "empty",
        "xglobal", "pf1", "pf1early", "rot", "rotearly"]
def load(t, r):
    p = os.path.join(here, "x", f"{t}-rep{r}.jsonl")
    return [json.loads(re.sub(r":(-?nan|-?inf)\b", ":null", l)) for l in open(p) if l.strip()]
D = {t: {r: load(t, r) for r in (1, 2)} for t, _ in SH}
lin = {t: {r: next(x["p50"] for x in D[t][r] if x["kind"] == "linear" and x["bps"] == 8) for r in (1, 2)} for t, _ in SH}
print("| variant | " + " | ".join(n for _, n in SH) + " |")
print("|---" * (len(SH) + 1) + "|")
print("| linear 16-byte read of the weight bytes | " + " | ".join(f"{lin[t][1]:.2f} / {lin[t][2]:.2f}" for t, _ in SH) + " |")
for v in ROWS:
    cells = []
    for t, _ in SH:
        a = next((x for x in D[t][1] if x["kind"] == "kernel" and x["label"] == v), None)
        b = next((x for x in D[t][2] if x["kind"] == "kernel" and x["label"] == v), None)
        if not a: cells.append(""); continue
        ck = {"pass": "✓", "fail": "✗", "diag": "diag"}[a["check"]]
        cells.append(f"**{a['p50']:.2f}** / {b['p50']:.2f} ({a['p50'] / lin[t][1]:.2f}×; {a['regs']} r / {a['wg_per_sm']} WG; {ck})")
    print(f"| {v} | " + " | ".join(cells) + " |")
