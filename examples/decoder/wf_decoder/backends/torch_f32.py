"""The reference path: every linear through its dequantised weights in float32, activations,
norms and residuals in float32 (no FP16 rounding anywhere). What the hidden-state gate compares
each path against."""

from __future__ import annotations

import torch

from ..gptq import GptqWeight
from .base import Backend


class TorchF32Backend(Backend):
    """Dequantised float32 reference (act-order supported)."""

    name = "torch_f32"
    dtype = torch.float32

    def prepare(self, w: GptqWeight) -> torch.Tensor:
        """W [K, N] = (q − z) · s in float32 on the device."""
        return w.to(self.device).dequantize(torch.float32)

    def linear_col(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x @ W in float32."""
        return x.to(torch.float32) @ w

    def describe(self) -> str:
        return "torch_f32: dequantised float32 weights, float32 activations (reference)"
