"""A model with a static KV cache: every forward of a given width has the same shapes.

The cache is one preallocated tensor per layer, [1, kv_heads, span, head_dim]; a forward
writes its keys and values at their positions and attends over the whole span through a
mask built from the positions (gpt-fast's layout). Rolling back is forgetting a length: the
stale entries are masked until they are overwritten. The span is a bucket (MIN_SPAN doubled
as the context needs): a chat attends over a few hundred slots, not the model's 128k, and a
reset goes back to the smallest. Because nothing in a forward depends on how long the context
is within its span, a (span, width) forward can be captured once as a CUDA graph and replayed
(spectui.engines.torch_backend.cuda_graphs); on a CPU, or where graphs are unavailable, the very
same forward runs eagerly. Llama- and Qwen2-style models only (lean.supports), no hidden
states (heads keep kv.CachedModel).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

import spectui.engines.torch_backend.lean as lean
from spectui.core.errors import UsageError
from spectui.engines.adaptive import K_AUTO_MAX
from spectui.engines.torch_backend.cuda_graphs import Capture, WidthGraphs
from spectui.engines.torch_backend.kv import common_prefix_len

if TYPE_CHECKING:
    from spectui.engines.speculative.engine import SpeculativeEngine
    from spectui.engines.speculative.proposers import Proposer
    from spectui.engines.torch_backend.backend import TorchBackend

# The smallest attended span; spans double from it as the context needs (each attends over all
# of its slots, masked, so a chat's forward reads a few hundred slots, not the model's limit).
MIN_SPAN = 256


def supports(model: Any) -> bool:
    return lean.supports(model, capture=True)


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    return next(p for p in model.parameters() if p.is_floating_point()).dtype


class StaticKV:
    """Keys and values of every layer, preallocated for `capacity` positions."""

    def __init__(self, model: Any, capacity: int, device: torch.device | str) -> None:
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

    def grown(self, model: Any, capacity: int) -> "StaticKV":
        """A larger cache holding this one's entries."""
        bigger = StaticKV(model, capacity, self.slots.device)
        with torch.inference_mode():  # this cache may hold inference tensors
            for old, new in zip(self.keys + self.values, bigger.keys + bigger.values):
                new[:, :, : self.capacity].copy_(old)
        return bigger


