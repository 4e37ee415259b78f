"""Long prompts you can see and stop: the loop prefills a long prompt in chunks, says how far
it is (Prefill events) and hears a cancel between chunks; a follow-up question prefills only
what the cache does not hold. On a tiny random GGUF through libllama: seconds, no weights."""

from __future__ import annotations

import pytest

from spectui.core.events import Control, Done, GenerationParams, Prefill, Step

from tiny_gguf import count_decodes

pytest.importorskip("llama_cpp_py_sync")

PARAMS = GenerationParams(max_tokens=6, top_p=1.0, seed=0)
PROMPT = [(7 * i + 3) % 90 + 5 for i in range(300)]  # 300 ids, none a stop token of the tiny tokenizer


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "target.gguf")


@pytest.fixture
def engine(tiny_gguf, tiny_tokenizer):
    from spectui.engines.ggml.load import load_ggml_engine

    engine = load_ggml_engine(tiny_gguf, tiny_tokenizer, "ngram", threads=1)
    engine.stop_ids = set()  # a random model may write its stop token at once: these replies run to max_tokens
    engine.decoded = count_decodes(engine)  # tokens per llama_decode batch the target ran
    # The loop's chunks on both paths (a fresh long prompt's are llama.cpp's batches, 512:
    # tests/test_fast_prefill.py; this tiny model's 300-token prompt would go whole)
    engine.target.fast_chunk = engine.target.prefill_chunk
    yield engine
    engine.close()


def reply_tokens(events) -> list[int]:
    return [t for event in events if isinstance(event, Step) for t in event.token_ids]


def until_first_step(engine, stream) -> tuple[list, int]:
    """The stream's events, and how many decode calls had run when its first Step came."""
    events, calls = [], None
    for event in stream:
        if calls is None and isinstance(event, Step):
            calls = len(engine.decoded)
        events.append(event)
    return events, calls or 0


def test_a_long_prompt_prefills_in_chunks_and_says_how_far_it_is(engine):
    chunk = engine.target.prefill_chunk
    events, calls = until_first_step(engine, engine.stream_ids(PROMPT, PARAMS, Control(0, 0.0)))
    progress = [event for event in events if isinstance(event, Prefill)]
    assert progress == [Prefill(done, len(PROMPT)) for done in range(0, len(PROMPT), chunk)]
    first_step = next(i for i, event in enumerate(events) if isinstance(event, Step))
    assert all(isinstance(event, Prefill) for event in events[:first_step])  # all of it before the first token
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "length"
    # Chunks of `chunk` tokens, then the rest with the first step: no token twice (a long
    # prompt's rest runs in two calls: all but its last token in the second context).
    chunks = len(range(chunk, len(PROMPT), chunk))
    assert chunks >= 2 and engine.decoded[:chunks] == [chunk] * chunks
    assert sum(engine.decoded[:calls]) == len(PROMPT)
    # The same reply as the prompt in one go (the tiny model's argmax does not hang on rounding).
    engine.forget_prompts()
    engine.target.prefill_chunk = engine.target.fast_chunk = None
    whole = list(engine.stream_ids(PROMPT, PARAMS, Control(0, 0.0)))
    assert not any(isinstance(event, Prefill) for event in whole)
    assert reply_tokens(whole) == reply_tokens(events) and len(reply_tokens(events)) == PARAMS.max_tokens


def test_a_short_prompt_says_nothing_of_its_prefill(engine):
    events = list(engine.stream_ids(PROMPT[: engine.target.prefill_chunk], PARAMS, Control(4, 0.0)))
    assert not any(isinstance(event, Prefill) for event in events)
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "length"


