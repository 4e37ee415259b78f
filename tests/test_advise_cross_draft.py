"""A draft model of another tokenizer in `spectui advise` (spectui.advise.cross_draft): its real
proposer (TLI, SLEM, --vocab auto) run step by step over the reply's true prefix gives every
step's drafts and kept drafts as the real run had them. On a six-token torch pair through the
loop, and on SmolLM2 drafting for Qwen2.5-Coder-0.5B on ggml, recorded into a history and read
back as advise reads it."""

from __future__ import annotations

import pytest

from spectui.advise.chats import ChatReply
from spectui.advise.costs import CostProfile
from spectui.advise.cross_draft import RULES, CrossPair, draft_key, parse_draft_ks, replay_cross_arm
from spectui.core.errors import UsageError
from spectui.core.events import Control, GenerationParams, Source, Step

from test_cross_vocab import (  # noqa: F401 - small_target and letters_draft are fixtures
    PROMPT_IDS, letters_draft, letters_encode, letters_map, small_target, target_letters_encode,
)

COSTS = CostProfile("target", "test", 0.01, {1: 1.0, 2: 1.5, 3: 2.0}, piece=3, draft_seconds={"draft:letters": 0.002})


def as_run(steps: list[Step]) -> list[tuple[int, int, int]]:
    """Each step's (drafts verified, drafts kept within the reply, tokens written)."""
    return [(step.num_drafted, sum(source is Source.DRAFT for source in step.sources), len(step.token_ids)) for step in steps]


def as_replayed(steps) -> list[tuple[int, int, int]]:
    return [(step.drafted, step.coloured, step.emitted) for step in steps]


@pytest.mark.parametrize("rule", ["tli", "slem", "auto"])
def test_the_replay_of_a_cross_vocabulary_draft_is_the_loops_run_step_for_step(small_target, letters_draft,  # noqa: F811
                                                                               tiny_tokenizer, rule):
    """Two replies of one chat through the loop at k 3 (the draft's cache and auto's trial carry
    from the first to the second), then replayed with a fresh proposer from the replies' ids."""
    from spectui.engines.torch_backend.backend import torch_vocab_proposer
    from spectui.engines.torch_backend.kv import CachedModel
    from test_engine import make_engine

    engine = make_engine(small_target, tiny_tokenizer,
                         torch_vocab_proposer(letters_draft, 6, letters_map(), letters_encode, target_letters_encode, rule))
    engine.stop_ids = set()
    prompt, replies, runs = list(PROMPT_IDS), [], []
    for _ in range(2):
        steps = [event for event in engine.stream_ids(prompt, GenerationParams(max_tokens=20, top_p=1.0), Control(3, 0.0))
                 if isinstance(event, Step)]
        ids = tuple(token for step in steps for token in step.token_ids)
        replies.append(ChatReply(tuple(prompt), ids, "length", conversation_id=1))
        runs.append(steps)
        prompt = prompt + list(ids) + [1, 2]  # the next turn's prompt holds this reply
    pair = CrossPair("letters", letters_map(), letters_encode, target_letters_encode, 6)
    replayed: list = []
    arm = replay_cross_arm(replies, pair, CachedModel(letters_draft), rule, 3, COSTS, steps_out=replayed)
    assert [as_replayed(steps) for steps in replayed] == [as_run(steps) for steps in runs]
    assert arm.coloured == sum(kept for steps in runs for _, kept, _ in as_run(steps)[1:]) > 0
    assert arm.vocab == rule and arm.drafter == f"letters ({RULES[rule]})"
    assert arm.as_dict()["draft_vocabulary_shared"] == pytest.approx(letters_map().draft_overlap)
    if rule == "auto":  # the trial spans both replies, as one engine's does
        assert arm.kept == (engine.proposer.greedy if engine.proposer.greedy != "trial" else None)


