"""Rank groups of one process per rank, over a `torch.distributed` process group (DESIGN.md §10).

Building a kernel with `group=` is collective: every process of the group must build the same
kernels in the same order. The handshake checks that they did (same generated source, ABI and TP).
On the simulator device each process then simulates the whole group on every rank's inputs
(exchanged through the process group at each call) and keeps its own rank's outputs. On GPUs each process
builds its rank's kernel, exports the IPC handles (cudaIpc, hipIpc on ROCm) of its peer arrays (cross-rank flags,
allreduce payloads), gathers every rank's through the process group and maps them, before any
launch or capture; where a GPU cannot reach a peer's memory (or the ranks are on different nodes)
building fails on every rank with the fallback in the message.
"""

from __future__ import annotations

import hashlib
import socket
import weakref
from typing import Any, List, Optional, Union

import torch

from ._kernel import ArgumentError, DeviceError, GenerateError

__all__ = ["Group", "group_from_process_group"]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Group:
    """A TP group of processes, one rank each, over a `torch.distributed` process group.

    Attributes:
        rank: this process's rank (its rank in the process group).
        size: the number of ranks (the TP size of the kernels built with it).
        device: this process's device (`"sim"` or `"cuda:N"`).
    """

    def __init__(self, pg: Any, device: str) -> None:
        import torch.distributed as dist

        self._pg = pg
        self.rank: int = dist.get_rank(pg)
        self.size: int = dist.get_world_size(pg)
        self.device: str = device
        self._closed = False
        # The kernels built with this group, closed with it (weak: a dropped kernel frees itself).
        self._kernels: "weakref.WeakSet[Any]" = weakref.WeakSet()

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed

    def close(self) -> None:
        """Closes the group and every kernel built with it; collective: every rank calls it.

        In order: kernels built with the group refuse further calls (`ArgumentError`); this
        rank's device finishes its queued work; all ranks meet at a barrier (no rank still
        launches a kernel that reads a peer's flags or payload); each rank frees its kernels'
        device state and unmaps its peers' buffers; all ranks meet again, so that none destroys
        the process group (or exits, freeing memory a peer has mapped) while another is still
        closing. Afterwards `dist.destroy_process_group()` is safe. A second call does nothing.
        """
        if self._closed:
            return
        import torch.distributed as dist

        self._closed = True
        if self.device != "sim" and torch.cuda.is_available():
            torch.cuda.synchronize(torch.device(self.device))
        dist.barrier(group=self._pg)
        for k in list(self._kernels):
            k.close()
        dist.barrier(group=self._pg)

    def __repr__(self) -> str:
        return f"<wavefuse.Group rank {self.rank} of {self.size} on {self.device}{' (closed)' if self._closed else ''}>"

    def _all_gather(self, obj: Any) -> List[Any]:
        import torch.distributed as dist

        if self._closed:
            raise ArgumentError("the process group (wavefuse.Group) was closed")
        out: List[Any] = [None] * self.size
        dist.all_gather_object(out, obj, group=self._pg)
        return out

    def _handshake(self, k: Any) -> None:
        mine = (k.name, k.tp, _digest(k.source), _digest(k.abi_toml))
        every = self._all_gather(mine)
        for r, theirs in enumerate(every):
            if theirs != mine:
                what = "kernel" if theirs[0] != mine[0] else "TP" if theirs[1] != mine[1] else "generated code or ABI"
                raise GenerateError(
                    f"rank {self.rank} built `{mine[0]}` (TP {mine[1]}) but rank {r} built `{theirs[0]}` "
                    f"(TP {theirs[1]}): the {what} differs; every process of a group must build the same "
                    "kernels, with the same shapes, in the same order"
                )

    def _check_one_node(self) -> None:
        hosts = sorted(set(self._all_gather(socket.gethostname())))
        if len(hosts) > 1:
            raise DeviceError(
                f"the ranks are on {len(hosts)} nodes ({', '.join(hosts)}): their GPUs cannot reach "
                "each other's memory. Across nodes use torch.distributed's allreduce (NCCL/RCCL) with "
                "the unfused kernels (gemv_int4, then dist.all_reduce, then the norm)"
            )

    def _agree(self, err: Optional[str], step: str, hint: str) -> None:
        """Raises on every rank when `step` failed on any (each passes its own error or None)."""
        errors = self._all_gather(err)
        failed = [(r, e) for r, e in enumerate(errors) if e]
        if failed:
            r, e = failed[0]
            raise DeviceError(f"rank {r}: {step} failed: {e}{hint}")


def group_from_process_group(pg: Any = None, device: Union[str, torch.device, None] = None) -> Group:
    """A `wavefuse.Group` over `pg` (default: the default process group), this process being its
    rank `dist.get_rank(pg)` on `device` (`"sim"`, or `"cuda:N"`; default: the current CUDA device,
    else `"sim"`). Pass it as `wavefuse.kernel(..., group=g)`.

    Raises:
        ArgumentError: torch.distributed is not initialised.
    """
    import torch.distributed as dist

    from ._kernel import _parse_device

    if not dist.is_available() or not dist.is_initialized():
        raise ArgumentError(
            "torch.distributed is not initialised: call dist.init_process_group(...) first"
        )
    if pg is None:
        pg = dist.group.WORLD
    return Group(pg, _parse_device(device))
