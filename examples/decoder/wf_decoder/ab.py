"""The engine authors' A/B protocol in tokens per second (issue 37), as a command:

    python -m wf_decoder.ab --config qwen27b_dense --paths a,b,c --tp 1,4 --batch 1,8 \\
        --steps 50 --runs 3 --out DIR

For each TP size and batch: every path decodes the same prompt of the same random (or loaded)
model. First the correctness gate, then the timing:

- Gate: each path decodes ``--check-steps`` (≥ 32) steps teacher-forced on the reference's greedy
  tokens, through the same captured graph that is timed. Its own greedy choice equals the
  reference's at every step, or the first divergence is a near-tie: the reference's top-2 logit
  margin there is below ``--tie-tol`` (an FP16 tolerance, in logits). Per-step logits cosine vs the
  reference ≥ 0.999. The reference (``--gate-ref``) is path (a), or the FP32 model of the
  dequantised weights where (a) computes in bfloat16 (tinygemm on CUDA: agreement with it would
  test (a)'s rounding; (a) is then reported against the FP32 model, not gated). For a model
  of ≤ 2 layers, each layer's residual stream vs the float32 reference of the dequantised weights
  (eager), relative L2 ≤ ``--hidden-tol``.
- Timing: a warm-up decode per path, then ``--runs`` runs × ``--steps`` steps per path, the paths
  alternating within each run (in reverse order on odd runs). tokens/s = batch × steps / time.
  Mean, spread (min–max and standard deviation), delta and % vs (a).
- The bytes one decode step reads (INT4 weights with scales and zeros, norms, FP16 LM head, the KV
  cache at the mean timed position) and the floor: the tokens/s a linear read of those bytes at
  the device's read bandwidth allows, measured in the same run (a large reduction; a
  device-to-device copy is reported beside it).

Writes ``ab.json``, ``ab.md`` and ``ab.png`` (when matplotlib is there) to ``--out``, each with
the provenance (device, torch, date, commit, command line). The device name is in every line
printed. Under torchrun (WORLD_SIZE > 1) each process drives one GPU as one rank of a TP group
(NCCL; gloo with ``--device cpu``); rank 0 reports.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from .backends import canonical, make_backend
from .checkpoint import CheckpointReader, RandomSource
from .config import load_config
from .decode import StepRunner, generate, timed_decode
from .model import Decoder, shard_model

COSINE_MIN = 0.999


# ---- provenance and bandwidth ------------------------------------------------------------------


def device_name(device: torch.device) -> str:
    """The device as torch names it (with the CPU's name and thread count on CPU)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU {platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def provenance(device: torch.device, argv: list[str]) -> dict:
    """Device, torch, CUDA/HIP, date, commit and command line of this run. The commit is
    ``$WAVEFUSE_COMMIT`` where set (what a run script says its build is: a copy of the tree on a
    GPU machine may carry a stale ``.git``), else the repository's git HEAD."""
    commit = os.environ.get("WAVEFUSE_COMMIT", "").strip()
    repo = Path(__file__).resolve().parents[3]
    try:
        commit = commit or subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit or "unknown",
        "command": " ".join(shlex.quote(a) for a in ["python", "-m", "wf_decoder.ab"] + argv),
    }


def _timer(device):
    if device.type == "cuda":

        def run(fn, reps):
            fn()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(reps):
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize(device)
                times.append(start.elapsed_time(end) / 1e3)
            return statistics.median(times)
    else:

        def run(fn, reps):
            fn()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

    return run


