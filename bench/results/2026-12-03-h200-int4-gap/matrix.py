#!/usr/bin/env python3
"""The README's variant x shape matrix from run*/x/*-rep1.jsonl: each cell p50 µs (p10–p90), GB/s of the
bytes a call moves, and p50 over the linear read of the same bytes in the same process; a variant is taken
from the first run that has it (the rows say which), its check in the last column.
run*/x/ is not in the tree: `git checkout 10541be -- bench/results/2026-12-03-h200-int4-gap` first."""
import glob, json, os, re
here = os.path.dirname(os.path.abspath(__file__))
SH = [("tp1b1", 5120, 17408, 1), ("tp1b8", 5120, 17408, 8), ("k17408", 17408, 5120, 1), ("tp4b1", 5120, 4352, 1), ("tp4b8", 5120, 4352, 8)]
ROWS = ["full", "loadsonly", "noglobal", "noglobal_lb9", "noload", "nosz", "nodecode", "nomma", "noepi",
        "rot_lb9", "pf1", "xglobal", "xglobal_lb9", "full_epi", "full_clus", "xglobal_epi", "xglobal_clus", "xglobal_lb9_epi",
        "pf1_epi", "ks1_full (k_split=1)", "ks1_pf1 (k_split=1)", "ks1_pf1xg (k_split=1)", "ks1_noglobal (k_split=1)",
        "ks2_pf1 (k_split=2)", "pf1_lb6", "pf1_lb6_clus", "pf1xg_lb6", "pf1xg_lb6_clus", "pf1xg_lb6_epi", "pf1xg", "pf1xg_epi", "pf1xg_lb9_epi",
        "ks1_xglobal (k_split=1)", "gen x_in_lds=false", "gen x_in_lds=false + epi", "gen pipeline_depth=2",
        "gen pipeline_depth=2, lb(128,6)", "gen k_split=1,pipeline_depth=2", "gen k_unit_words=8",
        "gen k_unit_words=8,pipeline_depth=2", "gen k_unit_words=8,pipeline_depth=2, lb(128,9)",
        "gen k_split=1,k_unit_words=8,pipeline_depth=2"]
def moved(k, n, b): return k // 8 * n * 4 + k // 128 * n * 2 + k // 128 * n // 8 * 4 + 2 * b * k + 2 * b * n
data, lin = {}, {}
for run in sorted(glob.glob(os.path.join(here, "run*"))):
    for tag, k, n, b in SH:
        p = os.path.join(run, "x", f"{tag}-rep1.jsonl")
        if not os.path.exists(p): continue
        xs = [json.loads(re.sub(r":(-?nan|-?inf)\b", ":null", l)) for l in open(p) if l.strip()]
        l8 = next(x["p50"] for x in xs if x["kind"] == "linear" and x["bps"] == 8)
        lin.setdefault(tag, (l8, os.path.basename(run)))
        for x in xs:
            if x["kind"] == "kernel" and (x["label"], tag) not in data:
                data[(x["label"], tag)] = (x, l8, os.path.basename(run))
hdr = "| variant | " + " | ".join(f"{k} → {n}, b{b}" for _, k, n, b in SH) + " |"
print(hdr); print("|---" * (len(SH) + 1) + "|")
print("| linear 16-byte read of the weight bytes (the floor) | " + " | ".join(
    f"{lin[t][0]:.2f} µs ({(moved(k, n, b) - 2*b*k - 2*b*n) / lin[t][0] / 1e3:.0f} GB/s)" if t in lin else "" for t, k, n, b in SH) + " |")
for r in ROWS:
    cells, seen = [], False
    for t, k, n, b in SH:
        if (r, t) in data:
            x, l8, rn = data[(r, t)]; seen = True
            ok = {"pass": "✓", "fail": "✗ FAIL", "diag": "(y wrong by design)"}[x["check"]]
            cells.append(f"**{x['p50']:.2f}** ({x['p10']:.2f}–{x['p90']:.2f}), {moved(k, n, b) / x['p50'] / 1e3:.0f} GB/s, {x['p50'] / l8:.2f}×, {x['regs']} r / {x['wg_per_sm']} WG, {ok} [{rn}]")
        else:
            cells.append("")
    if seen: print(f"| {r} | " + " | ".join(cells) + " |")
