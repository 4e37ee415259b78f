"""A conversation longer than the model's context, and memory running out: one clear line,
the work kept, the next reply possible."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from spectui.core.engine import EngineInfo
from spectui.engines.torch_backend.backend import torch_engine
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.prompt import ContextOverflow, fit_prompt
from spectui.core.errors import OutOfMemory, is_out_of_memory
from spectui.core.events import Control, GenerationParams, Step

from fake_engines import PlanEngine


def words(messages) -> list[int]:
    """One id per word: token counts a test can read off the text."""
    return [0 for message in messages for _ in message["content"].split()]


def chat(*contents: str, system: str | None = "be brief") -> list[dict]:
    opening = [{"role": "system", "content": system}] if system else []
    roles = ["user", "assistant"]
    return opening + [{"role": roles[i % 2], "content": text} for i, text in enumerate(contents)]


# fitting a conversation into the context


def test_a_conversation_that_fits_is_unchanged_and_the_reply_gets_the_room_left():
    messages = chat("a " * 10, "b " * 10, "c " * 10)
    fitted = fit_prompt(words, messages, max_tokens=100, context_length=64)
    assert len(fitted.ids) == 32 and fitted.dropped == 0
    assert fitted.max_tokens == 32  # 64 − 32: the reply stops at the context's end, not past it
    assert fit_prompt(words, messages, 100, None).max_tokens == 100  # no known context: no cut


def test_over_the_context_is_one_line_with_both_numbers():
    messages = chat("a " * 40, "b " * 40, "c " * 40)
    with pytest.raises(ContextOverflow) as caught:
        fit_prompt(words, messages, max_tokens=16, context_length=100)
    assert str(caught.value) == "the conversation is 122 tokens; the model holds 100 (23 too many to leave room for a reply)"
    assert (caught.value.prompt_tokens, caught.value.context_length) == (122, 100)


def test_truncation_drops_the_oldest_turns_in_pairs_and_keeps_the_system_and_last_message():
    messages = chat("old " * 30, "old reply " * 5, "mid " * 30, "mid reply " * 5, "now " * 20)
    seen = []

    def encode(kept):
        seen.append([m["content"].split()[0] for m in kept])
        return words(kept)

    fitted = fit_prompt(encode, messages, max_tokens=20, context_length=100, truncate=True)
    assert fitted.dropped == 2  # the oldest user message with its reply
    assert seen[-1] == ["be", "mid", "mid", "now"]
    assert len(fitted.ids) + fitted.max_tokens <= 100 and fitted.max_tokens == 20


def test_truncation_cannot_shorten_the_last_message():
    with pytest.raises(ContextOverflow, match="the last message alone is 152 tokens; the model holds 100"):
        fit_prompt(words, chat("a", "b", "x " * 150), max_tokens=8, context_length=100, truncate=True)


# the embedded engine


@pytest.fixture
def engine(tiny_target, tiny_tokenizer):
    info = EngineInfo("embedded", "tiny", None, "ngram", "float32", "cpu")
    return torch_engine(tiny_target, tiny_tokenizer, NgramProposer(1, 3), info)


def stream(engine, messages, **params):
    events = list(engine.stream(messages, GenerationParams(**params), Control(k=2)))
    return [e for e in events if isinstance(e, Step)], events[-1]


def test_the_engine_says_the_chat_is_over_its_context_and_resends_it_truncated(engine, tiny_tokenizer):
    assert engine.context_length == 512
    long_turn = "the quick brown fox jumps over the lazy dog " * 12
    turn_tokens = len(tiny_tokenizer(long_turn)["input_ids"])
    assert 256 < turn_tokens < 480, "two long turns overflow the context, one fits"
    messages = chat(long_turn, "ok", long_turn, "ok", "and now?", system=None)
    steps, done = stream(engine, messages, max_tokens=16)
    assert steps == [] and done.finish_reason == "error"
    prompt_tokens, context = done.context_overflow
    assert context == 512 and prompt_tokens > 512
    over = prompt_tokens - 511
    assert done.error == f"the conversation is {prompt_tokens:,} tokens; the model holds 512 ({over:,} too many to leave room for a reply)"

    steps, done = stream(engine, messages, max_tokens=16, truncate=True)
    assert done.finish_reason in ("stop", "length") and done.dropped_messages == 2
    assert turn_tokens < len(done.prompt_token_ids) <= 512 - 16 and steps


def test_a_reply_stops_at_the_end_of_the_context(engine, tiny_tokenizer):
    prompt = "the quick brown fox jumps over the lazy dog " * 18
    prompt_tokens = len(tiny_tokenizer(prompt)["input_ids"])
    assert 470 < prompt_tokens < 505, "the prompt should leave a little room"
    steps, done = stream(engine, chat(prompt, system=None), max_tokens=200, stop_token_ids=())
    emitted = sum(len(s.token_ids) for s in steps)
    room = 512 - prompt_tokens
    assert (done.finish_reason, emitted) == ("length", room) or (done.finish_reason == "stop" and emitted < room)


# out of memory


@pytest.mark.parametrize(
    "error, expected",
    [
        (MemoryError(), True),
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes; failed to allocate"), True),
        (RuntimeError("shape mismatch"), False),
        (ValueError("out of memory"), False),  # only allocators say it in text, and they raise RuntimeError
    ],
)
def test_out_of_memory_is_recognised(error, expected):
    assert is_out_of_memory(error) is expected


def test_out_of_memory_while_loading_is_one_line_with_advice(monkeypatch):
    from spectui.cli.app import app as cli
    from spectui.engines import factory

    def exhausted(options, models, progress):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 14.00 GiB\nmore lines from the allocator")

    monkeypatch.setattr(factory, "_build", exhausted)
    with pytest.raises(OutOfMemory, match=r"^out of memory while loading the models \(CUDA out of memory\. .*\): try --dtype int8"):
        factory.build_engine(factory.EngineOptions(), None)
    with pytest.raises(OutOfMemory, match="try a smaller --max-model-len"):  # vLLM has other knobs
        factory.build_engine(factory.EngineOptions(engine="vllm"), None)
    said = OutOfMemory("out of memory while loading the draft: try --dtype int8")
    monkeypatch.setattr(factory, "_build", lambda options, models, progress: (_ for _ in ()).throw(said))
    with pytest.raises(OutOfMemory) as caught:
        factory.build_engine(factory.EngineOptions(), None)
    assert caught.value is said  # not wrapped twice
    monkeypatch.setattr(factory, "_build", exhausted)
    result = CliRunner().invoke(cli, ["generate", "hello"])
    assert result.exit_code == OutOfMemory.exit_code
    assert result.stderr.strip().startswith("spectui: error: out of memory while loading the models")
    assert len(result.stderr.strip().splitlines()) == 1


def test_out_of_memory_mid_reply_keeps_the_steps_and_the_next_reply_runs(engine, tiny_tokenizer, monkeypatch):
    from spectui.engines.torch_backend import kv

    real_logits = kv.CachedModel.logits
    calls = {"n": 0}

    def logits_that_run_out(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB")
        return real_logits(self, *args, **kwargs)

    monkeypatch.setattr(kv.CachedModel, "logits", logits_that_run_out)
    steps, done = stream(engine, chat("def add(a, b):", system=None), max_tokens=40, stop_token_ids=())
    assert len(steps) >= 2, "the steps before the failure stay with the caller"
    assert done.finish_reason == "error"
    assert done.error.startswith("out of memory while generating (CUDA out of memory.")
    assert "try a smaller k" in done.error
    steps, done = stream(engine, chat("def add(a, b):", system=None), max_tokens=8)
    assert done.finish_reason in ("stop", "length") and steps


def test_the_tui_worker_names_out_of_memory_from_any_engine():
    from spectui.tui.messages import ReplyEnded
    from spectui.tui.worker import stream_reply

    exhausted = PlanEngine([None], raise_after=0, error=torch.OutOfMemoryError("CUDA out of memory"))
    posted = []
    stream_reply(exhausted, [], GenerationParams(), Control(), 1, posted.append, lambda step: None)
    [ended] = [m for m in posted if isinstance(m, ReplyEnded)]
    assert ended.error.startswith("out of memory while generating") and "smaller k" in ended.error