def bandwidth(device: torch.device) -> dict:
    """Measured read bandwidth (a float32-accumulated sum over a large tensor) and
    device-to-device copy bandwidth (read + write bytes), GB/s, medians of 10."""
    cuda = device.type == "cuda"
    nbytes = (1 << 30) if cuda else (1 << 26)
    dt = torch.float16 if cuda else torch.float32  # CPU reductions over FP16 are not read-bound
    x = torch.randn(nbytes // dt.itemsize, device=device, dtype=dt)
    y = torch.empty_like(x)
    run = _timer(device)
    t_read = run(lambda: x.sum(dtype=torch.float32), 10)
    t_copy = run(lambda: y.copy_(x), 10)
    return {
        "read_gbps": nbytes / t_read / 1e9,
        "copy_gbps": 2 * nbytes / t_copy / 1e9,
        "bytes": nbytes,
    }


# ---- bytes and floor ---------------------------------------------------------------------------


def step_bytes(model: Decoder, position: float) -> dict:
    """Bytes one decode step must read: weights (all held ranks), and K and V at ``position``
    (positions 0..position are attended)."""
    cfg, sm = model.cfg, model.sm
    kv = (
        2
        * cfg.num_hidden_layers
        * len(sm.ranks)
        * model.batch
        * model.nkv
        * (position + 1)
        * cfg.head_dim
        * 2
    )
    w = sm.weight_bytes()
    return {"weights": w, "kv": int(kv), "total": int(w + kv)}


# ---- correctness -------------------------------------------------------------------------------


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1).min())


def gate(ref_tokens, ref_logits, tokens, logits, tie_tol: float) -> dict:
    """Compare a path's teacher-forced greedy tokens and logits with (a)'s: equal tokens, or the
    first divergence a near-tie; and the lowest per-step logits cosine."""
    diff = (tokens != ref_tokens).nonzero()
    res = {
        "steps": int(ref_tokens.shape[1]),
        "tokens_equal": diff.numel() == 0,
        "cos_min": min(_cos(a, b) for a, b in zip(ref_logits, logits, strict=True)),
    }
    if diff.numel():
        bi, s = int(diff[0, 0]), int(diff[0, 1])
        for row in diff.tolist():  # first step, then first sequence
            if row[1] < s:
                bi, s = row
        top2 = ref_logits[s][bi].topk(2).values
        margin = float(top2[0] - top2[1])
        res.update(
            first_divergence={
                "step": s,
                "sequence": bi,
                "a_margin": margin,
                "max_abs_logit_diff": float((ref_logits[s][bi] - logits[s][bi]).abs().max()),
            },
            near_tie=margin < tie_tol,
            divergent_steps=int(diff[:, 1].unique().numel()),
        )
    res["pass"] = bool((res["tokens_equal"] or res["near_tie"]) and res["cos_min"] >= COSINE_MIN)
    return res


def f32_agreement(f32_logits, logits) -> dict:
    """How close one path's teacher-forced logits are to the FP32 reference's: the lowest per-step
    cosine, and the share of (step, sequence) whose greedy token is the reference's."""
    agree = [
        (f.argmax(-1) == g.argmax(-1)).double().mean().item()
        for f, g in zip(f32_logits, logits, strict=True)
    ]
    return {
        "cos_min": min(_cos(f, g) for f, g in zip(f32_logits, logits, strict=True)),
        "top1_agree": sum(agree) / len(agree),
    }


def f32_reference(sm, device, group, batch, max_seq, prompt, steps, force=None):
    """The FP32 model of the dequantised weights (``torch_f32``, eager) decoding ``steps`` steps
    after ``prompt``: greedily on its own tokens, or teacher-forced on ``force``; its tokens and
    logits. Where its float32 weights (4× their FP16 bytes) do not fit on the device, the same
    model with the weights dequantised per call (``torch_f32`` lazy: the same values, slower);
    None, and why, where that does not fit either."""
    why = None
    for lazy in (False, True):
        model = None
        try:
            model = Decoder(
                sm, make_backend("torch_f32", device, group, lazy=lazy), batch=batch, max_seq=max_seq
            )
            return (
                generate(
                    StepRunner(model, graph=False),
                    prompt.to(device),
                    steps,
                    keep_logits=True,
                    force=None if force is None else force.to(device),
                ),
                None,
            )
        except torch.OutOfMemoryError as e:
            why = f"the FP32 reference does not fit: {str(e).splitlines()[0]}"
        finally:
            model = None
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return None, why


