"""The static KV cache and the CUDA-graph path (issues 50, 60), on a CPU: graphs off, or the
capture injected (an eager stand-in that records how it was called, or one that fails). The
same logits and tokens as kv.CachedModel, the spans' growth and shrinking, the fallbacks and
what they report."""

from __future__ import annotations

import pytest
import torch

from spectui.core.engine import EngineInfo
from spectui.core.events import Control, Done, GenerationParams, Step
from spectui.engines.torch_backend.cuda_graphs import WidthGraphs, graphs_unavailable, spans
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
    small = StaticCachedModel(tiny_target, min_span=16, graphs=False, chunk=8)
    assert small.kv.keys[0].shape == (1, 2, 16, 16)  # [1, kv heads, span, head dim]
    chunked = logits_of(small)
    # 45 tokens and room for a verify of 17 after them: 64; the smallest span is kept
    assert small.span == 64 and sorted(small.spans) == [16, 64]
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
    graphs = WidthGraphs(lambda ids, positions, bucket: seen.append((ids.tolist(), positions.tolist())) or ids, "cpu")
    assert not graphs.on
    graphs.prepare(3)  # nothing to capture: no forward at load
    assert graphs.run([5, 6], 10).tolist() == [[5, 6]] and seen == [([[5, 6]], [10, 11])]


# --- the capture injected: what a CUDA graph would run, run eagerly on a CPU (issue 60)


class EagerReplay:
    """A capture's stand-in: runs the captured forward at each replay, and records whether the
    capture ran in inference mode and whether its output would hold autograd's graph."""

    def __init__(self, forward, width, device, tokens, start) -> None:
        self.forward, self.device = forward, device
        self.inference = torch.is_inference_mode_enabled()
        self.output = self.replay(tokens, start)
        self.requires_grad = self.output.requires_grad

    def replay(self, tokens, start):
        ids = torch.tensor([list(tokens)], device=self.device)
        return self.forward(ids, torch.arange(start, start + len(tokens), device=self.device))


class Captures:
    """capture=Captures(): every capture made, in order; with an error, the captures at spans
    from fail_from_span on raise it."""

    def __init__(self, error: Exception | None = None, fail_from_span: int = 0) -> None:
        self.made: list[EagerReplay] = []
        self.error, self.fail_from_span = error, fail_from_span

    def __call__(self, forward, width, device, tokens, start):
        if self.error is not None and self.span_of(forward) >= self.fail_from_span:
            raise self.error
        self.made.append(EagerReplay(forward, width, device, tokens, start))
        return self.made[-1]

    @staticmethod
    def span_of(forward) -> int:
        return forward.keywords["bucket"]  # a partial of the span's forward


def test_a_capture_that_fails_falls_back_to_eager_and_says_why_once():
    heard = []
    graphs = WidthGraphs(lambda ids, positions, bucket: positions, "cpu",
                         capture=Captures(RuntimeError("operation not permitted when stream is capturing\nmore")),
                         on_failure=heard.append)
    assert graphs.on and graphs.status() == "on, none captured yet"
    assert graphs.run([1, 2, 3], 4).tolist() == [4, 5, 6]  # eager, after the failed capture
    assert graphs.run([1], 9).tolist() == [9]
    said = "capture failed at width 3: RuntimeError: operation not permitted when stream is capturing"
    assert graphs.failed and graphs.disabled == said and heard == [said]  # the first failure, once
    assert graphs.status() == f"off ({said})" and graphs.widths() == []


@pytest.mark.parametrize("error", [torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                                   RuntimeError("CUDA error: out of memory")])
def test_out_of_memory_in_a_capture_is_raised_not_hidden_behind_eager(error):
    heard = []
    graphs = WidthGraphs(lambda ids, positions, bucket: positions, "cpu", capture=Captures(error), on_failure=heard.append)
    with pytest.raises(RuntimeError, match="out of memory"):
        graphs.run([1, 2], 0)
    assert graphs.on and not graphs.failed and heard == []


def test_the_widths_captured_are_said_as_ranges():
    assert spans([1, 2, 3, 4, 5, 6, 7, 8, 9]) == "widths 1-9"
    assert spans([1, 2, 5]) == "widths 1-2, 5" and spans([1]) == "width 1"


