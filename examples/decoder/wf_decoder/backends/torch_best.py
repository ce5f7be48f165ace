"""Path (a): PyTorch at its best, not a strawman.

- INT4 linears through ``torch._weight_int4pack_mm`` (tinygemm) on CUDA, or
  ``torch._weight_int4pack_mm_for_cpu`` on CPU, with the GPTQ tensors converted once at load.
  tinygemm dequantises w = (q − 8) · s + m per group, so a GPTQ group (scale s, zero point z,
  w = (q − z) · s) becomes m = (8 − z) · s: the same codes, exact in real arithmetic. Its CUDA
  kernel takes bfloat16 activations only and a bfloat16 scale/offset table (the FP16 scales lose 3
  mantissa bits there, and its outputs are bfloat16-rounded before this path casts them back to
  FP16); the CPU kernel runs in FP16. Where tinygemm cannot take a weight (act-order g_idx, a group
  size or K it does not tile, a GPU it is not built for), that linear falls back to a dequantised
  FP16 matmul (cuBLAS / rocBLAS), and :meth:`TorchBestBackend.describe` says how many did.
- Q|K|V and gate|up merged into one INT4 matmul each, as serving engines do. Activations that
  only feed tinygemm stay in its dtype (normed inputs, gate/up, the row-parallel partials), so the
  casts it forces cost two launches a layer rather than eight.
- Norms, SiLU·mul, residual adds and the in-process sum over ranks through ``torch.compile``
  (Inductor's generated Triton kernels) on CUDA; eager on CPU unless ``compile=True``.
- ``torch.distributed.all_reduce`` (NCCL) in FP16 when a process group is given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..gptq import GptqWeight, unpack_rows
from .base import Backend

TINYGEMM_GROUPS = (32, 64, 128, 256)


@dataclass
class Int4Packed:
    """A weight in tinygemm's layout: packed codes, [K/G, N, 2] scale/offset table, group size."""

    packed: torch.Tensor
    scale_offset: torch.Tensor
    group_size: int
    n: int


def _inner_k_tiles(k: int) -> int | None:
    for t in (8, 4, 2):
        if k % (t * 16) == 0:
            return t
    return None


def _nibble_pairs(codes_nk: torch.Tensor, high_first: bool) -> torch.Tensor:
    """Codes [N, K] -> uint8 [N, K/2], two codes a byte."""
    a, b = codes_nk[:, 0::2], codes_nk[:, 1::2]
    hi, lo = (a, b) if high_first else (b, a)
    return ((hi << 4) | lo).to(torch.uint8)


