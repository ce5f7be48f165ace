"""The kernels on a GPU (CUDA, or HIP through PyTorch's ROCm build): against the float64
reference, inside a captured CUDA graph replayed many times, under torch.compile with inductor,
and TP groups with all ranks on one GPU. Every test says "skipped: no GPU" where there is none."""

from __future__ import annotations

import os

import pytest
import torch

import wavefuse
from reference import activations, dequant_gptq, f16, int8_roundtrip, random_gptq, rel_l2, rmsnorm, silu

F64 = torch.float64
TOL = 3e-3
REPLAYS = int(os.environ.get("WAVEFUSE_TEST_REPLAYS", "100"))

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="skipped: no GPU")


def gen(seed):
    return torch.Generator().manual_seed(seed)


def cuda(x):
    if isinstance(x, (list, tuple)):
        return [cuda(t) for t in x]
    return x.cuda()


# Each case: (name, kwargs of wavefuse.kernel, make(seed) -> (inputs on CPU, reference outputs)).
def case_gemv_int4(seed, hidden=256, n=128, batch=1):
    g = gen(seed)
    qw, s, z = random_gptq(hidden, n, 128, g)
    x = activations((batch, hidden), g)
    return dict(w_qweight=qw, w_scales=s, w_qzeros=z, x=x), [f16(x.to(F64) @ dequant_gptq(qw, s, z))]


def case_gemv_f16(seed):
    g = gen(seed)
    w, x = activations((96, 256), g) * 0.05, activations((1, 256), g)
    return dict(w=w, x=x), [f16(x.to(F64) @ w.to(F64).T)]


def case_dual_silu(seed):
    g = gen(seed)
    wg, wu = random_gptq(256, 128, 128, g), random_gptq(256, 128, 128, g)
    x = activations((1, 256), g)
    ins = dict(
        w_gate_qweight=wg[0], w_gate_scales=wg[1], w_gate_qzeros=wg[2],
        w_up_qweight=wu[0], w_up_scales=wu[1], w_up_qzeros=wu[2], x=x,
    )
    xf = x.to(F64)
    return ins, [f16(silu(xf @ dequant_gptq(*wg)) * (xf @ dequant_gptq(*wu)))]


def case_qkv(seed):
    g = gen(seed)
    w = random_gptq(256, 128, 128, g)
    x = activations((1, 256), g)
    full = f16(x.to(F64) @ dequant_gptq(*w))
    return dict(w_qkv_qweight=w[0], w_qkv_scales=w[1], w_qkv_qzeros=w[2], x=x), [full[:, :64], full[:, 64:96], full[:, 96:]]


def case_ar(seed, tp=2):
    g = gen(seed)
    p = [activations((1, 256), g) for _ in range(tp)]
    r = activations((1, 256), g)
    want = f16(sum(t.to(F64) for t in p) + r.to(F64))
    return dict(partial=p, residual=[r] * tp), [[want] * tp]


def case_ar_norm(seed, tp=2):
    g = gen(seed)
    p = [activations((1, 256), g) for _ in range(tp)]
    r = activations((1, 256), g)
    w = (1.0 + 0.1 * activations((256,), g).to(F64)).to(torch.float16)
    res = f16(sum(t.to(F64) for t in p) + r.to(F64))
    return dict(partial=p, residual=[r] * tp, norm_w=[w] * tp), [[res] * tp, [f16(rmsnorm(res, w, 1e-6))] * tp]


def case_fused(seed, tp=2):
    g = gen(seed)
    ws = [random_gptq(128, 256, 128, g) for _ in range(tp)]
    xs = [activations((1, 128), g) for _ in range(tp)]
    r = activations((1, 256), g)
    w = (1.0 + 0.1 * activations((256,), g).to(F64)).to(torch.float16)
    parts = [f16(xs[i].to(F64) @ dequant_gptq(*ws[i])) for i in range(tp)]
    res = f16(sum(parts) + r.to(F64))
    ins = dict(
        w_down_qweight=[w_[0] for w_ in ws], w_down_scales=[w_[1] for w_ in ws],
        w_down_qzeros=[w_[2] for w_ in ws], x=xs, residual=[r] * tp, norm_w=[w] * tp,
    )
    return ins, [[res] * tp, [f16(rmsnorm(res, w, 1e-6))] * tp]


def case_int8(seed, tp=2):
    g = gen(seed)
    p = [activations((1, 256), g) for _ in range(tp)]
    return dict(partial=p), [[f16(sum(int8_roundtrip(t.to(F64), 128) for t in p))] * tp]


CASES = {
    "gemv_int4": (dict(hidden=256, n=128), case_gemv_int4),
    "gemv_f16": (dict(hidden=256, n=96), case_gemv_f16),
    "gemv_int4_dual_silu": (dict(hidden=256, n=128), case_dual_silu),
    "gemv_int4_qkv": (dict(hidden=256, nq=64, nkv=32), case_qkv),
    "allreduce_residual": (dict(tp=2, hidden=256), case_ar),
    "allreduce_residual_rmsnorm": (dict(tp=2, hidden=256), case_ar_norm),
    "gemv_int4_allreduce_rmsnorm": (dict(tp=2, hidden=256, k=128), case_fused),
    "allreduce_int8": (dict(tp=2, hidden=256), case_int8),
}