def draft_engine(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.core.engine import Kernels

    info = EngineInfo("embedded", "tiny", "tiny draft", "draft", "float32", "cpu", kernels=Kernels("torch", 2, "torch"))
    return torch_engine(tiny_target, tiny_tokenizer, torch_draft_proposer(tiny_draft), info)


def test_captures_at_load_run_in_inference_mode_and_hold_no_autograd(tiny_target, tiny_draft, tiny_tokenizer):
    assert any(p.requires_grad for p in tiny_target.parameters())  # a model as loaded: no help from it
    engine = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
    captures = Captures()
    assert use_static_caches(engine, 4, auto=True, capture=captures) == ["target", "draft"]
    assert len(captures.made) == 9 + 2  # the target's widths 1..9 (adaptive k stops at 8), the draft's 1, 2
    assert all(made.inference and not made.requires_grad for made in captures.made)


def test_what_captured_is_what_the_engine_info_says(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.core.record import kernels_record

    engine = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
    use_static_caches(engine, 4, auto=False, capture=Captures())
    assert engine.info.kernels.graphs == "target widths 1, 5 (span 256); draft widths 1-2 (span 256)"  # k 4: a plain step and a verify
    assert kernels_record(engine.info.kernels)["graphs"] == engine.info.kernels.graphs  # generate --json's
    failing = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
    use_static_caches(failing, 4, auto=False, capture=Captures(RuntimeError("CUDA error: operation not supported")))
    assert failing.info.kernels.graphs == "off (capture failed at width 1 (span 256): RuntimeError: CUDA error: operation not supported)"
    plain = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
    use_static_caches(plain, 4, auto=False)  # a CPU: what was switched on is not what captured
    assert plain.info.kernels.graphs == "off (CUDA graphs need a CUDA device, not cpu)"


def test_the_load_log_says_what_captured(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.engines.torch_backend.build import warm_static_caches

    engine = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
    said = []
    warm_static_caches(engine, 4, False, lambda stage, done, total: said.append(stage))
    assert said == ["note: static KV cache (target and draft); CUDA graphs: off (CUDA graphs need a CUDA device, not cpu)"]


def test_f3_says_what_captured():
    from types import SimpleNamespace

    from spectui.core.engine import Kernels
    from spectui.tui.screens.info import info_lines

    info = EngineInfo("embedded", "t", None, "ngram", "bfloat16", "cuda", kernels=Kernels("torch", graphs="target widths 1-9"))
    host = SimpleNamespace(engine=SimpleNamespace(info=info), k_from_engine=False, k_restarts_engine=False,
                           k_fixed_elsewhere=False, load_seconds=None)
    assert ("CUDA graphs", "target widths 1-9") in info_lines(host, {})  # type: ignore[arg-type]


# --- the attended span: a bucket, grown ahead of need, shrunk at reset (issue 60)


def test_spans_grow_ahead_of_need_keep_the_smallest_graphs_and_shrink_at_reset(tiny_target):
    captures = Captures()
    model = StaticCachedModel(tiny_target, min_span=16, capture=captures)
    model.warm_up([1, 2])
    assert model.graphs.widths(16) == [1, 2] and model.kv.capacity == 16
    model.logits(list(range(3, 21)), 1)  # 18 tokens (eager: wider than a graph), past the smallest span
    assert model.span == 64 and sorted(model.spans) == [16, 64]  # 18 + a verify of 17 ahead: 64
    model.logits(list(range(3, 22)), 1)
    assert model.graphs.widths(16) == [1, 2] and model.graphs.widths(64) == [1]  # nothing dropped, captured once
    model.logits(list(range(3, 70)) + [7, 8], 2)  # 69 tokens: 69 + 17 ahead needs 128
    model.logits(list(range(3, 70)) + [7, 8, 9], 1)
    assert model.span == 128 and sorted(model.spans) == [16, 128] and model.graphs.buckets() == [16, 128]
    model.reset()
    assert model.span == 16 and list(model.spans) == [16] and model.graphs.buckets() == [16]
    assert model.kv.keys[0].shape[2] == 16  # the next reply attends over 16 slots again
    model.logits([5, 6], 1)
    model.logits([5, 6, 7], 1)
    assert model.graphs.widths(16) == [1, 2] and len(captures.made) == 2 + 1 + 1  # the smallest's graphs replayed


def test_a_capture_that_fails_mid_reply_turns_graphs_off_and_the_info_says_so(tiny_target, tiny_draft, tiny_tokenizer):
    engine = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
    use_static_caches(engine, 2, auto=False, capture=Captures(RuntimeError("no capture past 256"), fail_from_span=512))
    assert engine.info.kernels.graphs == "target widths 1, 3 (span 256); draft widths 1-2 (span 256)"
    prompt = [3 + i % 200 for i in range(250)]
    events = list(engine.stream_ids(prompt, GenerationParams(max_tokens=24), Control(k=2)))
    assert isinstance(events[-1], Done) and events[-1].error is None  # the reply went on, eagerly
    assert engine.target.span == 512
    assert engine.info.kernels.graphs == ("target off (capture failed at width 3 (span 512): RuntimeError: no capture past 256); "
                                          "draft off (capture failed at width 2 (span 512): RuntimeError: no capture past 256)")


@pytest.mark.slow  # four tiny replies of 24 tokens after a 250-token prompt (about 15 s on a busy 2-core box)
def test_t0_replies_are_the_same_across_a_span_boundary_on_the_captured_path(tiny_target, tiny_draft, tiny_tokenizer):
    prompt = [3 + (i * 7) % 300 for i in range(245)]  # 245 + 24 tokens: from the 256 span to the 512
    replies = {}
    for static in (False, True):
        engine = draft_engine(tiny_target, tiny_draft, tiny_tokenizer)
        if static:
            use_static_caches(engine, 4, auto=False, capture=Captures())
        replies[static] = [stream_tokens(engine, prompt, k) for k in (0, 4)]
        if static:
            assert engine.target.span == 512 and engine.target.graphs.widths(512)  # crossed, and replayed there
    assert replies[True] == replies[False]
    assert replies[True][0] == replies[True][1]


# --- the bench's drafters, added beside a loaded target: on the target's path, or refused


def test_a_drafter_added_beside_a_static_target_runs_on_the_same_path(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.core.errors import UsageError
    from spectui.engines.torch_backend.static_kv import on_the_targets_path

    info = EngineInfo("embedded", "tiny", None, "ngram", "float32", "cpu")
    engine = torch_engine(tiny_target, tiny_tokenizer, NgramProposer(), info)
    dynamic = torch_draft_proposer(tiny_draft)
    assert on_the_targets_path(engine, dynamic).draft.__class__ is CachedModel  # a dynamic target: as it was
    assert use_static_caches(engine, 4, auto=True, graphs=False) == ["target"]
    assert isinstance(on_the_targets_path(engine, torch_draft_proposer(tiny_draft)).draft, StaticCachedModel)

    class Heads(NgramProposer):
        method = "medusa"
        needs_hidden = True

    with pytest.raises(UsageError, match="medusa heads read the target's hidden states"):
        on_the_targets_path(engine, Heads())
