#!/usr/bin/env python3
"""Issue 40's table from run.sh's results folder: wavefuse `gemv_int4` (ab JSON, two rounds) vs
Marlin, torch INT4 (tinygemm) and cuBLAS FP16 (marlin_bench JSON, `others.json`) per K -> N and
batch, with each kernel's time against its own batch-1 time. Usage: python3 table.py RESULTS_DIR
(prints Markdown); RESULTS_DIR is `results.tgz` unpacked. The card named is the one in the ab
JSON's provenance (`device.name`), else marlin_bench's."""

import glob
import json
import os
import sys

ORDER = [(5120, 17408), (17408, 5120), (5120, 4352), (4352, 5120), (1536, 5120)]
OTHERS = ("marlin", "torch_int4", "cublas_fp16")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(v, spec=".2f"):
    return "–" if v is None else format(v, spec)


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def main(res):
    wf, card = {}, None
    for path in sorted(glob.glob(os.path.join(res, "wf-*-r*.json"))):
        d = load(path) or {}
        card = card or (d.get("device") or {}).get("name")
        for r in d.get("rows", []):
            if r.get("kernel") != "gemv_int4":
                continue
            k, n = (int(x) for x in r["dims"].split("→"))
            g = r.get("generated") or {}
            t = g.get("timing")
            us = mean([x["median_us"] for x in t["repeats"]]) if t else None
            chk = g.get("check") or {}
            wf.setdefault((k, n, r["batch"]), []).append((us, bool(chk.get("pass")), chk.get("rel_l2")))
    mb = load(os.path.join(res, "others.json")) or {}
    other = {(r["k"], r["n"], r["batch"], r["kernel"]): r for r in mb.get("rows", [])}
    card = card or (mb.get("device") or {}).get("name") or "(card not recorded)"
    print("# Issue 40: `gemv_int4` at batch 1–64 vs Marlin, tinygemm and cuBLAS FP16\n")
    print(f"Measured on the {card}; torch {mb.get('torch_version', '?')}; copy bandwidth "
          f"{fmt((mb.get('copy') or {}).get('gbps'), '.0f')} GB/s; CUDA graphs, weights rotating over >= 4 x L2; "
          "µs per call. wavefuse: `ab --timing graphs --iters 400`, the mean of two rounds (before and after "
          "the others), each the mean of its repeats; the others: two repeats each, alternating. "
          "`÷ b1`: the time over the same kernel's batch-1 time.\n")
    print("| K → N | batch | wavefuse µs (r1, r2) | ÷ b1 | Marlin µs | ÷ b1 | tinygemm µs | cuBLAS FP16 µs "
          "| Marlin / wavefuse | checks (wavefuse rel L2; Marlin; tinygemm; cuBLAS) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    keys = sorted(set(wf) | {k[:3] for k in other},
                  key=lambda x: (ORDER.index(x[:2]) if x[:2] in ORDER else 9, x))
    for key in keys:
        rounds = wf.get(key, [])
        w = mean([r[0] for r in rounds])
        w1 = mean([r[0] for r in wf.get(key[:2] + (1,), [])])
        o = {name: other.get(key + (name,), {}) for name in OTHERS}
        om = {name: r.get("median_us") for name, r in o.items()}
        m1 = other.get(key[:2] + (1, "marlin"), {}).get("median_us")
        wchk = ", ".join(f"{fmt(r[2], '.1e')}{'' if r[1] else ' FAIL'}" for r in rounds)
        ochk = "; ".join(fmt((r.get("check") or {}).get("rel_l2"), ".1e") for r in o.values())
        print(f"| {key[0]} → {key[1]} | {key[2]} | {fmt(w)} ({', '.join(fmt(r[0]) for r in rounds)}) | "
              f"{fmt(w / w1 if w and w1 else None)} | {fmt(om['marlin'])} | "
              f"{fmt(om['marlin'] / m1 if om['marlin'] and m1 else None)} | {fmt(om['torch_int4'])} | "
              f"{fmt(om['cublas_fp16'])} | {fmt(om['marlin'] / w if om['marlin'] and w else None)}× | "
              f"{wchk}; {ochk} |")
    if mb.get("errors"):
        print("\nmarlin_bench errors: " + "; ".join(e.splitlines()[0][:200] for e in mb["errors"]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
