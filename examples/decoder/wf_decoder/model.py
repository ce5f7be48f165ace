"""A Llama/Qwen-style dense decoder over a pluggable :class:`~wf_decoder.backends.Backend`.

Per layer: RMSNorm → QKV → RoPE → static KV cache → SDPA (GQA) → O → residual → RMSNorm →
gate/up → SiLU·mul → down → residual; then the final norm and the FP16 LM head.

Tensor parallelism (Megatron-style, DESIGN.md §1): Q/K/V and gate/up are column-parallel (each
rank its heads / FFN columns), O and down row-parallel (each rank its K-shard, partial sums of all
outputs, then an allreduce), the LM head vocab-parallel. KV heads are split over the ranks, or
replicated where there are fewer KV heads than ranks. One process may hold every rank of the group
(``ranks`` = all: the allreduce is a sum over the rank tensors in this process) or one rank of a
``torch.distributed`` group (the backend's ``group``).

The row-parallel tail is written the way the fused kernels see it: O's allreduce carries the
post-attention norm, down's carries the *next* layer's input norm (the final norm after the last
layer), so each layer hands the next its normed input.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .backends.base import Backend
from .checkpoint import LayerWeights
from .config import DecoderConfig
from .gptq import GptqWeight


@dataclass
class ShardedModel:
    """A model's weights split for ``tp`` ranks, holding the shards of ``ranks``: shared by every
    path of an A/B, each converting them with its backend."""

    cfg: DecoderConfig
    tp: int
    ranks: list[int]
    embed: torch.Tensor
    final_norm: torch.Tensor
    lm_head: list[torch.Tensor]
    norms: list[tuple[torch.Tensor, torch.Tensor]]
    linears: list[list[dict[str, GptqWeight]]]

    def weight_bytes(self) -> int:
        """Bytes of the quantised linears, norms and LM head the held ranks read per step (the
        embedding row read is negligible)."""
        lin = sum(w.nbytes() for layer in self.linears for rank in layer for w in rank.values())
        norms = sum(a.numel() * 2 + b.numel() * 2 for a, b in self.norms)
        return lin + norms + sum(w.numel() * 2 for w in self.lm_head) + self.final_norm.numel() * 2


def shard_layer(cfg: DecoderConfig, lw: LayerWeights, rank: int, tp: int) -> dict[str, GptqWeight]:
    """Rank ``rank``'s shards of one layer's linears."""
    hd = cfg.head_dim
    nq = cfg.num_attention_heads // tp * hd
    kv = cfg.kv_head_ids(rank, tp)
    f = cfg.intermediate_size // tp
    L = lw.linears
    return {
        "q_proj": L["q_proj"].cols(rank * nq, (rank + 1) * nq),
        "k_proj": L["k_proj"].cols(kv[0] * hd, (kv[-1] + 1) * hd),
        "v_proj": L["v_proj"].cols(kv[0] * hd, (kv[-1] + 1) * hd),
        "o_proj": L["o_proj"].rows(rank * nq, (rank + 1) * nq),
        "gate_proj": L["gate_proj"].cols(rank * f, (rank + 1) * f),
        "up_proj": L["up_proj"].cols(rank * f, (rank + 1) * f),
        "down_proj": L["down_proj"].rows(rank * f, (rank + 1) * f),
    }


def shard_model(source, tp: int = 1, ranks: list[int] | None = None, device="cpu") -> ShardedModel:
    """Shard a model source (a :class:`~wf_decoder.checkpoint.CheckpointReader`,
    :class:`~wf_decoder.checkpoint.RandomSource` or :class:`~wf_decoder.checkpoint.Checkpoint`)
    for ``tp`` ranks, keeping ``ranks`` (default: all), one layer in memory at a time."""
    cfg = source.cfg
    cfg.check_tp(tp)
    ranks = list(range(tp)) if ranks is None else list(ranks)
    embed, final_norm, lm_head = source.globals(device)
    v = cfg.vocab_size // tp
    lm_shards = [lm_head[r * v : (r + 1) * v].contiguous() for r in ranks]
    del lm_head
    norms, linears = [], []
    for i in range(cfg.num_hidden_layers):
        lw = source.layer(i, device)
        norms.append((lw.input_norm, lw.post_norm))
        linears.append([shard_layer(cfg, lw, r, tp) for r in ranks])
        del lw
    return ShardedModel(cfg, tp, ranks, embed, final_norm, lm_shards, norms, linears)


def rope_tables(
    head_dim: int, max_seq: int, theta: float, device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [max_seq, head_dim] (float32) of rotate-half RoPE."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    f = torch.outer(torch.arange(max_seq, dtype=torch.float64), inv)
    emb = torch.cat([f, f], -1)
    return emb.cos().float().to(device), emb.sin().float().to(device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on x [B, heads, head_dim] at one position (cos, sin [1, head_dim]), in float32."""
    xf = x.float()
    h = xf.shape[-1] // 2
    rot = torch.cat([-xf[..., h:], xf[..., :h]], -1)
    return (xf * cos + rot * sin).to(x.dtype)


def rope_qkv(q, k, v, cos, sin, heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype):
    """Q and K [B, heads·head_dim] rotated, and V, as [B, heads, head_dim] in the KV cache's
    ``dtype``: the attention glue every path shares (one fused kernel under torch.compile)."""
    B = q.shape[0]
    return (
        apply_rope(q.reshape(B, heads, head_dim), cos, sin).to(dtype),
        apply_rope(k.reshape(B, kv_heads, head_dim), cos, sin).to(dtype),
        v.reshape(B, kv_heads, head_dim).to(dtype),
    )


