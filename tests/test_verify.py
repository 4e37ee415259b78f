"""verify_greedy and verify_sampled: the rules, and the losslessness they promise.

The statistical tests simulate generation with a target and a draft that are fixed,
position-dependent distributions (the token at position t is drawn from row t whatever
came before). The target's own autoregressive output is then a product distribution,
so the joint of the first two emitted tokens must be target[0] x target[1] exactly.
A chi-square test checks it, and the same test is shown to catch two classic mistakes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.engines.speculative.verify import Verdict, verify_greedy, verify_sampled
from spectui.core.events import Source

VOCAB = 6
NUM_POSITIONS = 5  # a step starting at position 1 with k = 3 reads target rows 1..4

# Upper 0.1% points of the chi-square distribution, from standard tables; the
# test below recomputes them from the regularized incomplete gamma function. At this
# level a correct rule fails a given seed 1 time in 1000; the wrong rules land far beyond.
CHI2_CRITICAL_0_001 = {VOCAB - 1: 20.515, VOCAB * VOCAB - 1: 66.619}


# ---------------------------------------------------------------- greedy


def one_hot_logits(argmaxes: Sequence[int], vocab: int = VOCAB) -> torch.Tensor:
    logits = torch.randn(len(argmaxes), vocab, generator=torch.Generator().manual_seed(0))
    logits[torch.arange(len(argmaxes)), torch.tensor(argmaxes)] = 10.0
    return logits


def test_greedy_all_accepted_gives_the_bonus():
    verdict = verify_greedy([3, 1, 4], one_hot_logits([3, 1, 4, 5]))
    assert verdict == Verdict(3, 5, Source.BONUS)


def test_greedy_first_mismatch_gives_the_targets_argmax():
    verdict = verify_greedy([3, 2, 4], one_hot_logits([3, 1, 4, 5]))
    assert verdict == Verdict(1, 1, Source.RECOVERED)
    verdict = verify_greedy([0, 1, 4], one_hot_logits([3, 1, 4, 5]))
    assert verdict == Verdict(0, 3, Source.RECOVERED)


def test_greedy_without_drafts_is_a_plain_target_token():
    assert verify_greedy([], one_hot_logits([2])) == Verdict(0, 2, Source.TARGET)


def test_greedy_ties_go_to_the_lowest_id():
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert verify_greedy([2], logits) == Verdict(0, 1, Source.RECOVERED)


def test_row_count_must_match_the_drafts():
    with pytest.raises(ValueError, match="shape"):
        verify_greedy([1, 2], one_hot_logits([1, 2]))
    with pytest.raises(ValueError, match="shape"):
        verify_sampled([1], torch.full((2, 4), 0.25), torch.full((2, 4), 0.25), None)
    with pytest.raises(ValueError, match="range"):
        verify_sampled([9], torch.full((2, 4), 0.25), torch.full((1, 4), 0.25), None)


# ---------------------------------------------------------------- sampled: exact cases


def test_draft_the_target_cannot_produce_is_always_rejected():
    p_target = torch.tensor([[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    p_draft = torch.tensor([[1.0, 0.0, 0.0]])
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        verdict = verify_sampled([0], p_target, p_draft, generator)
        assert verdict.num_accepted == 0 and verdict.next_source is Source.RECOVERED
        assert verdict.next_token in (1, 2)


def test_draft_the_target_prefers_is_always_accepted():
    # p_target >= p_draft on the drafted id: min(1, ratio) = 1. Also a draft whose draft
    # probability is 0 (a proposer bug or rounding) is kept when the target likes it.
    p_target = torch.tensor([[0.2, 0.8, 0.0], [0.0, 0.0, 1.0]])
    generator = torch.Generator().manual_seed(0)
    for p_draft_row in ([0.5, 0.5, 0.0], [1.0, 0.0, 0.0]):
        verdict = verify_sampled([1], p_target, torch.tensor([p_draft_row]), generator)
        assert verdict == Verdict(1, 2, Source.BONUS)


def test_identical_draft_and_target_accept_everything():
    rows = torch.softmax(torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(1)), -1)
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        verdict = verify_sampled([0, 5, 2], rows, rows[:3], generator)
        assert verdict.num_accepted == 3 and verdict.next_source is Source.BONUS


def test_seed_reproduces_the_verdicts():
    rows = torch.softmax(torch.randn(4, VOCAB, generator=torch.Generator().manual_seed(1)), -1)
    drafts = torch.softmax(torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(2)), -1)

    def verdicts(seed: int) -> list[Verdict]:
        generator = torch.Generator().manual_seed(seed)
        return [verify_sampled([1, 2, 3], rows, drafts, generator) for _ in range(30)]

    assert verdicts(5) == verdicts(5)
    assert verdicts(5) != verdicts(6)


# ---------------------------------------------------------------- sampled: losslessness

Rule = Callable[[Sequence[int], torch.Tensor, "torch.Tensor | None", torch.Generator], Verdict]


def fixed_distributions(seed: int) -> torch.Tensor:
    """[NUM_POSITIONS, VOCAB] rows, different per position, every probability >= 0.05.

    The floor keeps every cell of the two-token joint at >= 10 expected counts in 4000
    replies, where the chi-square approximation is sound.
    """
    generator = torch.Generator().manual_seed(seed)
    peaked = torch.softmax(1.5 * torch.randn(NUM_POSITIONS, VOCAB, generator=generator), -1)
    return 0.7 * peaked + 0.3 / VOCAB


P_TARGET = fixed_distributions(seed=1)
P_DRAFT = fixed_distributions(seed=4)
# What a deterministic proposer (n-gram lookup) drafts at each position.
POINT_DRAFTS = [int(i) for i in torch.argmax(P_DRAFT, dim=-1)]


def simulate_first_two(rule: Rule, k: int, num_replies: int, point_mass: bool = False, seed: int = 0):
    """The first two tokens of num_replies speculative replies, with a fresh step as needed."""
    generator = torch.Generator().manual_seed(seed)
    # Drafts are independent draws from each position's row: draw them all up front.
    draw_pools = [
        iter(torch.multinomial(P_DRAFT[pos], 3 * num_replies, True, generator=generator).tolist())
        for pos in range(NUM_POSITIONS)
    ]
    pairs = []
    for _ in range(num_replies):
        emitted: list[int] = []
        while len(emitted) < 2:
            pos = len(emitted)
            if point_mass:
                drafted = POINT_DRAFTS[pos : pos + k]
                p_draft = None
            else:
                drafted = [next(draw_pools[pos + i]) for i in range(k)]
                p_draft = P_DRAFT[pos : pos + k]
            verdict = rule(drafted, P_TARGET[pos : pos + k + 1], p_draft, generator)
            emitted += list(drafted[: verdict.num_accepted]) + [verdict.next_token]
        pairs.append((emitted[0], emitted[1]))
    return pairs


def chi_square(observed: Counter, expected_probs: dict, total: int) -> float:
    return sum(
        (observed.get(cell, 0) - total * prob) ** 2 / (total * prob)
        for cell, prob in expected_probs.items()
    )


def first_token_statistic(pairs) -> float:
    expected = {token: float(P_TARGET[0, token]) for token in range(VOCAB)}
    return chi_square(Counter(first for first, _ in pairs), expected, len(pairs))


def joint_statistic(pairs) -> float:
    expected = {
        (a, b): float(P_TARGET[0, a] * P_TARGET[1, b]) for a in range(VOCAB) for b in range(VOCAB)
    }
    return chi_square(Counter(pairs), expected, len(pairs))


def test_the_draft_really_differs_from_the_target():
    # Otherwise the losslessness tests below would pass for any rule.
    total_variation = 0.5 * (P_TARGET - P_DRAFT).abs().sum(dim=-1)
    assert bool((total_variation > 0.25).all())
    assert torch.equal(P_TARGET, fixed_distributions(1))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_sampled_output_follows_the_target_distribution(k):
    pairs = simulate_first_two(verify_sampled, k, 4_000)
    assert first_token_statistic(pairs) < CHI2_CRITICAL_0_001[VOCAB - 1]
    assert joint_statistic(pairs) < CHI2_CRITICAL_0_001[VOCAB * VOCAB - 1]


def test_point_mass_drafts_follow_the_target_distribution():
    pairs = simulate_first_two(verify_sampled, 2, 4_000, point_mass=True)
    assert first_token_statistic(pairs) < CHI2_CRITICAL_0_001[VOCAB - 1]
    assert joint_statistic(pairs) < CHI2_CRITICAL_0_001[VOCAB * VOCAB - 1]


def accept_when_target_is_not_smaller(drafted, p_target, p_draft, generator) -> Verdict:
    """WRONG: keeps a draft iff p_target >= p_draft, instead of with probability min(1, ratio)."""
    for i, draft in enumerate(drafted):
        if p_target[i, draft] < p_draft[i, draft]:
            residual = torch.clamp(p_target[i] - p_draft[i], min=0.0)
            token = int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
            return Verdict(i, token, Source.RECOVERED)
    token = int(torch.multinomial(p_target[len(drafted)], 1, generator=generator))
    return Verdict(len(drafted), token, Source.BONUS)


def recover_from_the_target(drafted, p_target, p_draft, generator) -> Verdict:
    """WRONG: the right acceptance test, but the recovered token comes from p_target, not the residual."""
    uniforms = torch.rand(len(drafted), generator=generator)
    for i, draft in enumerate(drafted):
        if uniforms[i] * p_draft[i, draft] >= p_target[i, draft]:
            token = int(torch.multinomial(p_target[i], 1, generator=generator))
            return Verdict(i, token, Source.RECOVERED)
    token = int(torch.multinomial(p_target[len(drafted)], 1, generator=generator))
    return Verdict(len(drafted), token, Source.BONUS)


@pytest.mark.parametrize("wrong_rule", [accept_when_target_is_not_smaller, recover_from_the_target])
def test_the_statistic_catches_a_wrong_rule(wrong_rule):
    pairs = simulate_first_two(wrong_rule, 1, 3_000)
    assert first_token_statistic(pairs) > 3 * CHI2_CRITICAL_0_001[VOCAB - 1]


def chi2_p_value(statistic: float, df: int) -> float:
    """P(chi-square with df degrees of freedom >= statistic): 1 - the lower regularized gamma
    function P(df/2, statistic/2), by its power series."""
    a, z = df / 2, statistic / 2
    if z <= 0:
        return 1.0
    term = total = 1 / a
    n = 0
    while term > 1e-17 * total:
        n += 1
        term *= z / (a + n)
        total += term
    return max(0.0, 1 - total * math.exp(-z + a * math.log(z) - math.lgamma(a)))


def test_critical_values_match_the_chi_square_distribution():
    for df, critical in CHI2_CRITICAL_0_001.items():
        assert chi2_p_value(critical, df) == pytest.approx(0.001, rel=1e-3)


# ---------------------------------------------------------------- sampled: properties


@st.composite
def verify_cases(draw):
    vocab = draw(st.integers(2, 8))
    k = draw(st.integers(0, 4))
    weights = st.lists(st.floats(0.0, 1.0), min_size=vocab, max_size=vocab).filter(
        lambda row: sum(row) > 1e-3
    )

    def rows(count: int) -> torch.Tensor:
        tensor = torch.tensor([draw(weights) for _ in range(count)], dtype=torch.float32)
        return tensor / tensor.sum(dim=-1, keepdim=True)

    p_target = rows(k + 1)
    p_draft = rows(k) if k else torch.zeros(0, vocab)
    drafted = draw(st.lists(st.integers(0, vocab - 1), min_size=k, max_size=k))
    seed = draw(st.integers(0, 2**31 - 1))
    return drafted, p_target, p_draft, seed


@settings(max_examples=100, deadline=None)
@given(verify_cases(), st.booleans())
def test_verdicts_are_consistent(case, point_mass):
    drafted, p_target, p_draft, seed = case
    k = len(drafted)
    generator = torch.Generator().manual_seed(seed)
    verdict = verify_sampled(drafted, p_target, None if point_mass else p_draft, generator)
    assert 0 <= verdict.num_accepted <= k
    assert 0 <= verdict.next_token < p_target.shape[1]
    if verdict.num_accepted == k:
        assert verdict.next_source is (Source.BONUS if k else Source.TARGET)
    else:
        assert verdict.next_source is Source.RECOVERED
    # Nothing the target rules out is ever emitted, accepted draft or target token.
    for i in range(verdict.num_accepted):
        assert p_target[i, drafted[i]] > 0
    assert p_target[verdict.num_accepted, verdict.next_token] > 0


@settings(max_examples=100, deadline=None)
@given(verify_cases(), st.booleans())
def test_one_hot_target_makes_sampling_greedy(case, point_mass):
    drafted, p_target, p_draft, seed = case
    # The T -> 0 limit of the target: all its mass on its argmax.
    one_hot = torch.nn.functional.one_hot(p_target.argmax(dim=-1), p_target.shape[1]).float()
    generator = torch.Generator().manual_seed(seed)
    sampled = verify_sampled(drafted, one_hot, None if point_mass else p_draft, generator)
    assert sampled == verify_greedy(drafted, one_hot)


# ---------------------------------------------------------------- the same rules on numpy rows (ggml)


def on_numpy(seed: int) -> Rule:
    """verify_sampled given numpy rows and a numpy stream, as on the ggml backend (no torch)."""
    import numpy

    stream = numpy.random.Generator(numpy.random.PCG64(seed))

    def rule(drafted, p_target, p_draft, generator) -> Verdict:
        return verify_sampled(drafted, p_target.numpy(), None if p_draft is None else p_draft.numpy(), stream)

    return rule


@pytest.mark.parametrize(("k", "point_mass"), [(1, False), (3, False), (2, True)])
def test_on_numpy_rows_sampled_output_follows_the_target_distribution(k, point_mass):
    pairs = simulate_first_two(on_numpy(k), k, 4_000, point_mass=point_mass)
    assert first_token_statistic(pairs) < CHI2_CRITICAL_0_001[VOCAB - 1]
    assert joint_statistic(pairs) < CHI2_CRITICAL_0_001[VOCAB * VOCAB - 1]


def test_on_numpy_rows_greedy_gives_what_torch_gives():
    for argmaxes, drafted in (([1, 2, 3, 4], [1, 2, 3]), ([1, 2, 3], [1, 5]), ([0, 0], [0]), ([3], [])):
        logits = one_hot_logits(argmaxes)
        assert verify_greedy(drafted, logits.numpy()) == verify_greedy(drafted, logits)
    ties = torch.zeros(1, VOCAB)
    assert verify_greedy([], ties.numpy()).next_token == 0