def close(got, want, tol):
    if isinstance(want, list):
        return all(close(g, w, tol) for g, w in zip(got, want))
    return rel_l2(got.cpu(), want) < tol


def outputs(result, k):
    return [result] if len(k.outputs) == 1 else list(result)


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_against_reference(name):
    kw, make = CASES[name]
    k = wavefuse.kernel(name, device="cuda", **kw)
    ins, want = make(1)
    got = outputs(k(**{n: cuda(v) for n, v in ins.items()}), k)
    k.check()
    tol = 1e-2 if name == "allreduce_int8" else TOL
    assert all(close(g, w, tol) for g, w in zip(got, want))


def _epoch_on_host(k):
    return "epoch_param" in k.abi_toml


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_graph_replay(name):
    """One capture, many replays, new inputs copied in before the last: the last outputs match
    the reference of the new inputs and the error words are clean."""
    kw, make = CASES[name]
    k = wavefuse.kernel(name, device="cuda", **kw)
    if k.synchronises and _epoch_on_host(k):
        pytest.xfail("the epoch is a host-passed launch argument: replay safety comes with issue 36 item 1")
    ins, _ = make(2)
    static = {n: cuda(v) for n, v in ins.items()}
    k(**static)  # warm-up outside the capture (also what torch.cuda.graphs recommends)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = outputs(k(**static), k)
    for _ in range(REPLAYS):
        graph.replay()
    new, want = make(3)
    for n, v in new.items():
        for dst, src in zip(static[n] if isinstance(v, list) else [static[n]], v if isinstance(v, list) else [v]):
            dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    k.check()
    tol = 1e-2 if name == "allreduce_int8" else TOL
    assert all(close(g, w, tol) for g, w in zip(out, want))


def test_compile_inductor_and_cuda_graphs():
    k = wavefuse.kernel("gemv_int4", device="cuda", hidden=256, n=128)
    ins, want = case_gemv_int4(4)
    ins = {n: cuda(v) for n, v in ins.items()}

    def f(x):
        return k(w_qweight=ins["w_qweight"], w_scales=ins["w_scales"], w_qzeros=ins["w_qzeros"], x=x).float() * 2

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = compiled(ins["x"])
    torch.cuda.synchronize()
    k.check()
    assert rel_l2(got.cpu() / 2, want[0]) < TOL


def test_fused_tp4_on_one_gpu():
    k = wavefuse.kernel("gemv_int4_allreduce_rmsnorm", device="cuda", tp=4, hidden=256, k=128)
    assert k.devices == ["cuda:0"] * 4
    ins, want = case_fused(5, tp=4)
    got = outputs(k(**{n: cuda(v) for n, v in ins.items()}), k)
    k.check()
    assert all(close(g, w, TOL) for g, w in zip(got, want))


def test_model_shapes_fused_tp4():
    """The fused kernel at Qwen 3.5 27B's TP-4 shapes (the default), all ranks on one GPU."""
    k = wavefuse.kernel("gemv_int4_allreduce_rmsnorm", device="cuda", tp=4)
    g = gen(6)
    hid, kk = 5120, 4352
    ws = [random_gptq(kk, hid, 128, g) for _ in range(4)]
    xs = [activations((1, kk), g) for _ in range(4)]
    r = activations((1, hid), g)
    w = (1.0 + 0.1 * activations((hid,), g).to(F64)).to(torch.float16)
    res, normed = k(
        w_down_qweight=cuda([a[0] for a in ws]), w_down_scales=cuda([a[1] for a in ws]),
        w_down_qzeros=cuda([a[2] for a in ws]), x=cuda(xs), residual=cuda([r] * 4), norm_w=cuda([w] * 4),
    )
    k.check()
    parts = [f16(xs[i].to(F64) @ dequant_gptq(*ws[i])) for i in range(4)]
    want = f16(sum(parts) + r.to(F64))
    assert all(rel_l2(t.cpu(), want) < TOL for t in res)
    assert all(rel_l2(t.cpu(), f16(rmsnorm(want, w, 1e-6))) < TOL for t in normed)


def test_wrong_gpu_and_cpu_tensor():
    k = wavefuse.kernel("gemv_int4", device="cuda", hidden=256, n=128)
    ins, _ = case_gemv_int4(7)
    with pytest.raises(wavefuse.ArgumentError, match="got one on cpu"):
        k(**ins)


def test_check_without_waiting():
    k = wavefuse.kernel("allreduce_residual", device="cuda", tp=2, hidden=256)
    ins, _ = case_ar(8)
    ins = {n: cuda(v) for n, v in ins.items()}
    before = torch.cuda.current_device()
    for _ in range(3):
        k(**ins)
        k.check(wait=False)  # enqueues a copy of the error words; never blocks
    torch.cuda.synchronize()
    k.check(wait=False)  # the earlier copy has completed: clean
    k.check()
    assert torch.cuda.current_device() == before
