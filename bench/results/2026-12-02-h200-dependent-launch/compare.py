#!/usr/bin/env python3
"""Per kernel@shape and side (generated / hand-written): the median µs per call of every ab JSON
given (each file's first repeat), side by side, and each column's ratio to the first column.
Usage: compare.py A.json B.json ..."""
import json
import sys


def medians(path):
    out = {}
    for r in json.load(open(path))["rows"]:
        for side in ("generated", "manual"):
            v = r.get(side)
            t = v and v.get("timing")
            if t:
                out[(f"{r['kernel']}@{r['shape']}", side)] = t["repeats"][0]["median_us"]
    return out


files = sys.argv[1:]
cols = [medians(f) for f in files]
keys = sorted(set().union(*cols))
names = [f.split("/")[-1].removesuffix(".json") for f in files]
print("| kernel@shape | side | " + " | ".join(names) + " | " + " | ".join(f"{n}/{names[0]}" for n in names[1:]) + " |")
print("|---|---|" + "---:|" * (2 * len(names) - 1))
for k in keys:
    v = [c.get(k) for c in cols]
    cells = [f"{x:.2f}" if x else "-" for x in v]
    ratios = [f"{x / v[0]:.3f}" if x and v[0] else "-" for x in v[1:]]
    side = "generated" if k[1] == "generated" else "hand-written"
    print(f"| {k[0]} | {side} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
