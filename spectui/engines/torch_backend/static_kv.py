"""A model with a static KV cache: every forward of a given width has the same shapes.

The cache is one preallocated tensor per layer, [1, kv_heads, capacity, head_dim]; a forward
writes its keys and values at their positions and attends over the whole capacity through a
mask built from the positions (gpt-fast's layout). Rolling back is forgetting a length: the
stale entries are masked until they are overwritten. Because nothing in a forward depends on
how long the context is, a width's forward can be captured once as a CUDA graph and replayed
(spectui.engines.torch_backend.cuda_graphs); on a CPU, or where graphs are unavailable, the very
same forward runs eagerly. Llama- and Qwen2-style models only (lean.supports), no hidden
states (heads keep kv.CachedModel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

import spectui.engines.torch_backend.lean as lean
from spectui.engines.torch_backend.cuda_graphs import WidthGraphs
from spectui.engines.torch_backend.kv import common_prefix_len

DEFAULT_CAPACITY = 2048  # tokens of context before the cache doubles (and graphs are re-captured);
# every step attends over all of it (masked), so it is kept near what a chat uses


def supports(model) -> bool:
    return lean.supports(model)


def model_dtype(model) -> torch.dtype:
    return next(p for p in model.parameters() if p.is_floating_point()).dtype


class StaticKV:
    """Keys and values of every layer, preallocated for `capacity` positions."""

    def __init__(self, model, capacity: int, device) -> None:
        config = model.config
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        shape = (1, kv_heads, capacity, self.head_dim)
        dtype = model_dtype(model)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.capacity = capacity
        # Filled once: the mask compares these to the forward's positions inside the graph.
        self.slots = torch.arange(capacity, device=device)

    def grown(self, model, capacity: int) -> "StaticKV":
        """A larger cache holding this one's entries."""
        bigger = StaticKV(model, capacity, self.slots.device)
        for old, new in zip(self.keys + self.values, bigger.keys + bigger.values):
            new[:, :, : self.capacity].copy_(old)
        return bigger


