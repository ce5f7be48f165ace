#!/usr/bin/env python3
"""The same commands through `--runtime cuda` and `--runtime hip` (the test double): verdicts side
by side, and the times' ratio (hip / cuda). Usage: compare.py DIR (the run's output folder)."""
import json
import os
import sys

d = sys.argv[1]
round2 = "--round2" in sys.argv[2:]


def load(name):
    p = os.path.join(d, name)
    try:
        with open(p) as f:
            return json.load(f)
    except Exception as e:  # a missing file is a finding, printed
        print(f"MISSING {name}: {e}")
        return None


def med(v):
    t = (v or {}).get("timing") or {}
    reps = t.get("repeats") or []
    return min((r["median_us"] for r in reps), default=None)


diffs = 0


def ab(name_cuda, name_hip, label):
    global diffs
    a, b = load(name_cuda), load(name_hip)
    if not a or not b:
        diffs += 1
        return
    print(f"== ab {label}: cuda '{a.get('cuda_version')}' vs hip '{b.get('cuda_version')}'")
    rows_b = {(r["kernel"], r["shape"]): r for r in b["rows"]}
    for r in a["rows"]:
        key = (r["kernel"], r["shape"])
        s = rows_b.get(key)
        if s is None:
            print(f"  {key}: absent through hip"); diffs += 1; continue
        # The verdict's class (correct / wrong / not run), not its speed wording: which of two
        # versions within 1 % is "faster" is run-to-run noise, reported by the ratio below.
        cls = lambda row: row["verdict"].split(";")[0]
        va = (cls(r), r["generated"]["check"]["pass"], (r.get("manual") or {}).get("check", {}).get("pass"))
        vb = (cls(s), s["generated"]["check"]["pass"], (s.get("manual") or {}).get("check", {}).get("pass"))
        ga, gb = med(r["generated"]), med(s["generated"])
        ratio = f"{gb / ga:.3f}" if ga and gb else "-"
        same = "same" if va == vb else "DIFFERENT"
        diffs += va != vb
        print(f"  {key[0]:<34} {key[1]:<14} {same:<9} cuda {va} hip {vb}  generated {ga and round(ga, 2)} vs {gb and round(gb, 2)} us (hip/cuda {ratio})")


def mgpu(name_cuda, name_hip):
    global diffs
    a, b = load(name_cuda), load(name_hip)
    if not (a and b):
        diffs += 1
        return
    print(f"== mgpu-bench --same-device ({name_cuda} / {name_hip})")
    rb = {(r["case"], r["tp"]): r for r in b["rows"]}
    for r in a["rows"]:
        s = rb.get((r["case"], r["tp"]))
        if s is None:
            print(f"  {r['case']} TP {r['tp']}: absent through hip"); diffs += 1; continue
        ok = lambda x: x["error"] is None and x["rel_l2_worst"] is not None and x["rel_l2_worst"] < 1e-2
        same = ok(r) == ok(s)
        diffs += not same
        pa, pb = r["per_call_us"]["p50"], s["per_call_us"]["p50"]
        print(f"  {r['case']:<50} TP {r['tp']} {'same' if same else 'DIFFERENT':<9} p50 {pa:.2f} vs {pb:.2f} us (hip/cuda {pb / pa if pa else float('nan'):.3f}); errors {r['error']!r} / {s['error']!r}")


if round2:
    for i in (1, 2):
        ab(f"ab-graphs-r{i}-cuda.json", f"ab-graphs-r{i}-hip.json", f"graphs round {i}")
        mgpu(f"mgpu-same-r{i}-cuda.json", f"mgpu-same-r{i}-hip.json")
    print(f"differences: {diffs}")
    sys.exit(1 if diffs else 0)

for i in (1, 2):
    ab(f"ab-events-r{i}-cuda.json", f"ab-events-r{i}-hip.json", f"events round {i}")
ab("ab-graphs-cuda.json", "ab-graphs-hip.json", "graphs")

mgpu("mgpu-same-cuda.json", "mgpu-same-hip.json")

a, b = load("suite-quick-cuda.json"), load("suite-quick-hip.json")
if a and b:
    print(f"== gpu-suite --quick: cuda {a['summary']} | hip {b['summary']}")
    key = lambda c: (c["kernel"], c["tp"], c["shape"], c["batch"])
    sb = {key(c): c for c in b["cases"]}
    n = 0
    for c in a["cases"]:
        s = sb.get(key(c))
        if s is None or s["status"] != c["status"]:
            diffs += 1
            print(f"  DIFFERENT {key(c)}: cuda {c['status']} hip {s and s['status']} {s and s['detail'][:300]}")
        else:
            n += 1
    print(f"  {n} of {len(a['cases'])} cases with the same status")
else:
    diffs += 1

a, b = load("tune-cuda.json"), load("tune-hip.json")
if a and b:
    print("== tune gemv_int4 qwen27b-tp1 --quick --budget 8")
    for ca, cb in zip(a["cases"], b["cases"]):
        cor = lambda c: [x.get("correct") for x in c["candidates"]]
        same = cor(ca) == cor(cb)
        diffs += not same
        print(f"  {ca['kernel']} {ca['shape']}: candidates' correctness {'same' if same else 'DIFFERENT'} ({cor(ca)} / {cor(cb)}); winner {ca.get('winner')} / {cb.get('winner')}")
else:
    diffs += 1

print(f"differences: {diffs}")
sys.exit(1 if diffs else 0)
