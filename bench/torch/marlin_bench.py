#!/usr/bin/env python3
"""Marlin and PyTorch's INT4 kernel side by side at issue 20's shapes and batches, on one NVIDIA GPU.

- Marlin (IST-DASLab/marlin; FP16 activations, symmetric INT4 weights, group 128, no zero points),
  called through ``bench/torch/marlin_shim.cu`` (a ctypes entry point compiled on the GPU machine
  against Marlin's ``marlin_cuda_kernel.cu``; Marlin's source is not in this repository) with its
  default tile for batch <= 16 (thread_k = thread_n = 128), all SMs, max_par 16. Weights packed
  by Marlin's own ``Layer.pack`` (``marlin/__init__.py``, imported with a stand-in for its
  ``marlin_cuda`` extension, which it only needs for ``mul``).
- ``torch._weight_int4pack_mm`` (tinygemm; BF16 activations, asymmetric, group 128), through
  ``bench/torch/int4_baselines.py``'s ``Int4``.
- cuBLAS FP16 (``F.linear`` on dense FP16 weights [N, K]), the dense reference.

Shapes K -> N: 5120 -> 17408 and 17408 -> 5120 at batch 1, 2, 4, 8; 5120 -> 4352, 4352 -> 5120 and
1536 -> 5120 (one TP 4 rank: the kernel alone on the GPU) at batch 1.

Before timing, each kernel's output (poisoned with NaN first) is checked against a float32
reference from the dequantised weights, ||out - ref|| / ||ref||; Marlin is checked again on the
output of the timed graph. Timing is ``int4_baselines.time_graph``: CUDA graphs of many calls, each
on the next of several weight copies totalling >= 4 x L2, replays behind ``torch.cuda._sleep``,
one event window per replay, median (p10 / p90) per call. Every (shape, batch) is timed REPEATS
times, Marlin, PyTorch and cuBLAS alternating. The copy bandwidth is measured in the same run.

Usage: ``python3 bench/torch/marlin_bench.py OUT.json --lib libmarlin.so --marlin-dir DIR`` (DIR
holds Marlin's ``marlin/`` package). Writes the JSON and a Markdown table beside it (``.md``).
``--shapes 5120x17408,17408x5120 --batches 1,2,4,8,16,32,64`` times those shapes (K x N) at those
batches instead (issue 40's table; Marlin keeps the batch <= 16 tile named above at every batch).
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import int4_baselines as ib  # noqa: E402

GROUP = 128
SHAPES = [((5120, 17408), (1, 2, 4, 8)), ((17408, 5120), (1, 2, 4, 8)),
          ((5120, 4352), (1,)), ((4352, 5120), (1,)), ((1536, 5120), (1,))]
REPEATS = 2
MAX_PAR = 16


def marlin_bytes(k, n, batch):
    """Bytes Marlin must move: packed codes, FP16 scales (no zero points), x and y in FP16."""
    return k * n // 2 + (k // GROUP) * n * 2 + 2 * batch * (k + n)


def torch_int4_bytes(k, n, batch):
    """Bytes tinygemm must move: codes, the BF16 scale-and-zero table, x and y."""
    return ib.int4_bytes(k, n) + 2 * (batch - 1) * (k + n)


class Marlin:
    """Marlin's packer (its Python module) and its kernel (through the ctypes shim)."""

    def __init__(self, torch, lib_path, marlin_dir):
        self.torch = torch
        self.lib = ctypes.CDLL(lib_path)
        f = self.lib.marlin_mul
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                                                    ctypes.c_void_p] + [ctypes.c_int] * 4
        sys.modules.setdefault("marlin_cuda", types.ModuleType("marlin_cuda"))
        sys.path.insert(0, marlin_dir)
        import marlin  # noqa: PLC0415 - Marlin's package, carried to the GPU machine

        self.module = marlin
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count

    def quantize(self, k, n, seed):
        """Random symmetric codes and FP16 scales (never zeros), packed by Marlin. Returns the packed
        weight, the permuted scales and the dequantised weight [K, N] in float32."""
        torch = self.torch
        g = torch.Generator(device="cuda").manual_seed(seed)
        q = torch.randint(0, 16, (k, n), dtype=torch.int32, device="cuda", generator=g)
        s = (torch.rand((k // GROUP, n), device="cuda", generator=g) * 0.004 + 0.001).half()
        s_full = s.float().repeat_interleave(GROUP, dim=0)
        w32 = (q.float() - 8) * s_full
        layer = self.module.Layer(k, n, groupsize=GROUP).to("cuda")
        # pack() reads weight [N, K] in FP16 and scales [N, K / group]; it recovers q as
        # round(w / s) + 8, exact here since w = (q - 8) * s rounded to FP16.
        layer.pack(types.SimpleNamespace(weight=w32.half().t()), s.t())
        del q, s_full
        return layer.B.contiguous(), layer.s.contiguous(), w32

    def mul(self, a, b, c, s, workspace):
        torch = self.torch
        m, k = a.shape
        n = c.shape[1]
        err = self.lib.marlin_mul(a.data_ptr(), b.data_ptr(), c.data_ptr(), s.data_ptr(), m, n, k,
                                  workspace.data_ptr(), GROUP, torch.cuda.current_device(),
                                  torch.cuda.current_stream().cuda_stream, -1, -1, self.sms, MAX_PAR)
        if err:
            raise RuntimeError(f"marlin_mul returned {err} (1: problem shape, 2: no kernel, 100+: CUDA error)")


def check(torch, got, want):
    finite = bool(torch.isfinite(got).all().item())
    return {"rel_l2": ib.rel_l2(torch, got, want), "all_written": finite,
            "max_abs": (got.float() - want).abs().max().item()}


def marlin_case(torch, mar, k, n, batches, l2, copy_gbps, seed):
    b, s, w32 = mar.quantize(k, n, seed)
    workspace = torch.zeros(n // 128 * MAX_PAR, dtype=torch.int32, device="cuda")
    per_batch = {}
    for batch in batches:
        a = torch.randn(batch, k, device="cuda").half()
        c = torch.full((batch, n), float("nan"), device="cuda").half()
        want = a.float() @ w32
        mar.mul(a, b, c, s, workspace)
        torch.cuda.synchronize()
        per_batch[batch] = {"a": a, "c": c, "want": want, "check": check(torch, c, want)}
    del w32
    nbytes = marlin_bytes(k, n, 1)
    copies = ib.copies_for(nbytes, l2)
    ws = [(b, s)] + [(b.clone(), s.clone()) for _ in range(copies - 1)]
    calls = ib.calls_per_replay(copies)

    def timer(batch):
        st = per_batch[batch]
        st["c"].fill_(float("nan"))

        def run():
            for i in range(calls):
                wb, wsc = ws[i % copies]
                mar.mul(st["a"], wb, st["c"], wsc, workspace)

        r = ib.result_from(ib.time_graph(torch, run), calls, marlin_bytes(k, n, batch), copy_gbps)
        torch.cuda.synchronize()
        r["check_after"] = check(torch, st["c"], st["want"])
        return r

    meta = {"copies": copies, "calls_per_replay": calls,
            "dtype": "fp16 activations, symmetric int4 weights, fp16 scales, group 128 (no zero points)"}
    return per_batch, timer, meta


def torch_case(torch, i4, k, n, batches, l2, copy_gbps, seed):
    q, sz = i4.quantize(n, k, seed)
    packed = i4.pack(q)
    w = i4.dequantized(q, sz).t()
    del q
    per_batch = {}
    for batch in batches:
        x = torch.randn(batch, k, device="cuda").to(torch.bfloat16)
        want = x.float() @ w
        per_batch[batch] = {"x": x, "check": check(torch, i4.mm(x, packed, sz), want)}
    del w
    nbytes = torch_int4_bytes(k, n, 1)
    copies = ib.copies_for(nbytes, l2)
    ws = [(packed, sz)] + [(packed.clone(), sz.clone()) for _ in range(copies - 1)]
    calls = ib.calls_per_replay(copies)

    def timer(batch):
        x = per_batch[batch]["x"]

        def run():
            for i in range(calls):
                wp, ws_ = ws[i % copies]
                i4.mm(x, wp, ws_)

        return ib.result_from(ib.time_graph(torch, run), calls, torch_int4_bytes(k, n, batch), copy_gbps)

    meta = {"copies": copies, "calls_per_replay": calls,
            "dtype": "bf16 activations, asymmetric int4 weights, bf16 scale+zero, group 128"}
    return per_batch, timer, meta


def cublas_case(torch, k, n, batches, l2, copy_gbps, seed):
    """cuBLAS FP16 (``F.linear``) on random FP16 weights [N, K]: the dense reference every INT4
    kernel must beat by reading a quarter of the bytes."""
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(seed)
    w = (torch.randn((n, k), device="cuda", generator=g) * 0.02).half()
    per_batch = {}
    for batch in batches:
        x = torch.randn(batch, k, device="cuda").half()
        want = x.float() @ w.float().t()
        per_batch[batch] = {"x": x, "check": check(torch, F.linear(x, w), want)}
    copies = ib.copies_for(ib.fp16_bytes(k, n), l2)
    ws = [w] + [w.clone() for _ in range(copies - 1)]
    calls = ib.calls_per_replay(copies)

    def timer(batch):
        x = per_batch[batch]["x"]

        def run():
            for i in range(calls):
                F.linear(x, ws[i % copies])

        return ib.result_from(ib.time_graph(torch, run), calls,
                              2 * k * n + 2 * batch * (k + n), copy_gbps)

    return per_batch, timer, {"copies": copies, "calls_per_replay": calls, "dtype": "fp16 (F.linear, cuBLAS)"}


def markdown(res):
    dev = res.get("device", {})
    out = [f"## Marlin and `torch._weight_int4pack_mm` (bench/torch/marlin_bench.py)\n\n"
           f"{dev.get('name', '?')}, torch {res.get('torch_version', '?')}, CUDA {res.get('cuda', '?')}, "
           f"{res.get('date', '?')}; copy bandwidth {ib.fmt(res.get('copy', {}).get('gbps'), '.0f')} GB/s; "
           f"Marlin {res.get('marlin_commit', '?')}; CUDA graphs, weights rotating over >= 4 x L2\n",
           "| K → N | batch | kernel | µs per call, repeats (p10–p90 of the first) | GB/s | check rel L2 (after timing) | error |",
           "|---|---:|---|---:|---:|---:|---|"]
    for r in res.get("rows", []):
        reps = r.get("repeats", [])
        meds = ", ".join(ib.fmt(x.get("median_us"), ".2f") for x in reps)
        first = reps[0] if reps else {}
        chk = r.get("check", {})
        after = reps[0].get("check_after", {}) if reps else {}
        out.append(
            f"| {r['k']} → {r['n']} | {r['batch']} | {r['kernel']} | {meds} "
            f"({ib.fmt(first.get('p10_us'), '.2f')}–{ib.fmt(first.get('p90_us'), '.2f')}) | "
            f"{ib.fmt(first.get('gbps'), '.0f')} | {ib.fmt(chk.get('rel_l2'), '.1e')}"
            f"{' (' + ib.fmt(after.get('rel_l2'), '.1e') + ')' if after else ''} | "
            f"{(r.get('error') or '').splitlines()[0][:120] if r.get('error') else ''} |")
    if res.get("errors"):
        out.append("\nErrors: " + "; ".join(e.splitlines()[0][:200] for e in res["errors"]))
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--lib", required=True, help="libmarlin.so built from bench/torch/marlin_shim.cu")
    ap.add_argument("--marlin-dir", required=True, help="the folder that holds Marlin's marlin/ package")
    ap.add_argument("--marlin-commit", default="?")
    ap.add_argument("--shapes", help="K x N pairs, comma-separated (default: issue 20's)")
    ap.add_argument("--batches", help="batches for every shape, comma-separated (default: issue 20's)")
    args = ap.parse_args(argv[1:])
    shapes = SHAPES
    if args.shapes:
        shapes = [(tuple(int(d) for d in kn.split("x")), (1,)) for kn in args.shapes.split(",")]
    if args.batches:
        batches = tuple(int(b) for b in args.batches.split(","))
        shapes = [(kn, batches) for kn, _ in shapes]
    res = {"schema": "wavefuse-marlin-bench/1", "marlin_commit": args.marlin_commit,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "python": platform.python_version(), "errors": [], "rows": []}
    t0 = time.time()

    def save():
        res["seconds"] = time.time() - t0
        with open(args.out, "w") as f:
            json.dump(res, f, indent=2, default=str)
        md = markdown(res)
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write(md)
        return md

    import torch
    res["torch_version"] = torch.__version__
    res["cuda"] = torch.version.cuda
    p = torch.cuda.get_device_properties(0)
    l2 = int(getattr(p, "L2_cache_size", 0) or 60 << 20)
    res["device"] = {"name": p.name, "sms": p.multi_processor_count, "l2_bytes": l2,
                     "capability": f"{p.major}.{p.minor}"}
    res["copy"] = ib.copy_bandwidth(torch)
    copy_gbps = res["copy"]["gbps"]
    mar = Marlin(torch, args.lib, args.marlin_dir)
    i4 = ib.Int4(torch)
    save()

    for (k, n), batches in shapes:
        cases = {}
        for name, make in (("marlin", lambda: marlin_case(torch, mar, k, n, batches, l2, copy_gbps, 7000 + k + n)),
                           ("torch_int4", lambda: torch_case(torch, i4, k, n, batches, l2, copy_gbps, 9000 + k + n)),
                           ("cublas_fp16", lambda: cublas_case(torch, k, n, batches, l2, copy_gbps, 11000 + k + n))):
            try:
                cases[name] = make()
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                res["errors"].append(f"{name} {k}->{n} setup: {ib.error_text(e)}")
        rows = {}
        for batch in batches:
            for name, (per_batch, _, meta) in cases.items():
                rows[(name, batch)] = {"kernel": name, "k": k, "n": n, "batch": batch,
                                       "check": per_batch[batch]["check"], "repeats": [], **meta}
        for rep in range(REPEATS):
            for batch in batches:
                for name, (_, timer, _) in cases.items():
                    row = rows[(name, batch)]
                    try:
                        row["repeats"].append(timer(batch))
                    except Exception as e:  # noqa: BLE001
                        row["error"] = ib.error_text(e)
        for (name, batch), row in rows.items():
            meds = [r["median_us"] for r in row["repeats"]]
            row["median_us"] = sum(meds) / len(meds) if meds else None
            res["rows"].append(row)
            print(f"{k}->{n} b{batch} {name}: {ib.fmt(row['median_us'], '.2f')} us, "
                  f"rel L2 {ib.fmt(row['check']['rel_l2'], '.1e')} {row.get('error', '')[:200]}",
                  file=sys.stderr, flush=True)
        del cases
        torch.cuda.empty_cache()
        save()
    if ib.HOLD_MISSING:
        res["errors"].append(ib.HOLD_MISSING[0])
    print(save())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