def static_forward(model, kv: StaticKV, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Logits [1, n, V] for input_ids [1, n] at positions [n] (consecutive); their keys and
    values land in kv at those positions. No host sync and no shape that depends on the
    context's length: capturable as a CUDA graph."""
    import torch.nn.functional as F

    inner, n, head_dim = model.model, input_ids.shape[1], kv.head_dim
    half = head_dim // 2
    hidden = inner.embed_tokens(input_ids)
    cos, sin = inner.rotary_emb(hidden, positions.unsqueeze(0))
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    # A position sees every slot at or before it: the prompt, the accepted tokens, and the
    # earlier tokens of this very forward; stale slots past it are masked.
    mask = (kv.slots.unsqueeze(0) <= positions.unsqueeze(1))[None, None]

    def rotate(x: torch.Tensor) -> torch.Tensor:
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    for index, layer in enumerate(inner.layers):
        attn, mlp = layer.self_attn, layer.mlp
        x = lean.rms_norm(layer.input_layernorm, hidden)
        shape = (1, n, -1, head_dim)
        q = rotate(attn.q_proj(x).view(shape).transpose(1, 2))
        k = rotate(attn.k_proj(x).view(shape).transpose(1, 2))
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        keys, values = kv.keys[index], kv.values[index]
        keys.index_copy_(2, positions, k)
        values.index_copy_(2, positions, v)
        out = F.scaled_dot_product_attention(
            q, keys, values, attn_mask=mask, scale=attn.scaling, enable_gqa=q.shape[1] != keys.shape[1]
        ).transpose(1, 2)
        hidden = hidden + attn.o_proj(out.reshape(1, n, -1))
        x = lean.rms_norm(layer.post_attention_layernorm, hidden)
        hidden = hidden + mlp.down_proj(F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
    return model.lm_head(lean.rms_norm(inner.norm, hidden))


class StaticCachedModel:
    """kv.CachedModel's contract (CachedLogits) over a static cache: told which tokens the
    model should have seen, it keeps the common prefix and runs the rest. Widths up to
    `graph_widths` run as captured CUDA graphs where graphs are on; longer runs (a prompt)
    go through the same forward eagerly, in chunks of at most `chunk` tokens."""

    arrays = "torch"  # what logits returns (CachedLogits)
    prefill_chunk = None  # a CUDA graph's prompt goes in whole
    exact_rows = None  # its batch-invariant paths compute a verify of any width row for row

    def __init__(self, model, capacity: int = DEFAULT_CAPACITY, graphs: bool | None = None,
                 graph_widths: int = 17, chunk: int = 512) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        limit = getattr(model.config, "max_position_embeddings", None) or capacity
        self.kv = StaticKV(model, min(capacity, limit), self.device)
        self.limit = limit
        self.graph_widths = graph_widths
        self.chunk = chunk
        self.graphs = WidthGraphs(self._forward, self.device, enabled=graphs)
        self.seen: list[int] = []

    def reset(self) -> None:
        self.seen = []  # the entries stay; the mask hides them until they are overwritten

    def warm_up(self, widths: Sequence[int]) -> None:
        """Capture (or, eagerly, run once) each width now: the first reply then runs at full speed."""
        for width in widths:
            self.graphs.prepare(width)

    def prefill(self, token_ids: Sequence[int], stop: Callable[[], bool]) -> bool:
        self.logits(token_ids, num_rows=1)  # a forward cannot stop midway
        return True

    @torch.inference_mode()
    def logits(self, token_ids: Sequence[int], num_rows: int) -> torch.Tensor:
        """Float32 logits [num_rows, V]; row -1 predicts the token after token_ids[-1]."""
        keep = min(common_prefix_len(self.seen, token_ids), len(token_ids) - num_rows)
        self._make_room(len(token_ids))
        start, logits = keep, None
        while start < len(token_ids):
            end = min(len(token_ids), start + self.chunk)
            logits = self._run(token_ids[start:end], start)
            start = end
        self.seen = list(token_ids)
        assert logits is not None and logits.shape[1] >= num_rows
        # A copy: a graph's output is overwritten by its next replay.
        return logits[0, -num_rows:].float().clone()

    def _run(self, tokens: Sequence[int], start: int) -> torch.Tensor:
        if len(tokens) <= self.graph_widths:
            return self.graphs.run(tokens, start)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + len(tokens), device=self.device)
        return self._forward(ids, positions)

    def _forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return static_forward(self.model, self.kv, input_ids, positions)

    def _make_room(self, length: int) -> None:
        if length <= self.kv.capacity:
            return
        if length > self.limit:
            raise ValueError(f"context of {length} tokens: the model holds {self.limit}")
        capacity = self.kv.capacity
        while capacity < length:
            capacity *= 2
        self.kv = self.kv.grown(self.model, min(capacity, self.limit))
        self.graphs.forget()  # captured against the old tensors


K_MOST = 16  # the widest verify adaptive k asks for is K_MOST + 1


def static_kv_wanted(device: str) -> bool:
    """On by default where graphs pay (CUDA); SPECTUI_STATIC_KV=1 or 0 says so anywhere."""
    import os

    setting = os.environ.get("SPECTUI_STATIC_KV", "")
    if setting in ("0", "1"):
        return setting == "1"
    return torch.device(device).type == "cuda"


def use_static_caches(engine, k: int, auto: bool, graphs: bool | None = None) -> list[str]:
    """Put the target (and a draft model) of a just-built embedded engine on static caches and
    warm every width it will run, so the first reply runs as fast as the next. Returns what was
    switched, for the load log; models it cannot drive stay on kv.CachedModel."""
    from spectui.engines.speculative.proposers import DraftModelProposer

    switched = []
    proposer = engine.proposer
    backend = engine.backend
    if supports(backend.model) and not getattr(proposer, "needs_hidden", False):
        widths = range(1, K_MOST + 2) if auto else sorted({1, k + 1})
        backend.target = warmed(StaticCachedModel(backend.model, graphs=graphs), widths)
        switched.append("target")
    draft_model = getattr(proposer.draft, "model", None) if isinstance(proposer, DraftModelProposer) else None
    if isinstance(proposer, DraftModelProposer) and draft_model is not None and supports(draft_model):
        # The proposer asks its draft for logits and resets only: CachedLogits, which this is.
        proposer.draft = warmed(StaticCachedModel(draft_model, graphs=graphs, graph_widths=2), (1, 2))
        switched.append("draft")
    return switched


def warmed(model: StaticCachedModel, widths: Sequence[int]) -> StaticCachedModel:
    """One eager prompt-sized forward (kernel choice, allocator) and every graph width, on the
    empty cache; then forgotten."""
    if model.graphs.on:
        model.logits([0] * 64, num_rows=1)
        model.warm_up(widths)
        model.reset()
    return model
