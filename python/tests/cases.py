"""Inputs and float64 reference outputs for every kernel of the set, at whatever shapes a built
kernel has (read from its ABI): shared by the GPU tests (small shapes) and the graph-replay bench
(the model's shapes). Replicated inputs (`residual`, `norm_w`) are the same on every rank."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch

from reference import dequant_gptq, f16, int8_roundtrip, rmsnorm, silu

F64 = torch.float64


def _shape(k, name) -> Tuple[int, ...]:
    return next(a.shape for a in k.abi if a.name == name)


def _act(shape, g):
    return torch.randn(*shape, generator=g, dtype=F64).to(torch.float16)


def _gptq(k, w, g):
    kg, n = _shape(k, f"{w}_qweight")
    groups = _shape(k, f"{w}_scales")[0]
    qweight = torch.randint(-(2**31), 2**31 - 1, (kg, n), dtype=torch.int32, generator=g)
    qzeros = torch.randint(-(2**31), 2**31 - 1, (groups, n // 8), dtype=torch.int32, generator=g)
    scales = (torch.rand(groups, n, generator=g, dtype=F64) * 0.004 + 0.001).to(torch.float16)
    return {f"{w}_qweight": qweight, f"{w}_scales": scales, f"{w}_qzeros": qzeros}


def _deq(ins, w, dev):
    return dequant_gptq(ins[f"{w}_qweight"], ins[f"{w}_scales"], ins[f"{w}_qzeros"]).to(dev)


def _norm_w(k, g):
    return (1.0 + 0.1 * torch.randn(*_shape(k, "norm_w"), generator=g, dtype=F64)).to(torch.float16)


def make(k: Any, seed: int, ref_device: str = "cpu") -> Tuple[Dict[str, Any], List[Any]]:
    """`k`'s inputs (CPU tensors; lists per rank when TP > 1) and its outputs in `k.outputs`
    order, computed in float64 on `ref_device` (per rank lists when TP > 1)."""
    g = torch.Generator().manual_seed(seed)
    tp, name = k.tp, k.name
    dev = ref_device

    def x64(t):
        return t.to(dev, F64)

    def ranks(make_one):
        return [make_one() for _ in range(tp)]

    if name in ("gemv_int4", "gemv_f16", "gemv_int4_dual_silu", "gemv_int4_qkv"):
        assert tp == 1, "the GEMV cases are built at TP 1"
        x = _act(_shape(k, "x"), g)
        if name == "gemv_f16":
            w = _act(_shape(k, "w"), g) * 0.02
            return dict(w=w, x=x), [f16(x64(x) @ x64(w).T).cpu()]
        if name == "gemv_int4":
            ins = dict(_gptq(k, "w", g), x=x)
            return ins, [f16(x64(x) @ _deq(ins, "w", dev)).cpu()]
        if name == "gemv_int4_dual_silu":
            ins = dict(_gptq(k, "w_gate", g), **_gptq(k, "w_up", g), x=x)
            xf = x64(x)
            return ins, [f16(silu(xf @ _deq(ins, "w_gate", dev)) * (xf @ _deq(ins, "w_up", dev))).cpu()]
        ins = dict(_gptq(k, "w_qkv", g), x=x)
        full = f16(x64(x) @ _deq(ins, "w_qkv", dev)).cpu()
        nq, nkv = _shape(k, "q")[1], _shape(k, "k")[1]
        return ins, [full[:, :nq], full[:, nq : nq + nkv], full[:, nq + nkv :]]

    hidden_shape = _shape(k, "residual_out") if name != "allreduce_int8" else _shape(k, "y")
    if name == "allreduce_int8":
        p = ranks(lambda: _act(hidden_shape, g))
        want = f16(sum(int8_roundtrip(x64(t), 128) for t in p)).cpu()
        return dict(partial=p), [[want] * tp]
    r = _act(hidden_shape, g)
    if name in ("allreduce_residual", "allreduce_residual_rmsnorm"):
        p = ranks(lambda: _act(hidden_shape, g))
        res = f16(sum(x64(t) for t in p) + x64(r))
        if name == "allreduce_residual":
            return dict(partial=p, residual=[r] * tp), [[res.cpu()] * tp]
        w = _norm_w(k, g)
        normed = f16(rmsnorm(res, x64(w), 1e-6)).cpu()
        return dict(partial=p, residual=[r] * tp, norm_w=[w] * tp), [[res.cpu()] * tp, [normed] * tp]
    assert name == "gemv_int4_allreduce_rmsnorm"
    ws = ranks(lambda: _gptq(k, "w_down", g))
    xs = ranks(lambda: _act(_shape(k, "x"), g))
    w = _norm_w(k, g)
    parts = [f16(x64(xs[i]) @ _deq(ws[i], "w_down", dev)) for i in range(tp)]
    res = f16(sum(parts) + x64(r))
    normed = f16(rmsnorm(res, x64(w), 1e-6)).cpu()
    ins = {n: [wi[n] for wi in ws] for n in ws[0]}
    ins.update(x=xs, residual=[r] * tp, norm_w=[w] * tp)
    return ins, [[res.cpu()] * tp, [normed] * tp]
