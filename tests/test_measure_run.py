"""run_reply, the one timed reply, and the cost estimator the panels and the bench share."""

from __future__ import annotations

import pytest

from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.measure.costs import DEFAULT_VERIFY_SLOPE, StepTimings, timings_of
from spectui.measure.run import run_reply

from fake_engines import StepsEngine, Ticks

D, R, T = Source.DRAFT, Source.RECOVERED, Source.TARGET


AFTER_DONE = Step((99,), (T,), "after the Done")  # must never be read


def test_run_reply_times_the_reply_on_the_callers_clock():
    steps = [Step((1,), (T,), "a"), Step((2, 3, 4), (D, D, R), "bcd", drafted=(2, 3, 5), k=3),
             Step((5, 6), (D, R), "ef", drafted=(5, 0, 0), k=3)]
    engine = StepsEngine([*steps, Done("stop", seconds=9.0), AFTER_DONE])
    seen = []
    reply = run_reply(engine, [], GenerationParams(), Control(3), lambda step, r: seen.append((step, r.arrivals[-1])),
                      clock=Ticks())
    # readings: 1 started, 2 3 4 the steps' arrivals, 5 the Done
    assert seen == [(steps[0], 2.0), (steps[1], 3.0), (steps[2], 4.0)]
    assert (reply.started, reply.arrivals, reply.ended) == (1.0, [2.0, 3.0, 4.0], 5.0)
    assert reply.steps == steps and reply.done.finish_reason == "stop" and engine.stream_closed
    assert reply.wall_seconds == 4.0 and reply.first_token_seconds == 1.0 and reply.first_chunk_tokens == 1
    assert reply.tokens_per_s == pytest.approx(6 / 4.0)
    assert reply.decode_tokens_per_s == pytest.approx(5 / 3.0)  # after the first token
    assert reply.stats.seconds == 9.0  # the stats keep the engine's own timing


def test_a_stream_without_done_ends_when_the_engine_stops():
    no_done = StepsEngine([Step((1, 2), (T, T), "ab")], ends=False)
    reply = run_reply(no_done, [], GenerationParams(), Control(0), clock=Ticks())
    assert reply.done is None and (reply.started, reply.ended) == (1.0, 3.0)
    assert reply.first_chunk_tokens == 2 and reply.decode_tokens_per_s is None  # no token after the first chunk


def step(drafted: int, verify: float, draft: float = 0.0, method: str = "draft") -> Step:
    ids = (0,) if not drafted else (0, 1)
    sources = (T,) if not drafted else (D, R)
    return Step(ids, sources, "", drafted=tuple(range(drafted)), k=drafted, draft_seconds=draft,
                verify_seconds=verify, method=method if drafted else "")


def test_costs_are_medians_so_one_slow_step_moves_nothing():
    steps = [step(0, 0.010), step(0, 0.010), step(0, 0.500),  # one plain step in a slow moment
             step(4, 0.014, 0.004), step(4, 0.014, 0.004), step(4, 0.900, 0.400)]
    timings = StepTimings()
    for each in steps:
        timings.add(each)
    estimate = timings.estimate()
    assert estimate.draft_cost == pytest.approx(0.1) and estimate.verify_slope == pytest.approx(0.1)
    assert estimate.estimated
    # the bench reads the same estimator: the same c and v(4) for the same steps
    target = timings.target_seconds()
    assert timings.draft_cost(target) == pytest.approx(estimate.draft_cost)
    assert timings.verify_cost(4, target) == pytest.approx(1 + 4 * estimate.verify_slope)


def test_without_a_plain_step_one_timed_k_backs_the_target_out_with_the_default_slope():
    timings = timings_of([[step(0, 5.0), step(2, 0.012, 0.002), step(2, 0.012, 0.002)]])  # the first: the prefill
    assert 0 not in timings.verify
    estimate = timings.estimate()
    assert estimate.verify_slope == DEFAULT_VERIFY_SLOPE and not estimate.slope_measured
    target = 0.012 / (1 + 2 * DEFAULT_VERIFY_SLOPE)
    assert estimate.draft_cost == pytest.approx(0.001 / target)
    assert StepTimings().estimate() is None