def rope_qkv_cache(
    q, k, v, k_cache, v_cache, pos, cos, sin, heads: int, kv_heads: int, head_dim: int
) -> torch.Tensor:
    """:func:`rope_qkv`, then K and V written into the caches [B, kv_heads, max_seq, head_dim]
    at position ``pos`` (a 0-d int64 tensor): the rotated Q [B, heads, head_dim] is returned.
    Under torch.compile the rotation, the casts and both cache writes are one fused kernel that
    writes the caches in place (the glue every path shares)."""
    q, k, v = rope_qkv(q, k, v, cos, sin, heads, kv_heads, head_dim, k_cache.dtype)
    k_cache.index_copy_(2, pos.view(1), k.unsqueeze(2))
    v_cache.index_copy_(2, pos.view(1), v.unsqueeze(2))
    return q


class Decoder:
    """The decoder of one path: a :class:`ShardedModel` with its weights converted by ``backend``,
    a static KV cache for ``batch`` sequences of up to ``max_seq`` positions. ``compile_glue``
    (default: on CUDA) fuses the RoPE of Q and K and the casts into the cache's dtype with
    torch.compile, with the KV cache writes: glue every path runs the same way, kept from costing
    ~6 launches a layer; the attention mask is made once per step, additive in the cache's dtype
    (SDPA would convert a boolean one in every layer)."""

    def __init__(
        self,
        sm: ShardedModel,
        backend: Backend,
        batch: int = 1,
        max_seq: int = 128,
        compile_glue: bool | None = None,
    ):
        cfg = sm.cfg
        self.cfg, self.sm, self.backend = cfg, sm, backend
        self.batch, self.max_seq = batch, max_seq
        dev, dt = backend.device, backend.dtype
        self.device = dev
        b = backend
        self.embed = sm.embed.to(device=dev, dtype=dt)
        self.final_norm = b.prepare_vector(sm.final_norm)
        self.lm_head = [b.prepare_dense(w) for w in sm.lm_head]
        self.norms = [(b.prepare_vector(a), b.prepare_vector(c)) for a, c in sm.norms]
        self.layers = []
        for layer in sm.linears:
            self.layers.append(
                [
                    {
                        "qkv": b.prepare_qkv(w["q_proj"], w["k_proj"], w["v_proj"]),
                        "o": b.prepare(w["o_proj"]),
                        "gate_up": b.prepare_gate_up(w["gate_proj"], w["up_proj"]),
                        "down": b.prepare(w["down_proj"]),
                    }
                    for w in layer
                ]
            )
        self.nq = cfg.num_attention_heads // sm.tp
        self.nkv = cfg.kv_heads_local(sm.tp)
        shape = (len(sm.ranks), batch, self.nkv, max_seq, cfg.head_dim)
        self.k_cache = [torch.zeros(shape, device=dev, dtype=dt) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, device=dev, dtype=dt) for _ in self.layers]
        self.cos, self.sin = rope_tables(cfg.head_dim, max_seq, cfg.rope_theta, dev)
        self.positions = torch.arange(max_seq, device=dev)
        if compile_glue is None:
            compile_glue = dev.type == "cuda"
        self._rope = (
            torch.compile(rope_qkv_cache, fullgraph=True, dynamic=False)
            if compile_glue
            else rope_qkv_cache
        )

    def reset(self) -> None:
        """Empty the KV cache."""
        for c in self.k_cache + self.v_cache:
            c.zero_()

    def _attention(self, i: int, r: int, x: torch.Tensor, pos: torch.Tensor, cos, sin, mask):
        cfg, b, B = self.cfg, self.backend, x.shape[0]
        hd = cfg.head_dim
        kc, vc = self.k_cache[i][r], self.v_cache[i][r]
        q = self._rope(
            *b.qkv(x, self.layers[i][r]["qkv"]), kc, vc, pos, cos, sin, self.nq, self.nkv, hd
        )
        o = F.scaled_dot_product_attention(
            q.unsqueeze(2), kc, vc, attn_mask=mask, enable_gqa=self.nq != self.nkv
        )
        return o.reshape(B, self.nq * hd)

    def step(
        self, tokens: torch.Tensor, pos: torch.Tensor, hidden: list | None = None
    ) -> torch.Tensor:
        """One decode step: ``tokens`` [B] (int64) at position ``pos`` (a 0-d int64 tensor on the
        device, so a captured graph replays at any position) -> logits [B, vocab]. Appends each
        layer's residual stream to ``hidden`` when given."""
        b, eps = self.backend, self.cfg.rms_norm_eps
        cos = self.cos.index_select(0, pos.view(1))
        sin = self.sin.index_select(0, pos.view(1))
        # Additive, in the attention's dtype: 0 up to `pos`, -inf after (SDPA turns a boolean mask
        # into this itself, in every layer).
        dt = self.k_cache[0].dtype
        mask = torch.where(self.positions > pos, float("-inf"), 0.0).to(dt).view(1, 1, 1, -1)
        residual = F.embedding(tokens, self.embed)
        normed = b.rmsnorm(residual, self.norms[0][0], eps)
        ranks = range(len(self.sm.ranks))
        n = len(self.layers)
        for i in range(n):
            attn = [self._attention(i, r, normed, pos, cos, sin, mask) for r in ranks]
            residual, normed = b.linear_row_allreduce_rmsnorm(
                attn, [self.layers[i][r]["o"] for r in ranks], residual, self.norms[i][1], eps
            )
            mlp = [b.gate_up_silu(normed, self.layers[i][r]["gate_up"]) for r in ranks]
            next_norm = self.norms[i + 1][0] if i + 1 < n else self.final_norm
            residual, normed = b.down_allreduce_rmsnorm(
                mlp, [self.layers[i][r]["down"] for r in ranks], residual, next_norm, eps
            )
            if hidden is not None:
                hidden.append(residual)
        return b.lm_head(normed, self.lm_head)
