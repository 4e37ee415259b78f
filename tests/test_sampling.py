"""target_probs and sample: temperature, nucleus filtering, seeded draws."""

from __future__ import annotations

import math

import numpy
import pytest
import torch

from spectui.engines.speculative.sampling import sample, target_probs
from spectui.core.errors import SpectuiError, UsageError


def probs_of(values: list[float]) -> torch.Tensor:
    """Logits whose softmax at T = 1 is exactly `values` (up to float rounding)."""
    return torch.log(torch.tensor(values))


def kept_ids(probs: torch.Tensor) -> set[int]:
    return set(torch.nonzero(probs > 0).flatten().tolist())


def test_no_filter_is_softmax():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0])
    assert torch.allclose(target_probs(logits, 1.0, 1.0), torch.softmax(logits, dim=-1))


def test_temperature_scales_logits():
    logits = torch.tensor([2.0, 1.0, 0.0])
    for temperature in (0.25, 0.5, 2.0):
        expected = torch.softmax(logits / temperature, dim=-1)
        assert torch.allclose(target_probs(logits, temperature, 1.0), expected)
    # Lower temperature sharpens, higher flattens.
    assert target_probs(logits, 0.5, 1.0)[0] > target_probs(logits, 1.0, 1.0)[0]
    assert target_probs(logits, 2.0, 1.0)[0] < target_probs(logits, 1.0, 1.0)[0]
    # Ratios follow exp(delta / T).
    probs = target_probs(logits, 0.5, 1.0)
    assert math.isclose(float(probs[0] / probs[1]), math.exp(2.0), rel_tol=1e-5)


@pytest.mark.parametrize(
    ("top_p", "expected"),
    [
        (0.01, {0}),  # the top token is always kept
        (0.5, {0}),  # 0.5 >= 0.5: one token is enough
        (0.6, {0, 1}),
        (0.75, {0, 1}),
        (0.85, {0, 1, 2}),
        (0.95, {0, 1, 2, 3}),
        (1.0, {0, 1, 2, 3, 4}),
    ],
)
def test_top_p_keeps_smallest_set_reaching_p(top_p, expected):
    probs = target_probs(probs_of([0.5, 0.3, 0.1, 0.06, 0.04]), 1.0, top_p)
    assert kept_ids(probs) == expected
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-6)


def test_top_p_renormalises_in_proportion():
    probs = target_probs(probs_of([0.5, 0.3, 0.1, 0.06, 0.04]), 1.0, 0.75)
    assert torch.allclose(probs, torch.tensor([0.625, 0.375, 0.0, 0.0, 0.0]), atol=1e-6)


def test_top_p_works_on_unsorted_ids_and_rows():
    # Order in the vocabulary must not matter; each row is filtered on its own.
    logits = torch.stack(
        [probs_of([0.1, 0.6, 0.05, 0.25]), probs_of([0.25, 0.25, 0.25, 0.25])]
    )
    probs = target_probs(logits, 1.0, 0.8)
    assert kept_ids(probs[0]) == {1, 3}
    assert probs.shape == (2, 4)
    assert torch.allclose(probs.sum(dim=-1), torch.ones(2))


def test_top_p_ties_break_by_lowest_id():
    probs = target_probs(torch.zeros(6), 1.0, 0.5)  # six equal tokens, half the mass
    assert kept_ids(probs) == {0, 1, 2}
    again = target_probs(torch.zeros(6), 1.0, 0.5)
    assert torch.equal(probs, again)


def test_returns_float32_from_half_logits():
    probs = target_probs(torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16), 0.7, 0.9)
    assert probs.dtype == torch.float32


@pytest.mark.parametrize(("temperature", "top_p"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (1.0, 1.5)])
def test_bad_settings_are_usage_errors(temperature, top_p):
    with pytest.raises(UsageError) as raised:
        target_probs(torch.zeros(3), temperature, top_p)
    assert isinstance(raised.value, SpectuiError)
    assert "\n" not in str(raised.value)


def test_seeded_sampling_reproduces():
    probs = torch.softmax(torch.randn(50, generator=torch.Generator().manual_seed(3)), dim=-1)

    def draws(seed: int) -> list[int]:
        generator = torch.Generator().manual_seed(seed)
        return [sample(probs, generator) for _ in range(40)]

    assert draws(11) == draws(11)
    assert draws(11) != draws(12)


def test_sample_respects_probabilities():
    generator = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.0, 0.8, 0.2, 0.0])
    counts = [0, 0, 0, 0]
    for _ in range(2000):
        counts[sample(probs, generator)] += 1
    assert counts[0] == counts[3] == 0
    # 1600 expected, sd ~ 18: 6 sd either way.
    assert 1490 < counts[1] < 1710