def test_a_step_is_charged_its_draft_forwards():
    """SLEM writes several draft tokens per target token it drafts: every forward is paid, the
    prompt's read (the prefill's, outside decode speed) is not."""
    from spectui.advise.cross_draft import CountedDraft, replay_cross_reply
    from spectui.engines.speculative.slem import SlemProposer
    from test_slem import TARGET_TOKENS, draft_encode, pair_map, scripted_draft, target_encode

    draft = scripted_draft({"d": "a", "a": "b", "b": "c", "c": "a"})  # after "d" the draft writes a b c a b c …
    counted = CountedDraft(draft)
    proposer = SlemProposer(counted, pair_map(), draft_encode, len(TARGET_TOKENS), target_encode)
    reply = ChatReply((3,), tuple(target_encode("abcabca")), "length")
    steps, drafting = replay_cross_reply(reply, proposer, counted, 2, 0.5, COSTS)
    assert counted.forwards == len(draft.calls)
    assert drafting == pytest.approx(0.5 * (counted.forwards - 1))
    assert 0 < sum(step.drafted for step in steps) < counted.forwards - 1
    assert sum(step.seconds for step in steps) > drafting


@pytest.mark.parametrize(("text", "ks"), [("2,4,8", (2, 4, 8)), ("1-3", (1, 2, 3)), ("8, 1-2", (1, 2, 8))])
def test_draft_ks_read_lists_and_ranges(text, ks):
    assert parse_draft_ks(text) == ks


@pytest.mark.parametrize("text", ["0", "9", "a", "", "2,x"])
def test_a_bad_draft_k_is_one_line(text):
    with pytest.raises(UsageError, match="--draft-k"):
        parse_draft_ks(text)


@pytest.mark.real_weights
@pytest.mark.slow
@pytest.mark.usefixtures("fetched_ggufs")
def test_smollm2_drafting_for_qwen_replays_a_real_ggml_run_step_for_step(tmp_path):
    """SmolLM2-135M drafting for Qwen2.5-Coder-0.5B on ggml at k 4, T = 0, by TLI, SLEM and
    auto: one chat of two turns each, recorded through the store, read back as advise reads it,
    replayed on a separate copy of the draft: every step's drafts and kept drafts equal the run's."""
    pytest.importorskip("llama_cpp_py_sync")
    from advise_chats import CHATS, record_chat
    from spectui.advise.chats import chat_replies, read_conversations
    from spectui.advise.measure import cached_gguf
    from spectui.engines.ggml.backend import ggml_draft_proposer
    from spectui.engines.ggml.cached import LlamaCached
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer
    from spectui.models.vocab_map import draft_vocab
    from spectui.store.history import Store

    target, draft = cached_gguf(resolve("qwen2.5-coder-0.5b")), cached_gguf(resolve("smollm2-135m"))
    vocab = draft_vocab(target.name, target.tokenizer, draft.name, draft.tokenizer)
    tokenizer = JsonTokenizer(target.tokenizer)
    encode, target_encode = encoder_of(JsonTokenizer(draft.tokenizer)), encoder_of(tokenizer)
    engine = load_ggml_engine(target.gguf, tokenizer, "draft", draft.gguf, threads=1, target_name=target.name,
                              draft_name=draft.name, vocab=vocab, draft_encode=encode, vocab_how="tli")
    path, recorded = tmp_path / "history.sqlite3", {}
    store = Store(path)
    try:
        shared_draft = engine.proposer.draft.model
        for rule in ("slem", "auto"):
            engine.add_proposer(rule, ggml_draft_proposer(shared_draft, engine.target.model.vocab_size, vocab, encode,
                                                          target_encode, rule), draft.name)
        for rule, method in (("tli", "draft"), ("slem", "slem"), ("auto", "auto")):
            drafting = engine.with_method(method)
            drafting.forget_prompts()  # each rule's chat starts with empty caches, as a new engine's
            recorded[rule] = record_chat(store, drafting, CHATS[0], Control(4, 0.0), max_tokens=24)
    finally:
        store.close()
        engine.close()
    width = max(tokenizer.get_vocab().values()) + 1
    replies = chat_replies(read_conversations(path), tokenizer, width).replies
    assert [list(reply.prompt_ids) for reply in replies] == [prompt for runs in recorded.values() for prompt, _ in runs]
    pair = CrossPair(draft.name, vocab, encode, target_encode, width)
    costs = CostProfile(target.name, "test", 0.03, {1: 1.0, 2: 1.5, 3: 2.0}, piece=3,
                        draft_seconds={draft_key(draft.name): 0.005})
    model = LlamaModel(draft.gguf, threads=1)
    try:
        for index, (rule, runs) in enumerate(recorded.items()):
            replayed: list = []
            arm = replay_cross_arm(replies[2 * index:2 * index + 2], pair, LlamaCached(model), rule, 4, costs,
                                   steps_out=replayed)
            assert [as_replayed(steps) for steps in replayed] == [as_run(steps) for _, steps in runs], rule
            assert arm.accepted > 0 and arm.per_target_token is not None
    finally:
        model.close()