def static_forward(model: Any, kv: StaticKV, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
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
    go through the same forward eagerly, in chunks of at most `chunk` tokens.

    The cache is one StaticKV per span in use: the smallest (kept, with its graphs, for the
    next reply) and the current one. A context that outgrows its span moves to one at least
    twice as large, with room for the widest verify; the spans between are dropped, as no
    forward attends over them again before a reset, which goes back to the smallest."""

    arrays = "torch"  # what logits returns (CachedLogits)
    prefill_chunk = None  # a CUDA graph's prompt goes in whole
    exact_rows = None  # its batch-invariant paths compute a verify of any width row for row

    def __init__(self, model: Any, min_span: int = MIN_SPAN, graphs: bool | None = None,
                 graph_widths: int = 17, chunk: int = 512, capture: Capture | None = None,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        limit = getattr(model.config, "max_position_embeddings", None) or min_span
        self.limit = limit
        self.min_span = min(min_span, limit)
        self.span = self.min_span
        self.spans = {self.span: StaticKV(model, self.span, self.device)}
        self.graph_widths = graph_widths
        self.chunk = chunk
        self.graphs = WidthGraphs(self._forward, self.device, enabled=graphs, capture=capture, on_failure=on_failure)
        self.seen: list[int] = []

    @property
    def kv(self) -> StaticKV:
        """The cache of the span in use."""
        return self.spans[self.span]

    def reset(self) -> None:
        self.seen = []  # the entries stay; the mask hides them until they are overwritten
        self.span = self.min_span
        self._drop_spans(keep=self.min_span)

    def warm_up(self, widths: Sequence[int]) -> None:
        """Capture (or, eagerly, run once) each width now, at the span in use: the first reply
        then runs at full speed."""
        for width in widths:
            self.graphs.prepare(width, self.span)

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

    def status(self) -> str:
        """What the graphs captured, or why none run."""
        return self.graphs.status()

    def _run(self, tokens: Sequence[int], start: int) -> torch.Tensor:
        if len(tokens) <= self.graph_widths:
            return self.graphs.run(tokens, start, self.span)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + len(tokens), device=self.device)
        return self._forward(ids, positions, self.span)

    def _forward(self, input_ids: torch.Tensor, positions: torch.Tensor, bucket: int) -> torch.Tensor:
        return static_forward(self.model, self.spans[bucket], input_ids, positions)

    def _make_room(self, length: int) -> None:
        if length <= self.span:
            return
        if length > self.limit:
            raise ValueError(f"context of {length} tokens: the model holds {self.limit}")
        # Ahead of need: at least double, with room for the widest verify after this call.
        span = self.span * 2
        while span < min(length + self.graph_widths, self.limit):
            span *= 2
        span = min(span, self.limit)
        self.spans[span] = self.kv.grown(self.model, span)
        self.span = span
        self._drop_spans(keep=self.min_span)

    def _drop_spans(self, keep: int) -> None:
        """Free every span but `keep` and the one in use, and their graphs."""
        for span in [span for span in self.spans if span not in (keep, self.span)]:
            del self.spans[span]
            self.graphs.forget(span)


def static_kv_wanted(device: str) -> bool:
    """On by default where graphs pay (CUDA); SPECTUI_STATIC_KV=1 or 0 says so anywhere."""
    import os

    setting = os.environ.get("SPECTUI_STATIC_KV", "")
    if setting in ("0", "1"):
        return setting == "1"
    return torch.device(device).type == "cuda"


def verify_widths(k: int, auto: bool) -> list[int]:
    """The widths a reply verifies at: a plain step's 1 and k + 1, or every one adaptive k
    reaches (it stops at K_AUTO_MAX drafts). Others are captured when first run."""
    return list(range(1, K_AUTO_MAX + 2)) if auto else sorted({1, k + 1})


def use_static_caches(engine: SpeculativeEngine, k: int, auto: bool, graphs: bool | None = None,
                      capture: Capture | None = None) -> list[str]:
    """Put the target (and a draft model) of a just-built embedded engine on static caches and
    warm every width it will run, so the first reply runs as fast as the next. Returns what was
    switched; graphs_report(engine) says what captured. Models it cannot drive stay on
    kv.CachedModel. A capture that fails later (a span's first forward, mid-reply) turns that
    model's graphs off and says so in engine.info."""
    switched = []
    proposer = engine.proposer
    backend = cast("TorchBackend", engine.backend)

    def failed(_why: str) -> None:
        report_graphs(engine)

    if supports(backend.model) and not getattr(proposer, "needs_hidden", False):
        backend.target = warmed(StaticCachedModel(backend.model, graphs=graphs, capture=capture, on_failure=failed),
                                verify_widths(k, auto))
        switched.append("target")
    if static_draft(engine, graphs, capture, on_failure=failed):
        switched.append("draft")
    report_graphs(engine)
    return switched


def static_draft(engine: SpeculativeEngine, graphs: bool | None = None, capture: Capture | None = None,
                 on_failure: Callable[[str], None] | None = None) -> bool:
    """The engine's draft model (if it has one that fits) on a static cache, warmed; True if so.
    The proposer asks its draft for logits and resets only: CachedLogits, which this is."""
    from spectui.engines.speculative.proposers import DraftModelProposer

    proposer = engine.proposer
    if not isinstance(proposer, DraftModelProposer) or isinstance(proposer.draft, StaticCachedModel):
        return False
    draft_model = getattr(proposer.draft, "model", None)
    if draft_model is None or not supports(draft_model):
        return False
    proposer.draft = warmed(StaticCachedModel(draft_model, graphs=graphs, graph_widths=2, capture=capture,
                                              on_failure=on_failure), (1, 2))
    return True


def on_the_targets_path(engine: SpeculativeEngine, proposer: Proposer) -> Proposer:
    """A drafter added beside a just-built engine (the bench's), on the path its target runs: a
    draft model on a static cache where the target is on one, so a bench's arms compare like
    with like. Heads need the target's hidden states, which a static cache does not give."""
    from spectui.engines.speculative.proposers import DraftModelProposer

    if not isinstance(engine.target, StaticCachedModel):
        return proposer
    if getattr(proposer, "needs_hidden", False):
        raise UsageError(f"{proposer.method} heads read the target's hidden states, which its static cache does not "
                         "keep: run them with SPECTUI_STATIC_KV=0")
    if isinstance(proposer, DraftModelProposer) and not isinstance(proposer.draft, StaticCachedModel):
        draft_model = getattr(proposer.draft, "model", None)
        if draft_model is not None and supports(draft_model):
            proposer.draft = warmed(StaticCachedModel(draft_model, graph_widths=2), (1, 2))
    return proposer


def graphs_report(engine: SpeculativeEngine) -> str | None:
    """What the static caches' graphs captured, per model ("target widths 1-9; draft widths
    1-2"), or why none run; None where no model runs on a static cache."""
    from spectui.engines.speculative.proposers import DraftModelProposer

    models = {"target": engine.target}
    proposer = engine.proposer
    if isinstance(proposer, DraftModelProposer):
        models["draft"] = proposer.draft
    said = {name: model.status() for name, model in models.items() if isinstance(model, StaticCachedModel)}
    if not said:
        return None
    if len(set(said.values())) == 1 and next(iter(said.values())).startswith("off"):
        return next(iter(said.values()))  # one reason for both: said once
    return "; ".join(f"{name} {text}" for name, text in said.items())


def report_graphs(engine: SpeculativeEngine) -> None:
    """engine.info's kernels say what the graphs captured (the record's and F3's line)."""
    from dataclasses import replace

    kernels = engine.info.kernels
    if kernels is not None:
        engine.info = replace(engine.info, kernels=replace(kernels, graphs=graphs_report(engine)))


def warmed(model: StaticCachedModel, widths: Sequence[int]) -> StaticCachedModel:
    """One eager prompt-sized forward (kernel choice, allocator) and every graph width, on the
    empty cache; then forgotten. Inside inference mode: a capture records no autograd."""
    if model.graphs.on:
        with torch.inference_mode():
            model.logits([0] * 64, num_rows=1)
            model.warm_up(widths)
            model.reset()
    return model
