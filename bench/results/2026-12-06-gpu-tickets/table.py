#!/usr/bin/env python3
"""The synchronisation-state A/B table: per kernel and shape, the generated kernel's time from
each binary of the run (ab-SIDE-ROUND.json: base = host-passed epoch 10541be, devepoch = the
per-workgroup device epoch 00264bb, tickets = weighted tickets), each the mean of its rounds'
medians, and each side / base. Usage: table.py DIR."""
import glob
import json
import os
import sys

SIDES = ["base", "devepoch", "tickets"]


def ab_time(gen):
    t = (gen or {}).get("timing")
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
    print(f"Generated kernels, `ab --timing graphs`, measured on {card or 'an unrecorded device'}.")
    print("µs per call per round (median of ab's repeats), then side / base (means of rounds).\n")
    print("| kernel | shape | " + " | ".join(f"{s} µs" for s in SIDES) + " | devepoch / base | tickets / base | checks |")
    print("|---|---|" + "---|" * len(SIDES) + "---|---|---|")
    for (k, s), sides in sorted(times.items()):
        def cell(side):
            v = sides.get(side, [])
            return ", ".join("—" if t is None else f"{t:.2f}" for t, _ in v) or "—"

        def mean(side):
            v = [t for t, _ in sides.get(side, []) if t is not None]
            return sum(v) / len(v) if v else None

        b = mean("base")
        ratio = lambda side: f"{mean(side) / b:.3f}" if b and mean(side) else "—"
        oks = all(ok for v in sides.values() for _, ok in v)
        print(f"| `{k}` | {s} | " + " | ".join(cell(x) for x in SIDES)
              + f" | {ratio('devepoch')} | {ratio('tickets')} | {'pass' if oks else 'FAIL'} |")


if __name__ == "__main__":
    main(sys.argv[1])
