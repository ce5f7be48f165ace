"""Every kernel of the set and one .wfir kernel as PyTorch ops (the `wavefuse` package) inside
ONE captured CUDA graph, replayed many times as an engine replays its decode step; then fresh
inputs, one more replay, every output against the float64 reference and every error word read.
Also each kernel's per-call time inside a graph, timed as `wavefuse ab --timing graphs` times it
(`per_call_us`), and with `--ab BINARY` that ab's time of the same kernel at the same shapes in
the same call (the binding should add nothing).

    python3 bench/python/graph_replay.py --replays 10000 --json $OUT/replay.json [--ab carry/wavefuse]

Needs the package importable (pip install ./python, or the built extension copied into
python/wavefuse/) and a GPU. Kernels of the set at the model's shapes (Qwen 3.5 27B): the GEMVs at
TP 1, the communicating kernels at --tp (all ranks on this GPU, one process)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
# The tests' cases first; the package from PYTHONPATH where given (another build of it), else here.
sys.path.insert(0, str(ROOT / "python" / "tests"))
sys.path.append(str(ROOT / "python"))

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


def nbytes(v):
    return sum(t.numel() * t.element_size() for t in (v if isinstance(v, list) else [v]))


GRAPH_CALLS = 20  # harness/src/ab/report.rs GRAPH_CALLS: launches per captured graph
MAX_SETS = 64  # harness/src/ab/gpu.rs MAX_SETS


def per_call_us(k, index, samples=25, rank_streams=False):
    """The op's time per call inside a CUDA graph, timed as `wavefuse ab --timing graphs` times a
    kernel (harness/src/ab/gpu.rs `graph_series`, runtime/src/timing.rs `GroupGraphs::replay`):
    one graph of GRAPH_CALLS calls, call c on input set c mod S, where S input sets total at least
    4 x L2 (at least 2, at most MAX_SETS; as ab, a graph uses its first GRAPH_CALLS sets); the
    graph replayed behind a gate (here a sleep kernel on the stream: the host has enqueued the
    start event, the graph and the end event before the device reaches them, so host launch time
    is not counted); one warm-up replay, then `samples` replays; the median per call.

    `rank_streams` (a diagnostic, not the binding as users call it): for ranks sharing a GPU, the
    op's side streams are forked from the current stream once before the calls and joined once
    after them, not at every call — each rank's launches back to back on its own stream, as
    `ab` captures them."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    first = {n: to_cuda(v) for n, v in make(k, 1000 + index)[0].items()}
    per_set = max(1, sum(nbytes(v) for v in first.values()))
    want = min(max(2, -(-4 * l2 // per_set)), MAX_SETS, GRAPH_CALLS)
    sets = [first]
    while len(sets) < want:
        sets.append({n: to_cuda(v) for n, v in make(k, 1000 + index + len(sets))[0].items()})
    for st in sets:
        k(**st)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    side = getattr(k, "_side", None) if rank_streams else None
    with torch.cuda.graph(g):
        cur = torch.cuda.current_stream()
        wait = torch.cuda.Stream.wait_stream
        if side:
            for st in side:
                st.wait_stream(cur)
            # the op's per-call fork and join dropped (a diagnostic: only the op runs meanwhile)
            torch.cuda.Stream.wait_stream = lambda self, other: None
        try:
            for c in range(GRAPH_CALLS):
                k(**sets[c % len(sets)])
        finally:
            torch.cuda.Stream.wait_stream = wait
            for st in side or []:
                cur.wait_stream(st)
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        torch.cuda._sleep(1_000_000)  # the gate: ~0.5 ms of device time ahead of the record
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / GRAPH_CALLS)
    times.sort()
    del sets
    return times[len(times) // 2], len(times)


def ab_per_call_us(binary, k, iters):
    """`wavefuse ab --timing graphs` of the same kernel at the same shapes (the GEMVs at
    qwen27b-tp1, the communicating kernels at qwen27b-tp<k.tp> with every rank on this GPU, the
    .wfir kernel with --kernel-file): the generated version's median per call over both
    repeats, its dimensions and its input sets."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "ab.json"
        cmd = [binary, "ab", "--timing", "graphs", "--iters", str(iters), "--json", str(out)]
        if k.name == "silu_gemv":
            cmd += ["--kernel-file", str(WFIR)]
        else:
            cmd += [k.name, "--shapes", f"qwen27b-tp{k.tp}"]
            if k.tp > 1:
                cmd += ["--placement", "same-device"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if not out.exists():
            return dict(error=f"exit {run.returncode}: {run.stderr.strip()[-400:]}", command=" ".join(cmd))
        row = json.loads(out.read_text())["rows"][0]
    gen = row["generated"]
    t = gen.get("timing") or {}
    meds = sorted(r["median_us"] for r in t.get("repeats", []))
    return dict(
        command=" ".join(cmd),
        dims=row.get("dims"),
        us=sum(meds) / len(meds) if meds else None,
        repeats_us=meds,
        input_sets=t.get("input_sets"),
        error=gen.get("error"),
        check_pass=(gen.get("check") or {}).get("pass"),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--replays", type=int, default=10000)
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--json", type=str, default=None)
    ap.add_argument("--ab", type=str, default=None, metavar="BINARY",
                    help="also time each kernel with this wavefuse binary's `ab --timing graphs`, same call")
    ap.add_argument("--ab-iters", type=int, default=500, help="ab's --iters (20 calls per graph)")
    ap.add_argument("--samples", type=int, default=25, help="graph replays timed per kernel")
    ap.add_argument("--rank-streams", action="store_true",
                    help="also time TP > 1 kernels with each rank's calls back to back on its own "
                    "stream (forked and joined once per graph, as ab captures them; a diagnostic)")
    ap.add_argument("--only", type=str, default=None, metavar="NAMES",
                    help="comma-separated kernels of the list below (default: all of them)")
    a = ap.parse_args()

    only = None if a.only is None else set(a.only.split(","))
    unknown = (only or set()) - set(GEMVS + COMMUNICATING + ["silu_gemv"])
    if unknown:
        ap.error(f"--only: no kernel {sorted(unknown)} here; these: {GEMVS + COMMUNICATING + ['silu_gemv']}")
    want = lambda n: only is None or n in only  # noqa: E731
    kernels = [wavefuse.kernel(n, device="cuda") for n in GEMVS if want(n)]
    kernels += [wavefuse.kernel(n, device="cuda", tp=a.tp) for n in COMMUNICATING if want(n)]
    if want("silu_gemv"):
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
    for i, (k, st, out, want) in enumerate(zip(kernels, statics, outs, wants)):
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
                dims=[list(x.shape) for x in k.abi],
                per_call_us_in_graph=per_call_us(k, i, a.samples)[0],
            )
        )
        if a.rank_streams and k.tp > 1:
            rows[-1]["per_call_us_rank_streams"] = per_call_us(k, i, a.samples, rank_streams=True)[0]
        if a.ab:
            rows[-1]["ab"] = ab_per_call_us(a.ab, k, a.ab_iters)
            ab_us = rows[-1]["ab"].get("us")
            rows[-1]["op_over_ab"] = rows[-1]["per_call_us_in_graph"] / ab_us if ab_us else None
    report = dict(
        device=torch.cuda.get_device_name(),
        torch=torch.__version__,
        package=str(Path(wavefuse.__file__).resolve().parent),
        replays=a.replays + 1,
        replay_wall_s=wall,
        kernels=rows,
    )
    print(f"{report['device']}: one graph of {len(kernels)} kernels, {a.replays} replays in {wall:.2f} s, then fresh inputs")
    print(f"{'kernel':32} {'tp':>3} {'sync':>5} {'rel L2 (last)':>14} {'us/call':>9} {'ab us':>8} {'op/ab':>6}  error word")
    for r in rows:
        ab = r.get("ab") or {}
        ab_us = f"{ab['us']:8.2f}" if ab.get("us") else f"{'-':>8}"
        ratio = f"{r['op_over_ab']:6.3f}" if r.get("op_over_ab") else f"{'-':>6}"
        print(
            f"{r['kernel']:32} {r['tp']:>3} {str(r['synchronises']):>5} {r['rel_l2_last_replay']:>14.2e} "
            f"{r['per_call_us_in_graph']:>9.2f} {ab_us} {ratio}  {r['error_word'] or 'clean'}"
        )
        if ab.get("error"):
            print(f"    ab: {ab['error']}")
        if "per_call_us_rank_streams" in r:
            print(f"    each rank on its own stream for the whole graph: {r['per_call_us_rank_streams']:.2f} us/call")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2))
    bad = [r for r in rows if r["error_word"] or not r["rel_l2_last_replay"] < (1e-2 if r["kernel"] == "allreduce_int8" else 3e-3)]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