def f32_logits_check(sm, device, group, batch, max_seq, prompt, ref, logits) -> dict:
    """Every path's logits (``logits``: path → per-step logits, teacher-forced on (a)'s tokens)
    against the FP32 reference of the dequantised weights (``torch_f32``), forced on the same
    tokens: which path is closer to exact arithmetic when they disagree with each other. The
    reference holds the weights in float32 (4× the FP16 bytes) or dequantises them per call
    (:func:`f32_reference`); where neither fits, every path's entry says so instead."""
    f32, why = f32_reference(sm, device, group, batch, max_seq, prompt, len(ref.logits), ref.tokens)
    if f32 is None:
        return {p: {"error": why} for p in logits}
    return {p: f32_agreement(f32.logits, lg) for p, lg in logits.items()}


def gate_reference(choice: str, baseline_backend) -> str:
    """Which reference the gate holds paths (b), (c) to: ``choice`` when it is ``a`` or ``f32``;
    with ``auto``, the FP32 model where path (a) computes in bfloat16 (tinygemm's CUDA kernel: its
    8-bit mantissa puts (a) further from exact arithmetic than an FP16 path, so agreement with (a)
    would test (a)), else (a)."""
    if choice != "auto":
        return choice
    return "f32" if getattr(baseline_backend, "act", None) == torch.bfloat16 else "a"


def hidden_states(model: Decoder, prompt, force) -> list[torch.Tensor]:
    """Each layer's residual stream at every position (eager), float32 on the CPU."""
    seq = torch.cat([prompt, force], 1).to(model.device)
    model.reset()
    out = []
    for t in range(seq.shape[1]):
        hs = []
        model.step(seq[:, t].contiguous(), torch.tensor(t, device=model.device), hidden=hs)
        out.append(torch.stack([h.float().cpu() for h in hs]))
    return out


def hidden_rel_err(got: list[torch.Tensor], ref: list[torch.Tensor]) -> float:
    """Largest relative L2 error of a layer's residual stream over positions and layers."""
    return max(
        float((g - r).norm() / r.norm())
        for gs, rs in zip(got, ref, strict=True)
        for g, r in zip(gs, rs, strict=True)
    )


# ---- the protocol ------------------------------------------------------------------------------


def _stats(tps: list[float]) -> dict:
    return {
        "runs": tps,
        "mean": statistics.fmean(tps),
        "min": min(tps),
        "max": max(tps),
        "stdev": statistics.stdev(tps) if len(tps) > 1 else 0.0,
    }


def run_ab(args, device, group=None, rank: int = 0, world: int = 1, log=print) -> dict:
    """The whole protocol for every TP size and batch of ``args``; returns the results dict."""
    cfg = load_config(args.config)
    paths = [canonical(p) for p in args.paths.split(",")]
    bw = bandwidth(device)
    dev_name = device_name(device)
    log(
        f"[{dev_name}] read {bw['read_gbps']:.1f} GB/s, copy {bw['copy_gbps']:.1f} GB/s "
        f"(read + write)"
    )
    rows, skipped = [], {}
    for tp in [int(t) for t in args.tp.split(",")]:
        ranks = list(range(tp)) if world == 1 else [rank]
        if world > 1 and world != tp:
            raise SystemExit(f"--tp {tp} with {world} processes: one rank per process")
        source = (
            CheckpointReader(args.checkpoint, cfg)
            if args.checkpoint
            else RandomSource(cfg, args.seed)
        )
        t0 = time.perf_counter()
        sm = shard_model(source, tp, ranks, device)
        where = (
            f"checkpoint {args.checkpoint}" if args.checkpoint else "random weights on the device"
        )
        dt = time.perf_counter() - t0
        log(f"[{dev_name}] {cfg.name}: tp {tp} sharded in {dt:.1f} s ({where})")
        for batch in [int(b) for b in args.batch.split(",")]:
            rows += _ab_one(
                args, cfg, sm, paths, tp, batch, device, group, dev_name, bw, skipped, log
            )
        del sm
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {
        "provenance": provenance(device, args.argv),
        "config": cfg.name,
        "model": {k: v for k, v in cfg.to_hf().items()},
        "bandwidth": bw,
        "protocol": {
            "steps": args.steps,
            "runs": args.runs,
            "check_steps": args.check_steps,
            "prompt_len": args.prompt_len,
            "tie_tol": args.tie_tol,
            "gate_ref": args.gate_ref,
            "schedule": args.schedule,
            "cosine_min": COSINE_MIN,
            "hidden_tol": args.hidden_tol,
            "graphs": device.type == "cuda" and not args.no_graph,
            "world_size": world,
        },
        "skipped": skipped,
        "rows": rows,
    }


