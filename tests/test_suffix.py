"""Suffix decoding: its drafts, and on the tiny models that it is lossless, history included."""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from spectui.core.events import Control, GenerationParams, Source
from spectui.engines.speculative.suffix import SuffixIndex, SuffixMatch, SuffixProposer

from small_distribution import CHI2_CRITICAL_0_001_DF5, SMALL_VOCAB, chi_square, exact_marginals, make_small_target


def index_of(*sequences):
    index = SuffixIndex()
    for sequence in sequences:
        index.add(sequence)
    return index


# ---------------------------------------------------------------- drafts


def test_the_most_frequent_continuation_wins_not_the_latest():
    # after [1, 2] came 3 twice, then 4 once (the latest): prompt lookup would copy 4
    index = index_of([1, 2, 3, 9, 1, 2, 3, 9, 1, 2, 4, 9])
    draft = index.draft([7, 1, 2], k=1)
    assert draft.tokens == [3]
    assert draft.first_probability == pytest.approx(2 / 3)


def test_a_match_of_m_tokens_drafts_at_most_m():
    index = index_of([5, 6, 7, 8, 9, 10, 11, 12])
    assert index.draft([0, 5], k=8).tokens == [6]
    assert index.draft([0, 6, 7], k=8).tokens == [8, 9]
    assert index.draft([0, 5, 6, 7], k=8).tokens == [8, 9, 10]
    assert index.draft([0, 5, 6, 7], k=2).tokens == [8, 9]
    # as Arctic's: a match is shorter than the context it is looked up from
    assert index.draft([5, 6, 7], k=8).tokens == [8, 9]


def test_match_and_draft_stay_within_the_depth():
    index = index_of(list(range(40)))
    # a 10-token match may draft 2 more; a 6-token one drafts 6, which scores higher
    draft = index.draft(list(range(10)), k=20, max_depth=12)
    assert draft.tokens == list(range(10, 16)) and draft.match_length == 6


def test_the_draft_stops_where_its_probability_falls_below_the_floor():
    # [1] went on to ten different tokens: each continuation is exactly 10% likely
    index = index_of([token for follower in range(20, 30) for token in (1, follower)])
    assert index.draft([0, 1], k=1, min_probability=0.1).tokens == [29]  # a tie: the latest
    assert index.draft([0, 1], k=1, min_probability=0.11).tokens == []
    # a sure-ish first token (2 of 3), then a split (1 of 2): the chain's probability is the product
    index = index_of([1, 2, 3, 50, 1, 2, 3, 60, 1, 2, 4])
    assert index.draft([0, 1, 2], k=2, min_probability=0.5).tokens == [3]
    two = index.draft([0, 1, 2], k=2, min_probability=0.3)
    assert two.tokens == [3, 60] and two.score == pytest.approx(2 / 3 + 1 / 3) and two.match_length == 2


def test_the_context_is_not_an_earlier_occurrence_of_itself():
    index = index_of([4, 5, 6, 4, 5])
    draft = index.draft([9, 4, 5], k=2, exclude=(0, 4))
    assert draft.tokens == [6, 4] and draft.first_probability == 1.0
    # counted as an occurrence that ends here, the context would halve every probability
    assert index.draft([9, 4, 5], k=2).first_probability == 0.5
    assert index_of([4, 5]).draft([9, 4, 5], k=2, exclude=(0, 1)).tokens == []


def test_the_proposer_drafts_from_the_conversation():
    proposer = SuffixProposer(use_history=False)
    proposal = proposer.propose([1, 2, 3, 4, 9, 1, 2, 3], 3, 0.0, 1.0, None)
    assert proposal.drafted == [4, 9, 1] and proposal.p_draft is None
    assert proposal.evidence == SuffixMatch(3, False, False)
    assert str(proposal.evidence) == "3, conversation"
    assert proposer.propose([1, 2, 3, 4, 9, 1, 2, 3, 4], 3, 0.0, 1.0, None).drafted == [9, 1, 2]


def test_history_drafts_where_the_conversation_has_nothing():
    history = [[10, 11, 12, 13, 14]]
    with_history = SuffixProposer(history)
    proposal = with_history.propose([1, 2, 10, 11, 12], 2, 0.0, 1.0, None)
    assert proposal.drafted == [13, 14] and proposal.evidence == SuffixMatch(3, False, True)
    assert SuffixProposer(history, use_history=False).propose([1, 2, 10, 11, 12], 2, 0.0, 1.0, None).drafted == []


def test_each_reply_joins_the_history_when_the_next_prompt_starts():
    for use_history, expected in ((True, [33, 34]), (False, [])):
        proposer = SuffixProposer(use_history=use_history)
        proposer.prefill([1, 2])
        proposer.propose([1, 2, 30, 31, 32, 33, 34], 2, 0.0, 1.0, None)  # the first prompt's reply so far
        proposer.prefill([7, 8, 31, 32])  # another conversation
        assert proposer.propose([7, 8, 31, 32], 2, 0.0, 1.0, None).drafted == expected
        # the prompt itself is not a reply: it never joins the history
        proposer.reset()
        assert proposer.propose([0, 8], 1, 0.0, 1.0, None).drafted == []


