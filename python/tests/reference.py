"""An independent float64 reference for the tests: GPTQ dequantised here from the packed words
(DESIGN.md §2), written from the format description, not from the code under test."""

from __future__ import annotations

import torch

F64 = torch.float64


def nibbles_along_rows(qweight: torch.Tensor) -> torch.Tensor:
    """int32 [K/8, N] packed along K -> codes [K, N] (nibble i of word (kg, n) is row 8kg+i)."""
    w = qweight.to(torch.int64) & 0xFFFFFFFF
    kg, n = w.shape
    shifts = torch.arange(8, dtype=torch.int64) * 4
    codes = (w.unsqueeze(1) >> shifts.view(1, 8, 1)) & 0xF  # [K/8, 8, N]
    return codes.reshape(kg * 8, n)


def nibbles_along_cols(qzeros: torch.Tensor) -> torch.Tensor:
    """int32 [G, N/8] packed along N -> codes [G, N] (nibble i of word j is column 8j+i)."""
    w = qzeros.to(torch.int64) & 0xFFFFFFFF
    g, n8 = w.shape
    shifts = torch.arange(8, dtype=torch.int64) * 4
    codes = (w.unsqueeze(2) >> shifts.view(1, 1, 8)) & 0xF  # [G, N/8, 8]
    return codes.reshape(g, n8 * 8)


def dequant_gptq(qweight, scales, qzeros, zero_point: str = "v1") -> torch.Tensor:
    """W [K, N] in float64: w = (q - z) * s, z = stored + 1 for v1, stored for v2, 8 symmetric."""
    q = nibbles_along_rows(qweight).to(F64)
    k, n = q.shape
    groups = scales.shape[0]
    g_of_k = torch.arange(k) // (k // groups)
    if zero_point == "symmetric":
        z = torch.full((groups, n), 8.0, dtype=F64)
    else:
        z = nibbles_along_cols(qzeros).to(F64) + (1.0 if zero_point == "v1" else 0.0)
    return (q - z[g_of_k]) * scales.to(F64)[g_of_k]


def f16(t: torch.Tensor) -> torch.Tensor:
    """One FP16 rounding (round to nearest even), back in float64."""
    return t.to(torch.float16).to(F64)


def silu(x: torch.Tensor) -> torch.Tensor:
    return x / (1.0 + torch.exp(-x))


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w.to(F64)


def int8_roundtrip(row: torch.Tensor, block: int) -> torch.Tensor:
    """Block-absmax INT8: s = max|x| / 127 per block, q = clamp(round(x / s), -127, 127)."""
    b, h = row.shape
    x = row.reshape(b, h // block, block)
    s = x.abs().amax(dim=-1, keepdim=True) / 127.0
    q = torch.where(s > 0, torch.clamp(torch.round(x / torch.where(s > 0, s, 1.0)), -127, 127), 0.0)
    return (q * s).reshape(b, h)


def rel_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.to(F64), want.to(F64)
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def random_gptq(k: int, n: int, group: int, gen: torch.Generator):
    """A random GPTQ weight: codes, zero points (v1-stored) and FP16 scales."""
    qweight = torch.randint(-(2**31), 2**31 - 1, (k // 8, n), dtype=torch.int32, generator=gen)
    qzeros = torch.randint(-(2**31), 2**31 - 1, (k // group, n // 8), dtype=torch.int32, generator=gen)
    scales = (torch.rand(k // group, n, generator=gen, dtype=F64) * 0.02 + 0.001).to(torch.float16)
    return qweight, scales, qzeros


def activations(shape, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=F64).to(torch.float16)