@pytest.fixture
def qwen_history(data_dir, tmp_path, fetched_ggufs):
    """Two saved Qwen2.5-Coder replies that copy their prompt, and costs with SmolLM2's draft cost."""
    from advise_chats import CODE, save_chat
    from spectui.advise.costs import profile_json
    from spectui.advise.measure import cached_gguf
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    tokenizer = JsonTokenizer(cached_gguf(resolve("qwen2.5-coder-0.5b")).tokenizer)
    path = data_dir / "history.sqlite3"
    save_chat(path, tokenizer, f"Repeat this code:\n{CODE}", f"Here it is:\n{CODE}")
    save_chat(path, tokenizer, f"Show this again:\n{CODE}", f"Sure:\n{CODE}")
    costs = tmp_path / "costs.json"
    costs.write_text(profile_json(CostProfile("qwen2.5-coder-0.5b", "test", 0.02, {1: 1.0, 2: 1.3, 3: 1.6}, piece=3,
                                              draft_seconds={"suffix": 0.0001, "ngram": 0.0001,
                                                             draft_key("smollm2-135m"): 0.004})))
    return costs


def advise(*arguments: str):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    return CliRunner().invoke(app, ["advise", "--model", "qwen2.5-coder-0.5b", "--draft", "smollm2-135m", *arguments])


@pytest.mark.real_weights
@pytest.mark.slow
def test_advise_replays_another_tokenizers_draft_by_each_rule(qwen_history):
    """Refused before: SmolLM2 for Qwen2.5-Coder is a row per rule and k, marked in --json."""
    import json

    pytest.importorskip("llama_cpp_py_sync")
    result = advise("--costs", str(qwen_history), "--draft-k", "2", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    arms = {(arm["drafter"], arm["k"]): arm for arm in data["arms"]}
    for rule, name in RULES.items():
        arm = arms[(f"smollm2-135m ({name})", 2)]
        assert arm["vocab"] == rule and 0.5 < arm["draft_vocabulary_shared"] < 1
        assert arm["tokens"] == data["baseline"]["tokens"] and arm["predicted_speedup"] > 0
    assert data["cross_vocabulary_draft"]["draft"] == "smollm2-135m"
    assert ("smollm2-135m (TLI)", 4) not in arms  # only the ks asked for
    # The table's rows and notes for the same arms: one conversation's replay shows them all.
    table = advise("--costs", str(qwen_history), "--draft-k", "2", "--last", "1")
    assert table.exit_code == 0, table.stderr
    words = " ".join(table.stdout.split())  # the lines under the table wrap at the terminal's width
    assert "smollm2-135m (SLEM)" in table.stdout and "% of its tokens shared" in words and "--vocab auto" in words


@pytest.mark.real_weights
def test_a_costs_file_without_the_cross_drafts_cost_is_one_line(qwen_history, tmp_path):
    from spectui.advise.costs import profile_json

    costs = tmp_path / "no-draft.json"
    costs.write_text(profile_json(CostProfile("qwen2.5-coder-0.5b", "test", 0.02, {1: 1.0}, draft_seconds={"draft": 0.01})))
    result = advise("--costs", str(costs))
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "draft_seconds.draft:smollm2-135m" in lines[0], result.stderr
