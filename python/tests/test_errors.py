"""Bad arguments and bad requests: each a clear exception naming what is wrong."""

from __future__ import annotations

import pytest
import torch

import wavefuse
from reference import activations, random_gptq


@pytest.fixture(scope="module")
def gemv():
    return wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64)


@pytest.fixture()
def args():
    g = torch.Generator().manual_seed(0)
    qw, s, z = random_gptq(128, 64, 128, g)
    return dict(w_qweight=qw, w_scales=s, w_qzeros=z, x=activations((1, 128), g))


def test_wrong_dtype(gemv, args):
    args["x"] = args["x"].float()
    with pytest.raises(wavefuse.ArgumentError, match=r"'x'.*expected dtype torch.float16, got torch.float32"):
        gemv(**args)


def test_wrong_shape(gemv, args):
    args["w_scales"] = args["w_scales"][:, :32]
    with pytest.raises(wavefuse.ArgumentError, match=r"'w_scales'.*expected shape \[1, 64\], got \[1, 32\]"):
        gemv(**args)


def test_wrong_stride(gemv, args):
    args["x"] = torch.zeros(1, 256, dtype=torch.float16)[:, ::2]  # shape [1, 128], stride 2
    with pytest.raises(wavefuse.ArgumentError, match=r"'x'.*contiguous"):
        gemv(**args)


def test_misaligned(gemv, args):
    base = torch.zeros(1 * 128 + 1, dtype=torch.float16)
    args["x"] = base[1:].view(1, 128)  # 2-byte offset; the ABI asks for 16
    with pytest.raises(wavefuse.ArgumentError, match=r"'x'.*not aligned to 16 bytes"):
        gemv(**args)


def test_missing_and_unknown(gemv, args):
    x = args.pop("x")
    with pytest.raises(wavefuse.ArgumentError, match=r"missing input 'x'"):
        gemv(**args)
    with pytest.raises(wavefuse.ArgumentError, match=r"no input 'xx'"):
        gemv(**args, xx=x)


def test_not_a_tensor(gemv, args):
    args["x"] = [[0.0] * 128]
    with pytest.raises(wavefuse.ArgumentError, match=r"'x'.*TP 1"):
        gemv(**args)
    args["x"] = 3.0
    with pytest.raises(wavefuse.ArgumentError, match=r"'x'.*expected a tensor"):
        gemv(**args)


def test_built_for_another_tp():
    k = wavefuse.kernel("allreduce_residual", device="sim", tp=2, hidden=128)
    p = activations((1, 128), torch.Generator().manual_seed(1))
    with pytest.raises(wavefuse.ArgumentError, match=r"'partial'.*built for TP 2, got 4 per-rank tensors"):
        k(partial=[p] * 4, residual=[p] * 4)
    with pytest.raises(wavefuse.ArgumentError, match=r"'partial'.*built for TP 2 and takes a list"):
        k(partial=p, residual=p)


def test_closed_kernel(args):
    k = wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64)
    k.close()
    assert k.closed
    with pytest.raises(wavefuse.ArgumentError, match="closed"):
        k(**args)


def test_cpu_tensor_for_a_gpu_kernel(args):
    if not torch.cuda.is_available():
        pytest.skip("skipped: no GPU")
    k = wavefuse.kernel("gemv_int4", device="cuda", hidden=128, n=64)
    with pytest.raises(wavefuse.ArgumentError, match=r"expected a tensor on cuda:0.*got one on cpu"):
        k(**args)


