"""τ and the acceptance counts, as vLLM defines them, on every path that shows them.

The reply below has what the old τ (1 + accepted / every step) got wrong: a prefill step and
a step that drafted nothing, neither of which vLLM counts as a draft.
"""

from __future__ import annotations

import re

import pytest

from spectui.core.events import Done, Source, Step
from spectui.core.stats import AcceptanceCounts, count_acceptance, summarize

D, R, B, T = Source.DRAFT, Source.RECOVERED, Source.BONUS, Source.TARGET
K = 4


def reply_steps() -> list[Step]:
    return [
        Step((1,), (T,), "a", k=K),  # the prefill: the target's first token, nothing drafted
        Step((2, 3, 4), (D, D, R), "bcd", drafted=(2, 3, 9, 9), k=K),  # 2 of 4 accepted
        Step((5,), (T,), "e", k=K),  # prompt lookup found nothing to propose
        Step((6, 7, 8, 9, 10), (D, D, D, D, B), "fghij", drafted=(6, 7, 8, 9), k=K),  # all 4
        Step((11,), (R,), "k", drafted=(12, 13), k=K),  # none of 2 accepted
        # the reply stopped inside this step: 3 drafts accepted, 2 emitted (the stop token last)
        Step((14, 15), (D, D), "l", drafted=(14, 15, 16, 17), k=K, accepted_count=3),
    ]


ACCEPTED, DRAFTING_STEPS, STEPS = 2 + 4 + 0 + 3, 4, 6


def test_tau_divides_by_the_drafting_steps_only():
    stats = summarize(reply_steps(), 1.0)
    assert (stats.num_accepted, stats.num_drafts, stats.num_steps) == (ACCEPTED, DRAFTING_STEPS, STEPS)
    assert stats.tau == pytest.approx(1 + ACCEPTED / DRAFTING_STEPS)  # 3.25
    # the all-steps figure has its own name, and it is not τ on this reply
    assert stats.tokens_per_forward == pytest.approx(1 + ACCEPTED / STEPS)  # 2.5
    assert stats.tokens_per_forward != pytest.approx(stats.tau)
    assert stats.as_dict()["tau"] == stats.tau and stats.as_dict()["num_drafts"] == DRAFTING_STEPS
    assert summarize([Step((1,), (T,), "a")], 1.0).tau is None  # nothing drafted: no τ


def test_counts_match_vllms_spec_decoding_stats_and_merge():
    counts = count_acceptance(reply_steps())
    assert counts.num_drafts == DRAFTING_STEPS
    assert counts.num_draft_tokens == 4 + 4 + 2 + 4
    assert counts.num_accepted_tokens == ACCEPTED
    assert counts.num_accepted_tokens_per_pos == [3, 3, 2, 1]
    assert counts.num_draft_tokens_per_pos == [4, 4, 3, 3]
    assert counts.per_position == pytest.approx([3 / 4, 3 / 4, 2 / 3, 1 / 3])
    assert counts.num_rejections == 3 and counts.alpha == pytest.approx(ACCEPTED / (ACCEPTED + 3))
    steps = reply_steps()
    merged = count_acceptance(steps[:3]).merged(count_acceptance(steps[3:]))
    assert merged == counts
    assert AcceptanceCounts().merged(counts) == counts and counts.copy() == counts


@pytest.mark.vllm
def test_tau_is_the_mean_acceptance_length_vllm_logs():
    """vLLM's own stats object and logger, fed as its scheduler feeds them (one observe_draft
    per step that scheduled drafts), print the τ spectui computes."""
    metrics = pytest.importorskip("vllm.v1.spec_decode.metrics")
    vllm_stats = metrics.SpecDecodingStats.new(K)
    for step in reply_steps():
        if step.num_drafted:
            vllm_stats.observe_draft(step.num_drafted, step.num_accepted)
    logging = metrics.SpecDecodingLogging()
    logging.observe(vllm_stats)
    lines = []
    logging.log(log_fn=lambda message, *args: lines.append(message % args))
    logged = float(re.search(r"Mean acceptance length: ([0-9.]+)", lines[0]).group(1))
    ours = count_acceptance(reply_steps())
    assert (ours.num_drafts, ours.num_draft_tokens, ours.num_accepted_tokens) == (
        vllm_stats.num_drafts, vllm_stats.num_draft_tokens, vllm_stats.num_accepted_tokens)
    assert ours.num_accepted_tokens_per_pos == vllm_stats.num_accepted_tokens_per_pos
    assert logged == pytest.approx(summarize(reply_steps(), 1.0).tau, abs=0.005)
    assert logged != pytest.approx(1 + ACCEPTED / STEPS, abs=0.005)  # the old τ


def test_the_vllm_engines_steps_give_the_tau_of_its_counters():
    """The vLLM engine turns vLLM's per-step counts into Steps: their τ is the one those
    counts give, 1 + accepted / steps that drafted."""
    from spectui.engines.provenance import StepCount
    from spectui.engines.vllm.engine import _ReplyState

    state = _ReplyState(k=K, temperature=0.0, method="ngram", started=0.0)
    counts = [StepCount(1, 0, 0), StepCount(3, 4, 2), StepCount(1, 0, 0), StepCount(5, 4, 4), StepCount(1, 2, 0),
              StepCount(2, 4, 3)]  # the last: stopped inside the step, 3 accepted and 2 emitted
    steps = []
    for index, count in enumerate(counts):
        steps += state.steps_for(list(range(count.num_tokens)), "x", [count], float(index + 1))
    drafting = [count for count in counts if count.num_drafted]
    vllm_tau = 1 + sum(count.num_accepted for count in drafting) / len(drafting)
    assert summarize(steps, 1.0).tau == pytest.approx(vllm_tau)


def test_json_panel_and_bench_show_the_same_tau_for_one_reply():
    from spectui.bench.measure import arm_result
    from spectui.bench.runs import Arm, ArmReply
    from spectui.measure.run import MeasuredReply
    from spectui.chat_session.stats import ReplyTracker, SessionTracker, panel_data

    steps = reply_steps()
    expected = 1 + ACCEPTED / DRAFTING_STEPS
    reply = MeasuredReply(list(steps), Done("stop", seconds=1.0))
    assert reply.stats.as_dict()["tau"] == pytest.approx(expected)  # --json's stats
    tracker = ReplyTracker(0.0)
    for index, step in enumerate(steps):
        tracker.add(step, 0.1 * (index + 1))
    assert panel_data(tracker, SessionTracker(), K, 0.0, 1.0).tau == pytest.approx(expected)  # the panel
    arm = Arm("spectui", "ngram", K)
    bench = arm_result(arm, [ArmReply(arm, reply.token_ids, 1.0, 0.1, steps)], None)
    assert bench.tau == pytest.approx(expected)  # the bench
