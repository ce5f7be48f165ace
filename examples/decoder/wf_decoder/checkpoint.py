"""Random-weight GPTQ checkpoints in the Hugging Face GPTQ safetensors layout, and their loader.

Tensor names (as AutoGPTQ / GPTQModel write them for Llama-family models)::

    model.embed_tokens.weight                              fp16 [vocab, hidden]
    model.layers.{i}.input_layernorm.weight                fp16 [hidden]
    model.layers.{i}.self_attn.{q,k,v,o}_proj.{qweight,qzeros,scales,g_idx}
    model.layers.{i}.post_attention_layernorm.weight       fp16 [hidden]
    model.layers.{i}.mlp.{gate,up,down}_proj.{qweight,qzeros,scales,g_idx}
    model.norm.weight                                      fp16 [hidden]
    lm_head.weight                                         fp16 [vocab, hidden] (absent if tied)

The writer streams: one safetensors shard per layer plus one for the embedding, final norm and LM
head, and ``model.safetensors.index.json`` mapping names to shards, so a 27B-shaped checkpoint
(~15 GB) never needs more than one layer in memory. :func:`random_checkpoint` makes the same
weights directly in memory (on a GPU for timing), skipping files.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import torch

from .config import ConfigError, DecoderConfig, from_dict
from .gptq import GptqWeight, quantize

ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
PARTS = ("qweight", "qzeros", "scales", "g_idx")
INDEX = "model.safetensors.index.json"
WEIGHT_STD = 0.02


class CheckpointError(ValueError):
    """A checkpoint that does not match its config or the GPTQ layout; the message names the
    tensor and what was expected."""


@dataclass
class LayerWeights:
    """One decoder layer's weights (unsharded)."""

    input_norm: torch.Tensor
    post_norm: torch.Tensor
    linears: dict[str, GptqWeight]


@dataclass
class Checkpoint:
    """A whole model's weights (unsharded): ``layers`` may be a list or, when streamed, filled
    layer by layer by the consumer."""

    config: DecoderConfig
    embed: torch.Tensor
    norm: torch.Tensor
    lm_head: torch.Tensor
    layers: list[LayerWeights] = field(default_factory=list)

    @property
    def cfg(self) -> DecoderConfig:
        """The config (the name every model source uses)."""
        return self.config

    def globals(self, device="cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(embedding, final norm, LM head) on ``device``."""
        return self.embed.to(device), self.norm.to(device), self.lm_head.to(device)

    def layer(self, i: int, device="cpu") -> LayerWeights:
        """Layer ``i`` on ``device``."""
        lw = self.layers[i]
        return LayerWeights(
            lw.input_norm.to(device),
            lw.post_norm.to(device),
            {p: w.to(device) for p, w in lw.linears.items()},
        )

    def save(self, path: str | Path) -> Path:
        """Write this checkpoint (see :func:`save_checkpoint`)."""
        return save_checkpoint(
            path, self.config, self.embed, self.norm, self.lm_head, iter(self.layers)
        )


def _prefix(proj: str, i: int) -> str:
    return f"model.layers.{i}.{'self_attn' if proj in ATTN else 'mlp'}.{proj}"


def _seed(seed: int, name: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63)


def _randn(shape, name: str, seed: int, device, std: float) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(_seed(seed, name))
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32) * std


