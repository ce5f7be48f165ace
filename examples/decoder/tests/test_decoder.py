"""The decoder example on the CPU at the tiny config: GPTQ packing, checkpoints, config and
checkpoint errors, paths and TP sizes agreeing on greedy tokens, the wavefuse adapter (through a
test double of its assumed API, and skipped for real when the package is absent), the A/B
command."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

from wf_decoder import checkpoint as ck
from wf_decoder.backends import make_backend
from wf_decoder.config import ConfigError, from_dict, load_config
from wf_decoder.decode import StepRunner, generate
from wf_decoder.gptq import pack_cols, pack_rows, quantize, unpack_rows
from wf_decoder.model import Decoder, shard_model

PROMPT = torch.tensor([[3, 141, 59, 26], [500, 7, 7, 1]])


def greedy(source, path, tp=1, steps=16, batch=2, force=None, keep_logits=False):
    sm = shard_model(source, tp)
    model = Decoder(sm, make_backend(path), batch=batch, max_seq=PROMPT.shape[1] + steps)
    return generate(StepRunner(model), PROMPT[:batch], steps, keep_logits, force)


# ---- the GPTQ format ---------------------------------------------------------------------------


def test_qweight_word_against_hand_unpacking():
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 16, (64, 24), generator=g)
    qweight = pack_rows(codes)
    assert qweight.dtype == torch.int32 and qweight.shape == (8, 24)
    kg, n = 5, 17
    word = int(qweight[kg, n]) & 0xFFFFFFFF  # the 32 bits, unsigned
    for i in range(8):  # nibble i, least significant first, is row 8·kg + i
        assert (word >> (4 * i)) & 0xF == int(codes[8 * kg + i, n])
    rows = torch.arange(8)[:, None].expand(8, 8)  # row i of a word holds code i
    assert int(pack_rows(rows)[0, 0]) == 0x76543210
    assert torch.equal(unpack_rows(qweight), codes.to(torch.int32))


def test_qzeros_word_against_hand_unpacking():
    z = torch.tensor([[8, 9, 10, 11, 12, 13, 14, 15, 1, 2, 3, 4, 5, 6, 7, 0]])
    words = pack_cols(z)
    assert words.shape == (1, 2)
    assert int(words[0, 0]) & 0xFFFFFFFF == 0xFEDCBA98  # nibble i of word j = column 8j + i
    assert int(words[0, 1]) == 0x07654321


@pytest.mark.parametrize("zero_point", ["v1", "v2"])
@pytest.mark.parametrize("sym", [True, False])
def test_quantisation_error_within_half_a_step(zero_point, sym):
    w = torch.randn(256, 64, generator=torch.Generator().manual_seed(2)) * 0.02
    q = quantize(w, 64, sym, zero_point)
    step = q.scales.float().repeat_interleave(64, 0)
    assert ((q.dequantize() - w).abs() / step).max() <= 0.51
    stored = int(q.qzeros[0, 0]) & 0xF  # column 0's stored zero point
    if sym:  # symmetric: z = 8, stored 7 by v1 and 8 by v2
        assert int(stored) == (7 if zero_point == "v1" else 8)


# ---- checkpoints -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["gptq", "gptq_v2"])
def test_checkpoint_round_trip(tmp_path, tiny, fmt):
    d = tiny.to_hf()
    d["quantization_config"]["checkpoint_format"] = fmt
    cfg = from_dict(d, name="tiny")
    ck.write_random_checkpoint(tmp_path / "a", cfg, seed=3)
    a = ck.load_checkpoint(tmp_path / "a")
    assert a.cfg == cfg and a.cfg.quant.zero_point == ("v1" if fmt == "gptq" else "v2")
    # dequantised weights equal the float weights within the quantisation error
    for proj, (k, n) in cfg.linear_shapes().items():
        name = f"model.layers.1.{'self_attn' if proj in ck.ATTN else 'mlp'}.{proj}"
        w = ck._randn((k, n), name, 3, "cpu", ck.WEIGHT_STD)
        q = a.layers[1].linears[proj]
        step = q.scales.float().repeat_interleave(cfg.quant.group_size, 0)
        assert ((q.dequantize() - w).abs() / step).max() <= 0.51, proj
    # loader -> writer -> loader is exact
    a.save(tmp_path / "b")
    b = ck.load_checkpoint(tmp_path / "b")
    for la, lb in zip(a.layers, b.layers, strict=True):
        assert torch.equal(la.input_norm, lb.input_norm) and torch.equal(la.post_norm, lb.post_norm)
        for p in la.linears:
            for part in ("qweight", "scales", "qzeros"):
                assert torch.equal(getattr(la.linears[p], part), getattr(lb.linears[p], part))
    for t in ("embed", "norm", "lm_head"):
        assert torch.equal(getattr(a, t), getattr(b, t))


def test_act_order_supported_where_dequantising_and_refused_elsewhere(tmp_path, tiny):
    ck.write_random_checkpoint(tmp_path, tiny, seed=4, act_order=True)
    c = ck.load_checkpoint(tmp_path)
    w = c.layers[0].linears["down_proj"]
    assert w.act_order and w.g_idx.shape == (tiny.intermediate_size,)
    ref = ck.RandomSource(tiny, 4, act_order=True).layer(0).linears["down_proj"]
    assert torch.equal(w.dequantize(), ref.dequantize())
    best = make_backend("torch_best")
    a = greedy(c, "torch_f32", steps=6)
    sm = shard_model(c, 2)
    model = Decoder(sm, best, batch=2, max_seq=10)
    assert "fallback" in best.describe()
    assert torch.equal(generate(StepRunner(model), PROMPT, 6).tokens, a.tokens)


def test_malformed_checkpoint_is_a_clear_error(tmp_path, tiny):
    from safetensors.torch import load_file, save_file

    ck.write_random_checkpoint(tmp_path, tiny, seed=5)
    shard = tmp_path / "model-00001-of-00003.safetensors"
    good = load_file(str(shard))
    qw = "model.layers.0.mlp.up_proj.qweight"

    def broken(change, match):
        t = dict(good)
        change(t)
        save_file(t, str(shard))
        with pytest.raises(ck.CheckpointError, match=match):
            ck.load_checkpoint(tmp_path)

    broken(
        lambda t: t.__setitem__(qw, t[qw][:-1].contiguous()),
        r"tensor `model\.layers\.0\.mlp\.up_proj\.qweight`: "
        r"shape \(31, 512\), expected \(32, 512\)",
    )
    broken(
        lambda t: t.__setitem__(qw, t[qw].to(torch.int64)), r"up_proj\.qweight`: dtype torch\.int64"
    )
    broken(
        lambda t: t.__setitem__(
            "model.layers.0.mlp.up_proj.scales", t["model.layers.0.mlp.up_proj.scales"].float()
        ),
        r"up_proj\.scales`: dtype torch\.float32, expected torch\.float16",
    )
    broken(
        lambda t: t.pop("model.layers.0.self_attn.o_proj.qzeros"),
        r"missing tensor `model\.layers\.0\.self_attn\.o_proj\.qzeros`",
    )
    save_file(dict(good), str(shard))
    idx = json.loads((tmp_path / ck.INDEX).read_text())
    idx["weight_map"]["model.layers.0.self_attn.q_proj.bias"] = shard.name
    (tmp_path / ck.INDEX).write_text(json.dumps(idx))
    with pytest.raises(
        ck.CheckpointError,
        match=r"unexpected tensor\(s\) model\.layers\.0\.self_attn\.q_proj\.bias",
    ):
        ck.load_checkpoint(tmp_path)
    (tmp_path / ck.INDEX).unlink()
    with pytest.raises(
        ck.CheckpointError, match="neither model.safetensors.index.json nor model.safetensors"
    ):
        ck.load_checkpoint(tmp_path)


# ---- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d.pop("hidden_size"), "missing field `hidden_size`"),
        (
            lambda d: d.__setitem__("num_hidden_layers", "2"),
            "field `num_hidden_layers` must be a positive integer",
        ),
        (
            lambda d: d.__setitem__("num_key_value_heads", 3),
            "field `num_key_value_heads` \\(3\\) must divide",
        ),
        (
            lambda d: d.__setitem__("rms_norm_eps", -1),
            "field `rms_norm_eps` must be a positive number",
        ),
        (lambda d: d.pop("quantization_config"), "missing field `quantization_config`"),
        (lambda d: d["quantization_config"].__setitem__("bits", 8), "field `bits` must be 4"),
        (
            lambda d: d["quantization_config"].__setitem__("group_size", -1),
            "`group_size` -1 \\(per-channel\\)",
        ),
        (
            lambda d: d["quantization_config"].__setitem__("checkpoint_format", "awq"),
            "field `checkpoint_format`",
        ),
        (
            lambda d: d["quantization_config"].__setitem__("sym", "yes"),
            "field `sym` must be true or false",
        ),
        (
            lambda d: d.__setitem__("intermediate_size", 520),
            "down_proj is 520 -> 256: its input width must be a multiple of group_size 64",
        ),
    ],
)
def test_malformed_config_names_the_field(tiny, edit, match):
    d = tiny.to_hf()
    edit(d)
    with pytest.raises(ConfigError, match=match):
        from_dict(d, name="tiny")


def test_config_files(tmp_path, tiny):
    for preset in ("tiny", "llama31_8b", "qwen27b_dense"):
        cfg = load_config(preset)
        for tp in (1, 2, 4):
            cfg.check_tp(tp)
    q = load_config("qwen27b_dense")
    assert (q.hidden_size, q.intermediate_size, q.num_hidden_layers, q.vocab_size) == (
        5120,
        17408,
        64,
        248320,
    )
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="num_attention_heads does not shard over tp=8"):
        tiny.check_tp(8)


# ---- decoding ----------------------------------------------------------------------------------


def test_torch_best_and_reference_agree(tiny_model):
    ref = greedy(tiny_model, "torch_f32", keep_logits=True)
    best = greedy(tiny_model, "torch_best", keep_logits=True, force=ref.tokens)
    assert torch.equal(best.tokens, ref.tokens)
    cos = min(
        float(torch.nn.functional.cosine_similarity(a, b, dim=-1).min())
        for a, b in zip(ref.logits, best.logits, strict=True)
    )
    assert cos >= 0.999


def test_tp_sizes_agree(tiny_model):
    ref = greedy(tiny_model, "torch_f32", tp=1, keep_logits=True)
    for tp in (2, 4):
        g = greedy(tiny_model, "torch_f32", tp=tp, keep_logits=True)
        assert torch.equal(g.tokens, ref.tokens), tp
        assert (
            max(float((a - b).abs().max()) for a, b in zip(g.logits, ref.logits, strict=True))
            < 1e-3
        )
    for tp in (1, 4):
        assert torch.equal(
            greedy(tiny_model, "torch_best", tp=tp, steps=8).tokens, ref.tokens[:, :8]
        ), tp


def test_eager_steps_equal_decode_loop(tiny_model):
    """StepRunner's advance/prefill bookkeeping against calling the model step by step."""
    sm = shard_model(tiny_model, 2)
    model = Decoder(sm, make_backend("torch_f32"), batch=2, max_seq=12)
    g = generate(StepRunner(model), PROMPT, 6)
    model.reset()
    toks = []
    seq = PROMPT.clone()
    for t in range(PROMPT.shape[1] + 5):
        nxt = model.step(seq[:, t], torch.tensor(t)).argmax(-1)
        if t + 1 >= PROMPT.shape[1]:
            toks.append(nxt)
            seq = torch.cat([seq, nxt[:, None]], 1)
    assert torch.equal(g.tokens, torch.stack(toks, 1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: graph capture untested")
def test_cuda_graph_replay_equals_eager(tiny_model):
    sm = shard_model(tiny_model, 2, device="cuda")
    eager = generate(
        StepRunner(Decoder(sm, make_backend("torch_best", "cuda"), 2, 24), graph=False),
        PROMPT.cuda(),
        16,
    )
    graph = generate(
        StepRunner(Decoder(sm, make_backend("torch_best", "cuda"), 2, 24), graph=True),
        PROMPT.cuda(),
        16,
    )
    assert torch.equal(eager.tokens, graph.tokens)


# ---- wavefuse ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tp", [1, 2])
def test_wavefuse_paths_real_package(tp):
    """The paths on the real package's kernels (its simulator device on the CPU: every lane
    of the generated kernels executed, the TP ranks' allreduce through their flags) agree with
    the float32 reference on greedy tokens."""
    if importlib.util.find_spec("wavefuse") is None:
        pytest.skip("skipped: wavefuse package not installed")
    ref = greedy(ck.RandomSource(load_config("tiny"), 0).load(), "torch_f32", tp=tp, steps=8)
    for path in ("torch_best", "wavefuse_unfused", "wavefuse_fused", "wavefuse_fused_prenorm"):
        got = greedy(ck.RandomSource(load_config("tiny"), 0).load(), path, tp=tp, steps=8)
        assert torch.equal(got.tokens, ref.tokens), path


def test_wavefuse_paths_past_batch_16():
    """Batch 17 (speculative verification, batched serving; issue 40): the wavefuse paths on the
    real package's simulator device (gfx906 lowering: past 16 rows the kernels take the rows in
    batch tiles) give the float32 reference's greedy tokens for 17 random prompts."""
    if importlib.util.find_spec("wavefuse") is None:
        pytest.skip("skipped: wavefuse package not installed")
    prompt = torch.randint(0, 500, (17, 4), generator=torch.Generator().manual_seed(17))

    def run(path):
        sm = shard_model(ck.RandomSource(load_config("tiny"), 0).load(), 1)
        model = Decoder(sm, make_backend(path), batch=17, max_seq=prompt.shape[1] + 3)
        return generate(StepRunner(model), prompt, 3)

    ref = run("torch_f32")
    for path in ("wavefuse_unfused", "wavefuse_fused"):
        got = run(path)
        assert got.tokens.shape == (17, 3), path
        assert torch.equal(got.tokens, ref.tokens), path


def test_dump_ir_writes_each_kernel_as_wfir_that_builds_the_same_kernel(tmp_path):
    """``--dump-ir``: the fused path's kernels, as built from shape parameters, written as `.wfir`
    text that the package builds back into a kernel of the same IR (what `wavefuse tune
    --kernel-file` tunes and ``schedule="tuned"`` then finds by that IR)."""
    if importlib.util.find_spec("wavefuse") is None:
        pytest.skip("skipped: wavefuse package not installed")
    import wavefuse

    sm = shard_model(ck.RandomSource(load_config("tiny"), 0), 1)
    backend = make_backend("c", dump_ir=tmp_path)
    generate(StepRunner(Decoder(sm, backend, batch=1, max_seq=6)), PROMPT[:1], 2)
    files = sorted(tmp_path.glob("*.wfir"))
    names = {f.name.split("-tp")[0] for f in files}
    assert names == {"gemv_int4_qkv", "gemv_int4_dual_silu", "gemv_int4_allreduce_rmsnorm"}, files
    for f in files:
        back = wavefuse.kernel(str(f), device="sim")
        assert back.ir == f.read_text(), f.name
    backend.close()


def test_schedule_reaches_every_wavefuse_kernel(tmp_path, fake_wavefuse):
    from wf_decoder import ab

    fake_wavefuse.schedules.clear()
    rc = ab.main(
        "--config tiny --paths a,c --tp 1 --batch 1 --steps 1 --runs 1 --warmup-steps 1 "
        f"--device cpu --schedule tuned --out {tmp_path}".split()
    )
    assert rc == 0
    assert fake_wavefuse.schedules and set(fake_wavefuse.schedules) == {"tuned"}


def test_wavefuse_absent_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wavefuse", None)
    with pytest.raises(ImportError, match="skipped: wavefuse package not installed"):
        make_backend("c")


@pytest.fixture
def fake_wavefuse(monkeypatch):
    import fake_wavefuse

    fake_wavefuse.calls.clear()
    fake_wavefuse.closed.clear()
    monkeypatch.setitem(sys.modules, "wavefuse", fake_wavefuse)
    return fake_wavefuse


@pytest.mark.parametrize("tp", [1, 2])
def test_wavefuse_adapter_against_a_test_double(fake_wavefuse, tiny_model, tp):
    ref = greedy(tiny_model, "torch_f32", tp=tp, steps=8)
    unfused = greedy(tiny_model, "b", tp=tp, steps=8)
    assert set(fake_wavefuse.calls) == {"gemv_int4", "allreduce_residual_rmsnorm"}
    fake_wavefuse.calls.clear()
    fused = greedy(tiny_model, "c", tp=tp, steps=8)
    assert set(fake_wavefuse.calls) == {
        "gemv_int4_qkv",
        "gemv_int4_dual_silu",
        "gemv_int4_allreduce_rmsnorm",
    }
    assert torch.equal(unfused.tokens, ref.tokens) and torch.equal(fused.tokens, ref.tokens)


def test_wavefuse_adapter_refuses_act_order(fake_wavefuse, tiny):
    sm = shard_model(ck.RandomSource(tiny, 0, act_order=True), 1)
    with pytest.raises(ValueError, match="act-order"):
        Decoder(sm, make_backend("b"))


# ---- the A/B command ---------------------------------------------------------------------------


def test_ab_command_writes_results(tmp_path, fake_wavefuse):
    from wf_decoder import ab

    rc = ab.main(
        [
            "--config",
            "tiny",
            "--paths",
            "a,b,c",
            "--tp",
            "2",
            "--batch",
            "1",
            "--steps",
            "3",
            "--runs",
            "2",
            "--warmup-steps",
            "1",
            "--device",
            "cpu",
            "--out",
            str(tmp_path),
        ]
    )
    res = json.loads((tmp_path / "ab.json").read_text())
    md = (tmp_path / "ab.md").read_text()
    assert rc == 0, md
    # every kernel the wavefuse paths built was closed once their rows were measured
    assert sorted(fake_wavefuse.closed) == sorted(fake_wavefuse.calls)
    assert [r["path"] for r in res["rows"]] == ["torch_best", "wavefuse_unfused", "wavefuse_fused"]
    for r in res["rows"]:
        assert len(r["tok_s"]["runs"]) == 2 and r["floor_tok_s"] > 0
        assert r["gate"]["pass"] and r["gate"]["hidden_rel_err"] < 2e-2
    assert res["rows"][1]["gate"]["tokens_equal"] and res["rows"][1]["gate"]["steps"] == 32
    assert res["provenance"]["device"] in md and "CPU" in res["provenance"]["device"]
    assert res["provenance"]["commit"] and res["provenance"]["torch"] == torch.__version__


# ---- one process per rank ----------------------------------------------------------------------


def _process_paths():
    """Paths run one process per rank: the wavefuse ones over wavefuse's group (its simulator
    device on the CPU) where the package is installed."""
    paths = ["torch_f32", "torch_best"]
    if importlib.util.find_spec("wavefuse") is not None:
        paths += ["wavefuse_unfused", "wavefuse_fused"]
    return paths


def _rank_main(rank, world, port, out):
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        src = ck.RandomSource(load_config("tiny"), 0)
        sm = shard_model(src, world, ranks=[rank])
        for path in _process_paths():
            backend = make_backend(path, group=dist.group.WORLD)
            model = Decoder(sm, backend, batch=2, max_seq=12)
            g = generate(StepRunner(model), PROMPT, 8)
            torch.save(g.tokens, f"{out}/{path}-{rank}.pt")
            # Collective: the group's kernels close between two barriers, so no rank destroys
            # the process group while a peer still runs one (gloo aborted a rank without it).
            backend.close()
    finally:
        dist.destroy_process_group()


def test_one_process_per_rank_matches_ranks_in_one_process(tmp_path, tiny_model):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank_main, args=(2, port, str(tmp_path)), nprocs=2)
    want = greedy(tiny_model, "torch_f32", tp=2, steps=8).tokens
    for path in _process_paths():
        for rank in range(2):
            assert torch.equal(torch.load(tmp_path / f"{path}-{rank}.pt"), want), (path, rank)


def test_profile_split_by_category_and_gap():
    from wf_decoder.ab import kernel_category, profile_split

    # names as the profiler reports them (PyTorch's and wavefuse's kernels)
    assert kernel_category("gemv_int4_allreduce_rmsnorm_tp4") == "wavefuse"
    assert kernel_category("void pytorch_flash::flash_fwd_splitkv_kernel<...>") == "attention"
    assert kernel_category("void at::native::_weight_int4pack_mm_kernel<256>") == "int4 GEMM (torch)"
    assert kernel_category("triton_poi_fused_add_mul_0") == "Triton (torch.compile)"
    assert kernel_category("ncclDevKernel_AllReduce_Sum_f16_RING_LL") == "allreduce (NCCL)"
    assert kernel_category("Memcpy DtoD (Device -> Device)") == "copy / fill"
    assert kernel_category("void at::native::vectorized_elementwise_kernel") == "other"
    # two steps: 2 x (10 + 4 + 1) µs of kernels, a 20 µs step -> 15 busy, 5 gap
    recs = [("gemv_int4", 10.0), ("flash_fwd", 4.0), ("triton_red", 1.0)] * 2
    p = profile_split(recs, steps=2, step_us=20.0)
    assert p["us_per_step"] == {"wavefuse": 10.0, "attention": 4.0, "Triton (torch.compile)": 1.0}
    assert list(p["us_per_step"]) == ["wavefuse", "attention", "Triton (torch.compile)"]
    assert p["busy_us"] == pytest.approx(15.0)
    assert p["gap_us"] == pytest.approx(5.0)
    assert p["kernels_per_step"] == 3
    assert [(t["name"], t["us_per_step"], t["per_step"]) for t in p["top_kernels"]] == [
        ("gemv_int4", 10.0, 1.0),
        ("flash_fwd", 4.0, 1.0),
        ("triton_red", 1.0, 1.0),
    ]


def test_f32_logits_names_how_close_each_path_is(tmp_path, fake_wavefuse):
    from wf_decoder import ab

    rc = ab.main(
        "--config tiny --paths a,c --tp 1 --batch 2 --steps 2 --runs 1 --warmup-steps 1 "
        f"--device cpu --f32-logits --out {tmp_path}".split()
    )
    res = json.loads((tmp_path / "ab.json").read_text())
    md = (tmp_path / "ab.md").read_text()
    assert rc == 0, md
    for r in res["rows"]:
        f = r["gate"]["f32"]
        # FP16 / BF16 paths against float32 arithmetic on the same weights: close, not exact
        assert 0.999 < f["cos_min"] < 1.0 and 0.9 <= f["top1_agree"] <= 1.0, f
    assert "vs FP32 reference: cos min" in md


def test_f32_agreement_by_hand():
    from wf_decoder.ab import f32_agreement

    f = [torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])]
    g = [torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])]  # 2nd sequence: orthogonal, other top-1
    a = f32_agreement(f, g)
    assert a["cos_min"] == pytest.approx(0.0) and a["top1_agree"] == pytest.approx(0.5)


