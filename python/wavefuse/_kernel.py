"""Kernels of the wavefuse pipeline as PyTorch custom ops (DESIGN.md §10).

Everything that is not argument checking or torch glue is the native module's, which calls the
same pipeline and runtime as the `wavefuse` command: generation (`suite::generate`), the CPU
protocol simulator, the compile cache and `KernelInstance`.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from . import _wavefuse as _native

__all__ = [
    "Arg",
    "ArgumentError",
    "DeviceError",
    "GenerateError",
    "Kernel",
    "KernelError",
    "WavefuseError",
    "Group",
    "group_from_process_group",
    "kernel",
    "kernel_set",
]


class WavefuseError(Exception):
    """Base class of every error the package raises on its own account."""


class GenerateError(WavefuseError, ValueError):
    """The kernel could not be generated: an unknown name, a shape the kernel set cannot be built
    at, an invalid `.wfir` kernel, or a lowering that does not support it."""


class DeviceError(WavefuseError, RuntimeError):
    """No GPU, driver or compiler for the requested device, or a compile, load or launch failed."""


class ArgumentError(WavefuseError, ValueError, TypeError):
    """A call's argument does not match the kernel's ABI (dtype, shape, device, contiguity,
    alignment, number of ranks). The message names the argument and what was expected."""


class KernelError(WavefuseError, RuntimeError):
    """A launch failed on the device: a bounded wait timed out and the kernel wrote its error word
    (DESIGN.md §5.10), or the simulator found a protocol violation. Raised by `Kernel.check()`."""


def kernel_set() -> List[str]:
    """The names of the kernel set (`wavefuse.kernel`'s `source` may be one of them)."""
    return list(_native.kernel_set())


@dataclass(frozen=True)
class Arg:
    """One array argument of a kernel, from its ABI.

    Attributes:
        name: the keyword it is passed by (`x`, `w_qweight`, `w_scales`, ...).
        role: `"input"` or `"output"`.
        dtype: the torch dtype a tensor must have (packed INT4 words: `torch.int32`).
        shape: the per-rank shape.
        align: the byte alignment its data pointer must have.
        buffer: the op-level buffer it belongs to.
        part: which array of the buffer (`data`, `qweight`, `scales`, `qzeros`, `g_idx`).
        abi_type: the ABI's element type (`f16`, `u32`, ...).
    """

    name: str
    role: str
    dtype: torch.dtype
    shape: Tuple[int, ...]
    align: int
    buffer: str
    part: str
    abi_type: str


_DTYPES = {
    "float16": torch.float16,
    "float32": torch.float32,
    "int32": torch.int32,
    "int8": torch.int8,
    "bool": torch.bool,
}

_LIB = torch.library.Library("wavefuse", "FRAGMENT")
_COUNTER = itertools.count()


def _rocm() -> bool:
    return getattr(torch.version, "hip", None) is not None


def _parse_device(d: Union[str, torch.device, None]) -> str:
    if d is None:
        return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "sim"
    if isinstance(d, torch.device):
        d = str(d)
    if d == "sim":
        return "sim"
    if d == "cuda":
        return f"cuda:{torch.cuda.current_device() if torch.cuda.is_available() else 0}"
    if d.startswith("cuda:") and d[5:].isdigit():
        return d
    raise GenerateError(
        f"device={d!r}: use 'sim' (the CPU protocol simulator, CPU tensors) or 'cuda' / 'cuda:N' "
        "(a GPU; on ROCm builds of PyTorch 'cuda' is the HIP device)"
    )


def _source_kind(source: Union[str, os.PathLike]) -> Tuple[str, str]:
    if isinstance(source, os.PathLike):
        return "file", os.fspath(source)
    if not isinstance(source, str):
        raise GenerateError(f"source must be a kernel name, a .wfir path or .wfir text, not {type(source).__name__}")
    if source in _native.kernel_set():
        return "set", source
    if "\n" in source or source.lstrip().startswith(("kernel", ";")):
        return "text", source
    if source.endswith(".wfir") or os.path.exists(source):
        return "file", source
    raise GenerateError(
        f"unknown kernel {source!r}: not in the kernel set ({', '.join(_native.kernel_set())}), "
        "not a .wfir file and not .wfir text"
    )


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
    group: Optional["Group"] = None,
    launch: str = "stream",
    **shape: Any,
) -> "Kernel":
    """Generates, compiles and binds a kernel; returns a callable `Kernel` registered as a
    `torch.library` custom op.

    Args:
        source: a kernel of the set by name (`gemv_int4`, `gemv_int4_allreduce_rmsnorm`, ...;
            see `kernel_set()`), a path to a `.wfir` file, or `.wfir` text.
        tp: the TP group size the kernel is built for; default 1 (a `.wfir` kernel: its own,
            which a given `tp` must match).
        batch: tokens per launch (rows of the activations); default 1 (a `.wfir` kernel: its
            own, which a given `batch` must match).
        target: `"gfx906"` or `"sm90"`; by default from the device (`sim`: gfx906, an NVIDIA
            GPU: sm90, a ROCm GPU: gfx906).
        device: `"sim"` (the CPU protocol simulator; CPU tensors) or `"cuda"` / `"cuda:N"`.
            Default: the current CUDA device when there is one, else `"sim"`.
        devices: for TP > 1 on GPUs, rank r's device (`["cuda:0"] * 4`: all ranks on one GPU;
            `["cuda:0", "cuda:1"]`: one per GPU, peer access required). Default: `[device] * tp`.
        config: a Hugging Face `config.json` whose dimensions (and GPTQ layout) the set's kernel
            is built at, per rank at `tp`.
        schedule: `"default"` (the target's) or `"tuned"` (the tuned-schedule store's entry for
            this kernel, shape and device when there is one).
        cache_dir: the compile cache (default: the runtime's, `$WAVEFUSE_CACHE_DIR` or the user
            cache directory).
        launch: `"stream"` (default: plain stream order) or `"dependent"`: on CUDA GPUs each
            call is launched as a programmatic dependent of the previous kernel of the stream
            where the kernel allows it (`Kernel.dependent_launch`: it opens with the wait for
            that kernel), so its start overlaps that kernel's end — in a captured graph too.
            Kernels whose workgroups wait for each other (grid barriers, flags) stay in stream
            order. Ignored on the simulator and on ROCm (HIP has no such launch).
        group: a `wavefuse.Group` (`group_from_process_group`): one process per rank; the
            kernel is built for the group's size and a call takes this process's rank's tensors.
        **shape: per-rank sizes of a set kernel: `hidden`, `n`, `k`, `nq`, `nkv`, `group_size`
            (32/64/128, -1 per-channel), `zero_point` (`'v1'`, `'v2'`, `'symmetric'`), `eps`.

    Compiling, loading and allocating the synchronisation state happen here, never in a call.

    Raises:
        GenerateError: the kernel cannot be generated as asked.
        DeviceError: no such device, or the compile / load / co-residency check failed.
    """
    if launch not in ("stream", "dependent"):
        raise GenerateError(f"launch={launch!r}: use 'stream' or 'dependent'")
    if group is not None:
        return _group_kernel(group, source, tp=tp, batch=batch, target=target, device=device,
                             devices=devices, config=config, schedule=schedule, cache_dir=cache_dir,
                             launch=launch,
                             **shape)
    kind, text = _source_kind(source)
    if kind == "set":
        tp = 1 if tp is None else tp
        batch = 1 if batch is None else batch
        if tp < 1 or batch < 1:
            raise GenerateError(f"tp={tp}, batch={batch}: both must be at least 1")
    if tp is None and devices is not None:
        tp = len(devices)
    dev = _parse_device(device)
    devs = None if devices is None else [_parse_device(d) for d in devices]
    if devs is not None:
        if tp is not None and len(devs) != tp:
            raise GenerateError(f"devices has {len(devs)} entries for tp={tp}")
        if device is not None and devs[0] != dev:
            raise GenerateError("device= and devices= disagree; give one of them")
        dev = devs[0]
    sim = dev == "sim"
    if sim and devs is not None and any(d != "sim" for d in devs):
        raise GenerateError("a kernel runs on the simulator or on GPUs, not both")
    if target is None:
        target = "gfx906" if sim or _rocm() else "sm90"
    # All ranks on one GPU: kernels with a grid barrier are refitted so every rank's grid is
    # resident at once (the native side keeps one rank per-device).
    placement = "per_device" if sim or (devs is not None and len(set(devs)) > 1) else "same_device"
    try:
        gen = _native.generate(
            kind,
            text,
            tp=tp or 0,
            batch=batch or 0,
            arch=target,
            schedule=schedule,
            placement=placement,
            config=None if config is None else os.fspath(config),
            **shape,
        )
    except _native.GenerateError as e:
        raise GenerateError(str(e)) from None
    except TypeError as e:
        raise GenerateError(f"{e} (shape keywords: hidden, n, k, nq, nkv, group_size, zero_point, eps)") from None
    if devs is None:
        devs = [dev] * int(gen.tp)
    native = None
    if not sim:
        if not _rocm():
            _find_nvrtc()
        if not torch.cuda.is_available():
            raise DeviceError(f"device {dev!r}: PyTorch sees no GPU (use device='sim' for the CPU simulator)")
        try:
            with _keep_current_device():
                native = _native.GpuKernel(
                    gen,
                    [int(d.split(":")[1]) for d in devs],
                    runtime="hip" if _rocm() else "cuda",
                    cache_dir=cache_dir,
                    dependent=launch == "dependent",
                )
        except _native.DeviceError as e:
            raise DeviceError(str(e)) from None
    return Kernel(gen, native, devs)