def test_gpu_tensor_for_the_simulator(gemv, args):
    if not torch.cuda.is_available():
        pytest.skip("skipped: no GPU")
    args["x"] = args["x"].cuda()
    with pytest.raises(wavefuse.ArgumentError, match=r"simulator takes CPU tensors"):
        gemv(**args)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: wavefuse.kernel("gemv_int5", device="sim"), "unknown kernel 'gemv_int5'"),
        (lambda: wavefuse.kernel("gemv_int4", device="sim", hidden=100, n=64), "K = 100 is not a multiple of 8"),
        (lambda: wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64, eps=1e-5), "takes no eps"),
        (lambda: wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64, zero_point="v3"), "zero_point"),
        (lambda: wavefuse.kernel("gemv_int4", device="sim", bogus=3), "bogus"),
        (lambda: wavefuse.kernel("gemv_int4", device="tpu"), "device='tpu'"),
        (lambda: wavefuse.kernel("gemv_int4", device="sim", schedule="fast"), "schedule"),
        (lambda: wavefuse.kernel("gemv_int4", device="sim", launch="eager"), "launch='eager'"),
        (lambda: wavefuse.kernel("kernel k(tp=1) {\n oops\n}", device="sim"), "<text>"),
    ],
)
def test_bad_requests(call, match):
    with pytest.raises(wavefuse.GenerateError, match=match):
        call()


def test_no_gpu_is_a_device_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(wavefuse.DeviceError, match="no GPU"):
        wavefuse.kernel("gemv_int4", device="cuda:0", hidden=128, n=64)


def test_exception_hierarchy():
    assert issubclass(wavefuse.ArgumentError, ValueError)
    assert issubclass(wavefuse.ArgumentError, TypeError)
    assert issubclass(wavefuse.GenerateError, ValueError)
    assert issubclass(wavefuse.KernelError, RuntimeError)


@pytest.mark.parametrize("runtime, vendor", [("hip", "AMD"), ("cuda", "NVIDIA")])
def test_gpu_binding_without_a_gpu(runtime, vendor):
    """The HIP and CUDA binding paths as far as a machine without GPUs goes: generated for the
    runtime's target, then a typed error that says what to install (never a crash)."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from wavefuse import _wavefuse

    arch = "gfx906" if runtime == "hip" else "sm90"
    gen = _wavefuse.generate("set", "gemv_int4", hidden=128, n=64, arch=arch)
    with pytest.raises(_wavefuse.DeviceError, match=f"no {vendor} (GPU/)?driver found.*install"):
        _wavefuse.GpuKernel(gen, [0], runtime=runtime)


def test_dlpack_producers_are_accepted(gemv, args):
    """Any DLPack producer binds (here numpy arrays), checked like a tensor."""
    np_args = {n: t.numpy() for n, t in args.items()}
    y = gemv(**np_args)
    assert torch.equal(y, gemv(**args))
    np_args["x"] = np_args["x"].astype("float32")
    with pytest.raises(wavefuse.ArgumentError, match="'x'.*dtype"):
        gemv(**np_args)


def test_output_aliasing_an_input_is_refused():
    k = wavefuse.kernel("allreduce_residual", device="sim", hidden=128)
    p = activations((1, 128), torch.Generator().manual_seed(2))
    r = p.clone()
    with pytest.raises(wavefuse.ArgumentError, match=r"output 'residual_out' shares memory with input 'residual'"):
        k(partial=p, residual=r, out={"residual_out": r})


class _FakeGpu:
    """Stands in for the native GPU binding, so the device checks of a GPU kernel run here."""

    def __init__(self, gen):
        self._data = [(a["buffer"], a["part"]) for a in gen.args()]

    def data_params(self):
        return self._data

    def launch(self, ptrs, streams):
        raise AssertionError("a call with a bad argument must not launch")


def test_cpu_tensor_for_a_gpu_kernel_without_a_gpu(args):
    """A GPU kernel's device check, with the native binding faked (no GPU needed)."""
    from wavefuse import _wavefuse

    gen = _wavefuse.generate("set", "gemv_int4", hidden=128, n=64, arch="sm90")
    k = wavefuse.Kernel(gen, _FakeGpu(gen), ["cuda:0"])
    with pytest.raises(wavefuse.ArgumentError, match=r"'w_qweight': expected a tensor on cuda:0 .*got one on cpu"):
        k(**args)
