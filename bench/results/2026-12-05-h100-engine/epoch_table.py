#!/usr/bin/env python3
"""The device-epoch A/B table: per kernel and shape, the generated kernel's time with the
host-passed epoch (base binary) and with the device epoch (new binary), each the mean of its
rounds' medians, and new / base. Usage: table.py DIR (the run's ab-{base,new}-{1,2}.json)."""
import glob
import json
import os
import sys


def ab_time(side):
    t = (side or {}).get("timing")
    if not t:
        return None
    meds = [r["median_us"] for r in t["repeats"]]
    return sum(meds) / len(meds)


def main(res):
    times, card = {}, None
    for path in sorted(glob.glob(os.path.join(res, "ab-*-*.json"))):
        side = os.path.basename(path).split("-")[1]
        with open(path) as f:
            d = json.load(f)
        card = card or (d.get("device") or {}).get("name")
        for r in d.get("rows", []):
            g = r.get("generated") or {}
            ok = bool(g.get("check", {}).get("pass"))
            key = (r["kernel"], r.get("shape", ""))
            times.setdefault(key, {}).setdefault(side, []).append((ab_time(g), ok))
    print(f"Generated kernels, `ab --timing graphs`, measured on {card or 'an unrecorded device'}:")
    print("base = host-passed epoch (10541be), new = device epoch; µs per call, mean of round medians.\n")
    print("| kernel | shape | base µs (r1, r2) | new µs (r1, r2) | new / base | checks |")
    print("|---|---|---|---|---|---|")
    for (k, s), sides in sorted(times.items()):
        def cell(v):
            return ", ".join("—" if t is None else f"{t:.2f}" for t, _ in v)
        b = [t for t, _ in sides.get("base", []) if t is not None]
        n = [t for t, _ in sides.get("new", []) if t is not None]
        ratio = f"{(sum(n) / len(n)) / (sum(b) / len(b)):.3f}" if b and n else "—"
        oks = all(ok for v in sides.values() for _, ok in v)
        print(f"| `{k}` | {s} | {cell(sides.get('base', []))} | {cell(sides.get('new', []))} | {ratio} | {'pass' if oks else 'FAIL'} |")


if __name__ == "__main__":
    main(sys.argv[1])