class Kernel:
    """A generated kernel bound to a device, callable on tensors and registered as the custom ops
    `Kernel.op` (functional: returns new outputs) and `Kernel.out_op` (writes given outputs).

    Call it with the input arguments by name (`Kernel.inputs`), per rank as lists when TP > 1:
    `k(x=x, w_qweight=qw, w_scales=s, w_qzeros=z)` returns the output tensor (a tuple of them
    when the kernel has several, in `Kernel.outputs` order; lists of per-rank tensors when
    TP > 1). With `out={"y": y}` it writes into the given tensors and returns them.

    A call checks every argument against the ABI (raising `ArgumentError`), then enqueues one
    launch on PyTorch's current stream (`torch.cuda.current_stream()`; when ranks share a GPU,
    one launch of all their workgroups through the kernel's ranks entry, or, for a kernel
    without one, rank 0 there and ranks 1.. on side streams forked from it and joined back) with
    the tensors' data pointers: no allocation but the
    outputs', no compile, no host synchronisation. Launch failures on the device are reported by
    `check()`.
    """

    def __init__(self, gen: Any, native: Any, devices: List[str], group: Any = None) -> None:
        self._gen = gen
        self._native = native
        self._devices = list(devices)
        self._tp = int(gen.tp)
        self._group = group
        # Ranks this process drives: all of them, or its own one in a process group.
        self._n = 1 if group is not None else self._tp
        self._lists = self._n > 1
        self._rank0 = group.rank if group is not None else 0
        self._sim = native is None
        self._findings: List[str] = []
        self._closed = False
        self._errwords: Optional[Tuple[List[torch.Tensor], torch.Tensor]] = None
        self._pending: Optional[List[Any]] = None
        args = []
        for a in gen.args():
            args.append(
                Arg(
                    name=a["name"],
                    role=a["role"],
                    dtype=_DTYPES[a["dtype"]],
                    shape=tuple(a["shape"]),
                    align=int(a["align"]),
                    buffer=a["buffer"],
                    part=a["part"],
                    abi_type=a["abi_type"],
                )
            )
        self._abi = tuple(args)
        self._inputs = tuple(a for a in args if a.role == "input")
        self._outputs = tuple(a for a in args if a.role == "output")
        if native is not None:
            by_key = {(a.buffer, a.part): i for i, a in enumerate(args)}
            self._order = [by_key[(b, p)] for (b, p) in native.data_params()]
            torch_devs = [torch.device(d) for d in devices]
            self._torch_devices = torch_devs
            same = len(set(devices)) == 1
            # Ranks sharing a GPU wait for each other inside the kernel, so they must run
            # concurrently: a kernel generated for them has a ranks entry that launches them all
            # as one grid on the current stream; otherwise (a hand-written kernel) rank 0
            # launches on the current stream, ranks 1.. each on a side stream forked from it and
            # joined back into it at every call (the fewest edges in a graph).
            forked = same and self._n > 1 and not native.ranks_entry()
            self._side = [torch.cuda.Stream(device=d) for d in torch_devs[1:]] if forked else None
        else:
            self._torch_devices = [torch.device("cpu")] * self._n
            self._side = None
        self._op_name = f"{gen.name}_{next(_COUNTER)}"
        self._register()
        self._op = getattr(torch.ops.wavefuse, self._op_name).default
        self._out_op = getattr(torch.ops.wavefuse, self._op_name + "_out").default

    # ------------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self._gen.name

    @property
    def tp(self) -> int:
        """The TP size it was built for."""
        return self._tp

    @property
    def target(self) -> str:
        """The target it was generated for (`gfx906`, `sm90`)."""
        return self._gen.arch

    @property
    def device(self) -> str:
        """Rank 0's device (`sim` or `cuda:N`)."""
        return self._devices[0]

    @property
    def devices(self) -> List[str]:
        """Every rank's device."""
        return list(self._devices)

    @property
    def abi(self) -> Tuple[Arg, ...]:
        """Every array argument (inputs and outputs) in ABI order."""
        return self._abi

    @property
    def inputs(self) -> Tuple[Arg, ...]:
        """The input arguments, in the order positional arguments take them."""
        return self._inputs

    @property
    def outputs(self) -> Tuple[Arg, ...]:
        """The output arguments, in the order a call returns them."""
        return self._outputs

    @property
    def source(self) -> str:
        """The generated HIP / CUDA source, exactly what `wavefuse emit` prints."""
        return self._gen.source

    @property
    def ir(self) -> str:
        """The op-level kernel as textual IR (a `.wfir` file's contents)."""
        return self._gen.ir

    @property
    def abi_toml(self) -> str:
        """The ABI description as TOML (as `wavefuse emit --out` writes it)."""
        return self._gen.abi_toml

    @property
    def synchronises(self) -> bool:
        """Whether the kernel has a grid barrier or cross-rank flags."""
        return self._gen.synchronises

    @property
    def dependent_launch(self) -> bool:
        """Whether the kernel opens with the wait for the previous kernel of its stream, so
        `launch="dependent"` launches it as a programmatic dependent of that kernel (sm_90
        kernels whose workgroups do not wait for each other)."""
        return self._gen.dependent_launch

    @property
    def op(self) -> Any:
        """The functional custom op `torch.ops.wavefuse.<name>_<n>`: inputs in `inputs` order,
        returns new outputs."""
        return self._op

    @property
    def out_op(self) -> Any:
        """The mutating custom op `torch.ops.wavefuse.<name>_<n>_out`: inputs, then outputs in
        `outputs` order (written in place); returns nothing."""
        return self._out_op

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed

    def __repr__(self) -> str:
        ins = ", ".join(f"{a.name}: {str(a.dtype).replace('torch.', '')}{list(a.shape)}" for a in self._inputs)
        outs = ", ".join(f"{a.name}: {str(a.dtype).replace('torch.', '')}{list(a.shape)}" for a in self._outputs)
        return f"<wavefuse.Kernel {self.name} tp={self.tp} {self.target} on {self.device}: ({ins}) -> ({outs})>"

    # ------------------------------------------------------------------ calls

    def __call__(self, *args: Any, out: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        """Runs the kernel on the inputs (positional in `inputs` order, or by name); see the class
        docs. Raises `ArgumentError` for an argument that does not match the ABI."""
        if self._group is not None and self._group.closed:
            raise ArgumentError(f"kernel {self.name}: its process group (wavefuse.Group) was closed")
        if self._closed:
            raise ArgumentError(f"kernel {self.name}: the kernel was closed")
        ins = self._bind_inputs(args, kwargs)
        if out is None:
            result = self._op(*ins)
            if self._lists and len(self._outputs) == 1:
                return list(result)
            if len(self._outputs) == 1:
                return result
            return tuple(list(r) if self._lists else r for r in result)
        outs = self._bind_outputs(out)
        self._out_op(*ins, *outs)
        if len(outs) == 1:
            return outs[0]
        return tuple(outs)

    def _bind_inputs(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Any]:
        if len(args) > len(self._inputs):
            raise ArgumentError(
                f"kernel {self.name} takes {len(self._inputs)} inputs "
                f"({', '.join(a.name for a in self._inputs)}), {len(args)} were given"
            )
        names = [a.name for a in self._inputs]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise ArgumentError(
                f"kernel {self.name} has no input {unknown[0]!r}; its inputs are {', '.join(names)}"
            )
        values: List[Any] = []
        for i, a in enumerate(self._inputs):
            if i < len(args):
                if a.name in kwargs:
                    raise ArgumentError(f"input {a.name!r} given twice")
                v = args[i]
            elif a.name in kwargs:
                v = kwargs[a.name]
            else:
                raise ArgumentError(f"kernel {self.name}: missing input {a.name!r} ({_describe(a)})")
            values.append(self._as_ranks(a, v))
        return values

    def _bind_outputs(self, out: Any) -> List[Any]:
        if not isinstance(out, dict):
            if len(self._outputs) == 1:
                out = {self._outputs[0].name: out}
            else:
                raise ArgumentError(
                    f"out= must map output names ({', '.join(a.name for a in self._outputs)}) to tensors"
                )
        names = [a.name for a in self._outputs]
        unknown = [k for k in out if k not in names]
        if unknown:
            raise ArgumentError(f"kernel {self.name} has no output {unknown[0]!r}; its outputs are {', '.join(names)}")
        missing = [n for n in names if n not in out]
        if missing:
            raise ArgumentError(f"out= lacks output {missing[0]!r}")
        return [self._as_ranks(a, out[a.name]) for a in self._outputs]

    def _as_ranks(self, a: Arg, v: Any) -> Any:
        if not self._lists:
            if isinstance(v, (list, tuple)):
                raise ArgumentError(
                    f"argument {a.name!r}: kernel {self.name} takes one tensor"
                    + (" (this process's rank)" if self._group is not None else " (it is built for TP 1)")
                    + f", got a sequence of {len(v)}"
                )
            return _tensor(a, v)
        if not isinstance(v, (list, tuple)):
            raise ArgumentError(
                f"argument {a.name!r}: kernel {self.name} is built for TP {self._tp} and takes a list "
                f"of {self._tp} per-rank tensors, got {type(v).__name__}"
            )
        if len(v) != self._tp:
            raise ArgumentError(
                f"argument {a.name!r}: kernel {self.name} is built for TP {self._tp}, got {len(v)} "
                "per-rank tensors"
            )
        return [_tensor(a, t) for t in v]

    # ------------------------------------------------------------------ checks

    def _check(self, a: Arg, ts: Sequence[torch.Tensor], real: bool) -> None:
        for r, t in enumerate(ts):
            where = f"argument {a.name!r}" + (f" of rank {r + self._rank0}" if self._tp > 1 else "")
            if t.dtype != a.dtype and not (a.abi_type == "u32" and t.dtype == getattr(torch, "uint32", None)):
                raise ArgumentError(f"{where}: expected dtype {a.dtype}, got {t.dtype}")
            if tuple(t.shape) != a.shape:
                raise ArgumentError(f"{where}: expected shape {list(a.shape)}, got {list(t.shape)}")
            want = self._torch_devices[r]
            if t.device.type == "meta":
                pass
            elif self._sim and t.device.type != "cpu":
                raise ArgumentError(f"{where}: a kernel on the simulator takes CPU tensors, got one on {t.device}")
            elif not self._sim and (t.device.type != "cuda" or t.device.index != want.index):
                raise ArgumentError(
                    f"{where}: expected a tensor on {want} (rank {r}'s device), got one on {t.device}"
                )
            if not t.is_contiguous():
                raise ArgumentError(
                    f"{where}: expected a contiguous tensor, got strides {list(t.stride())}; call .contiguous()"
                )
            if real and a.align > 1 and t.data_ptr() % a.align != 0:
                raise ArgumentError(
                    f"{where}: its data pointer {t.data_ptr():#x} is not aligned to {a.align} bytes"
                )

    def _check_all(self, ins: Sequence[Any], outs: Sequence[Any], real: bool) -> None:
        if self._group is not None and self._group.closed:
            raise ArgumentError(f"kernel {self.name}: its process group (wavefuse.Group) was closed")
        if self._closed:
            raise ArgumentError(f"kernel {self.name}: the kernel was closed")
        for a, v in zip(self._inputs, ins):
            self._check(a, v if self._lists else [v], real)
        for a, v in zip(self._outputs, outs):
            self._check(a, v if self._lists else [v], real)
        if real and outs:
            self._check_no_overlap(ins, outs)

    def _check_no_overlap(self, ins: Sequence[Any], outs: Sequence[Any]) -> None:
        # An output that shares memory with an input (or another output) would be written while
        # other workgroups or ranks still read it (DESIGN.md §5.7): refused, as the IR refuses it.
        spans = []
        for a, v in list(zip(self._inputs, ins)) + list(zip(self._outputs, outs)):
            for r, t in enumerate(v if self._lists else [v]):
                if t.device.type != "meta" and t.numel():
                    spans.append((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size(), a, r))
        for i, (o0, o1, oa, orank) in enumerate(spans):
            if oa.role != "output":
                continue
            for j, (p0, p1, pa, prank) in enumerate(spans):
                if i != j and o0 < p1 and p0 < o1 and (pa.role == "input" or j < i):
                    where = lambda a, r: repr(a.name) + (f" of rank {r}" if self._lists else "")  # noqa: E731
                    raise ArgumentError(
                        f"output {where(oa, orank)} shares memory with {pa.role} {where(pa, prank)}: "
                        "outputs must not alias inputs or each other (DESIGN.md §5.7)"
                    )

    # ------------------------------------------------------------------ running

    def _new_outputs(self, ins: Sequence[Any]) -> List[Any]:
        first = ins[0] if ins else None
        outs = []
        for a in self._outputs:
            per = []
            for r in range(self._n):
                if first is not None:
                    dev = (first[r] if self._lists else first).device
                else:
                    dev = self._torch_devices[r]
                per.append(torch.empty(a.shape, dtype=a.dtype, device=dev))
            outs.append(per if self._lists else per[0])
        return outs

    def _run(self, ins: Sequence[Any], outs: Sequence[Any]) -> None:
        self._check_all(ins, outs, real=True)
        if self._sim:
            self._run_sim(ins, outs)
        else:
            self._run_gpu(ins, outs)

    def _run_sim(self, ins: Sequence[Any], outs: Sequence[Any]) -> None:
        per_rank: List[Dict[str, bytes]] = [{} for _ in range(self._n)]
        for a, v in zip(self._inputs, ins):
            for r, t in enumerate(v if self._lists else [v]):
                per_rank[r][a.name] = t.detach().contiguous().numpy().tobytes()
        if self._group is not None:
            # One process per rank: every process simulates the whole group on every rank's
            # inputs (exchanged through the process group) and keeps its own rank's outputs.
            results, findings = self._gen.simulate(self._group._all_gather(per_rank[0]))
            results = [results[self._rank0]]
        else:
            results, findings = self._gen.simulate(per_rank)
        if findings:
            self._findings.extend(findings)
        for a, v in zip(self._outputs, outs):
            for r, t in enumerate(v if self._lists else [v]):
                got = torch.frombuffer(bytearray(results[r][a.name]), dtype=a.dtype).reshape(a.shape)
                with torch.no_grad():
                    t.copy_(got)

    def _run_gpu(self, ins: Sequence[Any], outs: Sequence[Any]) -> None:
        flat = list(self._inputs) + list(self._outputs)
        vals = list(ins) + list(outs)
        by_abi = {}
        for a, v in zip(flat, vals):
            by_abi[(a.buffer, a.part)] = [t.data_ptr() for t in (v if self._lists else [v])]
        ptrs = [by_abi[(self._abi[i].buffer, self._abi[i].part)] for i in self._order]
        # The runtime makes each rank's device (context) current to launch on it; the guard puts
        # back the caller's current device afterwards, which PyTorch reads from the same place.
        with torch.cuda.device(self._torch_devices[0]):
            if self._side is None:
                streams = [torch.cuda.current_stream(d).cuda_stream for d in self._torch_devices]
                self._native.launch(ptrs, streams)
                return
            cur = torch.cuda.current_stream(self._torch_devices[0])
            for s in self._side:
                s.wait_stream(cur)
            self._native.launch(ptrs, [cur.cuda_stream] + [s.cuda_stream for s in self._side])
            for s in self._side:
                cur.wait_stream(s)

    def check(self, wait: bool = True) -> None:
        """Raises `KernelError` if a launch since the last check failed on the device (a bounded
        wait timed out: the kernel's error word is set, DESIGN.md §5.10) or, on the simulator,
        if the simulator found a protocol violation.

        With `wait=True` (the default) it waits for the kernel's devices first (the one host
        synchronisation, and only here); after a timeout the kernel's synchronisation state is
        re-zeroed, so the next launch starts clean (§5.11). With `wait=False` it never blocks:
        it enqueues a copy of the error words on the current stream(s) and raises for the copy
        an earlier `check(wait=False)` enqueued, once that has completed (call `check()` then,
        to reset). Not inside a graph capture."""
        if self._closed:
            raise ArgumentError(f"kernel {self.name}: the kernel was closed")
        if not wait and not self._sim:
            self._check_async()
            return
        if self._sim:
            found, self._findings = self._findings, []
            if found:
                raise KernelError(f"kernel {self.name} (simulator): " + "; ".join(found))
            return
        for d in sorted(set(self._torch_devices), key=str):
            torch.cuda.synchronize(d)
        try:
            with _keep_current_device():
                codes = self._native.error_codes()
        except _native.DeviceError as e:
            raise KernelError(f"kernel {self.name}: {e}") from None
        if self._group is not None:
            codes = [codes[self._rank0]]
        bad = [(r + self._rank0, c) for r, c in enumerate(codes) if c]
        if bad:
            epoch = self._native.last_epoch()
            with _keep_current_device():
                self._native.reset()
            r, c = bad[0]
            raise KernelError(
                f"barrier timeout in kernel {self.name}, at or before epoch {epoch} (rank {r}, error code {c:#x}); "
                "its synchronisation state was reset"
            )

    def _check_async(self) -> None:
        if self._errwords is None:
            words = self._native.error_words()
            if words is None:
                return
            if self._group is not None:
                words = [words[self._rank0]]
            devs = self._torch_devices
            dev_t = [torch.as_tensor(_DeviceWord(p, d.index), device=d) for p, d in zip(words, devs)]
            host = torch.zeros(len(words), dtype=torch.int32, pin_memory=True)
            self._errwords = (dev_t, host)
        dev_t, host = self._errwords
        if self._pending is not None:
            if not all(e.query() for e in self._pending):
                return  # the last copy is still in flight: nothing new to say, nothing to enqueue
            self._pending = None
            bad = [(r, c) for r, c in enumerate(host.tolist()) if c]
            if bad:
                r, c = bad[0]
                r += self._rank0
                raise KernelError(
                    f"barrier timeout in kernel {self.name} (rank {r}, error code {c & 0xFFFFFFFF:#x}); "
                    "call check() to reset its synchronisation state"
                )
        events = []
        for r, d in enumerate(self._torch_devices):
            stream = torch.cuda.current_stream(d)
            with torch.cuda.stream(stream):
                host[r : r + 1].copy_(dev_t[r], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(stream)
            events.append(ev)
        self._pending = events

    def close(self) -> None:
        """Frees the kernel's device state (synchronisation arrays, loaded code). Later calls
        raise `ArgumentError`; the registered op stays but refuses to run."""
        self._closed = True
        if self._native is not None:
            with _keep_current_device():
                self._native.close()

    # ------------------------------------------------------------------ registration

    def _schema_types(self) -> Tuple[str, str]:
        t = "Tensor[]" if self._lists else "Tensor"
        ins = ", ".join(f"{t} {a.name}" for a in self._inputs)
        rets = [t for _ in self._outputs]
        ret = rets[0] if len(rets) == 1 else "(" + ", ".join(rets) + ")"
        return ins, ret

    def _register(self) -> None:
        ins, ret = self._schema_types()
        name = self._op_name
        _LIB.define(f"{name}({ins}) -> {ret}")
        mut = ", ".join(
            (f"Tensor(a{i}!)[] {a.name}" if self._lists else f"Tensor(a{i}!) {a.name}")
            for i, a in enumerate(self._outputs)
        )
        _LIB.define(f"{name}_out({ins}, {mut}) -> ()")
        n_in = len(self._inputs)

        def functional(*ins: Any) -> Any:
            outs = self._new_outputs(ins)
            self._run(ins, outs)
            return _ret(outs)

        def functional_fake(*ins: Any) -> Any:
            outs = self._new_outputs(ins)
            self._check_all(ins, outs, real=False)
            return _ret(outs)

        def mutating(*args: Any) -> None:
            self._run(args[:n_in], args[n_in:])

        def mutating_fake(*args: Any) -> None:
            self._check_all(args[:n_in], args[n_in:], real=False)

        def _ret(outs: List[Any]) -> Any:
            return outs[0] if len(outs) == 1 else tuple(outs)

        # One Python kernel for CPU and CUDA tensors alike: it checks the device itself, so a CPU
        # tensor passed to a GPU kernel is an ArgumentError, not a missing-kernel error.
        for key in ("CPU", "CUDA"):
            _LIB.impl(name, functional, key)
            _LIB.impl(name + "_out", mutating, key)
        torch.library.register_fake(f"wavefuse::{name}", functional_fake, lib=_LIB)
        torch.library.register_fake(f"wavefuse::{name}_out", mutating_fake, lib=_LIB)


def _group_kernel(group: "Group", source: Any, *, tp: Optional[int], devices: Any, device: Any, **kw: Any) -> "Kernel":
    if group.closed:
        raise ArgumentError("the process group (wavefuse.Group) was closed")
    if devices is not None:
        raise GenerateError("with group=, each process gives its own rank's device= (not devices=)")
    if tp is not None and tp != group.size:
        raise GenerateError(f"tp={tp}, but the process group has {group.size} ranks")
    dev = _parse_device(device if device is not None else group.device)
    if dev != "sim":
        return _group_gpu_kernel(group, source, dev, **kw)
    kw.pop("cache_dir", None)
    # Every process builds the whole group's kernel (the simulator runs all ranks), then checks
    # that every process built the same one: the same source, ABI and TP.
    whole = kernel(source, tp=group.size, device="sim", **kw)
    group._handshake(whole)
    k = Kernel(whole._gen, None, ["sim"], group=group)
    group._kernels.add(k)
    return k


class _DeviceWord:
    """One u32 at a device address, as a zero-copy int32 tensor (`__cuda_array_interface__`)."""

    def __init__(self, ptr: int, device: Optional[int]) -> None:
        self.__cuda_array_interface__ = {
            "shape": (1,),
            "typestr": "<i4",
            "data": (int(ptr), False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


def _keep_current_device() -> Any:
    """The runtime makes the device (context) it works on current; this puts back PyTorch's."""
    return torch.cuda.device(torch.cuda.current_device())


def _group_gpu_kernel(group: "Group", source: Any, dev: str, *, batch: Optional[int], target: Optional[str],
                      config: Any, schedule: str, cache_dir: Optional[str], launch: str = "stream",
                      **shape: Any) -> "Kernel":
    """One rank per process on GPUs: this process builds the group's kernel for its rank, exports
    the IPC handles of its peer arrays (flags, payloads), gathers every rank's through the process
    group and maps them (DESIGN.md §10). Collective: every step's success is agreed on by all
    ranks, so a failure on one raises on all instead of leaving the others waiting."""
    group._check_one_node()
    kind, text = _source_kind(source)
    if target is None:
        target = "gfx906" if _rocm() else "sm90"
    try:
        gen = _native.generate(kind, text, tp=group.size, batch=batch or (1 if kind == "set" else 0),
                               arch=target, schedule=schedule, placement="per_device",
                               config=None if config is None else os.fspath(config), **shape)
    except _native.GenerateError as e:
        raise GenerateError(str(e)) from None
    group._handshake(gen)
    if not torch.cuda.is_available():
        raise DeviceError(f"device {dev!r}: PyTorch sees no GPU (use device='sim' for the CPU simulator)")
    if not _rocm():
        _find_nvrtc()
    fallback = (
        "; drive the ranks from one process (wavefuse.kernel(..., devices=[...])) or use "
        "torch.distributed's allreduce (NCCL/RCCL) with the unfused kernels"
    )
    native, exports, err = None, [], None
    try:
        with _keep_current_device():
            native = _native.GpuKernel(gen, [int(dev.split(":")[1])] * group.size,
                                       runtime="hip" if _rocm() else "cuda", cache_dir=cache_dir,
                                       local_rank=group.rank, dependent=launch == "dependent")
            exports = [(i, bytes(h)) for i, h in native.ipc_exports()]
    except _native.DeviceError as e:
        err = str(e)
    group._agree(err, "binding", fallback)
    every = group._all_gather(exports)
    try:
        with _keep_current_device():
            native.import_peers(every)
    except _native.DeviceError as e:
        err = str(e)
    group._agree(err, "mapping the peers' buffers (IPC)", fallback)
    k = Kernel(gen, native, [dev], group=group)
    group._kernels.add(k)
    return k


def _find_nvrtc() -> None:
    """Points `$WAVEFUSE_NVRTC_LIB` at an NVRTC when it is unset and none loads by name: the one
    PyTorch's CUDA wheels ship (`nvidia/cu13/lib`), else a CUDA toolkit's."""
    if os.environ.get("WAVEFUSE_NVRTC_LIB"):
        return
    import glob
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in list(spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.1*")))
        found = [f for f in found if "builtins" not in f and "alt" not in os.path.basename(f)]
        if found:
            os.environ["WAVEFUSE_NVRTC_LIB"] = found[-1]
            return
    path = _native.nvrtc_fallback()
    if path:
        os.environ["WAVEFUSE_NVRTC_LIB"] = path


def _describe(a: Arg) -> str:
    return f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}"


def _tensor(a: Arg, v: Any) -> torch.Tensor:
    if isinstance(v, torch.Tensor):
        return v
    if hasattr(v, "__dlpack__"):
        return torch.from_dlpack(v)
    raise ArgumentError(f"argument {a.name!r}: expected a tensor ({_describe(a)}), got {type(v).__name__}")


from ._group import Group, group_from_process_group  # noqa: E402,F401  (uses the exceptions above)
