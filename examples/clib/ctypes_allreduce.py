#!/usr/bin/env python3
"""Drive a wavefuse C library from Python with ctypes alone, as an engine without PyTorch does
(docs/clib.md): the fused allreduce + residual + RMSNorm kernel at TP = 2, both ranks in this
process, each with its own state and stream, checked against a reference computed here.

    wavefuse emit allreduce_residual_rmsnorm --target sm90 --tp 2 --lib out/
    out/build_allreduce_residual_rmsnorm_sm90.sh
    python3 examples/clib/ctypes_allreduce.py out/ --target sm90 --devices 0,1 [--replays 1000] [--graph]

Both ranks on one GPU (the default, --devices 0,0): emit with `--placement same-device`, the
schedule fitted for ranks that share a device.

The HIP runtime (libamdhip64) or the CUDA runtime (libcudart) is loaded through ctypes for
memory, streams and graphs; the array lengths come from the kernel's ABI file. Exit status 0:
every check passed; 1: a check failed; 2: no GPU or runtime (the message says which).
"""

import argparse
import ctypes
import math
import os
import random
import struct
import sys
import tomllib

KERNEL = "allreduce_residual_rmsnorm"
EPS = 1e-6  # the RMSNorm epsilon the kernel was built with (the model's; Qwen 3.5: 1e-6)