def _act_order_g_idx(k: int, group: int, name: str, seed: int, device) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(_seed(seed, name + ".g_idx"))
    return (torch.randperm(k, generator=g) // group).to(torch.int32).to(device)


def random_layer(
    cfg: DecoderConfig, i: int, seed: int, device="cpu", act_order: bool = False
) -> LayerWeights:
    """Layer ``i`` of the random model: linear weights ~ N(0, 0.02) quantised with integer zero
    points (cfg.quant: group size, sym, v1/v2), norms 1 + N(0, 0.1). Deterministic from ``seed``
    on a given device type (CPU and CUDA generators give different numbers). ``act_order`` gives
    each linear a random act-order g_idx."""
    q = cfg.quant
    linears = {}
    for proj, (k, n) in cfg.linear_shapes().items():
        name = _prefix(proj, i)
        # linears reading the same input (Q, K, V; gate, up) share its act-order permutation,
        # as GPTQ's Hessian of that input gives them
        shared = {"k_proj": "q_proj", "v_proj": "q_proj", "up_proj": "gate_proj"}.get(proj, proj)
        g_idx = (
            _act_order_g_idx(k, q.group_size, _prefix(shared, i), seed, device)
            if act_order
            else None
        )
        w = _randn((k, n), name, seed, device, WEIGHT_STD)
        linears[proj] = quantize(w, q.group_size, q.sym, q.zero_point, g_idx=g_idx)
        del w
    h = cfg.hidden_size
    norms = [
        (1 + _randn((h,), f"model.layers.{i}.{n}.weight", seed, device, 0.1)).half()
        for n in ("input_layernorm", "post_attention_layernorm")
    ]
    return LayerWeights(input_norm=norms[0], post_norm=norms[1], linears=linears)


class RandomSource:
    """The random model of :func:`random_layer`, read like a checkpoint (``globals``, ``layer``),
    made on whatever device is asked: nothing is written or read from files."""

    def __init__(self, cfg: DecoderConfig, seed: int = 0, act_order: bool = False):
        self.cfg, self.seed, self.act_order = cfg, seed, act_order

    def globals(self, device="cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(embedding ~ N(0, 1), final norm, LM head ~ N(0, 0.02)), fp16."""
        cfg, seed = self.cfg, self.seed
        v, h = cfg.vocab_size, cfg.hidden_size
        embed = _randn((v, h), "model.embed_tokens.weight", seed, device, 1.0).half()
        norm = (1 + _randn((h,), "model.norm.weight", seed, device, 0.1)).half()
        lm_head = (
            embed
            if cfg.tie_word_embeddings
            else _randn((v, h), "lm_head.weight", seed, device, WEIGHT_STD).half()
        )
        return embed, norm, lm_head

    def layer(self, i: int, device="cpu") -> LayerWeights:
        """Layer ``i`` made on ``device``."""
        return random_layer(self.cfg, i, self.seed, device, self.act_order)

    def load(self, device="cpu") -> Checkpoint:
        """The whole random model in memory on ``device``."""
        embed, norm, lm_head = self.globals(device)
        layers = [self.layer(i, device) for i in range(self.cfg.num_hidden_layers)]
        return Checkpoint(self.cfg, embed, norm, lm_head, layers)


def random_checkpoint(
    cfg: DecoderConfig, seed: int = 0, device="cpu", act_order: bool = False
) -> Checkpoint:
    """The random model in memory on ``device`` (no files)."""
    return RandomSource(cfg, seed, act_order).load(device)


# ---- writing -----------------------------------------------------------------------------------


def layer_tensors(lw: LayerWeights, i: int) -> dict[str, torch.Tensor]:
    """A layer's tensors under their HF GPTQ names (g_idx written as GPTQ does: row // G when
    there is no act-order)."""
    out = {
        f"model.layers.{i}.input_layernorm.weight": lw.input_norm,
        f"model.layers.{i}.post_attention_layernorm.weight": lw.post_norm,
    }
    for proj, w in lw.linears.items():
        p = _prefix(proj, i)
        out[f"{p}.qweight"] = w.qweight
        out[f"{p}.qzeros"] = w.qzeros
        out[f"{p}.scales"] = w.scales
        out[f"{p}.g_idx"] = w.row_groups().to(torch.int32)
    return {k: v.detach().cpu().contiguous() for k, v in out.items()}


def save_checkpoint(
    path: str | Path,
    cfg: DecoderConfig,
    embed: torch.Tensor,
    norm: torch.Tensor,
    lm_head: torch.Tensor,
    layers: Iterator[LayerWeights],
) -> Path:
    """Write config.json, one shard per layer (consumed from the ``layers`` iterator one at a
    time), a last shard with embedding, final norm and LM head, and the index."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    n_shards = cfg.num_hidden_layers + 1
    weight_map, total = {}, 0

    def shard(j: int, tensors: dict) -> None:
        nonlocal total
        fname = f"model-{j + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file(tensors, str(path / fname), metadata={"format": "pt"})
        for k, t in tensors.items():
            weight_map[k] = fname
            total += t.numel() * t.element_size()

    count = 0
    for i, lw in enumerate(layers):
        shard(i, layer_tensors(lw, i))
        count += 1
    if count != cfg.num_hidden_layers:
        raise ValueError(f"save_checkpoint: got {count} layers, config has {cfg.num_hidden_layers}")
    glob = {"model.embed_tokens.weight": embed, "model.norm.weight": norm}
    if not cfg.tie_word_embeddings:
        glob["lm_head.weight"] = lm_head
    shard(cfg.num_hidden_layers, {k: v.detach().cpu().contiguous() for k, v in glob.items()})
    (path / "config.json").write_text(json.dumps(cfg.to_hf(), indent=2) + "\n")
    (path / INDEX).write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n"
    )
    return path


def write_random_checkpoint(
    path: str | Path, cfg: DecoderConfig, seed: int = 0, act_order: bool = False
) -> Path:
    """Write the random model of :func:`random_layer` to ``path``, one layer in memory at a time."""
    src = RandomSource(cfg, seed, act_order)
    embed, norm, lm_head = src.globals("cpu")
    layers = (src.layer(i, "cpu") for i in range(cfg.num_hidden_layers))
    return save_checkpoint(path, cfg, embed, norm, lm_head, layers)


# ---- loading -----------------------------------------------------------------------------------


class _Reader:
    """Tensors by name over a single-file or sharded (index.json) checkpoint."""

    def __init__(self, path: Path):
        self.path = path
        if (path / INDEX).exists():
            try:
                self.where = json.loads((path / INDEX).read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise CheckpointError(
                    f"{path / INDEX}: not a safetensors index (needs a `weight_map`): {e}"
                ) from e
        elif (path / "model.safetensors").exists():
            self.where = None
        else:
            raise CheckpointError(f"{path}: neither {INDEX} nor model.safetensors found")
        self._open = {}
        self.seen = set()

    def files(self) -> list[str]:
        return sorted(set(self.where.values())) if self.where else ["model.safetensors"]

    def _handle(self, fname: str):
        from safetensors import safe_open

        if fname not in self._open:
            f = self.path / fname
            if not f.exists():
                raise CheckpointError(f"{f}: shard named in {INDEX} is missing")
            try:
                self._open[fname] = safe_open(str(f), framework="pt")
            except Exception as e:  # safetensors raises its own error types for a bad header
                raise CheckpointError(f"{f}: not a readable safetensors file: {e}") from e
        return self._open[fname]

    def names(self) -> set[str]:
        if self.where is not None:
            return set(self.where)
        return set(self._handle("model.safetensors").keys())

    def has(self, name: str) -> bool:
        return name in self.names()

    def get(self, name: str) -> torch.Tensor:
        fname = self.where.get(name) if self.where is not None else "model.safetensors"
        h = None if fname is None else self._handle(fname)
        if h is None or name not in h.keys():
            raise CheckpointError(f"{self.path}: missing tensor `{name}`")
        self.seen.add(name)
        return h.get_tensor(name)


def _expect(name: str, t: torch.Tensor, shape: tuple, dtypes: tuple) -> torch.Tensor:
    if tuple(t.shape) != tuple(shape):
        raise CheckpointError(f"tensor `{name}`: shape {tuple(t.shape)}, expected {tuple(shape)}")
    if t.dtype not in dtypes:
        raise CheckpointError(
            f"tensor `{name}`: dtype {t.dtype}, expected {' or '.join(str(d) for d in dtypes)}"
        )
    return t


def _load_linear(r: _Reader, cfg: DecoderConfig, proj: str, i: int) -> GptqWeight:
    k, n = cfg.linear_shapes()[proj]
    g = cfg.quant.group_size
    p = _prefix(proj, i)
    qweight = _expect(f"{p}.qweight", r.get(f"{p}.qweight"), (k // 8, n), (torch.int32,))
    qzeros = _expect(f"{p}.qzeros", r.get(f"{p}.qzeros"), (k // g, n // 8), (torch.int32,))
    scales = _expect(f"{p}.scales", r.get(f"{p}.scales"), (k // g, n), (torch.float16,))
    g_idx = None
    if r.has(f"{p}.g_idx"):
        gi = _expect(f"{p}.g_idx", r.get(f"{p}.g_idx"), (k,), (torch.int32, torch.int64))
        if int(gi.min()) < 0 or int(gi.max()) >= k // g:
            raise CheckpointError(
                f"tensor `{p}.g_idx`: groups must lie in 0..{k // g - 1}, "
                f"got {int(gi.min())}..{int(gi.max())}"
            )
        if not torch.equal(gi.to(torch.int64), torch.arange(k) // g):
            g_idx = gi.to(torch.int32)
    return GptqWeight(
        qweight=qweight,
        scales=scales,
        qzeros=qzeros,
        group_size=g,
        zero_point=cfg.quant.zero_point,
        g_idx=g_idx,
    )


def _load_vector(r: _Reader, name: str, shape: tuple) -> torch.Tensor:
    t = _expect(name, r.get(name), shape, (torch.float16, torch.bfloat16, torch.float32))
    return t.to(torch.float16)


class CheckpointReader:
    """A GPTQ checkpoint directory, read layer by layer (``layer(i)``) or whole (``load()``).
    Every tensor is checked against the config: missing, misshapen or wrongly typed tensors and
    unexpected ones (biases, other quantisation formats) are :class:`CheckpointError`."""

    def __init__(self, path: str | Path, cfg: DecoderConfig | None = None):
        path = Path(path)
        if cfg is None:
            if not (path / "config.json").exists():
                raise CheckpointError(f"{path}: no config.json")
            try:
                cfg = from_dict(json.loads((path / "config.json").read_text()), name=path.name)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path / 'config.json'}: not valid JSON: {e}") from e
        self.cfg = cfg
        self.r = _Reader(path)
        expected = set()
        for i in range(cfg.num_hidden_layers):
            expected |= {
                f"model.layers.{i}.{n}.weight"
                for n in ("input_layernorm", "post_attention_layernorm")
            }
            expected |= {f"{_prefix(p, i)}.{part}" for p in ATTN + MLP for part in PARTS}
        expected |= {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
        extra = sorted(self.r.names() - expected)
        if extra:
            raise CheckpointError(
                f"{path}: unexpected tensor(s) {', '.join(extra[:5])}"
                f"{' …' if len(extra) > 5 else ''} (biases and other layouts "
                f"are not supported by this decoder)"
            )

    def globals(self, device="cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(embedding, final norm, LM head), fp16 on ``device``."""
        c = self.cfg
        embed = _load_vector(self.r, "model.embed_tokens.weight", (c.vocab_size, c.hidden_size))
        norm = _load_vector(self.r, "model.norm.weight", (c.hidden_size,))
        if c.tie_word_embeddings and not self.r.has("lm_head.weight"):
            lm_head = embed
        else:
            lm_head = _load_vector(self.r, "lm_head.weight", (c.vocab_size, c.hidden_size))
        return embed.to(device), norm.to(device), lm_head.to(device)

    def layer(self, i: int, device="cpu") -> LayerWeights:
        """Layer ``i``, checked, on ``device``."""
        h = self.cfg.hidden_size
        return LayerWeights(
            input_norm=_load_vector(self.r, f"model.layers.{i}.input_layernorm.weight", (h,)).to(
                device
            ),
            post_norm=_load_vector(
                self.r, f"model.layers.{i}.post_attention_layernorm.weight", (h,)
            ).to(device),
            linears={p: _load_linear(self.r, self.cfg, p, i).to(device) for p in ATTN + MLP},
        )

    def load(self, device="cpu") -> Checkpoint:
        """The whole checkpoint on ``device``."""
        embed, norm, lm_head = self.globals(device)
        layers = [self.layer(i, device) for i in range(self.cfg.num_hidden_layers)]
        return Checkpoint(self.cfg, embed, norm, lm_head, layers)


def load_checkpoint(path: str | Path, cfg: DecoderConfig | None = None, device="cpu") -> Checkpoint:
    """Read and check a whole GPTQ checkpoint (config.json in ``path`` unless ``cfg`` is given)."""
    return CheckpointReader(path, cfg).load(device)