# ---------------------------------------------------------------- the user's stored replies


def test_stored_replies_are_read_newest_first_and_left_as_they_were(tmp_path):
    from spectui.engines.speculative.suffix_history import stored_replies
    from spectui.store import Store

    path = tmp_path / "history.sqlite3"
    store = Store(path)
    conversation = store.new_conversation({})
    for index, finish in enumerate(["stop", "length", None, "cancelled", "stop"]):
        store.add_message(conversation, "user", f"question {index}")
        message = store.add_message(conversation, "assistant", "")
        if finish is not None:
            store.finish_message(message, f"answer {index}", finish)
    assert stored_replies(path) == ["answer 4", "answer 1", "answer 0"]  # the open store is read too
    store.close()
    before = path.read_bytes()
    assert stored_replies(path, limit=2) == ["answer 4", "answer 1"]
    assert path.read_bytes() == before  # (SQLite may add its -shm index beside a WAL file to read it)
    assert stored_replies(tmp_path / "none.sqlite3") == []
    (tmp_path / "junk.sqlite3").write_bytes(b"not a database")
    assert stored_replies(tmp_path / "junk.sqlite3") == []
    sqlite3.connect(tmp_path / "empty.sqlite3").close()
    assert stored_replies(tmp_path / "empty.sqlite3") == []


def test_the_proposer_reads_the_history_only_when_asked(tmp_path, tiny_tokenizer):
    from spectui.engines.speculative.suffix_history import suffix_proposer
    from spectui.store import Store

    path = tmp_path / "history.sqlite3"
    store = Store(path)
    conversation = store.new_conversation({})
    store.add_message(conversation, "user", "q")
    store.finish_message(store.add_message(conversation, "assistant", ""), "SELECT id, name FROM users", "stop")
    store.close()
    ids = tiny_tokenizer("SELECT id, name FROM users", add_special_tokens=False)["input_ids"]
    assert suffix_proposer(tiny_tokenizer, True, path).history.sequences == [ids]
    assert suffix_proposer(tiny_tokenizer, False, path).history.sequences == []


# ---------------------------------------------------------------- lossless on the tiny models


def make_engine(target, tokenizer, proposer):
    from spectui.core.engine import EngineInfo
    from spectui.engines.torch_backend.backend import torch_engine

    info = EngineInfo("embedded", "tiny", None, "suffix", "float32", "cpu")
    return torch_engine(target, tokenizer, proposer, info)


def reply(engine, prompt_ids, control, max_tokens=48, seed=None):
    events = list(engine.stream_ids(prompt_ids, GenerationParams(max_tokens=max_tokens, seed=seed), control))
    steps = [event for event in events[:-1]]
    return [t for s in steps for t in s.token_ids], steps


PROMPTS = ["def add(a, b):", '{"name": "spectui", "tags": [', "The quick brown fox"]


@pytest.fixture(scope="module")
def plain_replies(tiny_target, tiny_tokenizer):
    engine = make_engine(tiny_target, tiny_tokenizer, SuffixProposer(use_history=False))
    return {prompt: reply(engine, tiny_tokenizer(prompt)["input_ids"], Control(k=0))[0] for prompt in PROMPTS}


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_suffix_decoding_equals_plain_greedy(tiny_target, tiny_tokenizer, plain_replies, prompt):
    prompt_ids = tiny_tokenizer(prompt)["input_ids"]
    # history: every prompt's greedy reply (this one's included: drafts that hold), and noise
    history = [plain_replies[p] for p in PROMPTS] + [[5, 6, 7, 8] * 10]
    drafted = accepted = rejected = 0
    for proposer in (SuffixProposer(use_history=False), SuffixProposer(history)):
        engine = make_engine(tiny_target, tiny_tokenizer, proposer)
        for control in (Control(k=1), Control(k=3), Control(k=8), Control(k=4, auto=True)):
            tokens, steps = reply(engine, prompt_ids, control)
            assert tokens == plain_replies[prompt], control
            drafted += sum(s.num_drafted for s in steps)
            accepted += sum(s.num_accepted for s in steps)
            rejected += sum(Source.RECOVERED in s.sources for s in steps if s.drafted)
    assert accepted > 0 and drafted > accepted  # copies were kept, and some were refused


