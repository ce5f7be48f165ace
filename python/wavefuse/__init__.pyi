"""Type stubs of the `wavefuse` package (the implementation: _kernel.py)."""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

class WavefuseError(Exception):
    """Base class of every error the package raises on its own account."""

class GenerateError(WavefuseError, ValueError):
    """The kernel could not be generated as asked."""

class DeviceError(WavefuseError, RuntimeError):
    """No GPU, driver or compiler, or a compile, load or launch failed."""

class ArgumentError(WavefuseError, ValueError, TypeError):
    """An argument does not match the kernel's ABI; the message names it."""

class KernelError(WavefuseError, RuntimeError):
    """A launch failed on the device (error word) or the simulator found a violation."""

class Arg:
    """One array argument of a kernel, from its ABI."""

    name: str
    role: str
    dtype: torch.dtype
    shape: Tuple[int, ...]
    align: int
    buffer: str
    part: str
    abi_type: str

class Kernel:
    """A generated kernel bound to a device, callable on tensors, registered as custom ops."""

    @property
    def name(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def target(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def devices(self) -> List[str]: ...
    @property
    def abi(self) -> Tuple[Arg, ...]: ...
    @property
    def inputs(self) -> Tuple[Arg, ...]: ...
    @property
    def outputs(self) -> Tuple[Arg, ...]: ...
    @property
    def source(self) -> str: ...
    @property
    def ir(self) -> str: ...
    @property
    def abi_toml(self) -> str: ...
    @property
    def synchronises(self) -> bool: ...
    @property
    def dependent_launch(self) -> bool: ...
    @property
    def op(self) -> Any:
        """`torch.ops.wavefuse.<name>_<n>.default`: functional, returns new outputs."""
    @property
    def out_op(self) -> Any:
        """`torch.ops.wavefuse.<name>_<n>_out.default`: writes the given outputs."""
    @property
    def closed(self) -> bool: ...
    def __call__(self, *args: Any, out: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        """Runs the kernel; TP 1: tensors, TP > 1: lists of per-rank tensors."""
    def check(self, wait: bool = True) -> None:
        """Raises KernelError if a launch since the last check failed; wait=False never blocks."""
    def close(self) -> None:
        """Frees the device state; later calls raise ArgumentError."""

class Group:
    """A TP group of processes, one rank each, over a torch.distributed process group."""

    rank: int
    size: int
    device: str
    @property
    def closed(self) -> bool: ...
    def close(self) -> None:
        """Collective: closes the group and its kernels between two barriers of the process group;
        afterwards dist.destroy_process_group() is safe."""

def group_from_process_group(pg: Any = None, device: Union[str, torch.device, None] = None) -> Group:
    """A Group over `pg` (default: the default process group), this process on `device`."""

def kernel(
    source: Union[str, os.PathLike],
    *,
    tp: Optional[int] = None,
    batch: Optional[int] = None,
    target: Optional[str] = None,
    device: Union[str, torch.device, None] = None,
    devices: Optional[Sequence[Union[str, torch.device]]] = None,
    config: Union[str, os.PathLike, None] = None,
    schedule: str = "default",
    cache_dir: Optional[str] = None,
    group: Optional[Group] = None,
    launch: str = "stream",
    **shape: Any,
) -> Kernel:
    """Generates, compiles and binds a kernel; returns a callable registered as a custom op."""

def kernel_set() -> List[str]:
    """The names of the kernel set."""
