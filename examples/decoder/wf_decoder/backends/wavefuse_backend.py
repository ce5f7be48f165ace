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

    def __init__(
        self, device="cpu", group=None, schedule: str = "default", dump_ir=None, launch="stream"
    ):
        super().__init__(device, group)
        # "dependent": each kernel that opens with the wait for its stream predecessor is launched
        # as a programmatic dependent of it (wavefuse.kernel(launch=...)).
        self.launch = launch
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

    def _place(self, tp: int) -> dict:
        """Where a kernel of ``tp`` ranks runs: this device, the process group, or every rank on
        this device."""
        if tp == 1:
            return {"device": self._dev}
        if self._wf_group is not None:
            return {"group": self._wf_group, "device": self._dev}
        return {"devices": [self._dev] * tp}

    def _built(self, key, label: str, build):
        """The kernel under ``key``, built once with ``build()``; its ``.wfir`` written as
        ``<label>-<hash>.wfir`` into ``dump_ir`` when given."""
        if key not in self._kernels:
            k = build()
            self._kernels[key] = k
            if self._dump_ir is not None:
                import hashlib
                from pathlib import Path

                d = Path(self._dump_ir)
                d.mkdir(parents=True, exist_ok=True)
                tag = hashlib.sha256(k.ir.encode()).hexdigest()[:10]
                (d / f"{label}-{tag}.wfir").write_text(k.ir)
        return self._kernels[key]

    def _kernel(self, name: str, tp: int, batch: int, **shape):
        return self._built(
            (name, tp, batch, tuple(sorted(shape.items()))),
            f"{name}-tp{tp}-b{batch}",
            lambda: self.wf.kernel(
                name,
                tp=tp,
                batch=batch,
                schedule=self.schedule,
                launch=self.launch,
                **self._place(tp),
                **shape,
            ),
        )

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


class PendingNorm:
    """``rmsnorm(x, w, eps)`` not computed yet: what :class:`WavefusePrenormBackend` hands the
    decoder as a "normed" activation. Only that backend's consumers take it — ``qkv`` and
    ``gate_up_silu`` apply the norm inside their GEMV kernel (each workgroup computes the row's
    1/rms from ``x``), ``lm_head`` applies it first. ``shape`` is the activation's."""

    __slots__ = ("x", "w", "eps")

    def __init__(self, x: torch.Tensor, w: torch.Tensor, eps: float):
        self.x, self.w, self.eps = x, w, eps

    @property
    def shape(self) -> torch.Size:
        return self.x.shape


def _gptq_decl(name: str, w: GptqWeight, k: int, n: int, dist: str) -> str:
    return (
        f"input {name} : gptq<group={w.group_size}, zero={w.zero_point}, scale=f16>"
        f"[k={k}, n={n}] {dist} @global index=local"
    )


def _eps(eps: float) -> str:
    return repr(float(eps))


def qkv_norm_ir(batch: int, w: GptqWeight, nq: int, nkv: int, eps: float) -> str:
    """``.wfir`` of the pre-norm fused into the QKV GEMV: q | k | v = rmsnorm(x, norm_w) · W_qkv,
    the norm's activation rounded to FP16 (as the unfused norm's output), one rounding per
    output."""
    h = w.k
    return f"""kernel wf_qkv_norm(tp=1) {{
    buf0 = input x : f16[{batch}, {h}] replicated @global index=local
    buf1 = input norm_w : f16[{h}] replicated @global index=local
    buf2 = {_gptq_decl("w_qkv", w, h, nq + 2 * nkv, "replicated")}
    buf3 = output q : f16[{batch}, {nq}] replicated @global index=local
    buf4 = output k : f16[{batch}, {nkv}] replicated @global index=local
    buf5 = output v : f16[{batch}, {nkv}] replicated @global index=local
    v0 = load buf0
    v1 = load buf1
    v2 = rmsnorm v0, v1, eps={_eps(eps)}
    v3 = round_f16 v2
    v4 = gemv.rep buf2, v3
    v5 = slice v4, start=0, len={nq}
    v6 = round_f16 v5
    store v6, buf3
    v7 = slice v4, start={nq}, len={nkv}
    v8 = round_f16 v7
    store v8, buf4
    v9 = slice v4, start={nq + nkv}, len={nkv}
    v10 = round_f16 v9
    store v10, buf5
}}
"""


def gate_up_norm_ir(batch: int, wg: GptqWeight, eps: float) -> str:
    """``.wfir`` of the post-attention norm fused into gate/up and SiLU·mul: y =
    silu(rmsnorm(x)·W_gate) · (rmsnorm(x)·W_up), one rounding at the end."""
    h, n = wg.k, wg.n
    return f"""kernel wf_gate_up_norm(tp=1) {{
    buf0 = input x : f16[{batch}, {h}] replicated @global index=local
    buf1 = input norm_w : f16[{h}] replicated @global index=local
    buf2 = {_gptq_decl("w_gate", wg, h, n, "replicated")}
    buf3 = {_gptq_decl("w_up", wg, h, n, "replicated")}
    buf4 = output y : f16[{batch}, {n}] replicated @global index=local
    v0 = load buf0
    v1 = load buf1
    v2 = rmsnorm v0, v1, eps={_eps(eps)}
    v3 = round_f16 v2
    v4 = gemv.rep buf2, v3
    v5 = gemv.rep buf3, v3
    v6 = silu v4
    v7 = mul v6, v5
    v8 = round_f16 v7
    store v8, buf4
}}
"""


