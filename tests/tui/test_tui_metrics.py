"""Rolling tokens/s, TTFT, memory, and the numbers the panels derive from Steps."""

from __future__ import annotations

import pytest

from spectui.core.events import Done, Source, Step
from spectui.core.stats import count_acceptance
from spectui.core.theory import best_k, expected_tokens, linear_verify_cost
from spectui.measure.costs import StepTimings
from spectui.measure.metrics import ReplyClock, RollingRate, format_bytes, read_memory
from spectui.chat_session.stats import ReplyTracker, SessionTracker, panel_data
from spectui.tui.widgets.stats_panel import panel_lines


def drafted_step(k, accepted, draft_seconds=0.0, verify_seconds=0.0):
    ids = tuple(range(accepted + 1))
    last = Source.BONUS if accepted == k else Source.RECOVERED
    return Step(ids, (Source.DRAFT,) * accepted + (last,), "x" * len(ids),
                drafted=tuple(range(k)), k=k, draft_seconds=draft_seconds, verify_seconds=verify_seconds)


def plain_step(verify_seconds=0.0):
    return Step((0,), (Source.TARGET,), "x", verify_seconds=verify_seconds)


def test_rolling_rate_counts_only_the_window():
    rate = RollingRate(window_s=2.0)
    assert rate.rate(0.0) is None
    for t in range(5):
        rate.add(float(t), 10)  # 10 tokens a second
    assert rate.rate(4.0) == pytest.approx(10.0)
    rate.add(4.5, 100)  # a burst: the window now shows it
    assert rate.rate(4.5) == pytest.approx((10 + 100) / 1.5)
    assert rate.rate(10.0) is None  # everything expired


def test_reply_clock_ttft_and_rate():
    clock = ReplyClock(started=10.0)
    clock.on_tokens(10.5, 1)
    clock.on_tokens(11.0, 4)
    assert clock.time_to_first_token == pytest.approx(0.5)
    assert clock.tokens_per_s() == pytest.approx(5 / 1.0)


def test_memory_on_cpu_is_process_rss():
    reading = read_memory("cpu")
    assert reading.kind == "RSS" and reading.source == "psutil"
    assert 10 * 2**20 < reading.used_bytes < reading.total_bytes
    assert read_memory("cuda:0").kind in ("RSS", "VRAM")  # no GPU here: falls back
    assert format_bytes(1536 * 2**20) == "1.5 GiB"


def test_tree_rss_counts_this_process_and_says_so():
    from spectui.measure.metrics import tree_rss

    alone = read_memory("cpu")
    tree = tree_rss(pool_bytes=2**30)
    assert tree.with_children and not alone.with_children
    assert tree.used_bytes >= alone.used_bytes * 0.9 and tree.pool_bytes == 2**30


def test_tree_rss_lists_children_again_only_after_a_while(monkeypatch):
    import subprocess
    import sys

    from spectui.measure import metrics

    def listed() -> set[int]:
        return {process.pid for process in metrics._tree[1]}

    monkeypatch.setattr(metrics, "_tree", None)
    metrics.tree_rss()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        metrics.tree_rss()
        assert child.pid not in listed()  # the panel's twice-a-second reading reuses the list
        monkeypatch.setattr(metrics, "CHILDREN_RESCAN_SECONDS", 0.0)
        metrics.tree_rss()
        assert child.pid in listed()
    finally:
        child.kill()
        child.wait()
    monkeypatch.setattr(metrics, "CHILDREN_RESCAN_SECONDS", 3600.0)
    assert child.pid in listed() and metrics.tree_rss().used_bytes > 0  # a child gone since the listing is skipped


def test_alpha_estimate_is_the_iid_maximum_likelihood():
    # Accept with probability a: successes / (successes + failures).
    steps = [drafted_step(4, 4), drafted_step(4, 1), drafted_step(2, 0), plain_step()]
    assert count_acceptance(steps).alpha == pytest.approx(5 / (5 + 2))
    assert count_acceptance([plain_step()]).alpha is None


def estimate_costs(steps, engine_stats=None):
    timings = StepTimings()
    for step in steps:
        timings.add(step)
    return timings.estimate(engine_stats)


def test_costs_from_timings_with_and_without_a_plain_step():
    steps = [drafted_step(4, 2, draft_seconds=0.004, verify_seconds=0.014)] * 3
    with_plain = estimate_costs(steps + [plain_step(0.010)])
    assert with_plain.draft_cost == pytest.approx(0.1)  # 1 ms per draft / 10 ms per target step
    assert with_plain.verify_slope == pytest.approx(0.1)  # 14 ms at k=4 = 1 + 0.1*4
    guessed = estimate_costs(steps)
    assert guessed.estimated and guessed.verify_slope == pytest.approx(0.1)
    assert guessed.draft_cost == pytest.approx(0.1)
    engine_given = estimate_costs(steps, {"draft_cost": 0.05, "verify_slope": 0.2})
    assert (engine_given.draft_cost, engine_given.verify_slope, engine_given.estimated) == (0.05, 0.2, False)


