"""Every kernel of the set and one .wfir kernel on the CPU protocol simulator (device="sim")
against the independent float64 reference in reference.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import wavefuse
from reference import (
    activations,
    dequant_gptq,
    f16,
    int8_roundtrip,
    random_gptq,
    rel_l2,
    rmsnorm,
    silu,
)

F64 = torch.float64
TOL = 3e-3  # one FP16 rounding of FP32 sums, relative L2
DATA = Path(__file__).parent / "data"


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def clean(k: wavefuse.Kernel) -> None:
    k.check()  # raises KernelError on a simulator finding


@pytest.mark.parametrize("zero_point", ["v1", "v2"])
def test_gemv_int4(zero_point):
    k = wavefuse.kernel("gemv_int4", device="sim", batch=2, hidden=256, n=64, group_size=128, zero_point=zero_point)
    g = gen(1)
    qw, s, z = random_gptq(256, 64, 128, g)
    x = activations((2, 256), g)
    y = k(x=x, w_qweight=qw, w_scales=s, w_qzeros=z)
    clean(k)
    want = f16(x.to(F64) @ dequant_gptq(qw, s, z, zero_point))
    assert y.dtype == torch.float16 and y.shape == (2, 64)
    assert rel_l2(y, want) < TOL


@pytest.mark.parametrize("target", ["gfx906", "sm90"])
@pytest.mark.parametrize("batch", [20, 36])
def test_gemv_int4_past_batch_16(target, batch):
    """Speculative decoding and batched serving (issue 40): past 16 rows gfx906 takes the rows in
    tiles (32 per tile: 36 = 32 + a short tile of 4), sm_90 the tensor-core path; both against the
    float64 reference on fresh random inputs."""
    k = wavefuse.kernel("gemv_int4", device="sim", target=target, batch=batch, hidden=256, n=64, group_size=128)
    g = gen(10 + batch)
    qw, s, z = random_gptq(256, 64, 128, g)
    x = activations((batch, 256), g)
    y = k(x=x, w_qweight=qw, w_scales=s, w_qzeros=z)
    clean(k)
    want = f16(x.to(F64) @ dequant_gptq(qw, s, z))
    assert y.shape == (batch, 64)
    assert rel_l2(y, want) < TOL
    # What ran is what the source says: the tiles (a last one of 4 rows), or the tensor cores.
    if target == "sm90":
        assert "mma.sync" in k.source
    elif batch > 32:
        assert "batch tiles (batch_tile = 32)" in k.source and "then the last 4 row(s)" in k.source


def test_gemv_f16():
    k = wavefuse.kernel("gemv_f16", device="sim", hidden=128, n=48)
    g = gen(2)
    w = activations((48, 128), g) * 0.05
    x = activations((1, 128), g)
    y = k(w=w, x=x)
    clean(k)
    assert rel_l2(y, f16(x.to(F64) @ w.to(F64).T)) < TOL


def test_gemv_int4_dual_silu():
    k = wavefuse.kernel("gemv_int4_dual_silu", device="sim", hidden=128, n=64)
    g = gen(3)
    wg, wu = random_gptq(128, 64, 128, g), random_gptq(128, 64, 128, g)
    x = activations((1, 128), g)
    y = k(
        w_gate_qweight=wg[0], w_gate_scales=wg[1], w_gate_qzeros=wg[2],
        w_up_qweight=wu[0], w_up_scales=wu[1], w_up_qzeros=wu[2], x=x,
    )
    clean(k)
    xf = x.to(F64)
    want = f16(silu(xf @ dequant_gptq(*wg)) * (xf @ dequant_gptq(*wu)))
    assert rel_l2(y, want) < TOL


def test_gemv_int4_qkv():
    k = wavefuse.kernel("gemv_int4_qkv", device="sim", hidden=128, nq=32, nkv=16)
    g = gen(4)
    w = random_gptq(128, 64, 128, g)
    x = activations((1, 128), g)
    q, kk, v = k(w_qkv_qweight=w[0], w_qkv_scales=w[1], w_qkv_qzeros=w[2], x=x)
    clean(k)
    full = f16(x.to(F64) @ dequant_gptq(*w))
    assert rel_l2(q, full[:, :32]) < TOL
    assert rel_l2(kk, full[:, 32:48]) < TOL
    assert rel_l2(v, full[:, 48:]) < TOL


def test_allreduce_residual_tp2():
    k = wavefuse.kernel("allreduce_residual", device="sim", tp=2, batch=2, hidden=128)
    g = gen(5)
    partial = [activations((2, 128), g) for _ in range(2)]
    residual = activations((2, 128), g)  # replicated: the same on every rank
    out = k(partial=partial, residual=[residual, residual.clone()])
    clean(k)
    want = f16(partial[0].to(F64) + partial[1].to(F64) + residual.to(F64))
    for r in range(2):
        assert rel_l2(out[r], want) < TOL


def test_allreduce_residual_rmsnorm_tp2():
    eps = 1e-5
    k = wavefuse.kernel("allreduce_residual_rmsnorm", device="sim", tp=2, hidden=128, eps=eps)
    g = gen(6)
    partial = [activations((1, 128), g) for _ in range(2)]
    residual = [activations((1, 128), g)] * 2
    norm_w = [(1.0 + 0.1 * activations((128,), g).to(F64)).to(torch.float16)] * 2
    res_out, normed = k(partial=partial, residual=residual, norm_w=norm_w)
    clean(k)
    r_want = f16(partial[0].to(F64) + partial[1].to(F64) + residual[0].to(F64))
    n_want = f16(rmsnorm(r_want, norm_w[0], eps))
    for r in range(2):
        assert rel_l2(res_out[r], r_want) < TOL
        assert rel_l2(normed[r], n_want) < TOL


def test_gemv_int4_allreduce_rmsnorm_tp2():
    eps = 1e-6
    k = wavefuse.kernel("gemv_int4_allreduce_rmsnorm", device="sim", tp=2, hidden=128, k=128, eps=eps)
    g = gen(7)
    ws = [random_gptq(128, 128, 128, g) for _ in range(2)]
    xs = [activations((1, 128), g) for _ in range(2)]
    residual = activations((1, 128), g)
    norm_w = (1.0 + 0.1 * activations((128,), g).to(F64)).to(torch.float16)
    res_out, normed = k(
        w_down_qweight=[w[0] for w in ws], w_down_scales=[w[1] for w in ws],
        w_down_qzeros=[w[2] for w in ws], x=xs, residual=[residual] * 2, norm_w=[norm_w] * 2,
    )
    clean(k)
    partials = [f16(xs[r].to(F64) @ dequant_gptq(*ws[r])) for r in range(2)]
    r_want = f16(partials[0] + partials[1] + residual.to(F64))
    n_want = f16(rmsnorm(r_want, norm_w, eps))
    for r in range(2):
        assert rel_l2(res_out[r], r_want) < TOL
        assert rel_l2(normed[r], n_want) < TOL


def test_allreduce_int8_tp2():
    k = wavefuse.kernel("allreduce_int8", device="sim", tp=2, hidden=256)
    g = gen(8)
    partial = [activations((1, 256), g) for _ in range(2)]
    y = k(partial=partial)
    clean(k)
    want = f16(sum(int8_roundtrip(p.to(F64), 128) for p in partial))
    for r in range(2):
        assert rel_l2(y[r], want) < 1e-2


def test_wfir_file_and_text():
    path = DATA / "silu_gemv.wfir"
    for source in (str(path), path, path.read_text()):
        k = wavefuse.kernel(source, device="sim")
        assert k.name == "silu_gemv"
        g = gen(9)
        qw = torch.randint(-(2**31), 2**31 - 1, (32, 64), dtype=torch.int32, generator=g)
        qz = torch.randint(-(2**31), 2**31 - 1, (4, 8), dtype=torch.int32, generator=g)
        s = (torch.rand(4, 64, generator=g, dtype=F64) * 0.02).to(torch.float16)
        gate, up = activations((2, 256), g), activations((2, 256), g)
        y = k(g=gate, u=up, w_qweight=qw, w_scales=s, w_qzeros=qz)
        clean(k)
        h = f16(silu(gate.to(F64)) * up.to(F64))
        assert rel_l2(y, f16(h @ dequant_gptq(qw, s, qz, "v2"))) < TOL


def test_out_variant_writes_given_tensors():
    k = wavefuse.kernel("allreduce_residual", device="sim", hidden=128)
    g = gen(10)
    p, r = activations((1, 128), g), activations((1, 128), g)
    out = torch.full((1, 128), float("nan"), dtype=torch.float16)
    got = k(partial=p, residual=r, out={"residual_out": out})
    clean(k)
    assert got is out
    assert rel_l2(out, f16(p.to(F64) + r.to(F64))) < TOL


def test_source_and_abi():
    k = wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64)
    assert k.target == "gfx906"
    assert "hip_runtime.h" in k.source and "gemv_int4" in k.source
    assert [a.name for a in k.inputs] == ["w_qweight", "w_scales", "w_qzeros", "x"]
    assert [a.name for a in k.outputs] == ["y"]
    x = next(a for a in k.abi if a.name == "x")
    assert (x.dtype, x.shape, x.role) == (torch.float16, (1, 128), "input")
    cuda = wavefuse.kernel("gemv_int4", device="sim", target="sm90", hidden=128, n=64)
    assert "__global__" in cuda.source and "hip_runtime" not in cuda.source
    assert "[[params]]" in k.abi_toml


def test_config_json_shapes():
    """config= builds the set's kernel at a model's per-rank shapes (TinyLlama's: hidden 2048,
    FFN 5632), as `--model-config` does; shape keywords still override."""
    cfg = Path(__file__).parents[2] / "examples" / "own_kernels" / "config.json"
    k = wavefuse.kernel("gemv_int4", device="sim", tp=2, config=cfg)
    shapes = {a.name: a.shape for a in k.abi}
    assert shapes["x"] == (1, 2048) and shapes["y"] == (1, 5632 // 2)
    assert shapes["w_qweight"] == (2048 // 8, 5632 // 2)
    k = wavefuse.kernel("allreduce_residual_rmsnorm", device="sim", config=cfg, batch=3)
    assert {a.name: a.shape for a in k.abi}["normed"] == (3, 2048)


def test_model_shapes_by_default():
    k = wavefuse.kernel("gemv_int4_allreduce_rmsnorm", device="sim", tp=4)
    shapes = {a.name: a.shape for a in k.abi}
    assert shapes["x"] == (1, 17408 // 4) and shapes["residual_out"] == (1, 5120)


def test_schedule_overrides_from_the_environment(monkeypatch):
    """`$WAVEFUSE_SCHEDULE_SM90` reaches the package's kernels as it reaches the CLI's:
    `prefetch_before_wait` puts the weights' L2 prefetch before the stream-order wait of the
    CUDA source; without it the wait opens the kernel. `launch="dependent"` is accepted (the
    simulator has no stream predecessor), and the kernel says whether it may be so launched."""
    shape = dict(device="sim", target="sm90", hidden=128, n=64)
    monkeypatch.delenv("WAVEFUSE_SCHEDULE", raising=False)
    monkeypatch.delenv("WAVEFUSE_SCHEDULE_SM90", raising=False)
    plain = wavefuse.kernel("gemv_int4", **shape)
    assert plain.dependent_launch
    assert "prefetch.global.L2" not in plain.source
    monkeypatch.setenv("WAVEFUSE_SCHEDULE_SM90", "prefetch_before_wait=true")
    k = wavefuse.kernel("gemv_int4", launch="dependent", **shape)
    s = k.source
    assert s.index("prefetch.global.L2") < s.index("griddepcontrol.wait") < s.index(
        "griddepcontrol.launch_dependents"
    )
    # A kernel whose workgroups wait for each other (the RMSNorm's grid barrier) has neither.
    norm = wavefuse.kernel("allreduce_residual_rmsnorm", device="sim", target="sm90", tp=2, hidden=128)
    assert not norm.dependent_launch and "griddepcontrol" not in norm.source


def test_schedule_tuned_is_accepted():
    k = wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64, schedule="tuned")
    assert k.name == "gemv_int4"
