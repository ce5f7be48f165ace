"""A test double of the ``wavefuse`` package's assumed API (see
wf_decoder/backends/wavefuse_backend.py): ``kernel(name, tp=, batch=, device=, **shape)`` returns a
callable computing the kernel of kernels-gen/src/set.rs in PyTorch, with its rounding points. It
checks the adapter's calls (names, shape parameters, argument names, per-rank lists), not
wavefuse's kernels."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from wf_decoder.gptq import GptqWeight

SHAPES = {
    "gemv_int4": {"hidden", "n", "group_size", "zero_point"},
    "gemv_int4_qkv": {"hidden", "nq", "nkv", "group_size", "zero_point"},
    "gemv_int4_dual_silu": {"hidden", "n", "group_size", "zero_point"},
    "allreduce_residual": {"hidden"},
    "allreduce_residual_rmsnorm": {"hidden", "eps"},
    "gemv_int4_allreduce_rmsnorm": {"hidden", "k", "group_size", "zero_point", "eps"},
}
calls: list[str] = []


def _w(d: dict, k: int, n: int, shape: dict) -> torch.Tensor:
    w = GptqWeight(d["qweight"], d["scales"], d["qzeros"], shape["group_size"], shape["zero_point"])
    assert (w.k, w.n) == (k, n), f"weight {w.k}x{w.n}, kernel built for {k}x{n}"
    return w.dequantize(torch.float32)


def _list(x, tp: int) -> list:
    if tp == 1:
        assert not isinstance(x, list), "tp=1 takes single tensors"
        return [x]
    assert isinstance(x, list) and len(x) == tp, f"tp={tp} takes a list of {tp} per-rank tensors"
    return x


def _norm(r, w, eps):
    return (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * w.float()).half()


def kernel(name: str, tp: int, batch: int, device: str, **shape):
    """The kernel ``name`` built for these shapes, as a callable of its inputs by name."""
    assert set(shape) == SHAPES[name], f"{name}: shape parameters {sorted(shape)}"
    calls.append(name)
    h = shape["hidden"]

    def run(**a):
        if name == "gemv_int4":
            return (a["x"].float() @ _w(a["w"], h, shape["n"], shape)).half()
        if name == "gemv_int4_qkv":
            nq, nkv = shape["nq"], shape["nkv"]
            y = (a["x"].float() @ _w(a["w_qkv"], h, nq + 2 * nkv, shape)).half()
            return y[:, :nq], y[:, nq : nq + nkv], y[:, nq + nkv :]
        if name == "gemv_int4_dual_silu":
            g = a["x"].float() @ _w(a["w_gate"], h, shape["n"], shape)
            u = a["x"].float() @ _w(a["w_up"], h, shape["n"], shape)
            return (F.silu(g) * u).half()
        if name == "gemv_int4_allreduce_rmsnorm":
            xs, ws = _list(a["x"], tp), _list(a["w_down"], tp)
            parts = [
                (x.float() @ _w(w, shape["k"], h, shape)).half()
                for x, w in zip(xs, ws, strict=True)
            ]
        else:
            parts = _list(a["partial"], tp)
        assert a["residual"].shape == (batch, h)
        r = (sum(p.float() for p in parts) + a["residual"].float()).half()
        if name == "allreduce_residual":
            return r
        return r, _norm(r.float(), a["norm_w"], shape["eps"])

    return run