def test_sample_needs_a_vector():
    with pytest.raises(ValueError):
        sample(torch.ones(2, 3) / 3, None)


def test_sample_follows_the_distribution_across_blocks_and_never_draws_a_zero():
    # Mass on both sides of block edges (the sampler reads 1024 ids at a time), a spread
    # part, and zeros everywhere else, as top-p leaves a vocabulary.
    probs = torch.zeros(2500)
    named = {0: 0.1, 1023: 0.2, 1024: 0.3, 2047: 0.15, 2499: 0.05}
    for token, mass in named.items():
        probs[token] = mass
    spread = list(range(1100, 1200))
    probs[spread] = 0.2 / len(spread)
    generator = torch.Generator().manual_seed(4)
    draws = 20_000
    counts = {token: 0 for token in named} | {"spread": 0}
    for _ in range(draws):
        token = sample(probs, generator)
        assert probs[token] > 0, token
        counts[token if token in named else "spread"] += 1
    expected = named | {"spread": 0.2}
    statistic = sum((counts[key] - draws * p) ** 2 / (draws * p) for key, p in expected.items())
    assert statistic < 20.515, counts  # chi-square, 5 degrees of freedom, p = 0.001


def test_sample_of_a_point_mass_anywhere_is_that_token():
    generator = torch.Generator().manual_seed(0)
    for token in (0, 1023, 1024, 151_935):
        probs = torch.zeros(151_936)
        probs[token] = 1.0
        assert {sample(probs, generator) for _ in range(5)} == {token}


def test_a_draw_at_the_very_top_of_the_distribution_lands_on_the_last_token_with_mass():
    from spectui.engines.speculative.sampling import _first_above

    cumulative = torch.cumsum(torch.tensor([0.2, 0.0, 0.8, 0.0, 0.0], dtype=torch.float64), 0)
    assert [_first_above(cumulative, value) for value in (0.0, 0.19, 0.2, 0.99)] == [0, 0, 2, 2]
    assert _first_above(cumulative, 1.0) == 2  # rounding left the draw at the total: not a zero


# ---------------------------------------------------------------- the same functions on numpy (ggml)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (1.3, 0.5), (0.5, 0.05)])
def test_numpy_rows_get_the_probabilities_torch_gives(temperature, top_p):
    logits = torch.randn(3, 300, generator=torch.Generator().manual_seed(8)) * 3
    on_torch = target_probs(logits, temperature, top_p)
    on_numpy = target_probs(logits.numpy(), temperature, top_p)
    assert isinstance(on_numpy, numpy.ndarray) and on_numpy.dtype == numpy.float32
    assert numpy.allclose(on_numpy, on_torch.numpy(), atol=1e-6)
    assert ((on_numpy > 0) == (on_torch.numpy() > 0)).all()  # the same nucleus


def test_numpy_top_p_ties_break_by_lowest_id():
    probs = target_probs(numpy.zeros(6, dtype=numpy.float32), 1.0, 0.5)
    assert set(numpy.nonzero(probs)[0].tolist()) == {0, 1, 2}


def test_numpy_sample_follows_the_distribution_across_blocks_and_never_draws_a_zero():
    probs = numpy.zeros(2500, dtype=numpy.float32)
    named = {0: 0.1, 1023: 0.2, 1024: 0.3, 2047: 0.15, 2499: 0.05}
    for token, mass in named.items():
        probs[token] = mass
    probs[1100:1200] = 0.2 / 100
    stream = numpy.random.Generator(numpy.random.PCG64(4))
    draws = 20_000
    counts = {token: 0 for token in named} | {"spread": 0}
    for _ in range(draws):
        token = sample(probs, stream)
        assert probs[token] > 0, token
        counts[token if token in named else "spread"] += 1
    expected = named | {"spread": 0.2}
    statistic = sum((counts[key] - draws * p) ** 2 / (draws * p) for key, p in expected.items())
    assert statistic < 20.515, counts  # chi-square, 5 degrees of freedom, p = 0.001


def test_numpy_seeded_sampling_reproduces_and_the_top_edge_lands_on_mass():
    from spectui.engines.speculative.sampling import _first_above

    probs = target_probs(numpy.random.default_rng(3).normal(size=50).astype(numpy.float32), 1.0, 1.0)

    def draws(seed: int) -> list[int]:
        stream = numpy.random.Generator(numpy.random.PCG64(seed))
        return [sample(probs, stream) for _ in range(40)]

    assert draws(11) == draws(11) and draws(11) != draws(12)
    cumulative = numpy.cumsum(numpy.array([0.2, 0.0, 0.8, 0.0, 0.0]))
    assert [_first_above(cumulative, value) for value in (0.0, 0.19, 0.2, 0.99, 1.0)] == [0, 0, 2, 2, 2]