@pytest.mark.parametrize("temperature", [0.0, 0.3])
def test_drafting_from_another_conversation_never_changes_a_reply(tiny_target, tiny_tokenizer, plain_replies, temperature):
    """History only proposes: the reply shown is the target's, token for token, with or without it."""
    other = plain_replies[PROMPTS[0]]
    prompt_ids = tiny_tokenizer(PROMPTS[1])["input_ids"] + other[:6]  # a chat that drifts into the other one
    control = Control(k=4, temperature=temperature)
    without, _ = reply(make_engine(tiny_target, tiny_tokenizer, SuffixProposer(use_history=False)), prompt_ids,
                       control, seed=3)
    history_engine = make_engine(tiny_target, tiny_tokenizer, SuffixProposer([other] * 3))
    tokens, steps = reply(history_engine, prompt_ids, control, seed=3)
    assert tokens == without
    assert sum(s.num_accepted for s in steps) > 0  # the other conversation's drafts were offered, and some kept
    texts = [s.text for s in steps]
    plain_engine = make_engine(tiny_target, tiny_tokenizer, SuffixProposer(use_history=False))
    _, plain_steps = reply(plain_engine, prompt_ids, Control(k=0, temperature=temperature), seed=3)
    assert "".join(texts) == "".join(s.text for s in plain_steps)


# ---------------------------------------------------------------- T > 0: the target's distribution

REPLIES = 2_000
PROMPT = [1, 2, 3, 4, 5, 1]
# Earlier replies that make every context drafted from, with one continuation more common.
HISTORY = [[a, b, (a + b) % SMALL_VOCAB] for a in range(SMALL_VOCAB) for b in range(SMALL_VOCAB)] * 2 + [[1, 0, 0, 0]] * 6


@pytest.fixture(scope="module")
def small_target():
    return make_small_target()





def test_sampled_suffix_decoding_follows_the_target_distribution(small_target, tiny_tokenizer):
    second, third = exact_marginals(small_target, PROMPT, 1.0)
    engine = make_engine(small_target, tiny_tokenizer, SuffixProposer(HISTORY))
    engine.stop_ids = set()  # the tiny tokenizer's <eos> is one of the six ids
    seconds, thirds, sources = [], [], []
    for seed in range(REPLIES):
        # a fresh proposer each time: replies of earlier seeds must not become history
        engine.proposer = SuffixProposer(HISTORY)
        tokens, steps = reply(engine, PROMPT, Control(k=2, temperature=1.0), max_tokens=3, seed=seed)
        seconds.append(tokens[1])
        thirds.append(tokens[2])
        sources += [source for s in steps[1:] for source in s.sources]
    # both paths ran: drafts kept, and drafts refused for the target's own token
    assert sources.count(Source.DRAFT) > 200 and sources.count(Source.RECOVERED) > 200
    assert chi_square(seconds, second) < CHI2_CRITICAL_0_001_DF5
    assert chi_square(thirds, third) < CHI2_CRITICAL_0_001_DF5


def test_the_chi_square_catches_suffix_drafts_taken_as_they_come(small_target, tiny_tokenizer):
    """The same statistic on drafts kept unverified: the history's habits show, not the target's."""
    second, _ = exact_marginals(small_target, PROMPT, 1.0)
    engine = make_engine(small_target, tiny_tokenizer, SuffixProposer(use_history=False))
    engine.stop_ids = set()
    seconds = []
    for seed in range(REPLIES):
        first, _ = reply(engine, PROMPT, Control(k=0, temperature=1.0), max_tokens=1, seed=seed)
        drafted = SuffixProposer(HISTORY).propose(PROMPT + first, 1, 1.0, 1.0, None).drafted
        seconds.append(drafted[0] if drafted else first[0])
    assert Counter(seconds) != Counter()
    assert chi_square(seconds, second) > CHI2_CRITICAL_0_001_DF5


def test_drafts_match_arctic_inference_where_it_is_installed():
    """vLLM's suffix method runs Arctic Inference's suffix tree: on random histories the index
    drafts what Arctic drafts from its global tree, but where two continuations tie (Arctic
    takes one by its sibling order, this the latest) and the chains then part."""
    pytest.importorskip("arctic_inference.suffix_decoding")
    import random

    import numpy
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    rng = random.Random(0)
    same = 0
    for trial in range(500):
        vocab = rng.choice([3, 4, 6, 20])
        history = [[rng.randrange(vocab) for _ in range(rng.randint(5, 40))] for _ in range(rng.randint(1, 4))]
        arctic = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=100)
        for request, reply_ids in enumerate(history):
            arctic.start_request(request, [])
            arctic.add_active_response(request, reply_ids)
            arctic.stop_request(request)
        arctic.start_request("now", [])
        context = [rng.randrange(vocab) for _ in range(rng.randint(1, 8))]
        k = rng.randint(1, 8)
        theirs = arctic.speculate("now", numpy.array(context, dtype=numpy.int32), max_spec_tokens=k, min_token_prob=0.1)
        ours = index_of(*history).draft(context, k)
        same += (len(theirs.token_ids), theirs.match_len) == (len(ours.tokens), ours.match_length) and \
            abs(theirs.score - ours.score) < 1e-5
    # small vocabularies tie often, and a tie taken the other way can lead to another chain
    assert same >= 0.95 * 500
