"""The reference path: every linear through its dequantised weights in float32, activations,
norms and residuals in float32 (no FP16 rounding anywhere). What the hidden-state gate compares
each path against."""

from __future__ import annotations

import torch

from ..gptq import GptqWeight
from .base import Backend


class TorchF32Backend(Backend):
    """Dequantised float32 reference (act-order supported). With ``lazy`` the weights stay
    packed on the device and each call dequantises its own (the same values, computed again):
    a model whose float32 weights do not fit the device (4× the FP16 bytes: Qwen 3.5 27B's
    108 GB) still has its reference, at the cost of speed."""

    name = "torch_f32"
    dtype = torch.float32

    def __init__(self, device="cpu", group=None, lazy: bool = False):
        super().__init__(device, group)
        self.lazy = lazy

    def prepare(self, w: GptqWeight):
        """W [K, N] = (q − z) · s in float32 on the device (``lazy``: the packed weight)."""
        w = w.to(self.device)
        return w if self.lazy else w.dequantize(torch.float32)

    def linear_col(self, x: torch.Tensor, w) -> torch.Tensor:
        """x @ W in float32."""
        if isinstance(w, GptqWeight):
            w = w.dequantize(torch.float32)
        return x.to(torch.float32) @ w

    def describe(self) -> str:
        return "torch_f32: dequantised float32 weights, float32 activations (reference)"