def row_residual_ir(batch: int, w: GptqWeight, hidden: int, tp: int) -> str:
    """``.wfir`` of a row-parallel GEMV with the allreduce (at TP > 1) and the residual add, no
    norm: r' = round(Σ_ranks round(x·W) + r). Its outputs are per row, so no workgroup waits for
    another at TP 1 (split-K's arrivals only): the kernel may start as a programmatic dependent."""
    k = w.k
    if tp == 1:
        return f"""kernel wf_row_residual(tp=1) {{
    buf0 = {_gptq_decl("w", w, k, hidden, "replicated")}
    buf1 = input x : f16[{batch}, {k}] replicated @global index=local
    buf2 = input residual : f16[{batch}, {hidden}] replicated @global index=local
    buf3 = output residual_out : f16[{batch}, {hidden}] replicated @global index=local
    v0 = load buf1
    v1 = gemv.rep buf0, v0
    v2 = round_f16 v1
    v3 = load buf2
    v4 = add v2, v3
    v5 = round_f16 v4
    store v5, buf3
}}
"""
    return f"""kernel wf_row_residual(tp={tp}) {{
    buf0 = {_gptq_decl("w", w, k, hidden, f"row_parallel(tp={tp})")}
    buf1 = input x : f16[{batch}, {k}] col_parallel(tp={tp}) @global index=local
    buf2 = input residual : f16[{batch}, {hidden}] replicated @global index=local
    buf3 = output residual_out : f16[{batch}, {hidden}] replicated @global index=local
    v0 = load buf1
    v1 = gemv.row buf0, v0
    v2 = round_f16 v1
    v3 = allreduce v2, tp={tp}
    v4 = load buf2
    v5 = add v3, v4
    v6 = round_f16 v5
    store v6, buf3
}}
"""


class WavefusePrenormBackend(WavefuseFusedBackend):
    """Path (c) with the norms moved to their consumers: each RMSNorm is fused into the GEMV
    that reads it (the input norm into QKV, the post-attention norm into gate/up, each
    workgroup computing the row's 1/rms), and O and down end with the allreduce and the
    residual add only. No kernel of a layer then has a grid barrier (at TP 1 none waits for
    another workgroup), so each may be launched as a programmatic dependent of the one before
    (DESIGN.md §5.7). The kernels are ``.wfir`` text built from the weights' shapes
    (:func:`qkv_norm_ir`, :func:`gate_up_norm_ir`, :func:`row_residual_ir`)."""

    name = "wavefuse_fused_prenorm"

    def _ir_kernel(self, text: str, tp: int):
        head = text.split("(", 1)[0].split()[-1]
        return self._built(
            ("ir", text),
            f"{head}-tp{tp}",
            lambda: self.wf.kernel(
                text, schedule=self.schedule, launch=self.launch, **self._place(tp)
            ),
        )

    def rmsnorm(self, x, w, eps):
        return PendingNorm(x, w, eps)

    def qkv(self, x, wqkv):
        if not isinstance(x, PendingNorm):
            return super().qkv(x, wqkv)
        w, nq, nkv = wqkv
        k = self._ir_kernel(qkv_norm_ir(x.x.shape[0], w, nq, nkv, x.eps), 1)
        return tuple(_outputs(k(**_gptq_args("w_qkv", [w]), x=x.x, norm_w=x.w)))

    def gate_up_silu(self, x, wgu):
        if not isinstance(x, PendingNorm):
            return super().gate_up_silu(x, wgu)
        wg, wu = wgu
        k = self._ir_kernel(gate_up_norm_ir(x.x.shape[0], wg, x.eps), 1)
        args = {**_gptq_args("w_gate", [wg]), **_gptq_args("w_up", [wu])}
        return _outputs(k(**args, x=x.x, norm_w=x.w))[0]

    def linear_row_allreduce_rmsnorm(self, xs, ws, residual, norm_w, eps):
        xs, ws = list(xs), list(ws)
        tp = self._row_tp(len(xs))
        k = self._ir_kernel(row_residual_ir(residual.shape[0], ws[0], residual.shape[1], tp), tp)
        r = _outputs(k(**_gptq_args("w", ws), x=_ranked(xs), residual=self._rep(residual, tp)))[0]
        r = _rank0(r)
        return r, PendingNorm(r, norm_w, eps)

    def lm_head(self, x, shards):
        if isinstance(x, PendingNorm):
            x = Backend.rmsnorm(self, x.x, x.w, x.eps)  # the final norm, in PyTorch
        return super().lm_head(x, shards)

    def describe(self) -> str:
        return (
            f"{self.name}: .wfir kernels — RMSNorm fused into QKV and into gate/up + SiLU·mul; "
            f"O and down with the allreduce and residual add, no norm"
        )
