"""llama.cpp as a bench anchor: its speculative loop's bookkeeping on fake models, the glibc
shim of the wheel's libraries, and (real weights) SmolLM2 through libllama."""

from __future__ import annotations

import struct

import numpy
import pytest

from spectui.bench.anchors.llamacpp import draft_tokens, llamacpp_arms, plain_reply, speculative_reply
from spectui.bench.runs import Arm
from spectui.core.events import GenerationParams, Source

from fake_engines import Ticks

VOCAB = 11
STOP = 0


def rule(context: list[int]) -> int:
    """The fake target's next token: a function of the whole context, so a cache that holds
    the wrong tokens (a rollback off by one) writes a different reply."""
    return 1 + (sum(t * (i + 1) for i, t in enumerate(context[-4:])) + len(context)) % (VOCAB - 1)


class FakeModel:
    """decode/keep/clear/cached as spectui.engines.ggml.lib.LlamaModel has them."""

    def __init__(self, wrong_every: int = 0, doubt_every: int = 0, stop_after: int | None = None) -> None:
        self.cache: list[int] = []
        self.wrong_every, self.doubt_every, self.stop_after = wrong_every, doubt_every, stop_after
        self.calls: list[int] = []  # tokens per decode call

    @property
    def cached(self) -> int:
        return len(self.cache)

    def clear(self) -> None:
        self.cache = []

    def keep(self, positions: int) -> None:
        del self.cache[positions:]

    def decode(self, tokens, rows):
        self.calls.append(len(tokens))
        self.cache += list(tokens)
        out = numpy.zeros((rows, VOCAB), dtype=numpy.float32)
        for row in range(rows):
            context = self.cache[: len(self.cache) - rows + row + 1]
            token = rule(context)
            if self.stop_after is not None and len(context) >= self.stop_after:
                token = STOP
            if self.wrong_every and len(context) % self.wrong_every == 0:
                token = 1 + token % (VOCAB - 1)  # a draft that is wrong here
            out[row, token] = 2.0 if self.doubt_every and len(context) % self.doubt_every == 0 else 20.0
        return out


PROMPT = [3, 5, 7, 2]


def reference(max_tokens: int, stop_after: int | None = None) -> list[int]:
    context, out = list(PROMPT), []
    while len(out) < max_tokens:
        token = STOP if stop_after is not None and len(context) >= stop_after else rule(context)
        out.append(token)
        context.append(token)
        if token == STOP:
            break
    return out


@pytest.mark.parametrize("k", [1, 2, 4, 7])
@pytest.mark.parametrize("wrong_every", [0, 3, 5])
def test_greedy_speculation_writes_the_plain_reply(k, wrong_every):
    params = GenerationParams(max_tokens=40)
    plain = plain_reply(FakeModel(), PROMPT, params, 0.0, {STOP}, Ticks())
    assert plain.token_ids == reference(40)
    reply = speculative_reply(FakeModel(), FakeModel(wrong_every), PROMPT, params, 0.0, {STOP}, k, Ticks(), p_min=0.0)
    assert reply.token_ids == plain.token_ids
    assert sum(len(step.token_ids) for step in reply.steps) == len(reply.token_ids)
    accepted = sum(step.num_accepted for step in reply.steps)
    drafted = sum(step.num_drafted for step in reply.steps)
    assert accepted > 0
    if wrong_every:
        assert accepted < drafted and any(Source.RECOVERED in step.sources for step in reply.steps)
    else:
        assert accepted == drafted and all(Source.RECOVERED not in step.sources for step in reply.steps)


def test_a_reply_ends_on_its_stop_token_and_keeps_it_last():
    params = GenerationParams(max_tokens=40)
    expected = reference(40, stop_after=len(PROMPT) + 9)
    assert expected[-1] == STOP and len(expected) == 10
    for k in (0, 3, 6):
        reply = speculative_reply(FakeModel(stop_after=len(PROMPT) + 9), FakeModel(stop_after=len(PROMPT) + 9),
                                  PROMPT, params, 0.0, {STOP}, k, Ticks(), p_min=0.0)
        assert reply.token_ids == expected and reply.finish_reason == "stop"


def test_max_tokens_is_exact():
    for k in (0, 4):
        reply = speculative_reply(FakeModel(), FakeModel(), PROMPT, GenerationParams(max_tokens=13), 0.0, {STOP}, k,
                                  Ticks(), p_min=0.0)
        assert reply.token_ids == reference(13) and reply.finish_reason == "length"


def test_the_draft_stops_at_a_token_it_doubts():
    # The fake draft doubts the tokens it writes at positions 6, 9, 12 (0-based).
    draft = FakeModel(doubt_every=3)
    context = [1, 2, 3, 4, 5, 6]
    assert draft_tokens(draft, context, 6, p_min=0.75) == []
    draft.clear()
    context.append(7)  # positions 7 and 8 are sure, 9 is doubted
    assert len(draft_tokens(draft, context, 6, p_min=0.75)) == 2
    draft.clear()
    assert len(draft_tokens(draft, context, 6, p_min=0.0)) == 6


