"""The static KV cache and the CUDA-graph path (issue 50), on a CPU with graphs off: the same
logits and tokens as kv.CachedModel, the cache's shapes and growth, and the fallbacks."""

from __future__ import annotations

import pytest
import torch

from spectui.core.engine import EngineInfo
from spectui.core.events import Control, GenerationParams, Step
from spectui.engines.torch_backend import cuda_graphs
from spectui.engines.torch_backend.cuda_graphs import WidthGraphs, graphs_unavailable
from spectui.engines.torch_backend.backend import torch_engine
from spectui.engines.torch_backend.kv import CachedModel
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.torch_backend.backend import torch_draft_proposer
from spectui.engines.torch_backend.static_kv import StaticCachedModel, static_kv_wanted, use_static_caches

# (token_ids, num_rows) as the loop asks them: a prompt, plain steps, a verify of 4 drafts,
# a rollback that keeps two of them, a draft model catching up two tokens.
PROMPT = list(range(3, 40))
CALLS = [
    (PROMPT, 1),
    (PROMPT + [50], 1),
    (PROMPT + [50, 7, 8, 9, 10], 5),
    (PROMPT + [50, 7, 8, 61, 62, 63], 4),
    (PROMPT + [50, 7, 8, 61, 62, 63, 70, 71], 1),
]


def logits_of(model, calls=CALLS):
    return [model.logits(ids, rows) for ids, rows in calls]


def test_the_static_cache_gives_the_dynamic_caches_logits(tiny_target):
    dynamic = logits_of(CachedModel(tiny_target))
    static = logits_of(StaticCachedModel(tiny_target, graphs=False))
    for a, b in zip(dynamic, static):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
        assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_prompts_in_chunks_and_a_cache_that_grows_change_nothing(tiny_target):
    whole = logits_of(StaticCachedModel(tiny_target, graphs=False))
    small = StaticCachedModel(tiny_target, capacity=16, graphs=False, chunk=8)
    assert small.kv.keys[0].shape == (1, 2, 16, 16)  # [1, kv heads, capacity, head dim]
    chunked = logits_of(small)
    assert small.kv.capacity == 64 and len(small.kv.keys) == tiny_target.config.num_hidden_layers
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_a_context_past_the_model_is_refused(tiny_target):
    model = StaticCachedModel(tiny_target, graphs=False)
    with pytest.raises(ValueError, match="holds 512"):
        model.logits(list(range(600)), 1)


def stream_tokens(engine, prompt_ids, k):
    steps = engine.stream_ids(prompt_ids, GenerationParams(max_tokens=24), Control(k=k))
    return [t for event in steps if isinstance(event, Step) for t in event.token_ids]


@pytest.mark.slow  # two tiny replies per path and k (about 30 s on a busy 2-core box)
@pytest.mark.parametrize("method", ["draft", "ngram"])
def test_the_loop_emits_the_same_tokens_with_and_without_the_static_path(tiny_target, tiny_draft, tiny_tokenizer, method):
    prompt_ids = tiny_tokenizer("def add(a, b):")["input_ids"]
    info = EngineInfo("embedded", "tiny", None, method, "float32", "cpu")
    replies = {}
    for static in (False, True):
        proposer = torch_draft_proposer(tiny_draft) if method == "draft" else NgramProposer(1, 3)
        engine = torch_engine(tiny_target, tiny_tokenizer, proposer, info)
        if static:
            assert use_static_caches(engine, 4, False, graphs=False) == (["target", "draft"] if method == "draft" else ["target"])
            assert isinstance(engine.target, StaticCachedModel)
        replies[static] = [stream_tokens(engine, prompt_ids, k) for k in (0, 4)]
    assert replies[True] == replies[False]
    assert replies[True][0] == replies[True][1]  # T = 0: speculation changes no token


def test_a_drafter_that_reads_hidden_states_keeps_the_dynamic_cache(tiny_target, tiny_tokenizer):
    class Heads(NgramProposer):
        needs_hidden = True

    engine = torch_engine(tiny_target, tiny_tokenizer, Heads(), EngineInfo("embedded", "tiny", None, "medusa", "float32", "cpu"))
    assert use_static_caches(engine, 4, False, graphs=False) == []
    assert isinstance(engine.target, CachedModel)


def test_the_static_path_is_on_for_cuda_and_said_otherwise(monkeypatch):
    monkeypatch.delenv("SPECTUI_STATIC_KV", raising=False)
    assert static_kv_wanted("cuda:0") and not static_kv_wanted("cpu")
    monkeypatch.setenv("SPECTUI_STATIC_KV", "1")
    assert static_kv_wanted("cpu")
    monkeypatch.setenv("SPECTUI_STATIC_KV", "0")
    assert not static_kv_wanted("cuda")


def test_graphs_are_off_without_cuda_and_the_forward_runs_eagerly(monkeypatch):
    monkeypatch.delenv("SPECTUI_CUDA_GRAPHS", raising=False)
    assert "CUDA device" in graphs_unavailable("cpu")
    monkeypatch.setenv("SPECTUI_CUDA_GRAPHS", "0")
    assert graphs_unavailable("cuda") == "SPECTUI_CUDA_GRAPHS=0"
    seen = []
    graphs = WidthGraphs(lambda ids, positions: seen.append((ids.tolist(), positions.tolist())) or ids, "cpu")
    assert not graphs.on
    graphs.prepare(3)  # nothing to capture: no forward at load
    assert graphs.run([5, 6], 10).tolist() == [[5, 6]] and seen == [([[5, 6]], [10, 11])]


def test_a_capture_that_fails_falls_back_to_eager_for_good(monkeypatch):
    monkeypatch.setattr(cuda_graphs, "graphs_unavailable", lambda device: "")

    class Uncapturable:
        def __init__(self, *args):
            raise RuntimeError("operation not permitted when stream is capturing\nmore")

    monkeypatch.setattr(cuda_graphs, "CapturedWidth", Uncapturable)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: object())
    graphs = WidthGraphs(lambda ids, positions: positions, "cpu")
    assert graphs.on
    assert graphs.run([1, 2, 3], 4).tolist() == [4, 5, 6]
    assert graphs.disabled == "capture failed: operation not permitted when stream is capturing"
    assert graphs.run([1], 9).tolist() == [9]