def test_gate_against_the_f32_model(tmp_path, fake_wavefuse):
    """--gate-ref f32: every path teacher-forced on the FP32 model's own greedy tokens; (a) is
    reported against it, not gated; (b), (c) gated, with their cosine vs (a) beside it."""
    from wf_decoder import ab

    rc = ab.main(
        "--config tiny --paths a,b,c --tp 1 --batch 2 --steps 2 --runs 1 --warmup-steps 1 "
        f"--device cpu --gate-ref f32 --out {tmp_path}".split()
    )
    res = json.loads((tmp_path / "ab.json").read_text())
    md = (tmp_path / "ab.md").read_text()
    assert rc == 0, md
    a, b, c = res["rows"]
    assert a["gate"]["baseline"] and a["gate"]["reference"] == "f32"
    for r in (b, c):
        g = r["gate"]
        assert g["reference"] == "f32" and g["pass"] and not g.get("baseline"), g
        # FP16 paths against float32 arithmetic on the same weights: close, not exact
        assert 0.999 < g["cos_min"] < 1.0 and 0.999 < g["vs_a_cos_min"] <= 1.0, g
    assert "baseline, not gated" in md and "cos min vs FP32" in md


def test_f32_reference_dequantises_per_call_where_its_weights_do_not_fit(monkeypatch, tiny_model):
    """The FP32 reference with its weights dequantised per call (``lazy``) gives the same logits
    as with them dequantised once; and where the float32 weights do not fit (an out-of-memory
    error while they are prepared: Qwen 3.5 27B's 108 GB on an 80 GB card), ``f32_reference``
    falls back to it instead of giving the gate up."""
    from wf_decoder import ab
    from wf_decoder.backends.torch_f32 import TorchF32Backend

    sm = shard_model(tiny_model, 1)
    prompt = torch.tensor([[3, 5, 7], [11, 13, 17]])
    dense, why = ab.f32_reference(sm, torch.device("cpu"), None, 2, 8, prompt, 3)
    assert why is None
    real = TorchF32Backend.prepare

    def no_room(self, w):
        if not self.lazy:
            raise torch.OutOfMemoryError("CUDA out of memory (test)")
        return real(self, w)

    monkeypatch.setattr(TorchF32Backend, "prepare", no_room)
    lazy, why = ab.f32_reference(sm, torch.device("cpu"), None, 2, 8, prompt, 3)
    assert why is None
    assert torch.equal(lazy.tokens, dense.tokens)
    assert all(torch.equal(a, b) for a, b in zip(lazy.logits, dense.logits, strict=True))
    monkeypatch.setattr(
        TorchF32Backend, "prepare", lambda self, w: (_ for _ in ()).throw(torch.OutOfMemoryError("x"))
    )
    none, why = ab.f32_reference(sm, torch.device("cpu"), None, 2, 8, prompt, 3)
    assert none is None and "does not fit" in why


def test_gate_reference_choice():
    from types import SimpleNamespace

    from wf_decoder.ab import gate_passes, gate_reference

    bf16, fp16 = SimpleNamespace(act=torch.bfloat16), SimpleNamespace(act=torch.float16)
    assert gate_reference("auto", bf16) == "f32" and gate_reference("auto", fp16) == "a"
    assert gate_reference("a", bf16) == "a" and gate_reference("f32", fp16) == "f32"
    assert gate_passes(None) and gate_passes({"pass": False, "baseline": True})
    assert not gate_passes({"pass": False}) and gate_passes({"pass": True})
