"""Paths (b) and (c): wavefuse's kernels, unfused and fused, through the ``wavefuse`` package.

The package was being written while this adapter was; everything it assumes about its API is in
this file, so fixing the adapter to the real API touches nothing else. Assumed API:

    k = wavefuse.kernel(name, tp=, batch=, device=, <shape parameters of kernels-gen/src/set.rs>)
    outputs = k(**inputs)

- ``name``: a kernel of kernels-gen/src/set.rs; shape parameters as there: ``hidden`` (the input
  width of column-parallel GEMVs, the residual width of row-parallel ones), ``n`` (per-rank output
  width), ``k`` (per-rank K-shard of a row-parallel GEMV), ``nq``/``nkv`` (per-rank Q and K/V
  widths), ``group_size``, ``zero_point`` ("v1" | "v2") and ``eps``.
- ``inputs``: the kernel's ``in`` arguments by name. A GPTQ weight is a dict with ``qweight``,
  ``scales`` and ``qzeros`` tensors (DESIGN.md §2 layout). For ``tp`` > 1 a rank-distributed input
  (``partial``, a row-parallel ``x`` or ``w_down``) is a list with one tensor per rank, all in
  this process; replicated inputs are single tensors.
- ``outputs``: the ``out`` arguments in declaration order (a tensor, a tuple, or a dict by name).

Column-parallel kernels are built at ``tp=1`` with the rank's shapes (a rank's column-parallel
GEMV needs no other rank). Act-order (g_idx) weights are refused: the kernel set has no g_idx
input. One process per GPU (a torch.distributed group) is refused until the adapter binds
wavefuse's rank groups.

Kernels used. (b) ``wavefuse_unfused``: ``gemv_int4`` for every linear (Q, K, V, O, gate, up, down
separately; O and down as per-rank partial GEMVs), ``allreduce_residual_rmsnorm`` for the sum over
ranks + residual + next norm, PyTorch (eager) for the SiLU·mul and the first layer's norm, which
the kernel set has no standalone kernel for. (c) ``wavefuse_fused``: ``gemv_int4_qkv``,
``gemv_int4_dual_silu`` and ``gemv_int4_allreduce_rmsnorm`` (for both O and down).
"""

from __future__ import annotations

from typing import Any

import torch

from ..gptq import GptqWeight
from .base import Backend

MISSING = "skipped: wavefuse package not installed"


def import_wavefuse():
    """The ``wavefuse`` package, or ImportError saying what is missing and how to get it."""
    try:
        import wavefuse
    except ImportError as e:
        raise ImportError(
            f"{MISSING} (the wavefuse_unfused / wavefuse_fused paths need the "
            f"`wavefuse` Python package: build it with maturin from the repository; "
            f"{e})"
        ) from e
    if not hasattr(wavefuse, "kernel"):
        raise ImportError(
            "the installed `wavefuse` package has no `kernel(name, ...)`: "
            "wf_decoder/backends/wavefuse_backend.py assumes it (see its docstring)"
        )
    return wavefuse


def _gptq_arg(w: GptqWeight) -> dict:
    return {"qweight": w.qweight, "scales": w.scales, "qzeros": w.qzeros}


def _ranked(xs: list) -> Any:
    return xs[0] if len(xs) == 1 else list(xs)


def _outputs(out) -> tuple:
    if isinstance(out, torch.Tensor):
        return (out,)
    if isinstance(out, dict):
        return tuple(out.values())
    return tuple(out)


