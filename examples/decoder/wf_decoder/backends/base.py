"""The interface between the decoder and the kernels that run its linear layers, norms and
activations.

The decoder (model.py) owns embedding, RoPE, the KV cache and attention (SDPA); everything else
goes through a :class:`Backend`. Tensor parallelism: the decoder holds one or more ranks of a TP
group. Column-parallel ops (QKV, gate/up) run per rank; row-parallel ops take one input and one
weight *per held rank* (lists) and produce the replicated result, summing over the held ranks in
this process and, when ``group`` is a ``torch.distributed`` process group (one process per GPU),
across processes with ``all_reduce``.

Rounding points (DESIGN.md §2: activations FP16, accumulation FP32, one rounding per output) for
an FP16 backend:

- ``linear_col`` / ``qkv`` / ``linear_row_partial``: one rounding per output element;
- ``allreduce_residual``: r' = round(Σ_ranks partial + residual);
- ``rmsnorm``: round(x / rms(x) · w), statistics in FP32;
- ``silu_mul``: round(silu(g) · u).

A subclass must implement the *unfused* primitives; the *fused* entry points default to their
compositions, so a backend overrides exactly the fusions it has. Weights reach the backend once,
at load, through the ``prepare*`` methods, which return whatever the backend's kernels take.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F

from ..gptq import GptqWeight


class Backend:
    """Kernels for one path of the A/B. Subclasses set ``name`` and ``dtype`` and implement the
    primitives marked "must implement"."""

    name = "base"
    dtype = torch.float16

    def __init__(self, device: torch.device | str = "cpu", group=None):
        self.device = torch.device(device)
        self.group = group

    def close(self) -> None:
        """Releases what the backend holds on the device. With a process group it is collective:
        every rank calls it, and afterwards the process group may be destroyed. Default: nothing."""

    # ---- weights, converted once at load ------------------------------------------------------

    def prepare(self, w: GptqWeight) -> Any:
        """A rank's GPTQ weight shard -> what ``linear_col`` / ``linear_row_partial`` take."""
        return w

    def prepare_qkv(self, wq: GptqWeight, wk: GptqWeight, wv: GptqWeight) -> Any:
        """A rank's Q, K and V shards -> what ``qkv`` takes (default: each prepared)."""
        return tuple(self.prepare(w) for w in (wq, wk, wv))

    def prepare_gate_up(self, wg: GptqWeight, wu: GptqWeight) -> Any:
        """A rank's gate and up shards -> what ``gate_up_silu`` takes (default: each prepared)."""
        return self.prepare(wg), self.prepare(wu)

    def prepare_vector(self, v: torch.Tensor) -> torch.Tensor:
        """A norm weight (or any replicated vector) in the backend's dtype and device."""
        return v.to(device=self.device, dtype=self.dtype)

    def prepare_dense(self, w: torch.Tensor) -> torch.Tensor:
        """A dense FP16 weight [N, K] (LM head shard) in the backend's dtype and device."""
        return w.to(device=self.device, dtype=self.dtype).contiguous()

    # ---- unfused primitives --------------------------------------------------------------------

    def linear_col(self, x: torch.Tensor, w: Any) -> torch.Tensor:
        """y [B, N] = x [B, K] @ W (column-parallel: this rank's N columns). Must implement."""
        raise NotImplementedError

    def linear_row_partial(self, x: torch.Tensor, w: Any) -> torch.Tensor:
        """This rank's partial sums [B, N] of a row-parallel linear (x is its K-shard).
        Defaults to ``linear_col`` (the arithmetic is the same; only the caller's sum differs)."""
        return self.linear_col(x, w)

    def allreduce_residual(
        self, partials: Sequence[torch.Tensor], residual: torch.Tensor
    ) -> torch.Tensor:
        """r' = Σ partials (held ranks, then the process group) + residual, one rounding."""
        s = torch.stack(list(partials)).to(torch.float32).sum(0)
        if self.group is not None:
            import torch.distributed as dist

            dist.all_reduce(s, group=self.group)
        return (s + residual.to(torch.float32)).to(self.dtype)

    def rmsnorm(self, x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        """x / sqrt(mean(x²) + eps) · w, statistics in FP32."""
        xf = x.to(torch.float32)
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return (xf * r * w.to(torch.float32)).to(self.dtype)

    def silu_mul(self, g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """silu(g) · u, in FP32, one rounding."""
        gf = g.to(torch.float32)
        return (F.silu(gf) * u.to(torch.float32)).to(self.dtype)

    def lm_head(self, x: torch.Tensor, shards: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits [B, vocab] from the vocab-parallel LM head shards held here (all-gathered over
        the process group when there is one)."""
        parts = [F.linear(x, w) for w in shards]
        if self.group is not None:
            import torch.distributed as dist

            out = [torch.empty_like(parts[0]) for _ in range(dist.get_world_size(self.group))]
            dist.all_gather(out, torch.cat(parts, -1).contiguous(), group=self.group)
            parts = out
        return torch.cat(parts, -1)

    # ---- fused entry points (default: compositions of the primitives) --------------------------

    def qkv(self, x: torch.Tensor, wqkv: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of one rank from the pre-normed activation."""
        wq, wk, wv = wqkv
        return self.linear_col(x, wq), self.linear_col(x, wk), self.linear_col(x, wv)

    def gate_up_silu(self, x: torch.Tensor, wgu: Any) -> torch.Tensor:
        """silu(x @ Wgate) · (x @ Wup) of one rank."""
        wg, wu = wgu
        return self.silu_mul(self.linear_col(x, wg), self.linear_col(x, wu))

    def allreduce_residual_rmsnorm(
        self,
        partials: Sequence[torch.Tensor],
        residual: torch.Tensor,
        norm_w: torch.Tensor,
        eps: float,
    ):
        """(r', rmsnorm(r')) with r' = Σ partials + residual: the new residual stream and the
        next layer's normed input (two outputs; the stream is not overwritten)."""
        r = self.allreduce_residual(partials, residual)
        return r, self.rmsnorm(r, norm_w, eps)

    def linear_row_allreduce_rmsnorm(
        self,
        xs: Sequence[torch.Tensor],
        ws: Sequence[Any],
        residual: torch.Tensor,
        norm_w: torch.Tensor,
        eps: float,
    ):
        """Row-parallel linear (O or down: one x and one weight per held rank), allreduce,
        residual add, RMSNorm -> (r', normed)."""
        partials = [self.linear_row_partial(x, w) for x, w in zip(xs, ws, strict=True)]
        return self.allreduce_residual_rmsnorm(partials, residual, norm_w, eps)

    def down_allreduce_rmsnorm(self, xs, ws, residual, norm_w, eps):
        """The FFN down projection's fused tail (same contract as
        :meth:`linear_row_allreduce_rmsnorm`; a backend may fuse down and O differently)."""
        return self.linear_row_allreduce_rmsnorm(xs, ws, residual, norm_w, eps)

    def describe(self) -> str:
        """One line on what this backend runs, for the results' provenance."""
        return self.name