class TorchBestBackend(Backend):
    """PyTorch's INT4 kernel, merged projections, compiled elementwise work, NCCL allreduce."""

    name = "torch_best"
    dtype = torch.float16

    def __init__(self, device="cpu", group=None, compile: bool | None = None):
        super().__init__(device, group)
        self.cuda = self.device.type == "cuda"
        self.act = torch.bfloat16 if self.cuda else torch.float16
        self.compiled = self.cuda if compile is None else compile
        self.fallbacks: list[str] = []
        self.tinygemm = 0
        self._cuda_pairs_high_first = None
        wrap = (
            (lambda f: torch.compile(f, fullgraph=True, dynamic=False))
            if self.compiled
            else (lambda f: f)
        )
        self._add_norm = wrap(_add_norm)
        self._rmsnorm = wrap(_rmsnorm)
        self._silu_mul_halves = wrap(_silu_mul_halves)
        self._silu_mul = wrap(_silu_mul)

    # ---- weights -------------------------------------------------------------------------------

    def _pack(self, w: GptqWeight) -> Int4Packed | None:
        """tinygemm's layout of ``w``, or None (reason appended to ``fallbacks``)."""
        why = None
        tiles = _inner_k_tiles(w.k)
        if w.act_order:
            why = "act-order g_idx"
        elif w.group_size not in TINYGEMM_GROUPS:
            why = f"group size {w.group_size}"
        elif tiles is None:
            why = f"K={w.k} not a multiple of 32"
        elif w.n % 8:
            why = f"N={w.n} not a multiple of 8"
        if why:
            self.fallbacks.append(f"{w.k}->{w.n}: {why}")
            return None
        w = w.to(self.device)
        codes_nk = unpack_rows(w.qweight).t().contiguous()  # [N, K] int32
        s = w.scales.to(torch.float32)
        offset = (8 - w.zeros().to(torch.float32)) * s
        table = torch.stack([s, offset], dim=2).to(self.act).contiguous()
        try:
            if self.cuda:
                packed = self._convert_cuda(codes_nk, tiles, table, w)
            else:
                packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes_nk, tiles)
        except (RuntimeError, NotImplementedError) as e:  # e.g. not built for this GPU (gfx906)
            self.fallbacks.append(f"{w.k}->{w.n}: {str(e).splitlines()[0][:120]}")
            return None
        self.tinygemm += 1
        return Int4Packed(packed, table, w.group_size, w.n)

    def _convert_cuda(self, codes_nk, tiles, table, w: GptqWeight) -> torch.Tensor:
        """The CUDA conversion takes uint8 nibble pairs, code 2j in the high nibble of byte j in
        torch 2.11 (bench/results/2026-12-05-h100-decoder-torch-apis); the order is checked once
        against the dequantised weight, both tried, and then kept."""
        orders = (
            [self._cuda_pairs_high_first]
            if self._cuda_pairs_high_first is not None
            else [True, False]
        )
        want_w = w.dequantize(torch.float32)
        x = torch.randn(1, w.k, device=self.device).to(self.act)
        want = x.to(torch.float32) @ want_w
        for high_first in orders:
            packed = torch.ops.aten._convert_weight_to_int4pack(
                _nibble_pairs(codes_nk, high_first), tiles
            )
            got = torch.ops.aten._weight_int4pack_mm(x, packed, w.group_size, table)
            rel = (got.float() - want).norm() / want.norm()
            if rel < 2e-2:
                self._cuda_pairs_high_first = high_first
                return packed
        raise RuntimeError(
            f"torch {torch.__version__}: _convert_weight_to_int4pack's input "
            f"layout matched neither nibble order (rel err {float(rel):.3g})"
        )

    def prepare(self, w: GptqWeight):
        """tinygemm layout where it applies, else the dequantised FP16 weight [N, K]."""
        p = self._pack(w)
        if p is not None:
            return p
        return w.to(self.device).dequantize(torch.float16).t().contiguous()

    def _merged(self, ws: list[GptqWeight]):
        """Weights of one input side by side, as one weight (act-order ones, whose g_idx may
        differ, merged after dequantising)."""
        if any(w.act_order for w in ws):
            self.fallbacks.append(f"{ws[0].k}->{sum(w.n for w in ws)}: act-order g_idx")
            return (
                torch.cat([w.to(self.device).dequantize(torch.float16) for w in ws], 1)
                .t()
                .contiguous()
            )
        return self.prepare(GptqWeight.cat_cols(ws))

    def prepare_qkv(self, wq, wk, wv):
        """Q|K|V merged into one weight, with the split widths."""
        return self._merged([wq, wk, wv]), (wq.n, wk.n, wv.n)

    def prepare_gate_up(self, wg, wu):
        """gate|up merged into one weight."""
        return self._merged([wg, wu])

    # ---- primitives ----------------------------------------------------------------------------

    def _mm(self, x: torch.Tensor, w) -> torch.Tensor:
        """x @ W through tinygemm, output left in its activation dtype (bfloat16 on CUDA), or
        through the FP16 fallback; x is cast only where it is not in that dtype already."""
        if isinstance(w, torch.Tensor):
            return F.linear(x.to(w.dtype), w)
        xa = x if x.dtype == self.act else x.to(self.act)
        if self.cuda:
            return torch.ops.aten._weight_int4pack_mm(xa, w.packed, w.group_size, w.scale_offset)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(
            xa, w.packed, w.group_size, w.scale_offset
        )

    def linear_col(self, x: torch.Tensor, w) -> torch.Tensor:
        """x @ W, FP16 out."""
        return self._mm(x, w).to(self.dtype)

    def linear_row_partial(self, x: torch.Tensor, w) -> torch.Tensor:
        """A rank's partial sums in tinygemm's output dtype (casting them to FP16 before the sum
        would add a launch and no precision)."""
        return self._mm(x, w)

    def rmsnorm(self, x, w, eps):
        """In tinygemm's activation dtype: a normed activation only feeds INT4 matmuls here."""
        return self._rmsnorm(x, w, eps, self.act)

    def silu_mul(self, g, u):
        return self._silu_mul(g, u)

    def allreduce_residual(self, partials, residual):
        r, _ = self.allreduce_residual_rmsnorm(partials, residual, None, 0.0)
        return r

    def lm_head(self, x, shards):
        """The FP16 LM head (x arrives in tinygemm's activation dtype)."""
        return super().lm_head(x.to(self.dtype), shards)

    # ---- fused entry points --------------------------------------------------------------------

    def qkv(self, x, wqkv):
        """Column slices of one merged matmul, in its output dtype (the decoder's compiled RoPE
        casts them into the KV cache's dtype)."""
        w, (nq, nk, nv) = wqkv
        y = self._mm(x, w)
        return y[:, :nq], y[:, nq : nq + nk], y[:, nq + nk :]

    def gate_up_silu(self, x, wgu):
        """silu(gate)·up in one compiled kernel over the merged matmul's halves, left in its dtype
        for the down matmul."""
        return self._silu_mul_halves(self._mm(x, wgu))

    def allreduce_residual_rmsnorm(self, partials, residual, norm_w, eps):
        """Held ranks summed in FP32 inside one compiled kernel with the residual add (FP16 out)
        and the norm (out in tinygemm's activation dtype); across processes an NCCL all_reduce of
        the partial first."""
        partials = list(partials)
        if self.group is not None:
            import torch.distributed as dist

            p = partials[0] if len(partials) == 1 else torch.stack(partials).sum(0)
            dist.all_reduce(p, group=self.group)
            partials = [p]
        return self._add_norm(residual, norm_w, eps, self.act, *partials)

    def describe(self) -> str:
        kind = "torch._weight_int4pack_mm" + ("" if self.cuda else "_for_cpu")
        s = (
            f"torch_best: {kind} ({self.tinygemm} weights, {self.act} activations), merged "
            f"QKV and gate|up, elementwise {'torch.compile' if self.compiled else 'eager'}"
        )
        if self.fallbacks:
            s += f"; dequantised FP16 fallback for {len(self.fallbacks)}: {self.fallbacks[0]}"
        return s


def _rmsnorm(x, w, eps: float, out_dtype: torch.dtype):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(out_dtype)


def _add_norm(residual, norm_w, eps: float, out_dtype: torch.dtype, *partials):
    s = residual.float()
    for p in partials:
        s = s + p.float()
    r = s.to(residual.dtype)
    if norm_w is None:
        return r, None
    return r, _rmsnorm(r, norm_w, eps, out_dtype)


def _silu_mul(g, u):
    return (F.silu(g.float()) * u.float()).to(g.dtype)


def _silu_mul_halves(y):
    n = y.shape[-1] // 2
    return _silu_mul(y[:, :n], y[:, n:])