def test_verify_forwards_over_drafts_with_no_drafting_timed_give_no_estimate_rather_than_no_c():
    timings = StepTimings()
    timings.verify[3] = [0.012]  # the drafts' own time was never recorded: c cannot be told
    assert timings.draft_seconds() is None and timings.estimate() is None


def test_without_a_plain_step_two_timed_ks_give_the_line_through_them():
    timings = timings_of([[step(0, 5.0), step(2, 0.013, 0.002), step(4, 0.016, 0.004)]])  # t(n) = 0.010 + 0.0015 n
    estimate = timings.estimate()
    assert estimate.slope_measured and estimate.verify_slope == pytest.approx(0.15)
    assert estimate.draft_cost == pytest.approx(0.001 / 0.010)


def test_timed_ks_that_no_line_fits_are_a_guess_not_a_measured_slope_and_the_engines_load_timing_stands_in():
    # ggml verifies in pieces: at k 4 a step runs 2 rows or 4 (0.10 s, 0.30 s here), a "line" through
    # them puts the plain step below zero. The panel had called the default 0.1 measured and predicted
    # ×2.01 for SmolLM2 drafting for the 1.5B, which ran at 0.57× its k = 0.
    timings = timings_of([[step(0, 5.0), step(2, 0.10, 0.02), step(4, 0.30, 0.04)]])
    guessed = timings.estimate()
    assert guessed.verify_slope == DEFAULT_VERIFY_SLOPE and guessed.slope_guessed and not guessed.slope_measured
    timed = timings.estimate(load_slope=0.77)
    assert timed.verify_slope == 0.77 and timed.slope_measured and timed.slope_timed_at_load
    target = (0.10 / (1 + 2 * 0.77) + 0.30 / (1 + 4 * 0.77)) / 2
    assert timed.draft_cost == pytest.approx(0.01 / target)
    # the engine's figure comes before a line through pieced forwards (the walk's 'v(k)=1+2.48k'),
    # and timed plain steps before both
    pieces = timings_of([[step(0, 5.0), step(2, 0.013, 0.002), step(4, 0.016, 0.004)]])
    assert pieces.estimate().verify_slope == pytest.approx(0.15)
    assert pieces.estimate(load_slope=0.77).verify_slope == 0.77
    with_plain = timings_of([[step(0, 5.0), step(0, 0.010), step(4, 0.014, 0.004)]]).estimate(load_slope=0.77)
    assert with_plain.verify_slope == pytest.approx(0.1) and not with_plain.slope_timed_at_load


def test_timings_merge_as_if_added_together():
    first = [step(0, 0.01), step(2, 0.02, 0.004, "ngram"), step(4, 0.03, 0.008)]
    second = [step(0, 0.02), step(4, 0.05, 0.004)]
    together = StepTimings()
    for each in first + second:
        together.add(each)
    apart = StepTimings(), StepTimings()
    for timings, steps in zip(apart, (first, second)):
        for each in steps:
            timings.add(each)
    assert apart[0].merged(apart[1]) == together
    assert together.draft_seconds("ngram") == pytest.approx(0.002) and together.draft_seconds() == pytest.approx(0.002)


def test_a_verify_that_stopped_early_is_timed_as_the_drafts_it_ran():
    """v(n) is the forward over n drafts: a piecewise verify that ran 2 of 8 drafts is a v(2) figure."""
    timings = StepTimings()
    for seconds, verified in ((0.1, None), (0.22, 2), (0.3, None)):
        drafted = () if seconds == 0.1 else tuple(range(8))
        timings.add(Step((1,), (Source.RECOVERED if drafted else Source.TARGET,), "", drafted=drafted, k=len(drafted),
                         draft_seconds=0.001 * len(drafted), verify_seconds=seconds, verified_count=verified))
    assert timings.verify_seconds(2) == 0.22 and timings.verify_seconds(8) == 0.3
