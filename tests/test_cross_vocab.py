"""Drafting across vocabularies (TLI, spectui.engines.speculative.cross_vocab): the draft's
context kept as the draft's ids of the target's text, drafts only among shared tokens, mapped
to the target's ids; through the loop, greedy replies equal plain decoding and sampled replies
follow the target's distribution (chi-square), a rule that does not mask shown failing it."""

from __future__ import annotations

import random

import numpy
import pytest
import torch

from spectui.core.events import Control, GenerationParams, Source, Step
from spectui.engines.speculative.cross_vocab import CrossVocabProposer, DraftContext, draft_model_proposer
from spectui.engines.speculative.proposers import DraftModelProposer
from spectui.models.vocab_map import VocabMap, intersect, token_table

from rows_draft import RowsByLastToken
from test_verify import chi2_p_value

TARGET_TOKENS = ["a", "b", "c", "d", "e", "f"]  # the six-token target of tests/small_distribution.py
DRAFT_TOKENS = ["c", "a", "x", "f", "b", "y", "ab", "z"]  # shares a, b, c, f; lacks d, e


def letters_map(draft_tokens: list[str] = DRAFT_TOKENS) -> VocabMap:
    return intersect(token_table({t: i for i, t in enumerate(TARGET_TOKENS)}, set()),
                     token_table({t: i for i, t in enumerate(draft_tokens)}, set()))


def letters_encode(text: str) -> list[int]:
    """The draft's tokenizer: longest match first, an unknown character as "z"."""
    ids, at = [], 0
    while at < len(text):
        match = next((token for token in sorted(DRAFT_TOKENS, key=len, reverse=True) if text.startswith(token, at)), None)
        ids.append(DRAFT_TOKENS.index(match) if match else DRAFT_TOKENS.index("z"))
        at += len(match) if match else 1
    return ids


def test_shared_target_tokens_become_the_drafts_and_the_others_are_tokenized_by_the_draft():
    context = DraftContext(letters_map(), letters_encode)
    assert context.ids_for([0, 1, 2]) == [1, 4, 0]  # a b c
    assert context.ids_for([0, 1, 2, 3, 5]) == [1, 4, 0, 7, 3]  # d is not the draft's: its text, tokenized ("z")
    assert context.ids_for([0, 4]) == [1, 7]  # the sequence changed after "a": rebuilt from there


def byte_level_map() -> VocabMap:
    # "é" is two bytes: the target has each as a token, the draft only the whole character.
    target = token_table({"Ġh": 0, "Ã": 1, "©": 2, "i": 3, "Ġ": 4, "h": 5}, set())
    draft = token_table({"h": 0, "i": 1, "Ġ": 2, "Ã©": 3}, set())
    return intersect(target, draft)


def byte_level_encode(text: str) -> list[int]:
    pieces = {" ": 2, "h": 0, "i": 1, "é": 3}
    return [pieces.get(char, 2) for char in text]  # a stray byte, replaced, as a space


def test_half_a_character_waits_for_its_other_bytes():
    context = DraftContext(byte_level_map(), byte_level_encode)
    assert context.ids_for([0]) == [2, 0]  # " h": not one draft token, tokenized as text
    assert context.ids_for([0, 1]) == [2, 0]  # b"\xc3" alone is no text, and the draft has no such byte
    assert context.ids_for([0, 1, 2, 3]) == [2, 0, 3, 1]  # " hé" "i"


def test_the_kept_context_always_equals_one_built_afresh():
    """Random sequences, each a random edit of the last (rejected drafts, a new turn)."""
    chooser = random.Random(3)
    for build in (lambda: DraftContext(letters_map(), letters_encode), lambda: DraftContext(byte_level_map(), byte_level_encode)):
        kept, sequence = build(), []
        size = len(kept.vocab.target_offsets) - 1
        for _ in range(300):
            sequence = sequence[: chooser.randint(0, len(sequence))] + [chooser.randrange(size) for _ in range(chooser.randint(0, 4))]
            assert kept.ids_for(sequence) == build().ids_for(sequence), sequence