def _ab_one(args, cfg, sm, paths, tp, batch, device, group, dev_name, bw, skipped, log):
    gen = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(0, cfg.vocab_size, (batch, args.prompt_len), generator=gen)
    max_seq = args.prompt_len + max(args.steps, args.check_steps) + 2
    models, runners, describe, backends = {}, {}, {}, {}
    for p in paths:
        try:
            backend = make_backend(
                p,
                device,
                group,
                compile=args.compile,
                schedule=args.schedule,
                dump_ir=args.dump_ir,
                launch=args.launch,
            )
        except (ImportError, NotImplementedError) as e:
            if p not in skipped:
                skipped[p] = str(e).splitlines()[0]
                log(f"[{dev_name}] {p}: {skipped[p]}")
            continue
        backends[p] = backend
        models[p] = Decoder(sm, backend, batch=batch, max_seq=max_seq)
        t0 = time.perf_counter()
        runners[p] = StepRunner(models[p], graph=False if args.no_graph else None)
        describe[p] = backend.describe()
        log(
            f"[{dev_name}] tp {tp} batch {batch} {p}: ready in {time.perf_counter() - t0:.1f} s "
            f"— {describe[p]}"
        )
    live = [p for p in paths if p in models]
    if not live:
        return []
    # correctness: teacher-forced on the reference's greedy tokens, through the timed graphs
    a = live[0]
    ref_kind = gate_reference(args.gate_ref, backends[a])
    gates, logits, ref = {}, {}, None
    if ref_kind == "f32":
        ref, why = f32_reference(sm, device, group, batch, max_seq, prompt, args.check_steps)
        if ref is None:
            log(f"[{dev_name}] tp {tp} batch {batch}: gate against (a) instead: {why}")
            ref_kind = "a"
    if ref_kind == "a":
        ref = generate(runners[a], prompt.to(device), args.check_steps, keep_logits=True)
        logits[a] = ref.logits
    for p in live if ref_kind == "f32" else live[1:]:
        g = generate(
            runners[p],
            prompt.to(device),
            args.check_steps,
            keep_logits=True,
            force=ref.tokens.to(device),
        )
        gates[p] = gate(ref.tokens, ref.logits, g.tokens, g.logits, args.tie_tol)
        gates[p]["reference"] = ref_kind
        logits[p] = g.logits
    if ref_kind == "f32":
        # (a) is the baseline the others are timed against, not a path under test: its agreement
        # with the FP32 model is reported, not gated; each path's cosine vs (a) beside it.
        gates[a]["baseline"] = True
        for p in live[1:]:
            gates[p]["vs_a_cos_min"] = min(
                _cos(x, y) for x, y in zip(logits[a], logits[p], strict=True)
            )
    if args.f32_logits and ref_kind == "a":
        for p, f in f32_logits_check(sm, device, group, batch, max_seq, prompt, ref, logits).items():
            gates.setdefault(p, {"pass": True})["f32"] = f
    if cfg.num_hidden_layers <= 2:
        ref32 = Decoder(sm, make_backend("torch_f32", device, group), batch=batch, max_seq=max_seq)
        h_ref = hidden_states(ref32, prompt, ref.tokens)
        del ref32
        for p in live:
            gates.setdefault(p, {"pass": True})
            err = hidden_rel_err(hidden_states(models[p], prompt, ref.tokens), h_ref)
            gates[p]["hidden_rel_err"] = err
            gates[p]["pass"] = bool(gates[p]["pass"] and err <= args.hidden_tol)
    # timing
    for p in live:
        timed_decode(runners[p], prompt.to(device), args.warmup_steps)
    tps = {p: [] for p in live}
    for run in range(args.runs):
        for p in live if run % 2 == 0 else live[::-1]:
            dt = timed_decode(runners[p], prompt.to(device), args.steps)
            tps[p].append(batch * args.steps / dt)
    nbytes = step_bytes(models[a], args.prompt_len + args.steps / 2)
    floor = batch * bw["read_gbps"] * 1e9 / nbytes["total"]
    rows = []
    base = statistics.fmean(tps[a])
    for p in live:
        st = _stats(tps[p])
        row = {
            "tp": tp,
            "batch": batch,
            "path": p,
            "backend": describe[p],
            "tok_s": st,
            "delta_tok_s": st["mean"] - base,
            "delta_pct": 100 * (st["mean"] / base - 1),
            "bytes_per_step": nbytes,
            "floor_tok_s": floor,
            "pct_of_floor": 100 * st["mean"] / floor,
            "gate": gates.get(p),
            "placement": "ranks in one process" if len(sm.ranks) == tp else "one rank per process",
        }
        if args.profile and device.type == "cuda":
            try:
                row["profile"] = profile_step(
                    runners[p], prompt.to(device), args.profile, 1e6 * batch / st["mean"]
                )
            except Exception as e:  # noqa: BLE001 - the timing stands; the profile says why not
                row["profile"] = {"error": f"{type(e).__name__}: {e}"}
        rows.append(row)
        log(
            f"[{dev_name}] tp {tp} batch {batch} {p}: {st['mean']:.1f} tok/s "
            f"({st['min']:.1f}–{st['max']:.1f}, sd {st['stdev']:.2f}); "
            f"{row['delta_tok_s']:+.1f} tok/s ({row['delta_pct']:+.1f} %) vs {a}; "
            f"{row['pct_of_floor']:.0f} % of floor {floor:.0f} tok/s; "
            f"gate {_gate_text(row['gate'])}"
        )
    for r in runners.values():
        r.graph = None
    # Collective with a process group: every rank closes the same backends, in the same order.
    for b in backends.values():
        b.close()
    return rows


