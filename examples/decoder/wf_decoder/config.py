"""A Llama/Qwen-style dense decoder's configuration, read from a Hugging Face ``config.json``.

Only the fields the decoder uses are read; unknown keys (and keys starting with ``_``, used for
comments in the preset files under ``configs/``) are ignored. A missing or malformed field is a
:class:`ConfigError` that names it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

PRESETS_DIR = Path(__file__).parent / "configs"
CHECKPOINT_FORMATS = ("gptq", "gptq_v2")


class ConfigError(ValueError):
    """A config.json that the decoder cannot use; the message names the field."""


@dataclass(frozen=True)
class QuantConfig:
    """GPTQ INT4 settings (``quantization_config``): ``checkpoint_format`` "gptq" stores zero points
    minus 1 (v1), "gptq_v2" stores them as they are (DESIGN.md §2)."""

    bits: int = 4
    group_size: int = 128
    desc_act: bool = False
    sym: bool = True
    checkpoint_format: str = "gptq_v2"

    @property
    def zero_point(self) -> str:
        """The zero-point convention: "v1" (stored z - 1) or "v2" (stored z)."""
        return "v1" if self.checkpoint_format == "gptq" else "v2"


@dataclass(frozen=True)
class DecoderConfig:
    """The dimensions of a dense decoder, named as in Hugging Face's config.json."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    vocab_size: int
    rope_theta: float
    tie_word_embeddings: bool
    quant: QuantConfig
    name: str = field(default="decoder", compare=False)

    @property
    def q_size(self) -> int:
        """Width of the Q projection's output (all heads)."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of the K (or V) projection's output (all KV heads)."""
        return self.num_key_value_heads * self.head_dim

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(K, N) of each quantised linear of one layer, unsharded, keyed by projection name."""
        h, f = self.hidden_size, self.intermediate_size
        return {
            "q_proj": (h, self.q_size),
            "k_proj": (h, self.kv_size),
            "v_proj": (h, self.kv_size),
            "o_proj": (self.q_size, h),
            "gate_proj": (h, f),
            "up_proj": (h, f),
            "down_proj": (f, h),
        }

    def kv_heads_local(self, tp: int) -> int:
        """KV heads one rank holds: an even share, or one (replicated) where tp exceeds them."""
        return max(self.num_key_value_heads // tp, 1)

    def kv_head_ids(self, rank: int, tp: int) -> list[int]:
        """The KV heads rank ``rank`` of ``tp`` holds (a replicated head where tp exceeds the
        KV heads, as serving engines do)."""
        n = self.num_key_value_heads
        if n >= tp:
            per = n // tp
            return list(range(rank * per, (rank + 1) * per))
        return [rank // (tp // n)]

    def check_tp(self, tp: int) -> None:
        """Raise ConfigError unless this model shards over ``tp`` ranks as DESIGN.md does: Q and
        KV heads (or KV heads are replicated), the FFN width and the vocabulary split evenly,
        every column shard a whole number of packed qzeros words, every row shard a whole number
        of groups."""
        g = self.quant.group_size
        checks = [
            ("num_attention_heads", self.num_attention_heads % tp == 0),
            (
                "num_key_value_heads",
                self.num_key_value_heads % tp == 0 or tp % self.num_key_value_heads == 0,
            ),
            (
                "intermediate_size",
                self.intermediate_size % (tp * g) == 0 and (self.intermediate_size // tp) % 8 == 0,
            ),
            ("num_attention_heads * head_dim", self.q_size % (tp * g) == 0),
            ("num_key_value_heads * head_dim", self.kv_heads_local(tp) * self.head_dim % 8 == 0),
            ("vocab_size", self.vocab_size % tp == 0),
        ]
        for what, ok in checks:
            if not ok:
                raise ConfigError(
                    f"{self.name}: {what} does not shard over tp={tp} "
                    f"(group_size {g}, packed qzeros words of 8 columns)"
                )

    def to_hf(self) -> dict:
        """The config as a Hugging Face config.json dict (what :func:`from_dict` reads back)."""
        d = asdict(self)
        q = d.pop("quant")
        d.pop("name")
        q["quant_method"] = "gptq"
        d["quantization_config"] = q
        d["model_type"] = "llama"
        d["architectures"] = ["LlamaForCausalLM"]
        return d


def _field(d: dict, key: str, kind, where: str, default=None, required=True):
    if key not in d:
        if required:
            raise ConfigError(f"{where}: missing field `{key}`")
        return default
    v = d[key]
    if kind is bool:
        if not isinstance(v, bool):
            raise ConfigError(f"{where}: field `{key}` must be true or false, got {v!r}")
        return v
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(f"{where}: field `{key}` must be a positive integer, got {v!r}")
        return v
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ConfigError(f"{where}: field `{key}` must be a positive number, got {v!r}")
        return float(v)
    if kind is str:
        if not isinstance(v, str):
            raise ConfigError(f"{where}: field `{key}` must be a string, got {v!r}")
        return v
    raise TypeError(kind)


def _quant_from_dict(q, where: str) -> QuantConfig:
    if not isinstance(q, dict):
        raise ConfigError(f"{where}: field `quantization_config` must be an object, got {q!r}")
    w = f"{where}: quantization_config"
    bits = _field(q, "bits", int, w)
    if bits != 4:
        raise ConfigError(f"{w}: field `bits` must be 4 (INT4 GPTQ), got {bits}")
    method = q.get("quant_method", "gptq")
    if method != "gptq":
        raise ConfigError(f'{w}: field `quant_method` must be "gptq", got {method!r}')
    fmt = _field(q, "checkpoint_format", str, w, default="gptq", required=False)
    if fmt not in CHECKPOINT_FORMATS:
        raise ConfigError(
            f"{w}: field `checkpoint_format` must be one of {CHECKPOINT_FORMATS}, got {fmt!r}"
        )
    group = q.get("group_size")
    if isinstance(group, int) and not isinstance(group, bool) and group in (32, 64, 128):
        pass
    elif group == -1:
        raise ConfigError(
            f"{w}: field `group_size` -1 (per-channel) is not supported by the "
            f"decoder example; use 32, 64 or 128"
        )
    else:
        raise ConfigError(f"{w}: field `group_size` must be 32, 64 or 128, got {group!r}")
    return QuantConfig(
        bits=bits,
        group_size=group,
        desc_act=_field(q, "desc_act", bool, w, default=False, required=False),
        sym=_field(q, "sym", bool, w, default=True, required=False),
        checkpoint_format=fmt,
    )


def from_dict(d: dict, name: str = "decoder") -> DecoderConfig:
    """Build a DecoderConfig from a parsed config.json; ConfigError names a bad field."""
    if not isinstance(d, dict):
        raise ConfigError(f"{name}: config must be a JSON object")
    hidden = _field(d, "hidden_size", int, name)
    heads = _field(d, "num_attention_heads", int, name)
    kv_heads = _field(d, "num_key_value_heads", int, name, default=heads, required=False)
    if heads % kv_heads:
        raise ConfigError(
            f"{name}: field `num_key_value_heads` ({kv_heads}) must divide "
            f"`num_attention_heads` ({heads})"
        )
    head_dim = d.get("head_dim")
    if head_dim is None:
        if hidden % heads:
            raise ConfigError(
                f"{name}: missing field `head_dim`, and `hidden_size` is not a "
                f"multiple of `num_attention_heads`"
            )
        head_dim = hidden // heads
    else:
        head_dim = _field(d, "head_dim", int, name)
    if head_dim % 2:
        raise ConfigError(f"{name}: field `head_dim` must be even (RoPE), got {head_dim}")
    if "quantization_config" not in d:
        raise ConfigError(f"{name}: missing field `quantization_config` (an INT4 GPTQ model)")
    cfg = DecoderConfig(
        hidden_size=hidden,
        intermediate_size=_field(d, "intermediate_size", int, name),
        num_hidden_layers=_field(d, "num_hidden_layers", int, name),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=_field(d, "rms_norm_eps", float, name),
        vocab_size=_field(d, "vocab_size", int, name),
        rope_theta=_field(d, "rope_theta", float, name, default=10000.0, required=False),
        tie_word_embeddings=_field(
            d, "tie_word_embeddings", bool, name, default=False, required=False
        ),
        quant=_quant_from_dict(d["quantization_config"], name),
        name=name,
    )
    g = cfg.quant.group_size
    for proj, (k, n) in cfg.linear_shapes().items():
        if k % g or n % 8:
            raise ConfigError(
                f"{name}: {proj} is {k} -> {n}: its input width must be a multiple "
                f"of group_size {g} and its output width a multiple of 8"
            )
    return cfg


def load_config(path_or_preset: str | Path) -> DecoderConfig:
    """Read a config.json: a path to a file, a directory holding config.json, or the name of a
    preset in ``configs/`` ("tiny", "llama31_8b", "qwen27b_dense")."""
    p = Path(path_or_preset)
    if not p.exists() and (PRESETS_DIR / f"{path_or_preset}.json").exists():
        p = PRESETS_DIR / f"{path_or_preset}.json"
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        presets = sorted(f.stem for f in PRESETS_DIR.glob("*.json"))
        raise ConfigError(f"{path_or_preset}: no such config file (presets: {', '.join(presets)})")
    try:
        d = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{p}: not valid JSON: {e}") from e
    return from_dict(d, name=p.stem if p.name != "config.json" else p.parent.name)