def test_greedy_drafts_are_shared_tokens_in_the_targets_ids_and_the_draft_reads_its_own():
    rows = numpy.zeros((8, 8), dtype=numpy.float32)
    rows[:, DRAFT_TOKENS.index("x")] = 9.0  # the draft's favourite is a token the target lacks
    rows[:, DRAFT_TOKENS.index("f")] = 5.0
    rows[DRAFT_TOKENS.index("f"), DRAFT_TOKENS.index("b")] = 7.0  # after "f", "b"
    draft = RowsByLastToken(rows)
    proposer = CrossVocabProposer(draft, letters_map(), letters_encode, target_width=6)
    proposal = proposer.propose([0, 1], 3, 0.0, 1.0, None)
    assert proposal.drafted == [5, 1, 5]  # f b f as the target's ids, never "x"
    assert draft.calls[-1] == [1, 4, 3, 4]  # a b, then the draft's own f b


def test_sampled_drafts_come_with_the_masked_draft_distribution_over_the_targets_ids():
    rows = numpy.random.default_rng(0).normal(size=(8, 8)).astype(numpy.float32)
    proposer = CrossVocabProposer(RowsByLastToken(rows), letters_map(), letters_encode, target_width=6)
    proposal = proposer.propose([0], 2, 1.0, 1.0, numpy.random.default_rng(1))
    assert proposal.p_draft is not None and proposal.p_draft.shape == (2, 6)
    first = rows[DRAFT_TOKENS.index("a")]
    shared = [DRAFT_TOKENS.index(t) for t in "abcf"]
    expected = numpy.exp(first[shared]) / numpy.exp(first[shared]).sum()
    assert numpy.allclose(proposal.p_draft[0][[0, 1, 2, 5]], expected, atol=1e-6)
    assert proposal.p_draft[0][[3, 4]].tolist() == [0.0, 0.0]  # d and e: the draft never proposes them


def test_one_tokenizer_padded_drafts_as_before_and_never_a_padding_row():
    vocab = intersect(token_table({"a": 0, "b": 1, "[PAD2]": 2}, set()), token_table({"a": 0, "b": 1, "[PAD2]": 2, "[PAD3]": 3}, set()))
    rows = numpy.zeros((4, 4), dtype=numpy.float32)
    rows[:, 2] = 9.0  # a padding row is the draft's favourite
    proposer = draft_model_proposer(RowsByLastToken(rows), 3, vocab)
    assert isinstance(proposer, DraftModelProposer)
    assert proposer.propose([0], 2, 0.0, 1.0, None).drafted == [0, 0]
    sampled = proposer.propose([0], 2, 1.0, 1.0, numpy.random.default_rng(0))
    assert sampled.p_draft is not None and sampled.p_draft.shape == (2, 3) and sampled.p_draft[:, 2].tolist() == [0.0, 0.0]


# ---------------------------------------------------------------- through the loop (torch, tiny models)

PROMPT_IDS = [1, 2, 3, 4, 5, 1]


@pytest.fixture(scope="module")
def small_target():
    from small_distribution import make_small_target

    return make_small_target()


@pytest.fixture(scope="module")
def letters_draft(small_target):
    """The target's own weights under the draft's eight token ids, a little noise on its head:
    each shared token's row is the target's, x and z copy d's, y e's and ab a's (made likelier,
    so a rule that drafts them as target tokens shows)."""
    from tiny_models import make_tiny_model

    model = make_tiny_model(len(DRAFT_TOKENS), seed=9)
    source = [TARGET_TOKENS.index({"x": "d", "y": "e", "ab": "a", "z": "d"}.get(token, token)) for token in DRAFT_TOKENS]
    state = {name: value[source] if value.shape[:1] == (len(TARGET_TOKENS),) else value
             for name, value in small_target.state_dict().items()}
    model.load_state_dict(state)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        model.lm_head.weight.add_(0.02 * torch.randn(model.lm_head.weight.shape, generator=generator))
        for token in ("x", "ab", "z"):
            model.lm_head.weight[DRAFT_TOKENS.index(token)] *= 2.0
    return model