# Kernel names by what they do, first match wins (lower case). wavefuse's kernels carry the set's
# names (kernels-gen/src/set.rs) or a `.wfir` kernel's; the others are PyTorch's.
PROFILE_CATEGORIES = (
    ("allreduce (NCCL)", ("nccl",)),
    ("wavefuse", ("gemv_int4", "gemv_f16", "allreduce_", "wavefuse", "wf_")),
    ("attention", ("flash", "fmha", "attention", "sdpa", "efficient_attention")),
    ("int4 GEMM (torch)", ("int4", "tinygemm")),
    ("GEMM (cuBLAS/CUTLASS)", ("gemm", "cutlass", "xmma", "nvjet", "cublas")),
    ("Triton (torch.compile)", ("triton",)),
    ("copy / fill", ("memcpy", "memset", "copy", "fill")),
)


def kernel_category(name: str) -> str:
    """The profile category of a GPU kernel's name (:data:`PROFILE_CATEGORIES`), else "other"."""
    low = name.lower()
    for cat, keys in PROFILE_CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"


def profile_split(kernels: list[tuple[str, float]], steps: int, step_us: float) -> dict:
    """Per-step device time by category from ``(name, µs)`` kernel records over ``steps`` steps,
    and the gap: the timed step (``step_us``, from the tok/s) minus the kernels' sum, which is
    launch and graph overhead plus idle time where the kernels ran back to back on one stream."""
    cats: dict[str, float] = {}
    by_name: dict[str, list[float]] = {}
    for name, us in kernels:
        c = kernel_category(name)
        cats[c] = cats.get(c, 0.0) + us / steps
        t = by_name.setdefault(name, [0.0, 0.0])
        t[0] += us / steps
        t[1] += 1 / steps
    busy = sum(cats.values())
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:20]
    return {
        "us_per_step": dict(sorted(cats.items(), key=lambda kv: -kv[1])),
        # The 20 kernels (by name) with the most device time: µs and launches per step.
        "top_kernels": [
            {"name": n[:160], "category": kernel_category(n), "us_per_step": t, "per_step": c}
            for n, (t, c) in top
        ],
        "kernels_per_step": len(kernels) / steps,
        "busy_us": busy,
        "step_us": step_us,
        "gap_us": step_us - busy,
    }


