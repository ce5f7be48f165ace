"""wavefuse: generated fused decode kernels (INT4 GEMV, TP allreduce, RMSNorm) as PyTorch ops.

`wavefuse.kernel(...)` generates a kernel through the same pipeline as the `wavefuse` command
(what `wavefuse emit` prints is what runs), compiles and binds it once, and returns a `Kernel`:
a callable registered as a `torch.library` custom op, launched on PyTorch's current stream, that
works under `torch.compile` and inside CUDA graphs. `device="sim"` runs it on the CPU protocol
simulator instead, on CPU tensors. See docs/python.md.
"""

from ._kernel import (
    Arg,
    ArgumentError,
    DeviceError,
    GenerateError,
    Group,
    Kernel,
    KernelError,
    WavefuseError,
    group_from_process_group,
    kernel,
    kernel_set,
)

__all__ = [
    "Arg",
    "ArgumentError",
    "DeviceError",
    "GenerateError",
    "Group",
    "Kernel",
    "KernelError",
    "WavefuseError",
    "group_from_process_group",
    "kernel",
    "kernel_set",
]
