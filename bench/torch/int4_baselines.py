#!/usr/bin/env python3
"""PyTorch baselines for wavefuse's INT4 decode kernels (issue 7, items 1 and 3), on one NVIDIA GPU.

What a user would otherwise run on the same GPU, at batch 1:

1. Per GEMV shape K -> N of DESIGN.md section 1 (5120->4352, 4352->5120, 5120->8704, 1536->5120,
   5120->17408, 17408->5120):
   - INT4, group 128: ``torch._weight_int4pack_mm`` (the tinygemm kernel; bf16 activations, a
     bf16 [K/128, N, 2] scale-and-zero table), weights packed at run time with
     ``torch._convert_weight_to_int4pack`` in whichever input format this PyTorch takes (uint8
     nibble pairs [N, K/2] since 2.5, int32 codes [N, K] before; both are tried and the one whose
     output matches the dequantised weights is used);
   - FP16: ``torch.nn.functional.linear`` (cuBLAS GEMV at batch 1).
2. The PyTorch chain of item 3, TP = 4 with the four ranks on one device: per rank the INT4 GEMV
   4352 -> 5120 of its K-shard, the sum over ranks, the residual add and ``rms_norm``.
3. The PyTorch FFN block at TP = 4 on one device: per rank the merged gate/up INT4 GEMV
   5120 -> 2 x 4352 (what serving engines run), silu(gate) * up, the down INT4 GEMV 4352 -> 5120;
   then the sum over ranks, the residual add and ``rms_norm``.

Timing (DESIGN.md section 8): every measurement is a CUDA graph holding many calls, each on the
next of several copies of the weights totalling >= 4 x L2, so no call finds its weights in L2;
graph replays are queued behind ``torch.cuda._sleep`` (the host is far ahead, so each event window
holds device time only), timed with CUDA events one replay each, median of many replays (with
p10 / p90), divided by the calls per replay. The device-to-device copy bandwidth (read + write) is
measured in the same run.

Usage: ``python3 bench/torch/int4_baselines.py OUT.json`` (prints a Markdown table; writes the
JSON, and the table beside it with ``.md``). Every part runs under try/except: a failure is
recorded in the JSON (``error``) and the run goes on. Exit status 0 when the JSON was written.
"""

import datetime
import json
import math
import os
import platform
import sys
import time
import traceback

SHAPES = [(5120, 4352), (4352, 5120), (5120, 8704), (1536, 5120), (5120, 17408), (17408, 5120)]
GROUP = 128
HIDDEN = 5120
FFN = 17408
TP = 4
RMS_EPS = 1e-6
INNER_K_TILES = 8
# Calls per graph replay at least, and replays timed per measurement.
MIN_CALLS = 24
REPLAYS = 60
WARMUP_REPLAYS = 5
# Rotate over weights totalling at least this many L2s.
L2_FACTOR = 4
# Memory ceiling of one measurement's weight copies.
MAX_ROTATION_BYTES = 4 << 30
# torch.cuda._sleep cycles in front of the timed replays (~100 ms at ~2 GHz): the host queues
# every replay while the device sleeps.
SLEEP_CYCLES = 200_000_000


