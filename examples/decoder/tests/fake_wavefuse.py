"""A test double of the ``wavefuse`` package's API as the adapter uses it (see
wf_decoder/backends/wavefuse_backend.py and docs/python.md): ``kernel(name, tp=, batch=, device= |
devices=, **shape)`` returns a callable computing the kernel of kernels-gen/src/set.rs in PyTorch,
with its rounding points: a GPTQ weight ``w`` is three arguments ``w_qweight``/``w_scales``/
``w_qzeros``; at TP > 1 every input is a list of per-rank tensors and every output a list. It
checks the adapter's calls (names, shape parameters, argument names, per-rank lists), not
wavefuse's kernels (tests/test_decoder.py also runs the real package where it is installed)."""

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


def _w(a: dict, name: str, k: int, n: int, shape: dict, rank: int = 0) -> torch.Tensor:
    part = [a[f"{name}_{p}"] for p in ("qweight", "scales", "qzeros")]
    part = [x[rank] if isinstance(x, list) else x for x in part]
    w = GptqWeight(*part, shape["group_size"], shape["zero_point"])
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


closed: list = []  # the names of the kernels closed, in order
schedules: list = []  # the schedule= of every kernel built, in order


def kernel(
    name: str,
    tp: int,
    batch: int,
    device: str | None = None,
    devices=None,
    schedule: str = "default",
    launch: str = "stream",
    **shape,
):
    """The kernel ``name`` built for these shapes, as a callable of its inputs by name."""
    assert set(shape) == SHAPES[name], f"{name}: shape parameters {sorted(shape)}"
    assert schedule in ("default", "tuned"), schedule
    assert launch in ("stream", "dependent"), launch
    schedules.append(schedule)
    assert (device is None) != (devices is None), "device= at TP 1, devices= above"
    assert devices is None or len(devices) == tp
    calls.append(name)
    h = shape["hidden"]

    def run(**a):
        if name == "gemv_int4":
            return (a["x"].float() @ _w(a, "w", h, shape["n"], shape)).half()
        if name == "gemv_int4_qkv":
            nq, nkv = shape["nq"], shape["nkv"]
            y = (a["x"].float() @ _w(a, "w_qkv", h, nq + 2 * nkv, shape)).half()
            return y[:, :nq], y[:, nq : nq + nkv], y[:, nq + nkv :]
        if name == "gemv_int4_dual_silu":
            g = a["x"].float() @ _w(a, "w_gate", h, shape["n"], shape)
            u = a["x"].float() @ _w(a, "w_up", h, shape["n"], shape)
            return (F.silu(g) * u).half()
        if name == "gemv_int4_allreduce_rmsnorm":
            xs = _list(a["x"], tp)
            parts = [
                (x.float() @ _w(a, "w_down", shape["k"], h, shape, rank)).half()
                for rank, x in enumerate(xs)
            ]
        else:
            parts = _list(a["partial"], tp)
        residual = _list(a["residual"], tp)[0]
        assert residual.shape == (batch, h)
        r = (sum(p.float() for p in parts) + residual.float()).half()
        ranked = (lambda t: t) if tp == 1 else (lambda t: [t] * tp)
        if name == "allreduce_residual":
            return ranked(r)
        normed = _norm(r.float(), _list(a["norm_w"], tp)[0], shape["eps"])
        return ranked(r), ranked(normed)

    run.close = lambda: closed.append(name)  # what wavefuse.Kernel.close() is to the backend
    return run