def tli_engine(small_target, letters_draft, tiny_tokenizer, vocab: VocabMap | None = None):
    from spectui.engines.torch_backend.backend import torch_vocab_proposer
    from test_engine import make_engine

    proposer = torch_vocab_proposer(letters_draft, 6, vocab or letters_map(), letters_encode)
    engine = make_engine(small_target, tiny_tokenizer, proposer)
    engine.stop_ids = set()
    return engine


def reply(engine, control: Control, seed: int, max_tokens: int) -> tuple[list[int], list[Step]]:
    steps = [event for event in engine.stream_ids(PROMPT_IDS, GenerationParams(max_tokens=max_tokens, seed=seed, top_p=1.0), control)
             if isinstance(event, Step)]
    return [token for step in steps for token in step.token_ids], steps


def test_greedy_replies_with_a_cross_vocabulary_draft_equal_plain_decoding(small_target, letters_draft, tiny_tokenizer):
    engine = tli_engine(small_target, letters_draft, tiny_tokenizer)
    plain, _ = reply(engine, Control(0, 0.0), 0, 16)
    accepted = 0
    for k in (1, 3, 6):
        tokens, steps = reply(engine, Control(k, 0.0), 0, 16)
        assert tokens == plain, k
        assert all(token in (0, 1, 2, 5) for step in steps for token in step.drafted)  # shared tokens only
        accepted += sum(step.num_accepted for step in steps)
    assert accepted > 0


def target_letters_encode(text: str) -> list[int]:
    """The six-token target's tokenizer: one letter a token, any other character as d."""
    return [TARGET_TOKENS.index(char) if char in TARGET_TOKENS else 3 for char in text]


@pytest.mark.parametrize("how", ["slem", "auto"])
def test_greedy_replies_by_slem_equal_plain_decoding(small_target, letters_draft, tiny_tokenizer, how):
    """SLEM drafts the draft's text (its "ab", "x" and "z" too) as the target's tokens: the
    greedy reply is the target's all the same, at every k; auto tries TLI and SLEM in turn."""
    from spectui.engines.speculative.slem import SlemProposer
    from spectui.engines.torch_backend.backend import torch_vocab_proposer
    from test_engine import make_engine

    proposer = torch_vocab_proposer(letters_draft, 6, letters_map(), letters_encode, target_letters_encode, how)
    assert isinstance(proposer, SlemProposer)
    engine = make_engine(small_target, tiny_tokenizer, proposer)
    engine.stop_ids = set()
    plain, _ = reply(engine, Control(0, 0.0), 0, 24)
    accepted = 0
    for k in (1, 2, 4, 7):
        tokens, steps = reply(engine, Control(k, 0.0), 0, 24)
        assert tokens == plain, k
        assert all(len(step.drafted) <= k and all(0 <= token < 6 for token in step.drafted) for step in steps)
        accepted += sum(step.num_accepted for step in steps)
    assert accepted > 0
    if how == "auto":  # the trial was decided, and the engine's info (the panel's line) says which rule it kept
        assert proposer.greedy in ("tli", "slem"), proposer.trials
        assert engine.info.draft_vocab == proposer.vocab_words and "trying" not in proposer.vocab_words


def sampled_pairs(engine, replies: int) -> tuple[list[tuple[int, int]], list[int], list[Source]]:
    pairs, fourths, sources = [], [], []
    for seed in range(replies):
        tokens, steps = reply(engine, Control(2, 1.0), seed, 4)
        pairs.append((tokens[1], tokens[2]))
        fourths.append(tokens[3])
        sources += [source for step in steps if step.drafted for source in step.sources]
    return pairs, fourths, sources


def next_token_p_values(pairs: list[tuple[int, int]], joint) -> dict[str, float]:
    """The chi-square p-values of the 2nd and 3rd tokens (the step's two drafted positions),
    each as the next token after its prefix, and of the two together, against the target's."""
    from collections import Counter

    from test_heads import chi_square_table

    tables = {"2nd": (Counter(pair[0] for pair in pairs), dict(enumerate(joint.sum(1).tolist()))),
              "3rd": (Counter(pair[1] for pair in pairs), dict(enumerate(joint.sum(0).tolist()))),
              "pair": (Counter(pairs), {(b, c): float(joint[b, c]) for b in range(6) for c in range(6)})}
    return {name: chi2_p_value(*chi_square_table(observed, expected, len(pairs))) for name, (observed, expected) in tables.items()}


