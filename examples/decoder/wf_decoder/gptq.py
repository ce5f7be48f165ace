"""The INT4 GPTQ weight format of DESIGN.md §2, exactly, and its quantiser.

- ``qweight``: int32 [K/8, N], packed along K: nibble i (bits 4i..4i+3, least significant
  first) of word (kg, n) is the code of row 8·kg + i, column n.
- ``scales``: fp16 [K/G, N].
- ``qzeros``: int32 [K/G, N/8], packed along N: nibble i of word j is column 8·j + i.
- ``g_idx`` (act-order, optional): int32 [K], the group of each row.
- w = (q − z) · s, where z is the stored zero point plus 1 for GPTQ v1 ("gptq") and as stored for
  GPTQ v2 ("gptq_v2"). The convention is a field of :class:`GptqWeight`, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

ZERO_POINTS = ("v1", "v2")


def _shifts(device, dtype=torch.int32) -> torch.Tensor:
    """Nibble shifts 0, 4, …, 28, made on ``device`` (no host copy: safe in CUDA graph capture)."""
    return torch.arange(0, 32, 4, dtype=dtype, device=device)


def _to_int32(words: torch.Tensor) -> torch.Tensor:
    """int64 words in [0, 2^32) as the int32 with the same bits."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def pack_rows(codes: torch.Tensor) -> torch.Tensor:
    """Codes [K, N] in 0..15 -> qweight int32 [K/8, N] (packed along K, nibble i = row 8kg+i)."""
    k, n = codes.shape
    c = codes.to(torch.int64).reshape(k // 8, 8, n)
    shifts = _shifts(codes.device, torch.int64).view(1, 8, 1)
    return _to_int32((c << shifts).sum(1))


def unpack_rows(qweight: torch.Tensor) -> torch.Tensor:
    """qweight int32 [K/8, N] -> codes int32 [K, N] (inverse of :func:`pack_rows`)."""
    kw, n = qweight.shape
    shifts = _shifts(qweight.device).view(1, 8, 1)
    return ((qweight.unsqueeze(1) >> shifts) & 0xF).reshape(kw * 8, n)


def pack_cols(codes: torch.Tensor) -> torch.Tensor:
    """Codes [R, N] in 0..15 -> int32 [R, N/8] packed along N (nibble i of word j = column 8j+i)."""
    r, n = codes.shape
    c = codes.to(torch.int64).reshape(r, n // 8, 8)
    shifts = _shifts(codes.device, torch.int64).view(1, 1, 8)
    return _to_int32((c << shifts).sum(2))


def unpack_cols(words: torch.Tensor) -> torch.Tensor:
    """int32 [R, N/8] -> codes int32 [R, N] (inverse of :func:`pack_cols`)."""
    r, nw = words.shape
    shifts = _shifts(words.device).view(1, 1, 8)
    return ((words.unsqueeze(2) >> shifts) & 0xF).reshape(r, nw * 8)


@dataclass(frozen=True)
class GptqWeight:
    """One INT4 GPTQ linear, y = x @ W with W [K, N] (in_features K, out_features N)."""

    qweight: torch.Tensor
    scales: torch.Tensor
    qzeros: torch.Tensor
    group_size: int
    zero_point: str
    g_idx: torch.Tensor | None = None

    def __post_init__(self):
        if self.zero_point not in ZERO_POINTS:
            raise ValueError(f"zero_point must be one of {ZERO_POINTS}, got {self.zero_point!r}")

    @property
    def k(self) -> int:
        """Input features (rows of W)."""
        return self.qweight.shape[0] * 8

    @property
    def n(self) -> int:
        """Output features (columns of W)."""
        return self.qweight.shape[1]

    @property
    def act_order(self) -> bool:
        """True where rows map to groups through g_idx rather than row // group_size."""
        return self.g_idx is not None

    def nbytes(self) -> int:
        """Bytes of the packed weight, scales, zeros and g_idx (what a GEMV reads)."""
        t = [self.qweight, self.scales, self.qzeros] + ([self.g_idx] if self.act_order else [])
        return sum(x.numel() * x.element_size() for x in t)

    def zeros(self) -> torch.Tensor:
        """The true zero points z, int32 [groups, N] (v1's stored z − 1 plus 1)."""
        z = unpack_cols(self.qzeros)
        return z + 1 if self.zero_point == "v1" else z

    def row_groups(self) -> torch.Tensor:
        """The group of each row, int64 [K]."""
        if self.act_order:
            return self.g_idx.to(torch.int64)
        return torch.arange(self.k, device=self.qweight.device) // self.group_size

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """W [K, N] = (q − z) · s, computed in float32 and returned as ``dtype``."""
        g = self.row_groups()
        q = unpack_rows(self.qweight).to(torch.float32)
        z = self.zeros().to(torch.float32)[g]
        s = self.scales.to(torch.float32)[g]
        return ((q - z) * s).to(dtype)

    def cols(self, start: int, stop: int) -> GptqWeight:
        """Columns [start, stop) (column-parallel shard); both multiples of 8."""
        if start % 8 or stop % 8:
            raise ValueError(
                f"a column shard must start and end on a packed qzeros word: [{start}, {stop})"
            )
        return replace(
            self,
            qweight=self.qweight[:, start:stop].contiguous(),
            scales=self.scales[:, start:stop].contiguous(),
            qzeros=self.qzeros[:, start // 8 : stop // 8].contiguous(),
        )

    def rows(self, start: int, stop: int) -> GptqWeight:
        """Rows [start, stop) (row-parallel shard); multiples of group_size. With act-order the
        shard keeps every group's scales and zeros and its slice of g_idx."""
        if start % self.group_size or stop % self.group_size:
            raise ValueError(
                f"a row shard must start and end on a group of {self.group_size}: [{start}, {stop})"
            )
        qw = self.qweight[start // 8 : stop // 8].contiguous()
        if self.act_order:
            return replace(self, qweight=qw, g_idx=self.g_idx[start:stop].contiguous())
        g0, g1 = start // self.group_size, stop // self.group_size
        return replace(
            self,
            qweight=qw,
            scales=self.scales[g0:g1].contiguous(),
            qzeros=self.qzeros[g0:g1].contiguous(),
        )

    def to(self, device) -> GptqWeight:
        """The same weight on ``device``."""
        return replace(
            self,
            qweight=self.qweight.to(device),
            scales=self.scales.to(device),
            qzeros=self.qzeros.to(device),
            g_idx=None if self.g_idx is None else self.g_idx.to(device),
        )

    @staticmethod
    def cat_cols(ws: list[GptqWeight]) -> GptqWeight:
        """Weights of the same K side by side (Q|K|V, gate|up); act-order needs equal g_idx."""
        w0 = ws[0]
        for w in ws[1:]:
            if (w.k, w.group_size, w.zero_point, w.act_order) != (
                w0.k,
                w0.group_size,
                w0.zero_point,
                w0.act_order,
            ):
                raise ValueError(
                    "cat_cols: weights differ in K, group size, zero point or act-order"
                )
            if w.act_order and not torch.equal(w.g_idx, w0.g_idx):
                raise ValueError(
                    "cat_cols: act-order weights with different g_idx cannot share one launch"
                )
        return replace(
            w0,
            qweight=torch.cat([w.qweight for w in ws], 1),
            scales=torch.cat([w.scales for w in ws], 1),
            qzeros=torch.cat([w.qzeros for w in ws], 1),
        )


def quantize(
    w: torch.Tensor, group_size: int, sym: bool, zero_point: str, g_idx: torch.Tensor | None = None
) -> GptqWeight:
    """GPTQ-style round-to-nearest quantisation of W [K, N] (float) with integer zero points.

    Symmetric: s = 2·max|w| / 15 per group and column, z = 8. Asymmetric: s = (max − min) / 15 over
    the group's range widened to include 0, z = round(−min / s). Scales are rounded to fp16 first
    and the codes computed with the rounded scale, so |dequantize − w| ≤ s/2 except where a code
    clamps. For v1 the zero point is kept in 1..15 (stored z − 1 must fit a nibble). With an
    act-order ``g_idx`` (each group exactly ``group_size`` rows) the groups are its row sets."""
    k, n = w.shape
    if k % group_size or k % 8 or n % 8:
        raise ValueError(
            f"quantize: K={k} must be a multiple of group_size {group_size} and 8, "
            f"N={n} a multiple of 8"
        )
    perm = None
    if g_idx is not None:
        perm = torch.argsort(g_idx.to(torch.int64), stable=True)
        counts = torch.bincount(g_idx.to(torch.int64), minlength=k // group_size)
        if counts.numel() != k // group_size or not bool((counts == group_size).all()):
            raise ValueError(f"quantize: every g_idx group must hold exactly {group_size} rows")
        w = w[perm]
    wg = w.to(torch.float32).reshape(k // group_size, group_size, n)
    if sym:
        amax = wg.abs().amax(1).clamp_min(1e-6)
        scale = (2 * amax / 15).to(torch.float16).to(torch.float32)
        zero = torch.full_like(scale, 8.0)
    else:
        lo = wg.amin(1).clamp(max=0.0)
        hi = wg.amax(1).clamp(min=0.0)
        scale = ((hi - lo).clamp_min(1e-6) / 15).to(torch.float16).to(torch.float32)
        zero = torch.round(-lo / scale).clamp(0, 15)
    if zero_point == "v1":
        zero = zero.clamp(1, 15)
    q = torch.clamp(torch.round(wg / scale.unsqueeze(1)) + zero.unsqueeze(1), 0, 15).reshape(k, n)
    if perm is not None:
        q = torch.empty_like(q).index_copy_(0, perm, q)
    z = zero.to(torch.int64) - (1 if zero_point == "v1" else 0)
    return GptqWeight(
        qweight=pack_rows(q),
        scales=scale.to(torch.float16),
        qzeros=pack_cols(z),
        group_size=group_size,
        zero_point=zero_point,
        g_idx=None if g_idx is None else g_idx.to(torch.int32),
    )
