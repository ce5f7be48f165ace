"""Paths (b) and (c): wavefuse's kernels, unfused and fused, through the ``wavefuse`` Python package
(docs/python.md):

    k = wavefuse.kernel(name, tp=, batch=, device= | devices=[...], <shape parameters of
                        kernels-gen/src/set.rs>)          # compiled and bound once, at load
    outputs = k(**inputs)                                  # launched on torch's current stream

- ``name``: a kernel of kernels-gen/src/set.rs; shape parameters as there: ``hidden`` (the input
  width of column-parallel GEMVs, the residual width of row-parallel ones), ``n`` (per-rank output
  width), ``k`` (per-rank K-shard of a row-parallel GEMV), ``nq``/``nkv`` (per-rank Q and K/V
  widths), ``group_size``, ``zero_point`` ("v1" | "v2") and ``eps``.
- ``inputs``: the kernel's ``in`` arguments by name; a GPTQ weight ``w`` is three arguments
  ``w_qweight``, ``w_scales``, ``w_qzeros`` (DESIGN.md §2 layout). A kernel built for ``tp`` > 1
  in one process (``devices=[dev] * tp``: every rank on this GPU) takes a list of per-rank tensors
  for every input (the replicated ones repeated) and returns a list per output.
- ``outputs``: the ``out`` arguments in declaration order (a tensor, or a tuple).

Column-parallel kernels are built at ``tp=1`` with the rank's shapes (a rank's column-parallel
GEMV needs no other rank). Act-order (g_idx) weights are refused: the kernel set has no g_idx
input. With a torch.distributed group (one process per rank) the row-parallel kernels are built
over ``wavefuse.group_from_process_group``: each process passes its own rank's tensors.

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


def _gptq_args(name: str, ws: list) -> dict:
    """The three arguments of GPTQ weight ``name``: a tensor each at TP 1, per-rank lists above."""
    parts = {f"{name}_{p}": [getattr(w, p) for w in ws] for p in ("qweight", "scales", "qzeros")}
    return {k: _ranked(v) for k, v in parts.items()}


def _ranked(xs: list) -> Any:
    return xs[0] if len(xs) == 1 else list(xs)


def _replicated(t, tp: int) -> Any:
    """A replicated input: the tensor at TP 1, the same tensor for every rank above."""
    return t if tp == 1 else [t] * tp


def _rank0(out) -> Any:
    """A replicated output of a TP > 1 kernel: rank 0's (all ranks hold the same)."""
    return out[0] if isinstance(out, list) else out


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

    def __init__(self, device="cpu", group=None, schedule: str = "default", dump_ir=None):
        super().__init__(device, group)
        self.wf = import_wavefuse()
        self._kernels: dict[tuple, Any] = {}
        # "tuned": each kernel's entry in the tuned-schedule store where there is one (a kernel
        # built from shape parameters is keyed by its IR: tune it with `wavefuse tune
        # --kernel-file` on the files `dump_ir` writes).
        self.schedule = schedule
        self._dump_ir = dump_ir
        # On the CPU the package's simulator device runs the same kernels (docs/python.md).
        self._dev = "sim" if self.device.type == "cpu" else str(self.device)
        self._wf_group = None
        if group is not None:
            import torch.distributed as dist

            # One process per rank: the row-parallel kernels span the process group; wavefuse
            # exchanges their peer buffers once, when each kernel is built (DESIGN.md §10).
            self._wf_group = self.wf.group_from_process_group(group, device=self._dev)
            self._world = dist.get_world_size(group)

    def close(self) -> None:
        """Closes every kernel this backend built; with a process group, its wavefuse group
        (collective: the kernels close between two barriers of the process group, docs/python.md)."""
        if self._wf_group is not None:
            self._wf_group.close()
        for k in self._kernels.values():
            k.close()
        self._kernels.clear()

    def _row_tp(self, held: int) -> int:
        """The TP size of a row-parallel kernel whose inputs this process holds ``held`` ranks of."""
        if self._wf_group is None:
            return held
        if held != 1:
            raise NotImplementedError(
                f"{self.name}: with a process group each process holds one rank, not {held}"
            )
        return self._world

    def _rep(self, t, tp: int) -> Any:
        """A replicated input: this process's tensor, or the same tensor for every rank held."""
        return t if self._wf_group is not None else _replicated(t, tp)

    def _kernel(self, name: str, tp: int, batch: int, **shape):
        key = (name, tp, batch, tuple(sorted(shape.items())))
        if key not in self._kernels:
            if tp == 1:
                place = {"device": self._dev}
            elif self._wf_group is not None:
                place = {"group": self._wf_group, "device": self._dev}
            else:
                place = {"devices": [self._dev] * tp}
            k = self.wf.kernel(name, tp=tp, batch=batch, schedule=self.schedule, **place, **shape)
            self._kernels[key] = k
            if self._dump_ir is not None:
                import hashlib
                from pathlib import Path

                d = Path(self._dump_ir)
                d.mkdir(parents=True, exist_ok=True)
                tag = hashlib.sha256(k.ir.encode()).hexdigest()[:10]
                (d / f"{name}-tp{tp}-b{batch}-{tag}.wfir").write_text(k.ir)
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
        return _outputs(k(**_gptq_args("w", [w]), x=x))[0]

    def allreduce_residual(self, partials, residual):
        partials = list(partials)
        tp = self._row_tp(len(partials))
        k = self._kernel("allreduce_residual", tp, residual.shape[0], hidden=residual.shape[1])
        out = k(partial=_ranked(partials), residual=self._rep(residual, tp))
        return _rank0(out)

    def allreduce_residual_rmsnorm(self, partials, residual, norm_w, eps):
        partials = list(partials)
        tp = self._row_tp(len(partials))
        k = self._kernel(
            "allreduce_residual_rmsnorm", tp, residual.shape[0], hidden=residual.shape[1], eps=eps
        )
        r, normed = _outputs(
            k(
                partial=_ranked(partials),
                residual=self._rep(residual, tp),
                norm_w=self._rep(norm_w, tp),
            )
        )
        return _rank0(r), _rank0(normed)

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
        q, kk, v = _outputs(k(**_gptq_args("w_qkv", [w]), x=x))
        return q, kk, v

    def gate_up_silu(self, x, wgu):
        wg, wu = wgu
        k = self._kernel(
            "gemv_int4_dual_silu", 1, x.shape[0], hidden=wg.k, n=wg.n, **self._quant(wg)
        )
        return _outputs(k(**_gptq_args("w_gate", [wg]), **_gptq_args("w_up", [wu]), x=x))[0]

    def linear_row_allreduce_rmsnorm(self, xs, ws, residual, norm_w, eps):
        xs, ws = list(xs), list(ws)
        tp = self._row_tp(len(xs))
        k = self._kernel(
            "gemv_int4_allreduce_rmsnorm",
            tp,
            residual.shape[0],
            hidden=residual.shape[1],
            k=ws[0].k,
            eps=eps,
            **self._quant(ws[0]),
        )
        r, normed = _outputs(
            k(
                **_gptq_args("w_down", ws),
                x=_ranked(xs),
                residual=self._rep(residual, tp),
                norm_w=self._rep(norm_w, tp),
            )
        )
        return _rank0(r), _rank0(normed)

    def describe(self) -> str:
        return (
            f"{self.name}: wavefuse gemv_int4_qkv, gemv_int4_dual_silu, "
            f"gemv_int4_allreduce_rmsnorm (O and down)"
        )
