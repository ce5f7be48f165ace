"""Greedy decoding with each decode step captured once as a CUDA graph and replayed per token.

:class:`StepRunner` owns the step's static inputs (token ids [B] and the position, a 0-d device
tensor) and outputs (logits, next tokens). On CUDA the step is warmed up on a side stream (lazy
initialisation, torch.compile, wavefuse kernel builds), captured into one ``torch.cuda.CUDAGraph``
and replayed for every position; between replays the next token and position are advanced on the
device, so the loop never waits for the host. Elsewhere (CPU) the same step runs eagerly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from .model import Decoder

GRAPH_WARMUP = 3


class StepRunner:
    """One decode step of ``model`` at its batch size, graph-captured on CUDA unless
    ``graph=False``."""

    def __init__(self, model: Decoder, graph: bool | None = None):
        self.model = model
        dev = model.device
        self.tokens = torch.zeros(model.batch, dtype=torch.int64, device=dev)
        self.pos = torch.zeros((), dtype=torch.int64, device=dev)
        self.graph = None
        self.logits = self.next = None
        if graph is None:
            graph = dev.type == "cuda"
        if graph:
            self._capture()

    def _run(self):
        logits = self.model.step(self.tokens, self.pos)
        return logits, logits.argmax(-1)

    def _capture(self) -> None:
        s = torch.cuda.Stream(self.model.device)
        s.wait_stream(torch.cuda.current_stream(self.model.device))
        with torch.cuda.stream(s):
            for _ in range(GRAPH_WARMUP):
                self._run()
        torch.cuda.current_stream(self.model.device).wait_stream(s)
        torch.cuda.synchronize(self.model.device)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.logits, self.next = self._run()
        self.graph = g
        self.model.reset()

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the step on the current ``tokens`` and ``pos``: (logits [B, V], argmax [B]). With a
        graph the outputs are its static tensors, overwritten by the next call."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self.logits, self.next = self._run()
        return self.logits, self.next

    def prefill(self, prompt: torch.Tensor) -> None:
        """Reset the cache and feed ``prompt`` [B, P] one position at a time (through the same
        step); afterwards ``next`` holds the first generated token and ``pos`` is P − 1."""
        self.model.reset()
        for t in range(prompt.shape[1]):
            self.tokens.copy_(prompt[:, t])
            self.pos.fill_(t)
            self()

    def advance(self, tokens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed ``tokens`` (default: the step's own greedy choice) at the next position."""
        self.tokens.copy_(self.next if tokens is None else tokens)
        self.pos.add_(1)
        return self()


@dataclass
class Generation:
    """Greedy tokens [B, steps] and, when kept, each step's logits (float32, on the CPU)."""

    tokens: torch.Tensor
    logits: list[torch.Tensor] | None


def generate(
    runner: StepRunner,
    prompt: torch.Tensor,
    steps: int,
    keep_logits: bool = False,
    force: torch.Tensor | None = None,
) -> Generation:
    """Greedy decoding of ``steps`` tokens after ``prompt``. With ``force`` [B, steps]
    (teacher forcing) those tokens are fed instead of the path's own choices, so every step's
    logits are comparable across paths; ``tokens`` still holds each step's own argmax."""
    if runner.model.max_seq < prompt.shape[1] + steps:
        raise ValueError(
            f"max_seq {runner.model.max_seq} < prompt {prompt.shape[1]} + steps {steps}"
        )
    runner.prefill(prompt)
    out = torch.empty(steps, runner.model.batch, dtype=torch.int64, device=runner.model.device)
    kept = [] if keep_logits else None
    for s in range(steps):
        out[s].copy_(runner.next)
        if kept is not None:
            kept.append(runner.logits.float().cpu())
        if s + 1 < steps:
            runner.advance(None if force is None else force[:, s])
    return Generation(out.t().cpu(), kept)


def timed_decode(runner: StepRunner, prompt: torch.Tensor, steps: int) -> float:
    """Seconds for ``steps`` greedy decode steps after the prompt (prefill not timed), the
    device synchronised before and after."""
    dev = runner.model.device
    runner.prefill(prompt)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        runner.advance()
    sync()
    return time.perf_counter() - t0