def profile_step(runner, prompt, steps: int, step_us: float) -> dict:
    """``steps`` replays of the step under torch.profiler (CUDA activity): the device time of each
    kernel, split by :func:`profile_split`. The timed runs are done; this one is not timed."""
    from torch.profiler import ProfilerActivity, profile

    runner.prefill(prompt)
    torch.cuda.synchronize(runner.model.device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            runner.advance()
        torch.cuda.synchronize(runner.model.device)
    kernels = [
        (e.name, e.time_range.elapsed_us())
        for e in prof.events()
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
    ]
    if not kernels:
        raise RuntimeError("the profiler recorded no GPU kernel (CUPTI unavailable?)")
    return profile_split(kernels, steps, step_us)


_GATE_REF = {
    "a": "(a)",
    "f32": "the FP32 model of the dequantised weights",
    "auto": "the FP32 model where (a) runs in bfloat16, else (a)",
}


def gate_passes(g) -> bool:
    """Whether a row's gate lets the run pass: no gate (the reference itself), the baseline (a)
    against the FP32 model (reported, not gated), or a passed gate."""
    return g is None or bool(g.get("baseline")) or bool(g["pass"])


def _gate_text(g) -> str:
    if g is None:
        return "reference (a)"
    parts = []
    who = "FP32" if g.get("reference") == "f32" else "(a)"
    if "tokens_equal" in g:
        if g["tokens_equal"]:
            parts.append(f"tokens = {who} for {g['steps']} steps")
        else:
            d = g["first_divergence"]
            parts.append(
                f"first divergence from {who} at step {d['step']}: {who} margin "
                f"{d['a_margin']:.3g} "
                f"{'< tie tol: near-tie' if g['near_tie'] else '>= tie tol: NOT a near-tie'}"
            )
        parts.append(f"cos min vs {who} {g['cos_min']:.5f}")
    if "vs_a_cos_min" in g:
        parts.append(f"cos min vs (a) {g['vs_a_cos_min']:.5f}")
    if "hidden_rel_err" in g:
        parts.append(f"hidden vs f32 {g['hidden_rel_err']:.2e}")
    if "f32" in g:
        f = g["f32"]
        parts.append(
            f"FP32 reference: {f['error']}"
            if "error" in f
            else f"vs FP32 reference: cos min {f['cos_min']:.5f}, top-1 {100 * f['top1_agree']:.1f} %"
        )
    if g.get("baseline"):
        return "baseline, not gated: " + ", ".join(parts)
    return ("PASS: " if g["pass"] else "FAIL: ") + ", ".join(parts)


# ---- reports -----------------------------------------------------------------------------------


def markdown(res: dict) -> str:
    """The results as Markdown: provenance, then one table row per (TP, batch, path)."""
    pv, bw = res["provenance"], res["bandwidth"]
    pr = res["protocol"]
    out = [
        f"# Decode A/B: {res['config']} ({pv['device']})",
        "",
        f"- device: **{pv['device']}**; torch {pv['torch']} (CUDA {pv['cuda']}, HIP {pv['hip']})",
        f"- date: {pv['date']}; commit: {pv['commit']}",
        f"- command: `{pv['command']}`",
        f"- protocol: warm-up, then {pr['runs']} runs × {pr['steps']} steps per path, paths "
        f"alternating; {'each step one CUDA graph replay' if pr['graphs'] else 'eager steps'}; "
        f"gate over {pr['check_steps']} teacher-forced steps against "
        f"{_GATE_REF.get(pr.get('gate_ref', 'a'))} (tie tolerance {pr['tie_tol']} "
        f"logits, cosine ≥ {pr['cosine_min']}, hidden rel. L2 ≤ {pr['hidden_tol']} where ≤ 2 "
        f"layers)",
        f"- measured read bandwidth {bw['read_gbps']:.1f} GB/s (copy {bw['copy_gbps']:.1f} GB/s "
        f"read + write); floor = batch × read bandwidth / bytes per step",
        "- TP placement: "
        + (
            "one rank per process and device"
            if pr["world_size"] > 1
            else "every rank in one process on one device (TP > 1 rows time all "
            "ranks' work on that device, not a deployed TP step)"
        ),
        "",
    ]
    for p, why in res["skipped"].items():
        out.append(f"- {p}: {why}")
    if res["skipped"]:
        out.append("")
    out += [
        "| TP | batch | path | tok/s mean | min–max (sd) | Δ vs (a) | % vs (a) | MB/step | "
        "floor tok/s | % of floor | gate |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in res["rows"]:
        t = r["tok_s"]
        out.append(
            f"| {r['tp']} | {r['batch']} | {r['path']} | {t['mean']:.1f} | "
            f"{t['min']:.1f}–{t['max']:.1f} ({t['stdev']:.2f}) | {r['delta_tok_s']:+.1f} | "
            f"{r['delta_pct']:+.1f} % | {r['bytes_per_step']['total'] / 1e6:.1f} | "
            f"{r['floor_tok_s']:.0f} | {r['pct_of_floor']:.0f} % | {_gate_text(r['gate'])} |"
        )
    prof = [r for r in res["rows"] if r.get("profile")]
    if prof:
        cats = []
        for r in prof:
            for c in r["profile"].get("us_per_step", {}):
                if c not in cats:
                    cats.append(c)
        out += [
            "",
            "Profile of one step (torch.profiler over the replayed graph, µs of device time per "
            "step; gap = the timed step − the kernels' sum: launch/graph overhead and idle time):",
            "",
            "| TP | batch | path | step µs | " + " | ".join(cats) + " | gap µs | kernels/step |",
            "|---:|---:|---|---:|" + "---:|" * len(cats) + "---:|---:|",
        ]
        for r in prof:
            pf = r["profile"]
            if "error" in pf:
                out.append(f"| {r['tp']} | {r['batch']} | {r['path']} | profile failed: {pf['error']} |")
                continue
            cells = " | ".join(f"{pf['us_per_step'].get(c, 0.0):.1f}" for c in cats)
            out.append(
                f"| {r['tp']} | {r['batch']} | {r['path']} | {pf['step_us']:.1f} | {cells} | "
                f"{pf['gap_us']:.1f} | {pf['kernels_per_step']:.0f} |"
            )
    out += ["", "Paths (as built at the last TP size):"] + [
        f"- {b}" for b in {r["path"]: r["backend"] for r in res["rows"]}.values()
    ]
    return "\n".join(out) + "\n"


def chart(res: dict, path: Path) -> str | None:
    """A bar chart of tokens/s (mean, min–max) per path for each (TP, batch), with the floor;
    None if drawn, else why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: no chart"
    rows = res["rows"]
    groups = sorted({(r["tp"], r["batch"]) for r in rows})
    paths = list(dict.fromkeys(r["path"] for r in rows))
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(groups), 4))
    w = 0.8 / max(len(paths), 1)
    for j, p in enumerate(paths):
        xs, ys, lo, hi = [], [], [], []
        for i, g in enumerate(groups):
            r = next((r for r in rows if (r["tp"], r["batch"]) == g and r["path"] == p), None)
            if r:
                xs.append(i + j * w)
                ys.append(r["tok_s"]["mean"])
                lo.append(r["tok_s"]["mean"] - r["tok_s"]["min"])
                hi.append(r["tok_s"]["max"] - r["tok_s"]["mean"])
        ax.bar(xs, ys, w, yerr=[lo, hi], label=p, capsize=3)
    for i, g in enumerate(groups):
        f = next(r["floor_tok_s"] for r in rows if (r["tp"], r["batch"]) == g)
        ax.hlines(f, i - w / 2, i + w * (len(paths) - 0.5), colors="k", linestyles="dashed")
    ax.set_xticks([i + w * (len(paths) - 1) / 2 for i in range(len(groups))])
    ax.set_xticklabels([f"TP {t}, batch {b}" for t, b in groups])
    ax.set_ylabel("tokens/s (dashed: floor)")
    pv = res["provenance"]
    ax.set_title(f"{res['config']} on {pv['device']}\n{pv['date']} {pv['commit']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m wf_decoder.ab", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--config", default="tiny", help="preset name or config.json path")
    ap.add_argument(
        "--checkpoint",
        help="GPTQ checkpoint directory (default: random weights made on the device)",
    )
    ap.add_argument(
        "--paths",
        default="torch_best,wavefuse_unfused,wavefuse_fused",
        help="comma-separated paths; the first is (a), the baseline",
    )
    ap.add_argument("--tp", default="1", help="comma-separated TP sizes")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--check-steps", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=8)
    ap.add_argument(
        "--tie-tol",
        type=float,
        default=0.05,
        help="(a)'s top-2 logit margin under which a divergence is a near-tie",
    )
    ap.add_argument("--hidden-tol", type=float, default=2e-2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-graph", action="store_true", help="eager steps on CUDA too")
    ap.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile for torch_best (default: on CUDA)",
    )
    ap.add_argument(
        "--schedule",
        choices=["default", "tuned"],
        default="default",
        help="the wavefuse paths' schedules: the target's default, or the tuned-schedule store's "
        "entry per kernel where there is one (docs/python.md)",
    )
    ap.add_argument(
        "--launch",
        choices=["stream", "dependent"],
        default="stream",
        help="the wavefuse paths' launches: plain stream order, or each kernel that allows it as "
        "a programmatic dependent of the previous kernel (wavefuse.kernel(launch=...), "
        "docs/python.md)",
    )
    ap.add_argument(
        "--dump-ir",
        default=None,
        metavar="DIR",
        help="write each wavefuse kernel's .wfir into DIR as it is built (to tune them: `wavefuse "
        "tune --kernel-file`)",
    )
    ap.add_argument(
        "--gate-ref",
        choices=["auto", "a", "f32"],
        default="auto",
        help="what paths (b), (c) are gated against: (a)'s tokens and logits, or the FP32 model "
        "of the dequantised weights (decoding its own greedy tokens; (a) is then reported "
        "against it, not gated). auto: f32 where (a) computes in bfloat16 (tinygemm on CUDA), "
        "else a; where the FP32 model does not fit even with its weights dequantised per call, (a)",
    )
    ap.add_argument(
        "--f32-logits",
        action="store_true",
        help="also compare every path's teacher-forced logits, (a)'s too, with an FP32 reference "
        "of the dequantised weights (informational: says which path is closer to exact)",
    )
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="STEPS",
        help="after timing, profile STEPS replayed steps per path (CUDA): device time by kernel "
        "category and the launch gap (default: off)",
    )
    ap.add_argument("--out", default="ab-results")
    args = ap.parse_args(argv)
    if args.check_steps < 32 or args.steps < 1 or args.runs < 1:
        ap.error("--check-steps must be >= 32, --steps and --runs >= 1")
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the protocol; exit status 1 if any path failed its correctness gate."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # each (TP, batch, path) compiles its own variants of the same small functions
    torch._dynamo.config.recompile_limit = 64
    world = int(os.environ.get("WORLD_SIZE", "1"))
    group, rank = None, 0
    if world > 1:
        import torch.distributed as dist

        cuda = args.device != "cpu"
        dist.init_process_group("nccl" if cuda else "gloo")
        rank = dist.get_rank()
        if cuda:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        group = dist.group.WORLD
    else:
        device = torch.device(args.device)
    log = print if rank == 0 else (lambda *a, **k: None)
    res = run_ab(args, device, group, rank, world, log)
    if rank == 0:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "ab.json").write_text(json.dumps(res, indent=2) + "\n")
        md = markdown(res)
        why = chart(res, out / "ab.png")
        if why:
            md += f"\nChart: {why}.\n"
        (out / "ab.md").write_text(md)
        print(md)
        print(
            f"[{res['provenance']['device']}] wrote {out / 'ab.json'}, {out / 'ab.md'}"
            f"{'' if why else ', ' + str(out / 'ab.png')}"
        )
    ok = all(gate_passes(r["gate"]) for r in res["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