def test_a_cancel_during_the_prefill_ends_the_reply_before_the_prompt_is_in(engine):
    control = Control(4, 0.0)
    events = []
    for event in engine.stream_ids(PROMPT, PARAMS, control):
        events.append(event)
        if isinstance(event, Prefill) and event.done >= 128:
            control.cancel()  # Esc, heard before the next chunk
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "cancelled"
    assert not any(isinstance(event, Step) for event in events)
    assert sum(engine.decoded) == 128 < len(PROMPT)
    # What did go in stays cached: the same prompt again runs only the rest.
    engine.decoded.clear()
    again, calls = until_first_step(engine, engine.stream_ids(PROMPT, PARAMS, Control(4, 0.0)))
    assert [event for event in again if isinstance(event, Prefill)][0] == Prefill(0, len(PROMPT) - 128)
    assert sum(engine.decoded[:calls]) == len(PROMPT) - 128


def test_a_cancel_inside_a_chunk_stops_its_forward_midway_and_keeps_the_cache_whole(engine):
    """Esc does not wait for a chunk's end on ggml: libllama asks between the graph's nodes."""
    import numpy

    target = engine.target
    asked_whole: list[int] = []
    assert target.prefill(PROMPT[:128], stop=lambda: asked_whole.append(1) is not None)  # never says stop
    nodes = len(asked_whole)  # asked once per node of the chunk's graph
    assert nodes > 20
    whole_rows = target.logits(PROMPT[:200], num_rows=1)
    target.reset()
    asked: list[int] = []
    assert not target.prefill(PROMPT[:128], stop=lambda: len(asked) >= 3 or asked.append(1) is not None)
    assert len(asked) == 3  # stopped at the third node it reached, not after the other ~nodes
    assert target.model.cached == 0 and target.seen == []  # the stopped call left nothing half-written
    assert numpy.array_equal(target.logits(PROMPT[:200], num_rows=1), whole_rows)


def test_a_follow_up_question_prefills_only_its_new_tokens(engine, tiny_tokenizer):
    long_message = " ".join(f"line {i} says x{i % 7}" for i in range(60))
    first_turn = [{"role": "user", "content": long_message}]
    first_prompt = engine.prompt_ids(first_turn)
    assert len(first_prompt) > 2 * engine.target.prefill_chunk
    first = list(engine.stream(first_turn, PARAMS, Control(0, 0.0)))
    reply_ids = reply_tokens(first)
    follow_up = first_turn + [{"role": "assistant", "content": tiny_tokenizer.decode(reply_ids)},
                              {"role": "user", "content": "and the last line?"}]
    second_prompt = engine.prompt_ids(follow_up)
    engine.decoded.clear()
    second = list(engine.stream(follow_up, PARAMS, Control(0, 0.0)))
    assert isinstance(second[-1], Done) and second[-1].finish_reason == "length"
    prefill_tokens = engine.decoded[0]  # the first step's batch: the new tokens, and nothing before them
    assert not any(isinstance(event, Prefill) for event in second)  # too few new tokens to say
    assert prefill_tokens <= len(second_prompt) - len(first_prompt)
    assert prefill_tokens < engine.target.prefill_chunk < len(first_prompt)


def long_message(engine, tokens: int) -> list[dict]:
    """One user message whose prompt is at least `tokens` long (the tiny models hold 512)."""
    words = 0
    while len(engine.prompt_ids([{"role": "user", "content": "w " * words}])) < tokens:
        words += 8
    return [{"role": "user", "content": "w " * words}]


@pytest.mark.slow  # torch and transformers to import, two replies on the tiny models
def test_the_torch_engine_prefills_in_chunks_too_and_writes_the_same_reply():
    from tiny_models import build_tiny_engine

    engine = build_tiny_engine()
    chunk = engine.target.prefill_chunk
    messages = long_message(engine, chunk + 100)
    total = len(engine.prompt_ids(messages))
    params = GenerationParams(max_tokens=8, top_p=1.0, seed=0)
    events = list(engine.stream(messages, params, Control(3, 0.0)))
    assert [event for event in events if isinstance(event, Prefill)] == [
        Prefill(done, total) for done in range(0, total, chunk)]
    engine.forget_prompts()
    engine.target.prefill_chunk = None
    assert reply_tokens(engine.stream(messages, params, Control(3, 0.0))) == reply_tokens(events)