class WavefuseUnfusedBackend(Backend):
    """Path (b): one wavefuse kernel per GEMV, the allreduce + residual + norm kernel."""

    name = "wavefuse_unfused"
    dtype = torch.float16

    def __init__(self, device="cpu", group=None):
        super().__init__(device, group)
        if group is not None:
            raise NotImplementedError(
                f"{self.name}: one process per GPU (a torch.distributed "
                f"group) is not bound yet; run the ranks in one process"
            )
        self.wf = import_wavefuse()
        self._kernels: dict[tuple, Any] = {}

    def _kernel(self, name: str, tp: int, batch: int, **shape):
        key = (name, tp, batch, tuple(sorted(shape.items())))
        if key not in self._kernels:
            self._kernels[key] = self.wf.kernel(
                name, tp=tp, batch=batch, device=str(self.device), **shape
            )
        return self._kernels[key]

    @staticmethod
    def _quant(w: GptqWeight) -> dict:
        return {"group_size": w.group_size, "zero_point": w.zero_point}

    def prepare(self, w: GptqWeight) -> GptqWeight:
        """The GPTQ tensors as they are, on the device; act-order refused."""
        if w.act_order:
            raise ValueError(
                f"{self.name}: act-order (g_idx) weights are not supported by the "
                f"wavefuse kernel set; use a checkpoint without desc_act"
            )
        return w.to(self.device)

    def linear_col(self, x, w: GptqWeight):
        k = self._kernel("gemv_int4", 1, x.shape[0], hidden=w.k, n=w.n, **self._quant(w))
        return _outputs(k(w=_gptq_arg(w), x=x))[0]

    def allreduce_residual(self, partials, residual):
        partials = list(partials)
        k = self._kernel(
            "allreduce_residual", len(partials), residual.shape[0], hidden=residual.shape[1]
        )
        return _outputs(k(partial=_ranked(partials), residual=residual))[0]

    def allreduce_residual_rmsnorm(self, partials, residual, norm_w, eps):
        partials = list(partials)
        k = self._kernel(
            "allreduce_residual_rmsnorm",
            len(partials),
            residual.shape[0],
            hidden=residual.shape[1],
            eps=eps,
        )
        r, normed = _outputs(k(partial=_ranked(partials), residual=residual, norm_w=norm_w))
        return r, normed

    def describe(self) -> str:
        return f"{self.name}: wavefuse gemv_int4 per linear, allreduce_residual_rmsnorm"


class WavefuseFusedBackend(WavefuseUnfusedBackend):
    """Path (c): QKV in one launch, gate/up with SiLU·mul in one, and each row-parallel GEMV fused
    with the allreduce, the residual add and the next RMSNorm."""

    name = "wavefuse_fused"

    def prepare_qkv(self, wq, wk, wv):
        """Q|K|V as one GPTQ weight (one launch) and the per-rank widths."""
        return self.prepare(GptqWeight.cat_cols([wq, wk, wv])), wq.n, wk.n

    def qkv(self, x, wqkv):
        w, nq, nkv = wqkv
        k = self._kernel(
            "gemv_int4_qkv", 1, x.shape[0], hidden=w.k, nq=nq, nkv=nkv, **self._quant(w)
        )
        q, kk, v = _outputs(k(w_qkv=_gptq_arg(w), x=x))
        return q, kk, v

    def gate_up_silu(self, x, wgu):
        wg, wu = wgu
        k = self._kernel(
            "gemv_int4_dual_silu", 1, x.shape[0], hidden=wg.k, n=wg.n, **self._quant(wg)
        )
        return _outputs(k(w_gate=_gptq_arg(wg), w_up=_gptq_arg(wu), x=x))[0]

    def linear_row_allreduce_rmsnorm(self, xs, ws, residual, norm_w, eps):
        xs, ws = list(xs), list(ws)
        k = self._kernel(
            "gemv_int4_allreduce_rmsnorm",
            len(xs),
            residual.shape[0],
            hidden=residual.shape[1],
            k=ws[0].k,
            eps=eps,
            **self._quant(ws[0]),
        )
        r, normed = _outputs(
            k(
                w_down=_ranked([_gptq_arg(w) for w in ws]),
                x=_ranked(xs),
                residual=residual,
                norm_w=norm_w,
            )
        )
        return r, normed

    def describe(self) -> str:
        return (
            f"{self.name}: wavefuse gemv_int4_qkv, gemv_int4_dual_silu, "
            f"gemv_int4_allreduce_rmsnorm (O and down)"
        )
