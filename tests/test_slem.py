"""SLEM (spectui.engines.speculative.slem): the draft writes with its whole vocabulary, its text
is tokenized by the target's tokenizer after the last target tokens (the anchor), the last
target token dropped; k counts the target's tokens; at T > 0 it drafts by TLI."""

from __future__ import annotations

import numpy

from spectui.engines.speculative.slem import SlemProposer, text_before_cut
from spectui.models.vocab_map import VocabMap, intersect, token_table

from rows_draft import RowsByLastToken

TARGET_TOKENS = ["a", "b", "c", "d", "ab", "bc"]
DRAFT_TOKENS = ["a", "b", "c", "d", "x", "<end>"]  # x: the target has no such token; <end>: a special
END = DRAFT_TOKENS.index("<end>")


def pair_map() -> VocabMap:
    return intersect(token_table({t: i for i, t in enumerate(TARGET_TOKENS)}, set()),
                     token_table({t: i for i, t in enumerate(DRAFT_TOKENS)}, {END}))


def longest_first(tokens: list[str], unknown: str):
    def encode(text: str) -> list[int]:
        ids, at = [], 0
        while at < len(text):
            match = next((t for t in sorted(tokens, key=len, reverse=True) if text.startswith(t, at)), None)
            ids.append(tokens.index(match or unknown))
            at += len(match) if match else 1
        return ids
    return encode


target_encode = longest_first(TARGET_TOKENS, "d")
draft_encode = longest_first(DRAFT_TOKENS[:END], "x")


def scripted_draft(after: dict[str, str]) -> RowsByLastToken:
    """A draft whose favourite next token depends on its last token only: `after` maps one to the next."""
    rows = numpy.zeros((len(DRAFT_TOKENS), len(DRAFT_TOKENS)), dtype=numpy.float32)
    for last, following in after.items():
        rows[DRAFT_TOKENS.index(last), DRAFT_TOKENS.index(following)] = 5.0
    return RowsByLastToken(rows)


def proposer(after: dict[str, str]) -> SlemProposer:
    return SlemProposer(scripted_draft(after), pair_map(), draft_encode, len(TARGET_TOKENS), target_encode)


def test_the_drafts_text_becomes_the_targets_tokens_the_last_one_dropped():
    slem = proposer({"d": "a", "a": "b", "b": "c", "c": "a"})
    proposal = slem.propose([3], 2, 0.0, 1.0, None)  # after "d" the draft writes a b c a
    # "d"+"abca" is d ab c a to the target: after the anchor, ab c (a may still become ab)
    assert proposal.drafted == [TARGET_TOKENS.index("ab"), TARGET_TOKENS.index("c")]
    assert proposal.p_draft is None
    assert slem.draft.calls[-1] == [3, 0, 1, 2]  # four draft tokens for two target tokens
    assert slem.fallbacks == 0


def test_text_that_would_merge_with_the_anchor_is_tokenized_alone():
    slem = proposer({"a": "b", "b": "c", "c": "a"})
    # After a committed "a", "bca": the target's tokenizer writes "abca" as ab c a, not the
    # committed a: the draft's text alone then, bc a, the last dropped.
    assert slem.propose([0], 1, 0.0, 1.0, None).drafted == [TARGET_TOKENS.index("bc")]
    assert slem.fallbacks == 3


def test_a_special_token_ends_the_drafts_text():
    slem = proposer({"d": "a", "a": "b", "b": "c", "c": "<end>"})
    assert slem.propose([3], 4, 0.0, 1.0, None).drafted == [TARGET_TOKENS.index("ab")]  # "abc": ab, c dropped
    assert len(slem.draft.calls) == 4


def test_the_draft_writes_a_token_the_target_lacks():
    slem = proposer({"d": "x", "x": "a", "a": "b", "b": "d"})
    # "x" is no target token (TLI could never draft it); its text goes to the target's tokenizer all the same
    assert slem.propose([3], 2, 0.0, 1.0, None).drafted == [TARGET_TOKENS.index("d"), TARGET_TOKENS.index("ab")]


def test_at_a_temperature_it_drafts_by_tli_over_the_shared_tokens():
    slem = proposer({"d": "x"})
    proposal = slem.propose([3], 3, 1.0, 1.0, numpy.random.default_rng(0))
    assert proposal.p_draft is not None and proposal.p_draft.shape == (3, len(TARGET_TOKENS))
    assert all(token in (0, 1, 2, 3) for token in proposal.drafted)  # the shared a b c d only
    assert proposal.p_draft[:, 4:].sum() == 0.0


def test_a_character_cut_at_the_end_waits():
    assert text_before_cut("hé".encode()[:-1]) == "h"
    assert text_before_cut(b"a\xffb") == "a\ufffdb"


def test_the_panel_says_slem_runs_greedy_and_tli_sampled():
    assert proposer({}).vocab_words == "80% shared · SLEM at T = 0, TLI at T > 0"


def run_steps(slem: SlemProposer, continuation: int, steps: int, k: int = 3) -> list[int]:
    """The loop's greedy steps against a target that always writes `continuation`: the drafts
    up to the first other one accepted, then the target's own token."""
    token_ids = [continuation] * 3
    for _ in range(steps):
        drafted = slem.propose(token_ids, k, 0.0, 1.0, None).drafted
        accepted = next((i for i, token in enumerate(drafted) if token != continuation), len(drafted))
        token_ids += [continuation] * (accepted + 1)
    return token_ids


def test_auto_tries_both_and_keeps_slem_where_its_drafts_are_accepted_more():
    from spectui.engines.speculative.slem import TRIAL_STEPS

    # The draft's favourite is x, no target token: TLI drafts a instead (rejected), SLEM writes
    # x, which the target's tokenizer reads as d, the target's own token.
    slem = SlemProposer(scripted_draft({"d": "x", "x": "x"}), pair_map(), draft_encode, len(TARGET_TOKENS),
                        target_encode, choose=True)
    assert "trying both" in slem.vocab_words
    run_steps(slem, TARGET_TOKENS.index("d"), 2 * TRIAL_STEPS + 1)
    assert slem.greedy == "slem", slem.trials
    assert slem.trials["tli"] == [1] * TRIAL_STEPS and slem.trials["slem"] == [4] * TRIAL_STEPS
    assert slem.vocab_words == "80% shared · SLEM (T = 0; 4.00 tokens a step, TLI 1.00)"


def test_auto_keeps_tli_on_a_tie():
    slem = SlemProposer(scripted_draft({"a": "a"}), pair_map(), draft_encode, len(TARGET_TOKENS),
                        target_encode, choose=True)
    run_steps(slem, TARGET_TOKENS.index("a"), 20)
    assert slem.greedy == "tli" and slem.vocab_words == "80% shared · TLI"


def test_the_cached_map_keeps_the_drafts_pieces(tmp_path):
    from spectui.models.vocab_map import _read_map, _write_map

    path = tmp_path / "pair.npz"
    _write_map(path, pair_map())
    read = _read_map(path)
    assert read is not None
    assert [read.draft_piece(token) for token in range(len(DRAFT_TOKENS))] == [b"a", b"b", b"c", b"d", b"x", b""]
    assert read.draft_piece(99) == b""
