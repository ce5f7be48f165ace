"""The kernels as PyTorch ops: torch.library.opcheck, torch.compile(fullgraph=True) without a
graph break, and inside an nn.Module (on the simulator device, so this runs without a GPU)."""

from __future__ import annotations

import pytest
import torch

import wavefuse
from reference import activations, dequant_gptq, f16, random_gptq, rel_l2

F64 = torch.float64


@pytest.fixture(scope="module")
def gemv():
    return wavefuse.kernel("gemv_int4", device="sim", hidden=128, n=64)


@pytest.fixture(scope="module")
def ar2():
    return wavefuse.kernel("allreduce_residual_rmsnorm", device="sim", tp=2, hidden=128)


def gemv_args(seed=0):
    g = torch.Generator().manual_seed(seed)
    qw, s, z = random_gptq(128, 64, 128, g)
    return (qw, s, z, activations((1, 128), g))


def ar_args(seed=0):
    g = torch.Generator().manual_seed(seed)
    p = [activations((1, 128), g) for _ in range(2)]
    r = activations((1, 128), g)
    w = activations((128,), g)
    return (p, [r, r.clone()], [w, w.clone()])


def test_opcheck_functional(gemv):
    torch.library.opcheck(gemv.op, gemv_args())


def test_opcheck_out(gemv):
    y = torch.empty(1, 64, dtype=torch.float16)
    torch.library.opcheck(gemv.out_op, (*gemv_args(), y))


def test_opcheck_tp2(ar2):
    torch.library.opcheck(ar2.op, ar_args())


class Mlp(torch.nn.Module):
    """A GPTQ projection through a wavefuse kernel inside an ordinary module."""

    def __init__(self, k: wavefuse.Kernel, seed: int = 0) -> None:
        super().__init__()
        self.k = k
        qw, s, z, _ = gemv_args(seed)
        self.register_buffer("qweight", qw)
        self.register_buffer("scales", s)
        self.register_buffer("qzeros", z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.k(w_qweight=self.qweight, w_scales=self.scales, w_qzeros=self.qzeros, x=x)
        return y * 2


def test_module_eager_and_compiled_fullgraph(gemv):
    m = Mlp(gemv)
    x = gemv_args()[3]
    eager = m(x)
    want = f16(x.to(F64) @ dequant_gptq(m.qweight, m.scales, m.qzeros)) * 2
    assert rel_l2(eager, want) < 3e-3
    torch._dynamo.reset()
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(x), eager)
    explained = torch._dynamo.explain(m)(x)
    assert explained.graph_break_count == 0, explained.break_reasons
    gemv.check()


def test_compile_tp2_fullgraph(ar2):
    p, r, w = ar_args(3)

    def step(p, r, w):
        res, normed = ar2(partial=p, residual=r, norm_w=w)
        return res[0] + 1, normed[1]

    eager = step(p, r, w)
    torch._dynamo.reset()
    # aot_eager: the functionalised graph without inductor's C++ compile (30 s of CI on CPU);
    # the GPU tests compile with inductor.
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    got = compiled(p, r, w)
    assert all(torch.equal(a, b) for a, b in zip(got, eager))
    ar2.check()


def test_compile_out_variant_fullgraph(gemv):
    qw, s, z, x = gemv_args(5)

    def f(x, y):
        gemv(w_qweight=qw, w_scales=s, w_qzeros=z, x=x, out={"y": y})
        return y + 0

    y0 = torch.empty(1, 64, dtype=torch.float16)
    eager = f(x, y0)
    torch._dynamo.reset()
    y1 = torch.empty(1, 64, dtype=torch.float16)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, y1)
    assert torch.equal(got, eager) and torch.equal(y1, eager)


def test_fake_tensors_catch_bad_shapes_at_trace_time(gemv):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        qw, s, z, x = (torch.empty(t.shape, dtype=t.dtype) for t in gemv_args())
        y = gemv.op(qw, s, z, x)
        assert y.shape == (1, 64) and y.dtype == torch.float16
        with pytest.raises(wavefuse.ArgumentError, match="'x'"):
            gemv.op(qw, s, z, torch.empty(1, 64, dtype=torch.float16))
