#!/usr/bin/env python3
"""Puts `wavefuse mgpu-bench` beside NCCL (bench/torch/nccl_allreduce.py) from the same machine and
checks issue 9's targets: the generated allreduce <= 5 us per call at 10 KB, and the fused
`gemv_int4_allreduce_rmsnorm` >= 1.5x faster than the NCCL chain (GEMV + NCCL allreduce + residual
+ RMSNorm). All numbers are CUDA-graph p50 per call, max over ranks.

    python3 summarize.py --wavefuse mgpu-bench.json --nccl nccl-tp2.json nccl-tp4.json > summary.md
"""

import argparse
import json


def p50(d, key="graph_us"):
    v = d.get(key) if key else d
    return v.get("p50") if isinstance(v, dict) else None


def fmt(v):
    return "–" if v is None else f"{v:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wavefuse", required=True)
    ap.add_argument("--nccl", nargs="*", default=[])
    a = ap.parse_args()
    wf = json.load(open(a.wavefuse))
    nccl = {}
    for path in a.nccl:
        try:
            d = json.load(open(path))
            nccl[d["world_size"]] = d
        except (OSError, ValueError, KeyError) as e:
            print(f"note: {path}: {e}\n")

    def wf_row(tp, case):
        for r in wf["rows"]:
            if r["tp"] == tp and r["case"] == case and not r.get("error"):
                return r["per_call_us"]["p50"]
        return None

    def nc_row(tp, case, n=None):
        for r in nccl.get(tp, {}).get("rows", []):
            if r["case"] == case and (n is None or r.get("n") == n) and not r.get("error"):
                return r
        return None

    if isinstance(wf.get("device"), dict):  # wavefuse-mgpu-bench/2: the one provenance header
        devices = f"{wf['device']['count']} × {wf['device']['name']}"
    else:  # wavefuse-mgpu-bench/1
        devices = wf["devices"]
    print(f"## wavefuse vs NCCL, one rank per GPU ({devices}, commit {wf['commit']}, {wf['date']})\n")
    for tp, d in sorted(nccl.items()):
        runtime = f"HIP {d['hip']}, RCCL" if d.get("hip") else f"CUDA {d['cuda']}, NCCL"  # ROCm: RCCL
        print(f"- NCCL side TP {tp}: torch {d['torch']}, {runtime} {d['nccl']}, {d['date']}")
    print("\nCUDA-graph p50 per call (µs), max over ranks.\n")
    print("| tp | what | wavefuse | NCCL (graph) | NCCL (eager) | NCCL / wavefuse | target |")
    print("|---:|---|---:|---:|---:|---:|---|")
    tps = sorted({r["tp"] for r in wf["rows"]})
    for tp in tps:
        lines = [
            ("allreduce 10 KB (wavefuse: + residual)", "allreduce_residual n=5120", "allreduce", 5120, "wavefuse ≤ 5 µs"),
            ("allreduce 32 KB (wavefuse: + residual)", "allreduce_residual n=16384", "allreduce", 16384, ""),
            ("allreduce + residual + RMSNorm, 5120", "allreduce_residual_rmsnorm n=5120", "allreduce_residual_rmsnorm", None, ""),
            ("GEMV + allreduce + residual + RMSNorm: wavefuse fused vs NCCL chain",
             "gemv_int4_allreduce_rmsnorm (fused)", "gemv_allreduce_residual_rmsnorm", None, "≥ 1.5×"),
            ("GEMV + allreduce + residual + RMSNorm: wavefuse unfused chain vs NCCL chain",
             "gemv_int4 + allreduce_residual_rmsnorm (unfused)", "gemv_allreduce_residual_rmsnorm", None, ""),
        ]
        for what, wcase, ncase, n, target in lines:
            w = wf_row(tp, wcase)
            r = nc_row(tp, ncase, n)
            g = p50(r) if r else None
            e = p50(r, "eager_us") if r else None
            ratio = g / w if (g and w) else None
            met = ""
            if target.startswith("wavefuse") and w is not None:
                met = "met" if w <= 5.0 else "NOT met"
            elif target.startswith("≥") and ratio is not None:
                met = "met" if ratio >= 1.5 else "NOT met"
            note = f"{target} {met}".strip()
            if r and r.get("gemv"):
                note += f" (NCCL chain GEMV: {r['gemv']})"
            print(f"| {tp} | {what} | {fmt(w)} | {fmt(g)} | {fmt(e)} | {fmt(ratio)}{'×' if ratio else ''} | {note} |")


if __name__ == "__main__":
    main()
