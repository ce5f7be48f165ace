"""Backends by path name: ``torch_best`` (a), ``wavefuse_unfused`` (b), ``wavefuse_fused`` (c)
and ``torch_f32`` (the float32 reference). Short names a, b, c and ref are accepted."""

from __future__ import annotations

from .base import Backend

ALIASES = {
    "a": "torch_best",
    "b": "wavefuse_unfused",
    "c": "wavefuse_fused",
    "c2": "wavefuse_fused_prenorm",
    "ref": "torch_f32",
}
PATHS = ("torch_best", "wavefuse_unfused", "wavefuse_fused", "wavefuse_fused_prenorm", "torch_f32")


def canonical(name: str) -> str:
    """The full path name of ``name`` (an alias or a full name); ValueError if unknown."""
    full = ALIASES.get(name, name)
    if full not in PATHS:
        raise ValueError(
            f"unknown path `{name}`: choose from {', '.join(PATHS)} "
            f"(or {', '.join(f'{k}={v}' for k, v in ALIASES.items())})"
        )
    return full


def make_backend(
    name: str,
    device="cpu",
    group=None,
    compile: bool | None = None,
    schedule: str = "default",
    dump_ir=None,
    launch: str = "stream",
    lazy: bool = False,
) -> Backend:
    """A backend for path ``name`` on ``device`` (ImportError for a wavefuse path without the
    package); ``compile`` applies to torch_best (default: on CUDA only); ``schedule``
    (``"default"`` | ``"tuned"``), ``dump_ir`` (a folder: each kernel's ``.wfir`` written there
    when it is built) and ``launch`` (``"stream"`` | ``"dependent"``) to the wavefuse paths;
    ``lazy`` to torch_f32 (the weights dequantised per call: a reference that fits where the
    float32 weights would not)."""
    name = canonical(name)
    if name == "torch_best":
        from .torch_best import TorchBestBackend

        return TorchBestBackend(device, group, compile=compile)
    if name == "torch_f32":
        from .torch_f32 import TorchF32Backend

        return TorchF32Backend(device, group, lazy=lazy)
    from .wavefuse_backend import (
        WavefuseFusedBackend,
        WavefusePrenormBackend,
        WavefuseUnfusedBackend,
    )

    cls = {
        "wavefuse_fused": WavefuseFusedBackend,
        "wavefuse_fused_prenorm": WavefusePrenormBackend,
    }.get(name, WavefuseUnfusedBackend)
    return cls(device, group, schedule=schedule, dump_ir=dump_ir, launch=launch)


__all__ = ["Backend", "PATHS", "canonical", "make_backend"]