def test_sampled_speculation_draws_the_same_reply_as_plain_sampling():
    params = GenerationParams(max_tokens=30, seed=4)

    class Soft(FakeModel):
        def decode(self, tokens, rows):
            return super().decode(tokens, rows) / 8.0  # every token keeps some probability

    plain = plain_reply(Soft(), PROMPT, params, 1.0, {STOP}, Ticks()).token_ids
    spec = speculative_reply(Soft(), Soft(wrong_every=4), PROMPT, params, 1.0, {STOP}, 3, Ticks(), p_min=0.0)
    assert spec.token_ids == plain
    assert plain != reference(30)  # it sampled
    other = plain_reply(Soft(), PROMPT, GenerationParams(max_tokens=30, seed=5), 1.0, {STOP}, Ticks()).token_ids
    assert other != plain


def test_the_reply_times_what_it_ran():
    clock = Ticks()
    reply = speculative_reply(FakeModel(), FakeModel(wrong_every=3), PROMPT, GenerationParams(max_tokens=20), 0.0,
                              {STOP}, 3, clock, p_min=0.0)
    # readings: start, first token, then three per step (start, verify start, end)
    assert reply.first_token_seconds == 1.0
    assert clock.now == 2 + 3 * (len(reply.steps) - 1)
    for step in reply.steps[1:]:
        assert step.draft_seconds == 1.0 and step.verify_seconds == 1.0


def test_target_verifies_each_step_in_one_batch():
    target = FakeModel()
    speculative_reply(target, FakeModel(), PROMPT, GenerationParams(max_tokens=20), 0.0, {STOP}, 4, Ticks(), p_min=0.0)
    assert target.calls[0] == len(PROMPT)
    assert set(target.calls[1:]) <= {5} | set(range(1, 5))  # the last token and up to 4 drafts


def test_arms_follow_the_engines_and_methods():
    assert llamacpp_arms(["spectui"], ["draft"], 4) == []
    assert llamacpp_arms(["spectui", "llamacpp"], ["ngram"], 4) == [Arm("llamacpp", "none", 0)]
    assert llamacpp_arms(["spectui", "llamacpp"], ["draft", "ngram"], 3) == [Arm("llamacpp", "none", 0), Arm("llamacpp", "draft", 3)]


def test_the_bench_plans_llamacpp_arms():
    from spectui.bench.plan import RUNNERS, plan_arms

    assert "llamacpp" in RUNNERS
    arms = plan_arms(["spectui", "llamacpp"], ["draft"], [0, 4], 4)
    assert Arm("llamacpp", "none", 0) in arms and Arm("llamacpp", "draft", 4) in arms


# ---------------------------------------------------------------- the wheel on an older glibc


def test_elf_hash_is_the_sysv_one():
    from spectui.engines.ggml.compat import elf_hash

    # values readelf prints for these version names in any x86-64 binary
    assert elf_hash(b"GLIBC_2.2.5") == 0x09691A75
    assert elf_hash(b"GLIBC_2.38") == 0x069691B8


def wheel_libraries():
    from spectui.engines.ggml.lib import package_dir

    try:
        folder = package_dir()
    except Exception:
        pytest.skip("llama-cpp-py-sync is not installed")
    return folder


def test_the_patched_library_asks_only_for_classic_glibc_functions():
    from spectui.engines.ggml.compat import needs_c23_glibc, patch_c23_imports, version_names

    data = (wheel_libraries() / "libllama.so").read_bytes()
    if not needs_c23_glibc(data):
        pytest.skip("this wheel's libllama needs no glibc 2.38")
    assert b"__isoc23_strtol\0" in data
    patched = patch_c23_imports(data)
    assert len(patched) == len(data)
    assert b"GLIBC_2.38" not in version_names(patched) and not needs_c23_glibc(patched)
    assert version_names(patched).count(b"GLIBC_2.2.5") == version_names(data).count(b"GLIBC_2.2.5") + 1
    for name in (b"strtol", b"strtoul", b"strtoull", b"sscanf"):
        # the dynamic imports; the (unloaded) debug symbol table keeps its own names
        assert b"\0__isoc23_" + name + b"\0" in data and b"\0__isoc23_" + name + b"\0" not in patched
        assert b"\0" + name + b"\0" in patched


def test_patching_a_file_that_is_not_elf_is_refused():
    from spectui.engines.ggml.compat import ElfPatchError, patch_c23_imports

    with pytest.raises(ElfPatchError):
        patch_c23_imports(b"not an elf file" + struct.pack("<Q", 0) * 8)


# ---------------------------------------------------------------- SmolLM2 through libllama


@pytest.fixture(scope="module")
def smollm2_runner():
    pytest.importorskip("llama_cpp_py_sync")
    from transformers import AutoTokenizer

    from spectui.bench.anchors.llamacpp import LlamaCppRunner, gguf_for
    from spectui.models.load import ensure_local
    from spectui.models.registry import resolve

    tokenizer = AutoTokenizer.from_pretrained(ensure_local(resolve("smollm2-135m")))
    gguf = gguf_for(resolve("smollm2-135m"))

    def prompt_ids(messages):
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)

    runner = LlamaCppRunner(prompt_ids, {tokenizer.eos_token_id}, gguf, gguf, threads=1)
    yield runner
    runner.close()


