"""Rank groups of one process per rank over torch.distributed (gloo, CPU processes): the
handshake and the fused kernel on the simulator device, with 2 and 4 processes."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import wavefuse
from reference import activations, dequant_gptq, f16, random_gptq, rel_l2, rmsnorm

F64 = torch.float64


def _init(rank: int, world: int, path: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)


def _fused(rank: int, world: int, path: str) -> None:
    _init(rank, world, path)
    try:
        g = wavefuse.group_from_process_group(device="sim")
        assert (g.rank, g.size) == (rank, world)
        k = wavefuse.kernel("gemv_int4_allreduce_rmsnorm", group=g, hidden=128, k=128)
        assert k.tp == world
        # Every process makes every rank's data from one seed, and passes its own.
        gen = torch.Generator().manual_seed(11)
        ws = [random_gptq(128, 128, 128, gen) for _ in range(world)]
        xs = [activations((1, 128), gen) for _ in range(world)]
        r = activations((1, 128), gen)
        w = (1.0 + 0.1 * activations((128,), gen).to(F64)).to(torch.float16)
        res, normed = k(
            w_down_qweight=ws[rank][0], w_down_scales=ws[rank][1], w_down_qzeros=ws[rank][2],
            x=xs[rank], residual=r, norm_w=w,
        )
        k.check()
        want = f16(sum(f16(xs[i].to(F64) @ dequant_gptq(*ws[i])) for i in range(world)) + r.to(F64))
        assert rel_l2(res, want) < 3e-3
        assert rel_l2(normed, f16(rmsnorm(want, w, 1e-6))) < 3e-3
        # A list of per-rank tensors is refused: a process passes its own rank's.
        with pytest.raises(wavefuse.ArgumentError, match="this process's rank"):
            k(w_down_qweight=[ws[rank][0]] * world, w_down_scales=ws[rank][1],
              w_down_qzeros=ws[rank][2], x=xs[rank], residual=r, norm_w=w)
        g.close()  # collective: the kernels close between two barriers
        assert g.closed and k.closed
        g.close()  # a second call does nothing (and is not a collective)
        with pytest.raises(wavefuse.ArgumentError, match="group.*closed"):
            k(w_down_qweight=ws[rank][0], w_down_scales=ws[rank][1], w_down_qzeros=ws[rank][2],
              x=xs[rank], residual=r, norm_w=w)
    finally:
        dist.destroy_process_group()


def _mismatch(rank: int, world: int, path: str) -> None:
    _init(rank, world, path)
    try:
        g = wavefuse.group_from_process_group(device="sim")
        hidden = 256 if rank == world - 1 else 128  # the last rank builds other shapes
        with pytest.raises(wavefuse.GenerateError, match="every process of a group must build the same"):
            wavefuse.kernel("allreduce_residual", group=g, hidden=hidden)
    finally:
        dist.destroy_process_group()


def _spawn(fn, world: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(fn, args=(world, os.path.join(d, "rendezvous")), nprocs=world, join=True)


@pytest.mark.parametrize("world", [2, 4])
def test_fused_kernel_over_gloo(world):
    _spawn(_fused, world)


def test_handshake_refuses_different_kernels():
    _spawn(_mismatch, 2)


def test_group_needs_torch_distributed():
    if dist.is_initialized():
        pytest.skip("a process group is initialised")
    with pytest.raises(wavefuse.ArgumentError, match="not initialised"):
        wavefuse.group_from_process_group()