def test_panel_data_from_a_reply_matches_stats_and_theory():
    reply = ReplyTracker(started=0.0)
    steps = [plain_step(0.01)] + [drafted_step(4, a, 0.004, 0.014) for a in (4, 3, 0, 4)]
    for t, step in enumerate(steps, start=1):
        reply.add(step, t * 0.1)
    session = SessionTracker()
    data = panel_data(reply, session, k=4, temperature=0.0, now=0.5)
    assert data.gamma_reply == pytest.approx(11 / 16)
    assert data.gamma_session == pytest.approx(11 / 16)  # the streaming reply counts
    assert data.tau == pytest.approx(1 + 11 / 4)  # over the 4 drafting steps, as vLLM: not the prefill
    assert data.per_position == pytest.approx((0.75, 0.75, 0.75, 0.5))
    assert data.alpha_series == (None, 1.0, 0.75, 0.0, 1.0)
    assert data.time_to_first_token == pytest.approx(0.1)
    alpha = 11 / 13
    assert data.alpha == pytest.approx(alpha)
    assert data.theory.expected_tokens == pytest.approx(expected_tokens(alpha, 4))
    # v(k) timed at k = 4 alone says nothing of its slope: no best k, and the panel says why
    assert data.theory.best_k is None and data.theory.missing == "v(k) timed at k=4 only: needs another k"
    text = "\n".join("".join(p if isinstance(p, str) else p[0] for p in line) for line in panel_lines(data, 34))
    assert "best k: measuring… v(k) timed at" in text and "best k    " not in text
    assert text.count("predicted") == 1 and "predicted ×" in text and "from α 0.85" in text
    reply.finish(Done("stop", seconds=2.0, time_to_first_token=0.2), 0.6)
    session.add_reply(reply)
    done = panel_data(reply, session, k=4, temperature=0.0, now=9.0)
    # the engine's seconds, from its first token on: the prefill is not decoding (it shows as TTFT)
    assert done.rate_reply == pytest.approx((reply.stats().num_tokens - 1) / (2.0 - 0.2))
    assert done.rate_now is None
    assert done.time_to_first_token == pytest.approx(0.2)
    assert session.gamma() == pytest.approx(11 / 16)


def test_best_k_once_v_of_k_is_timed_at_two_k():
    reply = ReplyTracker(started=0.0)
    steps = [plain_step(0.01)] + [drafted_step(k, 2, 0.001 * k, 0.01 * (1 + 0.1 * k)) for k in (2, 4, 2, 4)]
    for t, step in enumerate(steps, start=1):
        reply.add(step, t * 0.1)
    theory = panel_data(reply, SessionTracker(), k=4, temperature=0.0, now=0.5).theory
    assert theory.cost.verify_slope == pytest.approx(0.1) and theory.cost.slope_measured
    assert theory.best_k == best_k(theory.alpha, 0.1, linear_verify_cost(0.1))[0]
    no_plain_step = StepTimings()
    no_plain_step.add_reply(steps[1:])  # the line through the two k gives the plain step's time
    assert no_plain_step.estimate().verify_slope == pytest.approx(0.1)


def test_the_end_of_a_reply_describes_the_reply_not_its_last_step():
    reply = ReplyTracker(started=0.0)
    # adaptive k's shape: drafts early, a last step at k = 0; plain steps timed at 10 ms
    steps = [plain_step(0.01), drafted_step(4, 4, 0.004, 0.014), drafted_step(4, 4, 0.004, 0.014),
             drafted_step(2, 2, 0.002, 0.012), plain_step(0.01)]
    for t, step in enumerate(steps, start=1):
        reply.add(step, t * 0.1)
    reply.finish(Done("stop", seconds=0.5), 0.6)
    session = SessionTracker()
    session.add_reply(reply)
    data = panel_data(reply, session, k=0, temperature=0.0, now=1.0)
    figures = data.theory.reply
    assert figures.mean_k == pytest.approx(10 / 5) and figures.tokens_per_step == pytest.approx(15 / 5)
    assert data.theory.speedup > 1.5  # the reply's steps drafted: not the 1.00 of its last k = 0 step
    # 14 tokens in 0.018 + 0.018 + 0.014 + 0.01 s of steps after the prefill, a plain step is 10 ms
    assert data.theory.measured_speedup == pytest.approx(14 / 0.06 * 0.01)
    text = "\n".join("".join(p if isinstance(p, str) else p[0] for p in line) for line in panel_lines(data, 34))
    assert "k mean    2.0" in text and "E(α,k=0)" not in text and "measured  ×2.33 vs k=0 steps" in text