MESSAGES = [{"role": "user", "content": "Write a Python function that checks whether a string is a palindrome."}]


@pytest.mark.real_weights
def test_llamacpp_speculation_writes_its_own_plain_reply(smollm2_runner):
    """SmolLM2 drafting for itself: llama.cpp's speculation claims its plain greedy reply."""
    params = GenerationParams(max_tokens=48, top_p=1.0, seed=1)
    plain = smollm2_runner.run(Arm("llamacpp", "none", 0), MESSAGES, params, 0.0)
    spec = smollm2_runner.run(Arm("llamacpp", "draft", 4), MESSAGES, params, 0.0)
    assert spec.token_ids == plain.token_ids
    assert len(plain.token_ids) == 48 or plain.finish_reason == "stop"
    drafted = sum(step.num_drafted for step in spec.steps)
    assert drafted > 0 and sum(step.num_accepted for step in spec.steps) > 0.8 * drafted


@pytest.mark.real_weights
def test_the_runner_reports_what_it_measured(smollm2_runner):
    params = GenerationParams(max_tokens=24, top_p=1.0, seed=1)
    reply = smollm2_runner.run(Arm("llamacpp", "draft", 3), MESSAGES, params, 0.0)
    assert reply.num_tokens == sum(len(step.token_ids) for step in reply.steps) == len(reply.token_ids)
    assert 0 < reply.first_token_seconds < reply.wall_seconds
    assert reply.decode_tokens_per_s == pytest.approx(
        (reply.num_tokens - 1) / (reply.wall_seconds - reply.first_token_seconds))
    assert reply.steps[0].verify_seconds == reply.first_token_seconds
    loaded = smollm2_runner.loaded
    assert loaded["load_seconds"] > 0 and loaded["draft_load_seconds"] > 0
    assert loaded["resident_after_load"] > loaded["resident_before"] > 0
    assert loaded["resident_peak"] >= loaded["resident_after_load"] * 0.5


# ---------------------------------------------------------------- spectui's loop on llama.cpp


def test_the_cached_view_keeps_the_common_prefix_and_runs_the_rest():
    from spectui.engines.ggml.cached import LlamaCached

    model = FakeModel()
    cached = LlamaCached(model)
    first = cached.logits([3, 5, 7, 2], 1)
    assert model.cache == [3, 5, 7, 2] and model.calls == [4]
    assert int(first[0].argmax()) == rule([3, 5, 7, 2])
    rows = cached.logits([3, 5, 7, 2, 9, 4], 3)  # two drafts: 3 rows, from the last context token on
    assert model.calls[-1] == 3 and rows.shape == (3, VOCAB)
    assert [int(r.argmax()) for r in rows] == [rule([3, 5, 7, 2][:4 + i] + [9, 4][:i]) for i in range(3)]
    cached.logits([3, 5, 7, 2, 9, 1], 1)  # draft 4 rejected: rolled back, the new token runs
    assert model.cache == [3, 5, 7, 2, 9, 1] and model.calls[-1] == 1
    cached.logits([3, 5, 7, 2, 9, 1], 2)  # rows for tokens already cached: they run again
    assert model.cache == [3, 5, 7, 2, 9, 1] and model.calls[-1] == 2
    cached.reset()
    assert model.cache == [] and cached.seen == []


@pytest.fixture(scope="module")
def smollm2_engines():
    pytest.importorskip("llama_cpp_py_sync")
    from spectui.bench.anchors.llamacpp import gguf_for
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.models.load import load_tokenizer
    from spectui.models.registry import resolve

    tokenizer, gguf = load_tokenizer(resolve("smollm2-135m")), gguf_for(resolve("smollm2-135m"))
    engines = {method: load_ggml_engine(gguf, tokenizer, method, draft_gguf=gguf, threads=1)
               for method in ("ngram", "suffix", "draft")}
    yield engines
    for engine in engines.values():
        engine.close()


def engine_reply(engine, control):
    from spectui.core.events import Done

    engine.forget_prompts()
    events = list(engine.stream(MESSAGES, GenerationParams(max_tokens=48, top_p=1.0, seed=0), control))
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length")
    return [t for step in events[:-1] for t in step.token_ids], events[:-1]


@pytest.mark.real_weights
@pytest.mark.parametrize("method", ["ngram", "suffix", "draft"])
def test_spectuis_loop_on_llamacpp_writes_that_engines_plain_greedy(smollm2_engines, method):
    from spectui.core.events import Control

    plain, _ = engine_reply(smollm2_engines["ngram"], Control(0, 0.0))
    accepted = 0
    for control in (Control(4, 0.0), Control(4, 0.0, auto=True)):
        tokens, steps = engine_reply(smollm2_engines[method], control)
        assert tokens == plain, control
        accepted += sum(step.num_accepted for step in steps)
        assert all(step.exact for step in steps)
    assert accepted > 0
