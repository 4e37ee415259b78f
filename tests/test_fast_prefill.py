"""A long prompt prefilled at llama.cpp's defaults in a second context, its cache moved into the
exact context (spectui.engines.ggml.fast_prefill): the conversion of the serialised cache, the
move on a tiny random GGUF (seconds, no weights), and T = 0 identity after it on SmolLM2."""

from __future__ import annotations

from typing import Any

import numpy
import pytest

from spectui.core.events import Control, Done, GenerationParams, Step
from spectui.engines.ggml.fast_prefill import KvLayout, StateLayoutError, f16_to_bf16, values_to_bf16

PROMPT = [(7 * i + 3) % 90 + 5 for i in range(300)]  # as tests/test_prefill.py: no stop token of the tiny tokenizer


def test_f16_to_bf16_rounds_every_f16_value_to_nearest_even():
    torch = pytest.importorskip("torch")
    values = numpy.arange(1 << 16, dtype=numpy.uint32).astype(numpy.uint16).view(numpy.float16)
    ours = f16_to_bf16(values)
    theirs = torch.from_numpy(values.astype(numpy.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(numpy.uint16)
    finite = ~numpy.isnan(values)
    assert numpy.array_equal(ours[finite], theirs[finite])
    back = (ours[~finite].astype(numpy.uint32) << 16).view(numpy.float32)
    assert numpy.isnan(back).all()  # a NaN stays a NaN
    assert f16_to_bf16(numpy.array([1.0, -2.5], dtype=numpy.float16)).tolist() == [0x3F80, 0xC020]


def serialised(front: bytes, layers: int, cells: int, keys: numpy.ndarray, values: numpy.ndarray,
               value_type: int = 1, value_row: int | None = None) -> numpy.ndarray:
    """A state as llama_state_seq_get_data lays it out, behind `front` (the cells' positions)."""
    parts = [numpy.frombuffer(front, dtype=numpy.uint8)]
    for kind, data, row in ((1, keys, keys.shape[-1] * 2), (value_type, values, value_row or values.shape[-1] * 2)):
        for layer in range(layers):
            parts += [numpy.array([kind], numpy.int32).view(numpy.uint8), numpy.array([row], numpy.uint64).view(numpy.uint8),
                      data[layer].astype(numpy.float16).view(numpy.uint8).ravel()]
    return numpy.concatenate(parts)


def test_the_values_become_bf16_and_everything_else_stays():
    rng = numpy.random.default_rng(0)
    layers, cells, width = 2, 3, 4
    keys = rng.standard_normal((layers, cells, width)).astype(numpy.float16)
    values = rng.standard_normal((layers, cells, width)).astype(numpy.float16)
    front = bytes(range(37))
    state = serialised(front, layers, cells, keys, values)
    before = state.copy()
    values_to_bf16(state, KvLayout(layers, 2 * width, 2 * width), cells)
    keys_end = len(front) + layers * (12 + cells * 2 * width)
    assert numpy.array_equal(state[:keys_end], before[:keys_end])  # positions and keys untouched
    at = keys_end
    for layer in range(layers):
        assert state[at:at + 4].view(numpy.int32)[0] == 30  # GGML_TYPE_BF16
        assert state[at + 4:at + 12].view(numpy.uint64)[0] == 2 * width
        converted = state[at + 12:at + 12 + cells * 2 * width].view(numpy.uint16)
        assert numpy.array_equal(converted, f16_to_bf16(values[layer].ravel()))
        at += 12 + cells * 2 * width
    assert at == len(state)


@pytest.mark.parametrize("change", ["row", "type", "short"])
def test_a_state_laid_out_otherwise_is_refused_not_misread(change):
    keys = numpy.zeros((2, 3, 4), numpy.float16)
    layout = KvLayout(2, 8, 8)
    if change == "row":  # a transposed value cache: (type, element bytes, width) where the row was
        state = serialised(b"x" * 40, 2, 3, keys, keys, value_row=2 | (4 << 32))
    elif change == "type":  # values already in another type
        state = serialised(b"x" * 40, 2, 3, keys, keys, value_type=8)
    else:
        state = serialised(b"", 2, 3, keys, keys)[:50]
    with pytest.raises(StateLayoutError):
        values_to_bf16(state, layout, 3)


# ---------------------------------------------------------------- on a tiny GGUF


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    pytest.importorskip("llama_cpp_py_sync")
    from tiny_gguf import write_tiny_gguf

    from spectui.engines.ggml.lib import LlamaModel

    model = LlamaModel(write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "target.gguf"), context=1024, threads=1)
    yield model
    model.close()


def chunked_rows(cached: Any, prompt: list[int], rows: int = 1) -> numpy.ndarray:
    """The loop's way in: 64-token chunks, then the last rows with the first step."""
    for end in range(64, len(prompt), 64):
        assert cached.prefill(prompt[:end], stop=lambda: False)
    return cached.logits(prompt, rows)


def test_a_long_prompt_runs_in_the_second_context_and_its_cache_moves_in(tiny_model: Any):
    from spectui.engines.ggml.cached import LlamaCached

    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    for end in range(64, len(PROMPT), 64):
        assert cached.prefill(PROMPT[:end], stop=lambda: False)
        assert cached.pending is not None and tiny_model.cached == 0  # nothing in the exact context yet
    row = cached.logits(PROMPT, 1)
    assert cached.pending is None and cached.fast_prefill  # moved, and read as this module reads it
    assert tiny_model.cached == len(PROMPT) and cached.seen == PROMPT
    exact = LlamaCached(tiny_model, rows=3)
    exact.reset()
    slow = chunked_rows(exact, PROMPT)
    assert row.shape == slow.shape and int(row.argmax()) == int(slow.argmax())
    assert numpy.abs(row - slow).max() < 0.05 * numpy.abs(slow).max()  # the prefill's rounding moved, not more
    # After the move the exact context stays batch-invariant: a verify of 3 = three plain steps.
    tail = [11, 12, 13]
    cached.reset()
    chunked_rows(cached, PROMPT)
    together = cached.logits(PROMPT + tail, 3)
    alone = [cached.logits(PROMPT + tail[:i + 1], 1)[0] for i in range(3)]
    assert all(numpy.array_equal(together[i], alone[i]) for i in range(3))


def test_a_prefill_stopped_in_the_second_context_goes_on_from_what_it_kept(tiny_model):
    from spectui.engines.ggml.cached import LlamaCached

    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    whole = chunked_rows(cached, PROMPT)
    cached.reset()
    assert cached.prefill(PROMPT[:64], stop=lambda: False)
    asked: list[int] = []
    assert not cached.prefill(PROMPT[:128], stop=lambda: len(asked) >= 3 or asked.append(1) is not None)
    assert cached.seen == PROMPT[:64] and cached.pending is not None  # the stopped call left nothing half-written
    assert numpy.array_equal(chunked_rows(cached, PROMPT), whole)


def test_a_state_that_does_not_read_falls_back_to_the_exact_prefill(tiny_model, monkeypatch):
    from spectui.engines.ggml import fast_prefill
    from spectui.engines.ggml.cached import LlamaCached

    exact = LlamaCached(tiny_model, rows=3)
    exact.reset()
    slow = chunked_rows(exact, PROMPT)

    def unreadable(state: numpy.ndarray, layout: KvLayout, cells: int) -> None:
        raise StateLayoutError("another libllama")

    monkeypatch.setattr(fast_prefill, "values_to_bf16", unreadable)
    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    row = chunked_rows(cached, PROMPT)
    assert not cached.fast_prefill and tiny_model.cached == len(PROMPT)
    assert numpy.array_equal(row, slow)  # the same tokens ran again in the exact context


def test_a_short_prompt_or_a_conversation_going_on_stays_in_the_exact_context(tiny_model):
    from spectui.engines.ggml.cached import LlamaCached

    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    cached.logits(PROMPT[:60], 1)
    assert cached.pending is None and tiny_model.cached == 60
    assert cached.prefill(PROMPT[:100], stop=lambda: False)  # 40 new tokens: too few
    assert cached.pending is None and tiny_model.cached == 100
    assert cached.prefill(PROMPT[:250], stop=lambda: False)  # 150 new after 100 cached: a follow-up
    assert cached.pending is None and tiny_model.cached == 250


def test_a_new_chat_sharing_only_the_templates_first_lines_prefills_fast_from_the_start(tiny_model):
    from spectui.engines.ggml.cached import LlamaCached

    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    cached.logits(PROMPT[:40], 1)  # the last chat: 40 tokens, 20 of them the template's
    other = PROMPT[:20] + [token + 1 for token in PROMPT[20:200]]
    assert cached.prefill(other[:84], stop=lambda: False)
    assert cached.pending is not None and cached.seen == other[:84] and tiny_model.cached == 0
    cached.logits(other, 1)
    assert cached.pending is None and tiny_model.cached == len(other) and cached.fast_prefill


# ---------------------------------------------------------------- T = 0 on real weights


@pytest.mark.real_weights
def test_after_a_fast_prefill_every_k_writes_the_plain_reply(smollm2_ggml):
    """The default engine prefills a long prompt fast; the replies after it at every k are the
    plain reply (SmolLM2 drafting for itself, so drafts are accepted)."""
    preamble = " ".join(f"Rule {i}: answer in plain words, no more than needed." for i in range(20))
    messages = [{"role": "system", "content": preamble},
                {"role": "user", "content": "List the numbers one to twelve in words, one per line."}]
    engine = smollm2_ggml.with_method("draft")
    target = engine.backend.target
    assert target.fast_prefill and len(engine.prompt_ids(messages)) > 4 * target.prefill_chunk
    replies = []
    for control in (Control(0, 0.0), Control(4, 0.0), Control(4, 0.0, auto=True)):
        engine.forget_prompts()
        landed = []
        original = target._land
        target._land = lambda: (landed.append(target.pending is not None), original())[1]
        try:
            events = list(engine.stream(messages, GenerationParams(max_tokens=40, top_p=1.0, seed=0), control))
        finally:
            del target._land
        assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length")
        assert any(landed) and target.fast_prefill  # this reply's prompt went through the second context
        replies.append([t for event in events if isinstance(event, Step) for t in event.token_ids])
    assert replies[1] == replies[0] and replies[2] == replies[0]


# ---------------------------------------------------------------- what a fast prefill costs (issue 59)


def test_the_loop_prefills_a_fresh_long_prompt_in_llamacpps_batches_and_a_follow_up_in_chunks(tiny_model):
    """64-token calls cost the second context twice the CPU of llama.cpp's 512-token batches
    beside busy neighbours (benchmarks/prefill_parts.py): a prompt it takes goes in those."""
    from spectui.engines.ggml.cached import LlamaCached
    from spectui.engines.speculative.loop import prefill_in_chunks

    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    assert cached.prefill_chunk_for(PROMPT) == tiny_model.batch == 512 and cached.prefill_chunk == 64
    cached.fast_chunk = 128  # at 512 this tiny prompt would go whole
    assert [event.done for event in prefill_in_chunks(cached, PROMPT, Control(0, 0.0))] == [0, 128, 256]
    assert cached.pending is not None and cached.seen == PROMPT[:256]
    cached.logits(PROMPT, 1)
    follow_up = PROMPT + [token + 1 for token in PROMPT[:200]]  # a conversation going on: the exact path
    assert cached.prefill_chunk_for(follow_up) == 64
    assert [event.done for event in prefill_in_chunks(cached, follow_up, Control(0, 0.0))] == [0, 64, 128, 192]
    assert cached.pending is None and tiny_model.cached == len(follow_up) - 8


def test_the_second_context_is_sized_to_the_prompt_and_grows_to_the_same_cache(tiny_model, monkeypatch):
    from spectui.engines.ggml import fast_prefill
    from spectui.engines.ggml.cached import LlamaCached

    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    whole = chunked_rows(cached, PROMPT)  # 1,024 cells from the start: the model's whole context
    monkeypatch.setattr(fast_prefill, "CELLS_STEP", 256)
    grown: list[int] = []
    original = fast_prefill.FastPrefill.grown
    monkeypatch.setattr(fast_prefill.FastPrefill, "grown",
                        lambda self, model, cells: (grown.append(cells), original(self, model, cells))[1])
    cached.reset()
    assert cached.prefill(PROMPT[:64], stop=lambda: False)
    assert cached.pending is not None and cached.pending.cells == 256
    row = chunked_rows(cached, PROMPT)
    assert grown == [299] and tiny_model.cached == len(PROMPT)  # 299 tokens into 256 cells: moved into 512
    assert numpy.array_equal(row, whole)


def test_the_second_context_asks_for_no_logits_row_while_it_prefills(tiny_model, monkeypatch):
    """Each row read the whole output matrix (~190 MB on the 1.5B), once per call, for nothing."""
    from spectui.engines.ggml import fast_prefill
    from spectui.engines.ggml.cached import LlamaCached

    rows: list[int] = []
    original = fast_prefill.decode_batches

    def counted(lib: Any, context: Any, tokens: list[int], start: int, batch: int, first_row: int) -> None:
        rows.append(len(tokens) - first_row)
        original(lib, context, tokens, start, batch, first_row)

    monkeypatch.setattr(fast_prefill, "decode_batches", counted)
    cached = LlamaCached(tiny_model, rows=3, fast_prefill=True)
    cached.reset()
    chunked_rows(cached, PROMPT)
    assert len(rows) == 5 and set(rows) == {0}


def test_a_draft_models_prompt_goes_through_its_own_second_context(tiny_model):
    from spectui.engines.ggml.backend import ggml_draft_proposer

    proposer: Any = ggml_draft_proposer(tiny_model, tiny_model.vocab_size)
    draft = proposer.draft
    opened: list[int] = []
    original = draft.open_prefill
    draft.open_prefill = lambda cells: (opened.append(cells), original(cells))[1]
    draft.reset()
    proposer.prefill(PROMPT)
    assert opened == [len(PROMPT) - 1] and draft.pending is None and tiny_model.cached == len(PROMPT)
