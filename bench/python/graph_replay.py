"""Every kernel of the set and one .wfir kernel as PyTorch ops (the `wavefuse` package) inside
ONE captured CUDA graph, replayed many times as an engine replays its decode step; then fresh
inputs, one more replay, every output against the float64 reference and every error word read.
Also each kernel's per-call time inside a graph (CUDA events), to hold against
`wavefuse ab --timing graphs` for the same kernel and shapes (the binding should add nothing).

    python3 bench/python/graph_replay.py --replays 10000 --json $OUT/replay.json

Needs the package importable (pip install ./python, or the built extension copied into
python/wavefuse/) and a GPU. Kernels of the set at the model's shapes (Qwen 3.5 27B): the GEMVs at
TP 1, the communicating kernels at --tp (all ranks on this GPU, one process)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "python" / "tests")]

import cases  # noqa: E402
import wavefuse  # noqa: E402
from reference import dequant_gptq, f16, rel_l2, silu  # noqa: E402

GEMVS = ["gemv_f16", "gemv_int4", "gemv_int4_dual_silu", "gemv_int4_qkv"]
COMMUNICATING = ["allreduce_residual", "allreduce_residual_rmsnorm", "gemv_int4_allreduce_rmsnorm", "allreduce_int8"]
WFIR = ROOT / "python" / "tests" / "data" / "silu_gemv.wfir"


def wfir_case(k, seed):
    g = torch.Generator().manual_seed(seed)
    qw = torch.randint(-(2**31), 2**31 - 1, (32, 64), dtype=torch.int32, generator=g)
    qz = torch.randint(-(2**31), 2**31 - 1, (4, 8), dtype=torch.int32, generator=g)
    s = (torch.rand(4, 64, generator=g, dtype=torch.float64) * 0.02).to(torch.float16)
    gate = torch.randn(2, 256, generator=g, dtype=torch.float64).to(torch.float16)
    up = torch.randn(2, 256, generator=g, dtype=torch.float64).to(torch.float16)
    h = f16(silu(gate.double()) * up.double())
    return dict(g=gate, u=up, w_qweight=qw, w_scales=s, w_qzeros=qz), [f16(h @ dequant_gptq(qw, s, qz, "v2"))]


def to_cuda(v):
    return [t.cuda() for t in v] if isinstance(v, list) else v.cuda()


def as_list(result, k):
    return [result] if len(k.outputs) == 1 else list(result)


def worst(got, want):
    if isinstance(want, list):
        return max(worst(g, w) for g, w in zip(got, want))
    return rel_l2(got.cpu(), want)


def make(k, seed):
    return wfir_case(k, seed) if k.name == "silu_gemv" else cases.make(k, seed, ref_device="cuda")


def per_call_us(k, static, calls=20, reps=50):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            k(**static)
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replays", type=int, default=10000)
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--json", type=str, default=None)
    a = ap.parse_args()

    kernels = [wavefuse.kernel(n, device="cuda") for n in GEMVS]
    kernels += [wavefuse.kernel(n, device="cuda", tp=a.tp) for n in COMMUNICATING]
    kernels.append(wavefuse.kernel(WFIR, device="cuda"))
    statics, outs = [], []
    for i, k in enumerate(kernels):
        ins, _ = make(k, 100 + i)
        statics.append({n: to_cuda(v) for n, v in ins.items()})
        k(**statics[-1])  # warm-up outside the capture
    torch.cuda.synchronize()
    for k in kernels:
        k.check()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for k, st in zip(kernels, statics):
            outs.append(as_list(k(**st), k))
    t0 = time.time()
    for _ in range(a.replays):
        graph.replay()
    torch.cuda.synchronize()
    wall = time.time() - t0
    wants = []
    for i, (k, st) in enumerate(zip(kernels, statics)):
        new, want = make(k, 200 + i)
        wants.append(want)
        for n, v in new.items():
            dsts = st[n] if isinstance(v, list) else [st[n]]
            srcs = v if isinstance(v, list) else [v]
            for d, s in zip(dsts, srcs):
                d.copy_(s)
    graph.replay()
    torch.cuda.synchronize()

    rows = []
    for k, st, out, want in zip(kernels, statics, outs, wants):
        err = None
        try:
            k.check()
        except wavefuse.KernelError as e:
            err = str(e)
        rows.append(
            dict(
                kernel=k.name,
                tp=k.tp,
                synchronises=k.synchronises,
                epoch_on_host="epoch_param" in k.abi_toml,
                rel_l2_last_replay=worst(out, want),
                error_word=err,
                per_call_us_in_graph=per_call_us(k, st),
            )
        )
    report = dict(
        device=torch.cuda.get_device_name(),
        torch=torch.__version__,
        replays=a.replays + 1,
        replay_wall_s=wall,
        kernels=rows,
    )
    print(f"{report['device']}: one graph of {len(kernels)} kernels, {a.replays} replays in {wall:.2f} s, then fresh inputs")
    print(f"{'kernel':32} {'tp':>3} {'sync':>5} {'rel L2 (last)':>14} {'us/call':>9}  error word")
    for r in rows:
        print(
            f"{r['kernel']:32} {r['tp']:>3} {str(r['synchronises']):>5} {r['rel_l2_last_replay']:>14.2e} "
            f"{r['per_call_us_in_graph']:>9.2f}  {r['error_word'] or 'clean'}"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2))
    bad = [r for r in rows if r["error_word"] or not r["rel_l2_last_replay"] < (1e-2 if r["kernel"] == "allreduce_int8" else 3e-3)]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
