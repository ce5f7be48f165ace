#!/usr/bin/env python3
"""(Copy of ../2026-12-03-h200-int4-gap/torch_gap.py with this folder's shapes.)
PyTorch's INT4 kernel (torch._weight_int4pack_mm) and cuBLAS FP16 (F.linear) at this run's
shapes and batches, through bench/torch/int4_baselines.py's helpers (its packing probe, CUDA-graph
timing behind a sleep kernel, weights rotating over >= 4 x L2). That script times batch 1 only; this
one passes x of `batch` rows. Replays: 120 per measurement.
    python3 torch_gap.py OUT.md"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "torch"))
import int4_baselines as ib  # noqa: E402
import torch  # noqa: E402

SHAPES = [(4352, 5120, 1), (1536, 5120, 1), (5120, 4352, 1)]  # (rank-gap folder: the one shape list changed)
REPLAYS = 120


def int4(i4, k, n, b, l2):
    q, sz = i4.quantize(n, k, 1000 + k + n)
    packed = i4.pack(q)
    x = torch.randn(b, k, device="cuda").to(torch.bfloat16)
    check = ib.rel_l2(torch, i4.mm(x, packed, sz), x.float() @ i4.dequantized(q, sz).t())
    del q
    nb = k * n // 2 + (k // 128) * n * 4 + 2 * b * k + 2 * b * n
    copies = ib.copies_for(nb, l2)
    ws = [(packed.clone(), sz.clone()) for _ in range(copies)]
    calls = ib.calls_per_replay(copies)

    def run():
        for c in range(calls):
            w, s = ws[c % copies]
            i4.mm(x, w, s)

    st = ib.stats_us([t / calls for t in ib.time_graph(torch, run, replays=REPLAYS)])
    del ws
    return st, nb, check, copies


def fp16(k, n, b, l2):
    F = torch.nn.functional
    w = (torch.randn(n, k, device="cuda") * 0.02).half()
    x = torch.randn(b, k, device="cuda").half()
    check = ib.rel_l2(torch, F.linear(x, w), x.float() @ w.float().t())
    nb = 2 * k * n + 2 * b * k + 2 * b * n
    copies = ib.copies_for(nb, l2)
    ws = [w] + [w.clone() for _ in range(copies - 1)]
    calls = ib.calls_per_replay(copies)

    def run():
        for c in range(calls):
            F.linear(x, ws[c % copies])

    st = ib.stats_us([t / calls for t in ib.time_graph(torch, run, replays=REPLAYS)])
    del ws
    return st, nb, check, copies


def main():
    out = open(sys.argv[1], "w")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 60 << 20)
    cb = ib.copy_bandwidth(torch)
    i4 = ib.Int4(torch)
    head = (f"## PyTorch {torch.__version__} on {props.name}: copy {cb['gbps']:.0f} GB/s (r+w); "
            f"INT4 packing: {i4.variant or '(probed at first use)'}\n\n"
            "| K -> N, batch | kernel | p50 us | p10 / p90 | GB/s | copies | check rel L2 (fp32 ref) |\n|---|---|---:|---:|---:|---:|---:|\n")
    print(head, end="")
    out.write(head)
    for k, n, b in SHAPES:
        for name, f in (("torch._weight_int4pack_mm (bf16, g128)", lambda: int4(i4, k, n, b, l2)),
                        ("cuBLAS FP16 F.linear", lambda: fp16(k, n, b, l2))):
            try:
                st, nb, check, copies = f()
                row = (f"| {k} -> {n}, {b} | {name} | {st['median_us']:.2f} | {st['p10_us']:.2f} / {st['p90_us']:.2f} | "
                       f"{nb / st['median_us'] / 1e3:.0f} | {copies} | {check:.1e} |\n")
            except Exception as e:  # noqa: BLE001
                row = f"| {k} -> {n}, {b} | {name} | error: {type(e).__name__}: {str(e)[:150]} | | | | |\n"
            print(row, end="", flush=True)
            out.write(row)
            out.flush()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
