"""Sampled replies through the whole engine loop follow the target's own distribution, at
T > 0 with top-p: a draft model's drafts (the rejection rule, its residual, the bonus) and
prompt lookup's copies (point masses, k changing at random between steps). Each test's
statistic is also shown to reject a deliberately wrong rule, or it would prove little.

The target has six tokens, so the exact distribution of a reply's 2nd and 3rd tokens, and
of its 4th, is enumerated; replies are 4 tokens, so a step verifies up to 2 drafts.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from spectui.core.events import Control, GenerationParams, Source, Step
from spectui.engines.speculative import loop
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.torch_backend.backend import torch_draft_proposer
from spectui.engines.speculative.sampling import sample
from spectui.engines.speculative.verify import Verdict
from test_engine import make_engine
from small_distribution import make_small_target
from test_heads import REPLIES, SMALL_VOCAB, TEMPERATURE, chi2_critical_0_001, chi_square_table, exact_joint, tree_chi_squares

TOP_P = 0.8
PROMPT_IDS = [1, 2, 3, 4, 5, 1]
LOOKUP_PROMPT_IDS = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]  # prompt lookup finds copies all along


@pytest.fixture(scope="module")
def small_target():
    return make_small_target()


@pytest.fixture(scope="module")
def small_draft():
    """Another random six-token model: it drafts often against the target's choice."""
    from tiny_models import make_tiny_model

    model = make_tiny_model(6, seed=9)
    with torch.no_grad():
        model.lm_head.weight.mul_(0.25)
    return model


@pytest.fixture(scope="module")
def exact(small_target):
    return {prompt: exact_joint(small_target, list(prompt), TOP_P) for prompt in (tuple(PROMPT_IDS), tuple(LOOKUP_PROMPT_IDS))}


def sampled_replies(engine, prompt_ids, replies, k_for_step):
    """(2nd, 3rd) and 4th tokens of seeded 4-token replies, and the steps that drafted.
    k_for_step(seed) gives the k each step reads in turn."""
    engine.stop_ids = set()  # the tiny tokenizer's <eos> is one of the six ids
    pairs, fourths, drafting = [], [], []
    for seed in range(replies):
        ks = k_for_step(seed)
        control = Control(k=next(ks), temperature=TEMPERATURE)
        tokens = []
        for event in engine.stream_ids(prompt_ids, GenerationParams(max_tokens=4, seed=seed, top_p=TOP_P), control):
            if isinstance(event, Step):
                tokens += event.token_ids
                drafting += [event] if event.drafted else []
                control.live.update(k=next(ks))
        pairs.append((tokens[1], tokens[2]))
        fourths.append(tokens[3])
    return pairs, fourths, drafting


def fixed_k(seed):
    while True:
        yield 2


def random_ks(seed):
    """A k from 0 to 3 before every step, drawn from the reply's seed."""
    chooser = random.Random(seed)
    while True:
        yield chooser.randint(0, 3)


def draft_model_replies(small_target, small_draft, tiny_tokenizer, replies):
    engine = make_engine(small_target, tiny_tokenizer, torch_draft_proposer(small_draft))
    return sampled_replies(engine, PROMPT_IDS, replies, fixed_k)


def lookup_replies(small_target, tiny_tokenizer, replies):
    engine = make_engine(small_target, tiny_tokenizer, NgramProposer(1, 3))
    return sampled_replies(engine, LOOKUP_PROMPT_IDS, replies, random_ks)


def test_a_draft_models_sampled_replies_follow_the_target_with_top_p(small_target, small_draft, tiny_tokenizer, exact):
    joint, fourth = exact[tuple(PROMPT_IDS)]
    pairs, fourths, drafting = draft_model_replies(small_target, small_draft, tiny_tokenizer, REPLIES)
    sources = [source for step in drafting for source in step.sources]
    # Every way out of a verify ran: kept drafts, a recovered token, a bonus.
    assert 0.1 < sources.count(Source.DRAFT) / len(sources) < 0.9
    assert Source.RECOVERED in sources and Source.BONUS in sources
    (pair_stat, pair_df), (fourth_stat, fourth_df) = tree_chi_squares(pairs, fourths, joint, fourth)
    assert pair_stat < chi2_critical_0_001(pair_df), (pair_stat, pair_df)
    assert fourth_stat < chi2_critical_0_001(fourth_df), (fourth_stat, fourth_df)