def test_the_p_value_matches_the_chi_square_tables():
    assert chi2_p_value(20.515, 5) == pytest.approx(0.001, rel=1e-3)
    assert chi2_p_value(15.086, 5) == pytest.approx(0.01, rel=1e-3)
    assert chi2_p_value(42.980, 24) == pytest.approx(0.01, rel=1e-3)
    assert chi2_p_value(0.0, 3) == 1.0


@pytest.mark.slow
def test_sampled_replies_with_a_cross_vocabulary_draft_follow_the_target(small_target, letters_draft, tiny_tokenizer):
    """T = 1, TLI through the loop, 2,000 seeded replies: every next-token distribution the
    step drafts (2nd, 3rd token, and both) at p > 0.01 against the target's exact one, the 4th too."""
    from test_heads import REPLIES, chi_square_table, exact_joint

    joint, fourth = exact_joint(small_target, PROMPT_IDS, 1.0)
    pairs, fourths, sources = sampled_pairs(tli_engine(small_target, letters_draft, tiny_tokenizer), REPLIES)
    assert 0.1 < sources.count(Source.DRAFT) / len(sources) < 0.9
    assert Source.RECOVERED in sources and Source.BONUS in sources
    p_values = next_token_p_values(pairs, joint)
    from collections import Counter

    p_values["4th"] = chi2_p_value(*chi_square_table(Counter(fourths), dict(enumerate(fourth.tolist())), len(fourths)))
    assert min(p_values.values()) > 0.01, p_values


@pytest.mark.slow
def test_the_statistic_rejects_drafting_without_the_mask(small_target, letters_draft, tiny_tokenizer):
    """Not masking: the draft's tokens outside the intersection drafted too, each as the target
    token it was wrongly paired with (x as a, ab as b, z as d), its probability alone carried:
    the same next-token statistics fall below p = 0.01, on a quarter of the replies."""
    from test_heads import REPLIES, exact_joint

    wrong = letters_map()
    unmasked = wrong.draft_to_target.copy()
    for token, paired in (("x", 0), ("ab", 1), ("z", 3), ("y", 4)):
        unmasked[DRAFT_TOKENS.index(token)] = paired
    wrong = VocabMap(unmasked, wrong.target_offsets, wrong.target_blob, wrong.draft_byte_ids,
                     wrong.draft_shareable, wrong.target_shareable, 0)
    joint, _ = exact_joint(small_target, PROMPT_IDS, 1.0)
    pairs, _, _ = sampled_pairs(tli_engine(small_target, letters_draft, tiny_tokenizer, wrong), REPLIES // 4)
    p_values = next_token_p_values(pairs, joint)
    assert p_values["2nd"] < 0.01 and p_values["pair"] < 0.01, p_values


def test_the_engine_says_the_overlap_while_the_cross_vocabulary_draft_drafts(small_target, letters_draft, tiny_tokenizer):
    engine = tli_engine(small_target, letters_draft, tiny_tokenizer)
    lookup = engine.with_method("ngram")
    assert lookup.info.draft_vocab == ""  # prompt lookup drafts from the target's own tokens
    assert lookup.with_method("draft").info.draft_vocab == "50% shared"  # a, b, c, f of the draft's eight


def test_the_engine_holds_a_cross_vocabulary_draft_as_its_draft_model(small_target, letters_draft, tiny_tokenizer):
    """It is closed with the engine, given the engine's threads and timed by the bench, as a
    draft of the target's tokenizer is (it was None: the draft model never closed)."""
    engine = tli_engine(small_target, letters_draft, tiny_tokenizer)
    assert engine.draft_cached() is engine.proposer.draft
    assert engine.draft_model is letters_draft
