#!/usr/bin/env python3
"""NCCL's side of `wavefuse mgpu-bench`, on the same machine: what a PyTorch user would run.

Launch with one process per GPU:

    torchrun --standalone --nproc_per_node=N bench/torch/nccl_allreduce.py --out nccl-tpN.json

Measures, per call (microseconds), in CUDA graphs of CALLS back-to-back calls (and eagerly):

- `allreduce`: NCCL allreduce (sum, in place) of 5120 FP16 (10 KB) and 16384 FP16 (32 KB);
- `allreduce_residual_rmsnorm`: NCCL allreduce of 5120 + residual add + RMSNorm (plain torch ops);
- `gemv_allreduce_residual_rmsnorm`: the fused kernel's equivalent chain at the down-projection
  shape per rank (K = 17408 / N ranks -> 5120): an INT4 GEMV (`torch._weight_int4pack_mm`, group
  128, BF16 activations, so the chain runs in BF16: the same bytes as FP16) when this PyTorch has
  it for this GPU, else an FP16 GEMV (`F.linear`), which the output says; then NCCL allreduce,
  residual add, RMSNorm. Weights rotate over enough copies to exceed 4 x L2.

On PyTorch for ROCm the same script measures RCCL: there the "nccl" backend is RCCL and torch.cuda
drives the HIP devices (CUDA graphs are HIP graphs). The JSON then also carries "hip" (the HIP
version), "collectives": "rccl" and "gcn_arch" (e.g. gfx906:sramecc+:xnack-); "nccl" is RCCL's
version. ROCm's `_weight_int4pack_mm` runs only on CDNA2 and later (gfx90a, gfx942, gfx950), so on
an MI50 (gfx906) the GEMV chain is the FP16 `F.linear` fallback, and rank 0 says so on stderr.

Timing: per sample, all ranks meet at a barrier, each replays its graph between two events on its
own stream, and one call's time is the slowest rank's window / CALLS (max over ranks, as in
`wavefuse mgpu-bench`). p10/p50/p90 over SAMPLES samples. Values are not checked (the in-place
allreduce of the same buffer grows it without bound; timing does not depend on the values).
"""

import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

HIDDEN = 5120
FFN = 17408
GROUP = 128
EPS = 1e-6


def percentiles(v):
    s = sorted(v)

    def at(p):
        return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]

    return {"p10": at(10), "p50": at(50), "p90": at(90), "samples": v}


def slowest(us):
    """The largest value over ranks."""
    t = torch.tensor([us], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def time_graph(fn, calls, samples):
    """Per-call microseconds of `fn` in a CUDA graph of `calls` calls, max over ranks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(samples + 2):
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        us = slowest(start.elapsed_time(end) * 1e3 / calls)
        if i >= 2:
            out.append(us)
    del graph
    return percentiles(out)


def time_eager(fn, calls, samples):
    """Per-call microseconds of `calls` eager calls, max over ranks."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(samples + 2):
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        us = slowest(start.elapsed_time(end) * 1e3 / calls)
        if i >= 2:
            out.append(us)
    return percentiles(out)


def rms_norm(h, w):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(h, (h.shape[-1],), w, EPS)
    hf = h.float()
    return (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS)).to(h.dtype) * w


def collectives_version():
    """NCCL's version (RCCL's on ROCm), or why it is unknown."""
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as e:  # noqa: BLE001 - a missing version must not stop the benchmark
        return f"unknown ({type(e).__name__})"


def rocm_fields(props):
    """The fields a ROCm run adds to the JSON (none on CUDA, whose output stays as it was)."""
    if not getattr(torch.version, "hip", None):
        return {}
    return {"hip": torch.version.hip, "collectives": "rccl", "gcn_arch": getattr(props, "gcnArchName", None)}