def rejected(pairs, joint) -> bool:
    """Whether the (2nd, 3rd) pairs reject the target's joint distribution: a pair it gives
    probability 0 came out, or the chi-square is past the value a correct rule passes 1 seed in 1000."""
    counts = Counter(pairs)
    expected = {(b, c): float(joint[b, c]) for b in range(SMALL_VOCAB) for c in range(SMALL_VOCAB)}
    if any(expected[pair] == 0.0 for pair in counts):
        return True
    statistic, df = chi_square_table(counts, expected, len(pairs))
    return statistic > chi2_critical_0_001(df)


def keep_every_draft(drafted, p_target, p_draft, generator):
    return Verdict(len(drafted), sample(p_target[len(drafted)], generator), Source.BONUS)


def recover_from_the_target(drafted, p_target, p_draft, generator):
    """The rejection rule with its residual replaced by the target's own row."""
    for i, token in enumerate(drafted):
        if float(torch.rand((), generator=generator)) * float(p_draft[i, token]) >= float(p_target[i, token]):
            return Verdict(i, sample(p_target[i], generator), Source.RECOVERED)
    return Verdict(len(drafted), sample(p_target[len(drafted)], generator), Source.BONUS)


@pytest.mark.parametrize("wrong_rule", [keep_every_draft, recover_from_the_target])
def test_the_draft_model_statistic_rejects_a_wrong_rule(small_target, small_draft, tiny_tokenizer, exact, monkeypatch, wrong_rule):
    monkeypatch.setattr(loop, "verify_sampled", wrong_rule)
    pairs, _, _ = draft_model_replies(small_target, small_draft, tiny_tokenizer, REPLIES // 2)
    assert rejected(pairs, exact[tuple(PROMPT_IDS)][0])


def test_prompt_lookups_sampled_replies_follow_the_target_with_top_p_as_k_changes(small_target, tiny_tokenizer, exact):
    joint, fourth = exact[tuple(LOOKUP_PROMPT_IDS)]
    pairs, fourths, drafting = lookup_replies(small_target, tiny_tokenizer, REPLIES)
    assert {step.k for step in drafting} >= {1, 2}, "k changed between the replies' steps"
    sources = [source for step in drafting for source in step.sources]
    assert 0.1 < sources.count(Source.DRAFT) / len(sources) < 0.9
    assert Source.RECOVERED in sources and Source.BONUS in sources
    (pair_stat, pair_df), (fourth_stat, fourth_df) = tree_chi_squares(pairs, fourths, joint, fourth)
    assert pair_stat < chi2_critical_0_001(pair_df), (pair_stat, pair_df)
    assert fourth_stat < chi2_critical_0_001(fourth_df), (fourth_stat, fourth_df)


def keep_a_copy_by_its_probability(drafted, p_target, draws):
    """The rule for a point mass, wrongly: keep the copy with probability p(copy), else draw
    from the target's row with the copy still in it (the copy comes out too often)."""
    for i, token in enumerate(drafted):
        generator = draws(i)
        if float(torch.rand((), generator=generator)) >= float(p_target[i, token]):
            return Verdict(i, sample(p_target[i], generator), Source.RECOVERED)
    return Verdict(len(drafted), sample(p_target[len(drafted)], draws(len(drafted))), Source.BONUS)


def test_the_prompt_lookup_statistic_rejects_a_wrong_rule(small_target, tiny_tokenizer, exact, monkeypatch):
    monkeypatch.setattr(loop, "verify_copies", keep_a_copy_by_its_probability)
    pairs, _, _ = lookup_replies(small_target, tiny_tokenizer, REPLIES)
    assert rejected(pairs, exact[tuple(LOOKUP_PROMPT_IDS)][0])
