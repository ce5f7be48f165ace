#!/usr/bin/env python3
"""(Copy of ../2026-12-03-h200-int4-gap/ncu_table.py, reading x/ncu/: `mkdir x && git show 10541be:bench/results/2026-12-03-h200-rank-gap/results.tgz | tar xz -C x`.) One line per Nsight Compute report of this folder (x/ncu/*-raw.csv, `ncu --page raw --csv`):
duration, DRAM throughput, achieved occupancy, issue, the top warp stall reasons (cycles per issued
instruction), and an estimate of the weight bytes a SM waits on at a time (see README)."""
import csv, glob, os, re
here = os.path.dirname(os.path.abspath(__file__))
def f(d, k):
    try: return float(d[k])
    except Exception: return None
print("| report | ncu µs | DRAM % of peak | DRAM TB/s | achieved occupancy % (warps/SM) | issue active % of active cycles | warp cycles per issued inst | top stalls (cycles per issued inst) |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for p in sorted(glob.glob(os.path.join(here, "x/ncu/*-raw.csv"))):
    rows = list(csv.reader(open(p)))
    try:
        hi = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    except StopIteration:
        continue
    h, u, v = rows[hi], rows[hi + 1], rows[hi + 2]
    d = dict(zip(h, v)); units = dict(zip(h, u))
    st = {}
    for k in h:
        m = re.match(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$", k)
        if m and f(d, k) is not None: st[m.group(1)] = f(d, k)
    top = ", ".join(f"{k} {x:.2f}" for k, x in sorted(st.items(), key=lambda t: -t[1])[:5] if k != "selected")
    dur = f(d, "gpu__time_duration.sum")
    if units.get("gpu__time_duration.sum") == "ns" and dur: dur /= 1e3
    if units.get("gpu__time_duration.sum") == "msecond" and dur: dur *= 1e3
    dram_b = f(d, "dram__bytes_read.sum")
    bu = units.get("dram__bytes_read.sum", "")
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(bu, 1)
    tbs = dram_b * scale / (dur * 1e-6) / 1e12 if dram_b and dur else None
    occ = f(d, "sm__warps_active.avg.pct_of_peak_sustained_active")
    wps = f(d, "smsp__warps_active.avg.per_cycle_active")
    iss = f(d, "smsp__issue_active.avg.pct_of_peak_sustained_active") or f(d, "sm__instruction_throughput.avg.pct_of_peak_sustained_active")
    wc = f(d, "smsp__average_warp_latency_per_inst_issued.ratio")
    name = os.path.basename(p).replace("-raw.csv", "")
    run = "x"
    fmt = lambda x, s=".1f": "–" if x is None else format(x, s)
    print(f"| {run}/{name} | {fmt(dur, '.2f')} | {fmt(f(d, 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed'))} | {fmt(tbs, '.2f')} | "
          f"{fmt(occ)} ({fmt(wps * 4 if wps else None)}) | {fmt(iss)} | {fmt(wc)} | {top} |")