class Runtime:
    """The few HIP / CUDA runtime calls the example needs (same signatures, other prefix)."""

    def __init__(self, target):
        self.hip = target.startswith("gfx")
        p = "hip" if self.hip else "cuda"
        names = (
            ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so"]
            if self.hip
            else [
                "libcudart.so",
                "libcudart.so.13",
                "libcudart.so.12",
                os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "libcudart.so"),
            ]
        )
        if os.environ.get("WAVEFUSE_RUNTIME_LIB"):
            names.insert(0, os.environ["WAVEFUSE_RUNTIME_LIB"])
        self.lib = None
        for n in names:
            try:
                self.lib = ctypes.CDLL(n)
                break
            except OSError:
                continue
        if self.lib is None:
            print(f"no {p} runtime library found ({', '.join(names)}); set WAVEFUSE_RUNTIME_LIB")
            sys.exit(2)
        self.p = p

    def call(self, name, *args):
        rc = getattr(self.lib, self.p + name)(*args)
        if rc != 0:
            raise RuntimeError(f"{self.p}{name} failed with error {rc}")

    def malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self.call("Malloc", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        return ptr.value

    def upload(self, dev, data):
        self.call("Memcpy", ctypes.c_void_p(dev), data, ctypes.c_size_t(len(data)), 1)

    def download(self, dev, nbytes):
        buf = ctypes.create_string_buffer(nbytes)
        self.call("Memcpy", buf, ctypes.c_void_p(dev), ctypes.c_size_t(nbytes), 2)
        return buf.raw

    def stream(self):
        s = ctypes.c_void_p()
        self.call("StreamCreateWithFlags", ctypes.byref(s), 1)  # non-blocking
        return s

    def sync(self, stream):
        self.call("StreamSynchronize", stream)

    def capture(self, stream, enqueue):
        """One graph holding what `enqueue` puts on `stream`, instantiated."""
        graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("StreamBeginCapture", stream, 2)  # relaxed
        enqueue()
        self.call("StreamEndCapture", stream, ctypes.byref(graph))
        if self.hip:
            self.call("GraphInstantiate", ctypes.byref(exe), graph, None, None, ctypes.c_size_t(0))
        else:
            self.call("GraphInstantiate", ctypes.byref(exe), graph, ctypes.c_ulonglong(0))
        return exe

    def replay(self, exe, stream):
        self.call("GraphLaunch", exe, stream)


def f16(values):
    return struct.pack(f"<{len(values)}e", *values)


def from_f16(raw):
    return struct.unpack(f"<{len(raw) // 2}e", raw)


def reference(partials, residual, norm_w):
    """r' = f16(sum of partials + residual); normed = f16(r' / rms(r') * w)."""
    r = list(from_f16(f16([sum(p[i] for p in partials) + residual[i] for i in range(len(residual))])))
    inv = 1.0 / math.sqrt(sum(x * x for x in r) / len(r) + EPS)
    return r, list(from_f16(f16([x * inv * w for x, w in zip(r, norm_w)])))


def close(got, want, what):
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-2 + 1e-2 * abs(w)]
    if bad:
        i = bad[0]
        print(f"{what}: {len(bad)} of {len(want)} differ, first at {i}: {got[i]} vs {want[i]}")
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the folder `wavefuse emit --lib` wrote and the build script built")
    ap.add_argument("--target", default="sm90", help="gfx906 or sm90")
    ap.add_argument("--devices", default="0,0", help="each rank's device (default: both on 0)")
    ap.add_argument("--replays", type=int, default=100, help="launches of each rank after the first")
    ap.add_argument("--graph", action="store_true", help="capture each rank's launch once, replay the graph")
    a = ap.parse_args()

    stem = f"{KERNEL}_{a.target}"
    with open(os.path.join(a.dir, f"{stem}.abi.toml"), "rb") as f:
        abi = tomllib.load(f)
    tp = abi["tp"]
    data = [p for p in abi["params"] if p["purpose"] == "data" and p["kind"] == "array"]
    n = {p["name"]: p["len"] for p in data}
    devices = [int(d) for d in a.devices.split(",")]
    assert len(devices) == tp, f"--devices names {len(devices)} devices for TP = {tp}"

    rt = Runtime(a.target)
    lib = ctypes.CDLL(os.path.join(a.dir, f"lib{stem}.so"))
    pre = f"wf_{KERNEL}"
    fn = lambda name: getattr(lib, f"{pre}_{name}")  # noqa: E731

    class Args(ctypes.Structure):  # the header's wf_<kernel>_args: one pointer per data array
        _fields_ = [(p["name"], ctypes.c_void_p) for p in data]

    fn("wait_site").restype = ctypes.c_char_p

    # One state per rank (each on its device), then the peer tables from every rank's buffers.
    states, streams = [], []
    for rank, dev in enumerate(devices):
        try:
            rt.call("SetDevice", dev)
        except RuntimeError as e:
            print(f"no usable GPU {dev}: {e}")
            return 2
        s = ctypes.c_void_p()
        rc = fn("state_create")(dev, ctypes.byref(s))
        if rc != 0:
            print(f"rank {rank}: state_create on device {dev} returned {rc} (no usable GPU?)")
            return 2
        assert fn("set_rank")(s, rank) == 0
        states.append(s)
        streams.append(rt.stream())
    npeer = 2  # WF_<KERNEL>_PEER_ARRAYS: ar_payload, ar_flags
    by_rank = (ctypes.c_void_p * (tp * npeer))()
    for rank, s in enumerate(states):
        mine = (ctypes.c_void_p * npeer)()
        assert fn("peer_buffers")(s, mine) == 0
        for j in range(npeer):
            by_rank[rank * npeer + j] = mine[j]
    for s in states:
        rc = fn("set_peers")(s, by_rank)
        assert rc == 0, f"set_peers returned {rc}"

    # The caller's arrays: a partial sum per rank, the residual and norm weight on every rank.
    rng = random.Random(1)
    h = n["residual"]
    partials = [list(from_f16(f16([rng.uniform(-1, 1) for _ in range(h)]))) for _ in range(tp)]
    residual = list(from_f16(f16([rng.uniform(-1, 1) for _ in range(h)])))
    norm_w = list(from_f16(f16([rng.uniform(0.5, 1.5) for _ in range(h)])))
    args = []
    for rank, dev in enumerate(devices):
        rt.call("SetDevice", dev)
        ptrs = {name: rt.malloc(2 * length) for name, length in n.items()}
        rt.upload(ptrs["partial"], f16(partials[rank]))
        rt.upload(ptrs["residual"], f16(residual))
        rt.upload(ptrs["norm_w"], f16(norm_w))
        args.append((Args(**ptrs), ptrs))

    def launch(rank):
        rc = fn("launch")(ctypes.byref(args[rank][0]), states[rank], streams[rank])
        assert rc == 0, f"rank {rank}: launch returned {rc}"

    def launch_all():  # every rank launches once per step: the flags wait for all of them
        for rank, dev in enumerate(devices):
            rt.call("SetDevice", dev)
            launch(rank)

    launches = 1 + a.replays
    if a.graph:
        graphs = []
        for rank, dev in enumerate(devices):
            rt.call("SetDevice", dev)
            graphs.append(rt.capture(streams[rank], lambda r=rank: launch(r)))
        for _ in range(launches):
            for rank, dev in enumerate(devices):
                rt.call("SetDevice", dev)
                rt.replay(graphs[rank], streams[rank])
    else:
        for _ in range(launches):
            launch_all()
    for rank, dev in enumerate(devices):
        rt.call("SetDevice", dev)
        rt.sync(streams[rank])

    want_r, want_y = reference(partials, residual, norm_w)
    ok = True
    for rank, s in enumerate(states):
        code = ctypes.c_uint()
        assert fn("error")(s, ctypes.byref(code)) == 0
        if code.value:
            print(f"rank {rank}: timed out: {fn('wait_site')(code.value).decode()}")
            ok = False
        ptrs = args[rank][1]
        rt.call("SetDevice", devices[rank])
        got_r = from_f16(rt.download(ptrs["residual_out"], 2 * h))
        got_y = from_f16(rt.download(ptrs["normed"], 2 * h))
        ok &= close(got_r, want_r, f"rank {rank} residual_out")
        ok &= close(got_y, want_y, f"rank {rank} normed")
    for s in states:
        assert fn("state_destroy")(s) == 0
    how = "graph replays" if a.graph else "launches"
    print(f"{KERNEL} TP = {tp} on devices {devices}: {launches} {how}, {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
