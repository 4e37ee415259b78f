"""The replay is exact at T = 0: real replies recorded on SmolLM2 (ggml) into a history, read
back as `spectui advise` reads them (prompts rebuilt by the engine's template), and replayed
step for step: every step's drafts, kept drafts and emitted tokens equal the real run's, for
each copy drafter at a fixed k; under adaptive k (whose replay is shown simulated costs) each
step's drafts and acceptance, given the k the real run chose."""

from __future__ import annotations

import pytest

from advise_chats import CHATS, MAX_TOKENS, recorded_history
from spectui.advise.advice import Drafter
from spectui.advise.chats import chat_replies, read_conversations
from spectui.advise.costs import CostProfile
from spectui.advise.replay import replay_reply
from spectui.core.events import Control, Source
from spectui.engines.adaptive import K_AUTO_MAX
from spectui.engines.speculative.cached_model import common_prefix_len

pytestmark = [pytest.mark.real_weights, pytest.mark.usefixtures("fetched_ggufs")]

# what the smollm2_ggml fixture drafts with: n-gram lookup's defaults, suffix over the conversation only
DRAFTERS = {"ngram": Drafter("ngram 1-8", "ngram"), "suffix": Drafter("suffix (no history)", "suffix", history=False)}
COSTS = CostProfile("smollm2-135m", "test", 0.01, {1: 1.0, 2: 1.5, 3: 2.0}, piece=3)


@pytest.fixture(scope="module")
def smollm2_ggml():
    """SmolLM2 on ggml with prompt lookup and suffix decoding (over the conversation only), on one
    thread: a shared 2-core box runs two spinning threads 20x slower than one."""
    pytest.importorskip("llama_cpp_py_sync")
    from spectui.advise.measure import cached_gguf
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.engines.speculative.suffix import SuffixProposer
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    model = cached_gguf(resolve("smollm2-135m"))
    engine = load_ggml_engine(model.gguf, JsonTokenizer(model.tokenizer), "ngram", threads=1, target_name=model.name)
    engine.add_proposer("suffix", SuffixProposer(use_history=False), None)
    yield engine
    engine.close()


def read_back(smollm2_ggml, path, recorded):
    """The replies as advise reads them, each checked against the prompt ids the engine used."""
    tokenizer = smollm2_ggml.tokenizer
    selection = chat_replies(read_conversations(path), tokenizer, max(tokenizer.get_vocab().values()) + 1)
    expected = [prompt for replies in recorded.values() for prompt, _ in replies]
    assert [list(reply.prompt_ids) for reply in selection.replies] == expected
    assert selection.skipped == {}
    return selection.replies


def as_recorded(steps):
    return [(len(step.token_ids), sum(s is Source.DRAFT for s in step.sources), step.num_drafted) for step in steps]


@pytest.mark.parametrize("k", [pytest.param(1, marks=pytest.mark.slow), 3, pytest.param(8, marks=pytest.mark.slow)])
def test_a_fixed_k_replays_step_for_step(smollm2_ggml, tmp_path, k):
    path = tmp_path / "history.sqlite3"
    recorded = recorded_history(path, smollm2_ggml, {"ngram": Control(k, 0.0), "suffix": Control(k, 0.0)}, CHATS[:1])
    replies = iter(read_back(smollm2_ggml, path, recorded))
    kept = 0
    for method, runs in recorded.items():
        proposer = DRAFTERS[method].build()
        for _, steps in runs:
            reply = next(replies)
            assert reply.arm == f"{method} k {k}"
            replayed = replay_reply(reply, proposer, k, COSTS)
            assert [(step.emitted, step.coloured, step.drafted) for step in replayed] == as_recorded(steps), method
            kept += sum(step.coloured for step in replayed)
    assert kept > 0  # the chats copy: something was drafted and kept


def test_adaptive_k_steps_draft_and_keep_what_the_real_run_did(smollm2_ggml, tmp_path):
    path = tmp_path / "history.sqlite3"
    recorded = recorded_history(path, smollm2_ggml, {"ngram": Control(4, 0.0, auto=True), "suffix": Control(4, 0.0, auto=True)},
                                CHATS[:1])
    replies = iter(read_back(smollm2_ggml, path, recorded))
    checked = 0
    for method, runs in recorded.items():
        for _, steps in runs:
            reply = next(replies)
            proposer = DRAFTERS[method].build()
            position = len(steps[0].token_ids)
            for step in steps[1:]:
                if step.num_drafted:
                    context = list(reply.prompt_ids) + list(reply.reply_ids[:position])
                    most = min(K_AUTO_MAX, MAX_TOKENS - position - 1)
                    drafted = list(proposer.propose(context, most, 0.0, 1.0, None).drafted)[:step.k]
                    assert drafted == list(step.drafted), (method, position)
                    kept = common_prefix_len(drafted, list(reply.reply_ids[position:]))
                    assert min(kept, len(step.token_ids)) == sum(s is Source.DRAFT for s in step.sources)
                    checked += 1
                position += len(step.token_ids)
    assert checked > 0


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 5])
def test_a_draft_model_teacher_forced_replays_a_real_draft_model_run_step_for_step(tmp_path, k):
    """SmolLM2 drafting for itself on ggml (a separate copy of it teacher-forced): one pass per
    reply gives the same drafts kept, step for step, as the real run."""
    pytest.importorskip("llama_cpp_py_sync")
    from spectui.advise.draft_model import all_predictions, replay_teacher_forced
    from spectui.advise.measure import cached_gguf
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    model = cached_gguf(resolve("smollm2-135m"))
    engine = load_ggml_engine(model.gguf, JsonTokenizer(model.tokenizer), "draft", draft_gguf=model.gguf, threads=1,
                              target_name=model.name)
    teacher = LlamaModel(model.gguf, threads=1)
    try:
        path = tmp_path / "history.sqlite3"
        recorded = recorded_history(path, engine, {"draft": Control(k, 0.0)}, CHATS[:1])
        replies = read_back(engine, path, recorded)
        predictions = all_predictions(teacher, replies, engine.target.model.vocab_size)
    finally:
        teacher.close()
        engine.close()
    kept = 0
    for reply, forced, (_, steps) in zip(replies, predictions, recorded["draft"], strict=True):
        replayed = replay_teacher_forced(reply, forced, k, COSTS)
        assert [(step.emitted, step.coloured, step.drafted) for step in replayed] == as_recorded(steps)
        kept += sum(step.coloured for step in replayed)
    assert kept > 0