def int4_weights(k, n, copies):
    """`copies` INT4-packed [n, k] weights and their scales/zeros, or None when this PyTorch or
    GPU has no `_weight_int4pack_mm`."""
    if not (hasattr(torch, "_weight_int4pack_mm") and hasattr(torch, "_convert_weight_to_int4pack")):
        return None, "torch has no _weight_int4pack_mm"
    try:
        out = []
        for _ in range(copies):
            codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
            packed = torch._convert_weight_to_int4pack(codes, 8)
            sz = torch.empty(k // GROUP, n, 2, dtype=torch.bfloat16, device="cuda")
            sz[..., 0].uniform_(0.001, 0.01)  # scales
            sz[..., 1].uniform_(-0.05, 0.05)  # zeros
            out.append((packed, sz))
        x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
        y = torch._weight_int4pack_mm(x, out[0][0], GROUP, out[0][1])
        assert y.shape == (1, n), y.shape
        return out, None
    except Exception as e:  # noqa: BLE001 - any failure means "not available here"
        return None, f"{type(e).__name__}: {e}".splitlines()[0][:300]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--out", help="write the JSON here (rank 0)")
    ap.add_argument("--no-gemv", action="store_true", help="skip the GEMV chain")
    a = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    try:  # eager NCCL init (torch >= 2.3); older versions take no device_id
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    except TypeError:
        dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234 + rank)
    props = torch.cuda.get_device_properties(local)
    l2 = getattr(props, "L2_cache_size", 0) or 60 * 2**20
    started = time.time()
    res = {
        "schema": "wavefuse-nccl-bench/1",
        "world_size": world,
        "device": props.name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        **rocm_fields(props),
        "nccl": collectives_version(),
        "host": socket.gethostname(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "calls_per_graph": a.calls,
        "samples": a.samples,
        "timing": "per call = slowest rank's window / calls; ranks meet at a barrier before each sample",
        "rows": [],
    }

    def row(name, fn, **extra):
        r = {"case": name, **extra}
        try:
            r["graph_us"] = time_graph(fn, a.calls, a.samples)
            r["eager_us"] = time_eager(fn, a.calls, a.samples)
        except Exception as e:  # noqa: BLE001 - report and go on with the next row
            r["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        res["rows"].append(r)
        if rank == 0:
            g = r.get("graph_us", {}).get("p50")
            e = r.get("eager_us", {}).get("p50")
            print(f"[tp {world}] {name}: graph p50 {g} us, eager p50 {e} us {r.get('error', '')}",
                  file=sys.stderr, flush=True)

    for n in (HIDDEN, 16384):
        buf = torch.randn(n, dtype=torch.float16, device="cuda") * 1e-3
        row("allreduce", lambda buf=buf: dist.all_reduce(buf), n=n, bytes=2 * n, dtype="float16")

    p = torch.randn(1, HIDDEN, dtype=torch.float16, device="cuda") * 1e-3
    resid = torch.randn(1, HIDDEN, dtype=torch.float16, device="cuda")
    w = torch.randn(HIDDEN, dtype=torch.float16, device="cuda")

    def ar_norm():
        dist.all_reduce(p)
        h = p + resid
        return h, rms_norm(h, w)

    row("allreduce_residual_rmsnorm", ar_norm, n=HIDDEN, dtype="float16")

    if not a.no_gemv:
        k = FFN // world
        per_copy_int4 = k * HIDDEN // 2 + (k // GROUP) * HIDDEN * 4
        copies = max(1, min(32, -(-4 * l2 // per_copy_int4)))
        ws, why = int4_weights(k, HIDDEN, copies)
        if ws is not None:
            x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
            r16 = resid.to(torch.bfloat16)
            w16 = w.to(torch.bfloat16)
            state = {"i": 0}

            def chain():
                qw, sz = ws[state["i"] % len(ws)]
                state["i"] += 1
                part = torch._weight_int4pack_mm(x, qw, GROUP, sz)
                dist.all_reduce(part)
                h = part + r16
                return h, rms_norm(h, w16)

            row("gemv_allreduce_residual_rmsnorm", chain, gemv="int4 (_weight_int4pack_mm, group 128, bf16)",
                k=k, n=HIDDEN, weight_copies=len(ws))
        else:
            if rank == 0:
                print(f"[tp {world}] INT4 GEMV unavailable ({why}): the GEMV chain uses an FP16 F.linear GEMV",
                      file=sys.stderr, flush=True)
            per_copy = k * HIDDEN * 2
            copies = max(1, min(32, -(-4 * l2 // per_copy)))
            wf = [torch.randn(HIDDEN, k, dtype=torch.float16, device="cuda") * 0.02 for _ in range(copies)]
            x = torch.randn(1, k, dtype=torch.float16, device="cuda")
            state = {"i": 0}

            def chain16():
                wi = wf[state["i"] % len(wf)]
                state["i"] += 1
                part = F.linear(x, wi)
                dist.all_reduce(part)
                h = part + resid
                return h, rms_norm(h, w)

            row("gemv_allreduce_residual_rmsnorm", chain16, gemv=f"fp16 F.linear (INT4 unavailable: {why})",
                k=k, n=HIDDEN, weight_copies=len(wf))

    res["seconds"] = time.time() - started
    if rank == 0:
        text = json.dumps(res, indent=2)
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
