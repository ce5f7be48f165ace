"""Shared fixtures: the tiny config and its random model, made once per session, on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# One thread: on a small shared CPU, PyTorch's thread pool spinning costs more than it gains at
# these sizes (the CPU INT4 kernel runs ~15x faster with one thread there).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny():
    from wf_decoder.config import load_config

    return load_config("tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny):
    from wf_decoder.checkpoint import RandomSource

    return RandomSource(tiny, seed=0).load()