# ------------------------------------------------------------------------------------------------
# Pure helpers (unit-tested without torch: bench/torch/test_int4_baselines.py)
# ------------------------------------------------------------------------------------------------


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list (p in [0, 1]); NaN when empty."""
    n = len(sorted_values)
    if n == 0:
        return float("nan")
    rank = min(max(math.ceil(p * n), 1), n)
    return sorted_values[rank - 1]


def stats_us(samples_us):
    """Median (mean of the two middles for even counts), p10, p90 and count, in microseconds."""
    s = sorted(samples_us)
    n = len(s)
    if n == 0:
        med = float("nan")
    elif n % 2 == 1:
        med = s[n // 2]
    else:
        med = 0.5 * (s[n // 2 - 1] + s[n // 2])
    return {"median_us": med, "p10_us": percentile(s, 0.1), "p90_us": percentile(s, 0.9), "samples": n}


def copies_for(bytes_per_copy, l2_bytes, factor=L2_FACTOR, cap_bytes=MAX_ROTATION_BYTES):
    """Copies of a working set so that they total >= factor x L2 (at least 2), within cap_bytes
    where possible (never fewer than 2)."""
    if bytes_per_copy <= 0:
        return 2
    want = max(2, math.ceil(factor * l2_bytes / bytes_per_copy))
    most = max(2, cap_bytes // bytes_per_copy)
    return int(min(want, most))


def calls_per_replay(copies, min_calls=MIN_CALLS):
    """Calls in one graph: whole passes over the copies, at least min_calls."""
    return copies * max(1, math.ceil(min_calls / copies))


def int4_bytes(k, n, group=GROUP):
    """Bytes an INT4 GEMV must move at batch 1: packed codes, the bf16 scale-and-zero table, x and y
    (2 bytes each)."""
    return k * n // 2 + (k // group) * n * 2 * 2 + 2 * k + 2 * n


def fp16_bytes(k, n):
    """Bytes an FP16 GEMV must move at batch 1: W, x and y."""
    return 2 * k * n + 2 * k + 2 * n


def pack_pairs(row):
    """Reference of the uint8 packing PyTorch >= 2.5 takes, on one row of 4-bit codes: byte j holds
    code 2j in its high nibble and code 2j+1 in its low one."""
    if len(row) % 2:
        raise ValueError("an even number of codes")
    return [((row[2 * j] & 0xF) << 4) | (row[2 * j + 1] & 0xF) for j in range(len(row) // 2)]


def tinygemm_qparams(column):
    """Asymmetric 4-bit parameters of one group (tinygemm's convention): scale, zero and codes, so
    that w ~ (q - 8) * scale + zero."""
    lo, hi = min(column), max(column)
    scale = max(hi - lo, 1e-6) / 15
    zero = lo + scale * 8
    codes = [min(max(round((w - lo) / scale), 0), 15) for w in column]
    return scale, zero, codes


def dequant(q, scale, zero):
    """tinygemm's dequantisation of one code."""
    return (q - 8) * scale + zero


def gbps(bytes_moved, us):
    if not us or not math.isfinite(us) or us <= 0:
        return None
    return bytes_moved / (us * 1e-6) / 1e9


def fmt(v, spec=".1f"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return format(v, spec)


def markdown(res):
    """The Markdown tables of a results dict."""
    out = []
    dev = res.get("device", {})
    copy = res.get("copy", {})
    out.append(
        "## PyTorch baselines, batch 1 (bench/torch/int4_baselines.py)\n\n"
        f"{dev.get('name', '?')}, torch {res.get('torch_version', '?')}, CUDA {res.get('cuda', '?')}, "
        f"{res.get('date', '?')}; L2 {dev.get('l2_bytes', 0) >> 20} MB; copy bandwidth "
        f"{fmt(copy.get('gbps'), '.0f')} GB/s (read + write); INT4 packing: "
        f"{res.get('int4_pack', {}).get('variant', 'none')}\n"
    )
    out.append("| K → N | kind | µs median (p10–p90) | GB/s | % of copy bw | copies | check rel L2 | error |")
    out.append("|---|---|---:|---:|---:|---:|---:|---|")
    for r in res.get("gemv", []):
        out.append(
            f"| {r.get('k')} → {r.get('n')} | {r.get('kind')} | {fmt(r.get('median_us'))} "
            f"({fmt(r.get('p10_us'))}–{fmt(r.get('p90_us'))}) | {fmt(r.get('gbps'), '.0f')} | "
            f"{fmt(r.get('pct_copy'), '.0f')} | {r.get('copies', '–')} | {fmt(r.get('check_rel_l2'), '.1e')} | "
            f"{(r.get('error') or '').splitlines()[0][:120] if r.get('error') else ''} |"
        )
    out.append("")
    out.append("| chain (TP = 4, ranks on one device, CUDA graph) | µs median (p10–p90) | × 64 layers | check rel L2 | error |")
    out.append("|---|---:|---:|---:|---|")
    for key in ("fused_down_chain_tp4", "ffn_block_tp4"):
        r = res.get(key, {})
        per_token = r.get("median_us") * 64 / 1e3 if isinstance(r.get("median_us"), (int, float)) else None
        err = r.get("error")
        out.append(
            f"| {key}: {r.get('what', '')} | {fmt(r.get('median_us'))} ({fmt(r.get('p10_us'))}–{fmt(r.get('p90_us'))}) | "
            f"{fmt(per_token, '.2f')} ms | {fmt(r.get('check_rel_l2'), '.1e')} | "
            f"{err.splitlines()[0][:160] if err else ''} |"
        )
    if res.get("errors"):
        out.append("")
        out.append("Errors: " + "; ".join(e.splitlines()[0][:200] for e in res["errors"]))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------
# On the GPU
# ------------------------------------------------------------------------------------------------


def error_text(e):
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return f"{type(e).__name__}: {e}\n" + "".join(tb[-3:])


def hold(torch):
    """A sleep kernel in front of the timed work, so the host queues it all before it runs (without
    torch.cuda._sleep the windows may also hold host enqueue gaps; the JSON says so)."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        HOLD_MISSING.append("torch.cuda._sleep missing: windows may include host enqueue gaps")
        return
    sleep(SLEEP_CYCLES)


HOLD_MISSING = []


def time_graph(torch, fn, replays=REPLAYS, warmup=WARMUP_REPLAYS):
    """Capture fn() (which enqueues the calls) in a CUDA graph, then time `replays` replays, each
    between two events, all queued behind a sleep kernel. Returns per-replay microseconds."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up outside the graph (lazy initialisation, autotuning)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
    hold(torch)
    events[0].record()
    for i in range(replays):
        g.replay()
        events[i + 1].record()
    torch.cuda.synchronize()
    return [events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(replays)]


def copy_bandwidth(torch, nbytes=1 << 30, copies=20):
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(copies + 1)]
    hold(torch)
    events[0].record()
    for i in range(copies):
        dst.copy_(src)
        events[i + 1].record()
    torch.cuda.synchronize()
    s = stats_us([events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(copies)])
    s["bytes"] = nbytes
    s["gbps"] = gbps(2 * nbytes, s["median_us"])
    del src, dst
    return s


class Int4:
    """Packing for this PyTorch's _convert_weight_to_int4pack, found at run time."""

    def __init__(self, torch):
        self.torch = torch
        self.variant = None
        self.tried = []

    def quantize(self, n, k, seed):
        """Random codes [N, K], bf16 scale-and-zero [K/G, N, 2], on the GPU (never zeros)."""
        torch = self.torch
        g = torch.Generator(device="cuda").manual_seed(seed)
        q = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda", generator=g)
        scale = (torch.rand((k // GROUP, n), device="cuda", generator=g) * 0.004 + 0.001)
        zero = (torch.rand((k // GROUP, n), device="cuda", generator=g) - 0.5) * 0.01
        sz = torch.stack([scale, zero], dim=2).to(torch.bfloat16).contiguous()
        return q, sz

    def dequantized(self, q, sz):
        """W [N, K] in float32 from codes and the table: (q - 8) * scale + zero."""
        torch = self.torch
        s = sz[..., 0].float().t().repeat_interleave(GROUP, dim=1)
        z = sz[..., 1].float().t().repeat_interleave(GROUP, dim=1)
        return (q.float() - 8) * s + z

    def _variants(self):
        torch = self.torch
        conv = torch.ops.aten._convert_weight_to_int4pack

        def uint8_pairs(q):
            return conv((q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8), INNER_K_TILES)

        def int32_codes(q):
            return conv(q.contiguous(), INNER_K_TILES)

        return [("uint8 nibble pairs [N, K/2] (torch >= 2.5)", uint8_pairs),
                ("int32 codes [N, K] (torch <= 2.4)", int32_codes)]

    def pack(self, q):
        torch = self.torch
        if self.variant is None:
            self._find()
        return dict(self._variants())[self.variant](q)

    def mm(self, x, packed, sz):
        return self.torch._weight_int4pack_mm(x, packed, GROUP, sz)

    def _find(self):
        """Try each input format on a small weight; keep the first whose product matches the
        dequantised weight."""
        torch = self.torch
        n, k = 256, 512
        q, sz = self.quantize(n, k, 1)
        x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
        want = x.float() @ self.dequantized(q, sz).t()
        for name, f in self._variants():
            try:
                got = self.mm(x, f(q), sz).float()
                rel = ((got - want).norm() / want.norm()).item()
                self.tried.append({"variant": name, "rel_l2": rel})
                if rel < 2e-2:
                    self.variant = name
                    return
            except Exception as e:  # noqa: BLE001 - a format this version rejects
                self.tried.append({"variant": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        raise RuntimeError(
            "no input format of torch._convert_weight_to_int4pack worked with "
            f"torch._weight_int4pack_mm in torch {torch.__version__}: {self.tried}")


def rel_l2(torch, got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def gemv_int4(torch, i4, k, n, l2, copy_gbps):
    q, sz = i4.quantize(n, k, 1000 + k + n)
    packed = i4.pack(q)
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    check = rel_l2(torch, i4.mm(x, packed, sz), x.float() @ i4.dequantized(q, sz).t())
    del q
    b = int4_bytes(k, n)
    copies = copies_for(b, l2)
    ws = [(packed.clone(), sz.clone()) for _ in range(copies)]
    calls = calls_per_replay(copies)

    def run():
        for c in range(calls):
            w, s = ws[c % copies]
            i4.mm(x, w, s)

    r = result_from(time_graph(torch, run), calls, b, copy_gbps)
    r.update({"copies": copies, "calls_per_replay": calls, "check_rel_l2": check,
              "dtype": "bf16 activations, int4 weights, bf16 scale+zero, group 128"})
    return r


def gemv_fp16(torch, k, n, l2, copy_gbps):
    F = torch.nn.functional
    w = (torch.randn(n, k, device="cuda") * 0.02).half()
    x = torch.randn(1, k, device="cuda").half()
    check = rel_l2(torch, F.linear(x, w), x.float() @ w.float().t())
    b = fp16_bytes(k, n)
    copies = copies_for(b, l2)
    ws = [w] + [w.clone() for _ in range(copies - 1)]
    calls = calls_per_replay(copies)

    def run():
        for c in range(calls):
            F.linear(x, ws[c % copies])

    r = result_from(time_graph(torch, run), calls, b, copy_gbps)
    r.update({"copies": copies, "calls_per_replay": calls, "check_rel_l2": check,
              "dtype": "fp16 (F.linear, cuBLAS)"})
    return r


def result_from(replay_us, calls, bytes_moved, copy_gbps):
    s = stats_us([t / calls for t in replay_us])
    s["bytes"] = bytes_moved
    s["gbps"] = gbps(bytes_moved, s["median_us"])
    s["pct_copy"] = 100 * s["gbps"] / copy_gbps if s["gbps"] and copy_gbps else None
    return s


def rms_norm_fn(torch):
    F = torch.nn.functional
    if hasattr(F, "rms_norm"):
        return lambda x, w: F.rms_norm(x, (x.shape[-1],), w, RMS_EPS), "F.rms_norm"

    def manual(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(x.dtype) * w

    return manual, "manual rms_norm (this torch has no F.rms_norm)"


def down_chain(torch, i4, l2, copy_gbps):
    """Item 3: per rank INT4 GEMV 4352 -> 5120, sum over ranks, residual add, rms_norm."""
    k = FFN // TP
    norm, norm_name = rms_norm_fn(torch)
    per_rank = []
    for r in range(TP):
        q, sz = i4.quantize(HIDDEN, k, 2000 + r)
        per_rank.append((i4.pack(q), sz, q))
    xs = [torch.randn(1, k, device="cuda").to(torch.bfloat16) for _ in range(TP)]
    residual = torch.randn(1, HIDDEN, device="cuda").to(torch.bfloat16)
    norm_w = (1 + 0.1 * torch.randn(HIDDEN, device="cuda")).to(torch.bfloat16)

    def chain(weights, res_out, normed):
        partial = [i4.mm(xs[r], weights[r][0], weights[r][1]) for r in range(TP)]
        s = partial[0]
        for p in partial[1:]:
            s = s + p
        torch.add(s, residual, out=res_out)
        return norm(res_out, norm_w)

    res_out = torch.empty_like(residual)
    normed = torch.empty_like(residual)
    chain([(p, s) for p, s, _ in per_rank], res_out, normed)
    want = sum(xs[r].float() @ i4.dequantized(per_rank[r][2], per_rank[r][1]).t() for r in range(TP))
    want = want + residual.float()
    check = rel_l2(torch, res_out, want)
    weights = [(p, s) for p, s, _ in per_rank]
    del per_rank
    b = TP * int4_bytes(k, HIDDEN)
    copies = copies_for(b, l2)
    sets = [weights] + [[(p.clone(), s.clone()) for p, s in weights] for _ in range(copies - 1)]
    calls = calls_per_replay(copies)

    def run():
        for c in range(calls):
            chain(sets[c % copies], res_out, normed)

    r = result_from(time_graph(torch, run), calls, b, copy_gbps)
    r.update({"copies": copies, "calls_per_replay": calls, "check_rel_l2": check,
              "what": f"4 x INT4 GEMV 4352->5120 + sum over ranks + residual + {norm_name}, bf16"})
    return r


def ffn_block(torch, i4, l2, copy_gbps):
    """Per rank merged gate/up INT4 GEMV 5120 -> 8704, silu * mul, down INT4 GEMV 4352 -> 5120;
    sum over ranks, residual add, rms_norm."""
    F = torch.nn.functional
    n = FFN // TP
    norm, norm_name = rms_norm_fn(torch)
    ranks = []
    for r in range(TP):
        qg, szg = i4.quantize(2 * n, HIDDEN, 3000 + r)
        qd, szd = i4.quantize(HIDDEN, n, 4000 + r)
        ranks.append(((i4.pack(qg), szg), (i4.pack(qd), szd), (qg, qd)))
    x = torch.randn(1, HIDDEN, device="cuda").to(torch.bfloat16)
    residual = torch.randn(1, HIDDEN, device="cuda").to(torch.bfloat16)
    norm_w = (1 + 0.1 * torch.randn(HIDDEN, device="cuda")).to(torch.bfloat16)

    def block(weights, res_out, normed):
        partial = []
        for (wgu, sgu), (wd, sd) in weights:
            gu = i4.mm(x, wgu, sgu)
            h = F.silu(gu[:, :n]) * gu[:, n:]
            partial.append(i4.mm(h, wd, sd))
        s = partial[0]
        for p in partial[1:]:
            s = s + p
        torch.add(s, residual, out=res_out)
        return norm(res_out, norm_w)

    res_out = torch.empty_like(residual)
    normed = torch.empty_like(residual)
    weights = [(gu, d) for gu, d, _ in ranks]
    block(weights, res_out, normed)
    # Reference in float32 from the dequantised weights, rounding h to bf16 as the chain does.
    want = residual.float()
    for (gu, d, (qg, qd)) in ranks:
        gu_f = x.float() @ i4.dequantized(qg, gu[1]).t()
        h = (F.silu(gu_f[:, :n]) * gu_f[:, n:]).to(torch.bfloat16).float()
        want = want + h @ i4.dequantized(qd, d[1]).t()
    check = rel_l2(torch, res_out, want)
    del ranks
    b = TP * (int4_bytes(HIDDEN, 2 * n) + int4_bytes(n, HIDDEN))
    copies = copies_for(b, l2)
    sets = [weights] + [[((a.clone(), b2.clone()), (c.clone(), d.clone())) for (a, b2), (c, d) in weights]
                        for _ in range(copies - 1)]
    calls = calls_per_replay(copies, min_calls=8)

    def run():
        for c in range(calls):
            block(sets[c % copies], res_out, normed)

    r = result_from(time_graph(torch, run), calls, b, copy_gbps)
    r.update({"copies": copies, "calls_per_replay": calls, "check_rel_l2": check,
              "what": "per rank INT4 gate/up 5120->8704 + silu*mul + INT4 down 4352->5120; "
                      f"sum over ranks + residual + {norm_name}, bf16"})
    return r


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip().splitlines()[0])
        print(f"usage: {argv[0]} OUT.json", file=sys.stderr)
        return 2
    out_path = argv[1]
    res = {"schema": "wavefuse-torch-baselines/1",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "python": platform.python_version(), "errors": [], "gemv": []}
    t0 = time.time()

    def save():
        res["seconds"] = time.time() - t0
        with open(out_path, "w") as f:
            json.dump(res, f, indent=2, default=str)
        md = markdown(res)
        with open(os.path.splitext(out_path)[0] + ".md", "w") as f:
            f.write(md)
        return md

    try:
        import torch
        res["torch_version"] = torch.__version__
        res["cuda"] = torch.version.cuda
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False: no GPU for PyTorch")
        p = torch.cuda.get_device_properties(0)
        l2 = int(getattr(p, "L2_cache_size", 0) or 60 << 20)
        res["device"] = {"name": p.name, "sms": p.multi_processor_count, "l2_bytes": l2,
                         "capability": f"{p.major}.{p.minor}", "memory_bytes": p.total_memory}
        try:
            with open("/proc/driver/nvidia/version") as f:
                res["driver"] = f.readline().strip()
        except OSError:
            pass
    except Exception as e:  # noqa: BLE001
        res["errors"].append(f"setup: {error_text(e)}")
        print(save())
        return 0

    copy_gbps = None
    try:
        res["copy"] = copy_bandwidth(torch)
        copy_gbps = res["copy"]["gbps"]
    except Exception as e:  # noqa: BLE001
        res["copy"] = {"error": error_text(e)}
    save()

    i4 = Int4(torch)
    try:
        i4.pack(torch.zeros(8, 256, dtype=torch.int32, device="cuda"))
        res["int4_pack"] = {"variant": i4.variant, "inner_k_tiles": INNER_K_TILES, "tried": i4.tried}
    except Exception as e:  # noqa: BLE001
        res["int4_pack"] = {"variant": None, "tried": i4.tried, "error": error_text(e)}
        res["errors"].append(f"INT4 packing: {e}")
    save()

    for k, n in SHAPES:
        for kind, f in (("int4_g128", lambda: gemv_int4(torch, i4, k, n, l2, copy_gbps)),
                        ("fp16", lambda: gemv_fp16(torch, k, n, l2, copy_gbps))):
            row = {"k": k, "n": n, "kind": kind}
            try:
                if kind == "int4_g128" and i4.variant is None:
                    raise RuntimeError("no working INT4 packing (see int4_pack)")
                row.update(f())
            except Exception as e:  # noqa: BLE001
                row["error"] = error_text(e)
            res["gemv"].append(row)
            torch.cuda.empty_cache()
            print(f"{k}->{n} {kind}: {fmt(row.get('median_us'))} us {row.get('error', '')[:200]}",
                  file=sys.stderr, flush=True)
            save()

    for key, f in (("fused_down_chain_tp4", down_chain), ("ffn_block_tp4", ffn_block)):
        try:
            if i4.variant is None:
                raise RuntimeError("no working INT4 packing (see int4_pack)")
            res[key] = f(torch, i4, l2, copy_gbps)
        except Exception as e:  # noqa: BLE001
            res[key] = {"error": error_text(e)}
        torch.cuda.empty_cache()
        print(f"{key}: {fmt(res[key].get('median_us'))} us {res[key].get('error', '')[:200]}",
              file=sys.stderr, flush=True)
        save()

    if HOLD_MISSING:
        res["errors"].append(HOLD_MISSING[0])
    print(save())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
