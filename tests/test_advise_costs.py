"""The cost profile: JSON both ways, rows past the widest measured, and this machine's profile
measured once per model and backend, then read back from beside the history."""

from __future__ import annotations

from dataclasses import replace

from spectui.advise.advice import new_chooser
from spectui.advise.costs import CostProfile, cached_profile_path, profile_from

PROFILE = CostProfile("smollm2-135m", "ggml Q4_1 · 2 threads", 0.012, {1: 1.0, 2: 1.4, 3: 1.9}, piece=3,
                      context_tokens=300, draft_seconds={"suffix": 0.0002, "ngram": 0.00001})


def test_a_profile_reads_back_as_it_was_written():
    assert profile_from(PROFILE.as_dict(), "test") == PROFILE


def test_llama_cpps_plain_step_reads_back_and_a_profile_without_it_has_none():
    from dataclasses import replace

    import json

    import pytest

    from spectui.advise.costs import profile_json
    from spectui.core.errors import UsageError

    with_anchor = replace(PROFILE, llamacpp_plain_seconds=0.0105)
    assert profile_from(json.loads(profile_json(with_anchor)), "test") == with_anchor
    older = {key: value for key, value in PROFILE.as_dict().items() if key != "llamacpp_plain_seconds"}
    assert profile_from(older, "test").llamacpp_plain_seconds is None
    with pytest.raises(UsageError, match="llamacpp_plain_seconds must be above 0"):
        profile_from({**PROFILE.as_dict(), "llamacpp_plain_seconds": 0}, "test")


def test_a_width_past_the_measured_ones_follows_the_last_two():
    unpieced = CostProfile("m", "b", 0.01, {1: 1.0, 2: 1.5, 3: 2.25})
    assert unpieced.rows_cost(5) == 2.25 + 2 * 0.75
    assert unpieced.verify_steps(4, 4) == (3.75, None)  # 5 rows in one decode: no pieces


def test_this_machines_profile_is_measured_once_and_kept(tmp_path, monkeypatch):
    import spectui.advise.measure as measure
    import spectui.engines.ggml.lib as lib

    measured = []

    def fake_measure(model, context_ids, progress=None, engine=None):
        measured.append(len(context_ids))
        return PROFILE

    monkeypatch.setattr(lib, "library_problem", lambda: None)
    monkeypatch.setattr(measure, "measure_profile", fake_measure)
    model = measure.GgufModel("smollm2-135m", None, tmp_path / "x.gguf", tmp_path)  # type: ignore[arg-type]  # never loaded: measuring is faked
    first = measure.this_machine_profile(model, tmp_path, [1, 2, 3])
    second = measure.this_machine_profile(model, tmp_path, [1, 2, 3])
    assert first == (PROFILE, True) and second == (PROFILE, False) and measured == [3]
    assert cached_profile_path(tmp_path, PROFILE.model, PROFILE.backend).is_file()
    assert measure.this_machine_profile(model, tmp_path, [1, 2], remeasure=True) == (PROFILE, True)
    assert measured == [3, 2]


class Clock:
    """perf_counter for the measurement: a decode advances it by its row cost, and the loop's own
    work (the fake detokenizer) by its cost, nothing else does."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class RowTimedTarget:
    """A stand-in ggml target (the loop's CachedLogits) whose decode of n rows takes
    row_seconds[n] on clock; it keeps the common prefix cached as LlamaCached does and records
    how many rows each call decoded. Row i predicts the token after it as (position + 1) % 7:
    never the context's last token again, so a draft of it is turned down."""

    device = "cpu"
    arrays = "numpy"
    prefill_chunk = None
    exact_rows = 3

    def __init__(self, clock: Clock, row_seconds: dict[int, float]) -> None:
        self.clock, self.row_seconds = clock, row_seconds
        self.seen: list[int] = []
        self.decoded: list[int] = []

    def reset(self) -> None:
        self.seen = []

    def logits(self, token_ids, num_rows):
        import numpy

        from spectui.engines.speculative.cached_model import common_prefix_len

        keep = min(common_prefix_len(self.seen, token_ids), len(token_ids) - num_rows)
        rows = len(token_ids) - keep
        self.decoded.append(rows)
        self.clock.now += self.row_seconds.get(rows, 0.0)
        self.seen = list(token_ids)
        out = numpy.zeros((num_rows, 8), dtype=numpy.float32)
        for row in range(num_rows):
            out[row, (len(token_ids) - num_rows + row + 1) % 7] = 1.0
        return out


class StepCostDetokenizer:
    """The loop's own work per step, outside the target's decode: `seconds` on clock."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def add(self, token_ids) -> str:
        self.clock.now += self.seconds
        return ""

    def flush(self) -> str:
        return ""


def timed_engine(clock: Clock, target: RowTimedTarget):
    from types import SimpleNamespace

    return SimpleNamespace(target=target, tokenizer=None, info=SimpleNamespace(backend="ggml test · 2 threads"),
                           close=lambda: None)


def measure_with(monkeypatch, tmp_path, row_seconds: dict[int, float], busy: float | None):
    import spectui.advise.measure as measure

    return measure.this_machine_profile(faked(monkeypatch, tmp_path, row_seconds, busy), tmp_path, list(range(40)))


def faked(monkeypatch, tmp_path, row_seconds: dict[int, float], busy: float | None, step_seconds: float = 0.0,
          target: RowTimedTarget | None = None):
    """The model to measure, with its engine, clock and the cores' business faked; step_seconds:
    the loop's own work per step."""
    import spectui.advise.measure as measure
    import spectui.engines.ggml.lib as lib
    import spectui.engines.ggml.load as load
    import spectui.engines.speculative.decode_timing as decode_timing

    clock = Clock()
    timed = target or RowTimedTarget(clock, row_seconds)
    timed.clock = clock
    monkeypatch.setattr(lib, "library_problem", lambda: None)
    monkeypatch.setattr(load, "load_ggml_engine", lambda *args, **kwargs: timed_engine(clock, timed))
    monkeypatch.setattr("spectui.models.tokenizer_json.JsonTokenizer", lambda folder: None)
    monkeypatch.setattr(decode_timing, "Silent", lambda: StepCostDetokenizer(clock, step_seconds))
    monkeypatch.setattr(measure, "time", clock)
    monkeypatch.setattr(decode_timing, "time", clock)
    monkeypatch.setattr(decode_timing, "others_share", lambda before, after: busy)
    monkeypatch.setattr(measure, "llamacpp_plain_step", lambda gguf, context: 0.001 * len(context))
    return measure.GgufModel("smollm2-135m", None, tmp_path / "x.gguf", tmp_path)  # type: ignore[arg-type]  # never loaded: the engine is faked


def test_costs_timed_on_a_busy_or_moving_machine_are_refused_and_not_kept(tmp_path, monkeypatch):
    """A 1.5B's costs measured beside other jobs read v(2) 0.50, v(3) 0.50 and the screen
    predicted ×3.9 over k 0: such timings are refused in one line, and nothing is kept."""
    import pytest

    from spectui.core.errors import UsageError

    steady = {1: 0.060, 2: 0.094, 3: 0.130}
    profile, measured = measure_with(monkeypatch, tmp_path, steady, busy=0.05)
    assert measured and profile.verify == pytest.approx({1: 1.0, 2: 0.094 / 0.060, 3: 0.130 / 0.060})
    # llama.cpp's plain step decodes one token after the same cached tokens as v(n)
    assert profile.llamacpp_plain_seconds == pytest.approx(0.001 * (profile.context_tokens + 1))
    for row_seconds, busy, words in (({1: 0.742, 2: 0.373, 3: 0.368}, 0.05, "a decode of 2 rows timed at 0.50"),
                                     (steady, 0.6, "other processes took 60% of the cores")):
        with pytest.raises(UsageError, match=words):
            measure_with(monkeypatch, tmp_path / "again", row_seconds, busy)
    assert not (tmp_path / "again" / "advise-costs").exists()


def test_a_benchmark_may_keep_unsteady_costs_and_the_profile_says_so(tmp_path, monkeypatch):
    """benchmarks/advise_vs_timed.py measures in the run it reports: it keeps the timings and the
    profile's machine names why they are not steady, where advise refuses them."""
    import spectui.advise.measure as measure

    model = faked(monkeypatch, tmp_path, {1: 0.060, 2: 0.094, 3: 0.130}, busy=0.6)
    profile = measure.measure_profile(model, list(range(40)), refuse_unsteady=False)
    assert profile.machine.endswith("(unsteady: other processes took 60% of the cores meanwhile)")
    assert profile.verify[2] > 1.5 and not (tmp_path / "advise-costs").exists()


def test_costs_measured_on_the_chats_engine_load_no_second_copy(tmp_path, monkeypatch):
    """The advise screen measured on a second copy of the target (a 1.5B twice in memory): given
    the chat's engine, its own decodes are timed, nothing is loaded, llama.cpp's step is not timed
    (that would load it again), and the numbers are the same kind: v(n) per width, a plain step."""
    import pytest

    import spectui.advise.measure as measure
    import spectui.engines.ggml.load as load
    from spectui.core.engine import DecodeTimings

    asked = []

    class ChatEngine:
        def time_decodes(self, context_ids, widest, rounds, progress=None):
            asked.append((len(context_ids), widest, rounds))
            progress("verify widths", rounds, rounds)
            return DecodeTimings({1: [0.07, 0.06], 2: [0.094, 0.1], 3: [0.13, 0.2]}, len(context_ids) - 3, 3,
                                 "ggml Q4_K_M · 2 threads", neighbour_share=0.05)

    def no_load(*args, **kwargs):
        raise AssertionError("the target was loaded a second time")

    monkeypatch.setattr(load, "load_ggml_engine", no_load)
    monkeypatch.setattr(measure, "llamacpp_plain_step", no_load)
    model = measure.GgufModel("smollm2-135m", None, tmp_path / "x.gguf", tmp_path)  # type: ignore[arg-type]  # never loaded
    stages = []
    profile, measured = measure.this_machine_profile(model, tmp_path, list(range(40)), progress=lambda *s: stages.append(s),
                                                     engine=ChatEngine())  # type: ignore[arg-type]  # a stand-in
    assert measured and asked == [(40, measure.WIDEST, measure.ROUNDS)] and ("verify widths", 7, 7) in stages
    assert profile.plain_seconds == 0.06 and profile.verify == pytest.approx({1: 1.0, 2: 0.094 / 0.06, 3: 0.13 / 0.06})
    assert (profile.piece, profile.context_tokens, profile.backend) == (3, 37, "ggml Q4_K_M · 2 threads")
    assert profile.llamacpp_plain_seconds is None and set(profile.draft_seconds) == {"suffix", "ngram"}
    assert cached_profile_path(tmp_path, profile.model, profile.backend).is_file()


def test_the_profile_is_the_loops_steps_the_verify_and_the_loops_own_work_included(tmp_path, monkeypatch):
    """Issue 57: the profile timed the target's decode alone (v(2) 1.54, v(3) 2.02 on the 1.5B)
    and replays came out 10-31 % above timed runs of the same arms. It times the loop's steps now:
    a plain step and a verify of n rows each with the loop's own work (here 20 ms a step), every
    timed step decoding exactly the rows a real verify decodes (1 + its drafts, the drafts the
    target turned down the step before rolled back)."""
    import pytest

    import spectui.advise.measure as measure

    rows = {1: 0.060, 2: 0.094, 3: 0.130}
    target = RowTimedTarget(Clock(), rows)
    model = faked(monkeypatch, tmp_path, rows, busy=0.05, step_seconds=0.020, target=target)
    profile = measure.measure_profile(model, list(range(40)), refuse_unsteady=False)
    assert profile.plain_seconds == pytest.approx(0.080)
    assert profile.verify == pytest.approx({1: 1.0, 2: 0.114 / 0.080, 3: 0.150 / 0.080})
    # the prefill, then per round and width the prompt's last token and STEPS steps of `width` rows
    from spectui.engines.speculative.decode_timing import STEPS

    per_round = [rows for width in (1, 2, 3) for rows in [1] + [width] * STEPS]
    assert target.decoded == [40 - 3] + per_round * measure.ROUNDS


def test_a_kept_profile_of_an_older_version_is_measured_again(tmp_path, monkeypatch):
    """A profile kept before the loop's steps were timed (version 1: the target's decode alone)
    is not this machine's cost: it is measured again, not silently reused. --costs FILE reads it."""
    import json

    import spectui.advise.measure as measure
    import spectui.engines.ggml.lib as lib
    from spectui.advise.costs import read_profile

    measured = []
    monkeypatch.setattr(lib, "library_problem", lambda: None)
    monkeypatch.setattr(measure, "measure_profile", lambda model, context_ids, progress=None, engine=None: measured.append(1) or PROFILE)
    old = cached_profile_path(tmp_path, PROFILE.model, PROFILE.backend)
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({**PROFILE.as_dict(), "version": 1}))
    model = measure.GgufModel("smollm2-135m", None, tmp_path / "x.gguf", tmp_path)  # type: ignore[arg-type]  # never loaded: measuring is faked
    assert measure.this_machine_profile(model, tmp_path, [1, 2, 3]) == (PROFILE, True) and measured == [1]
    assert json.loads(old.read_text())["version"] == 2
    assert measure.this_machine_profile(model, tmp_path, [1, 2, 3]) == (PROFILE, False)
    old.write_text(json.dumps({**PROFILE.as_dict(), "version": 1}))
    assert read_profile(old) == PROFILE


def test_the_replays_adaptive_k_weighs_the_profiles_slope_as_the_engine_weighs_the_one_it_timed_at_load():
    # The ggml engine's chooser counts its load-timed slope for PRIOR_SPREAD squared drafts
    # (issue 58): one noisy verify among plain steps cannot pull V(1) off it. The replay's must too,
    # or its auto arm chooses on another line than the engine would on the same steps.
    profile = CostProfile("m", "ggml", 0.04, {1: 1.0, 2: 1.79, 3: 2.49}, piece=3)
    chooser = replace(new_chooser(profile), accept=[0.98] * 8, seen=[20] * 8, draft_seconds=0.0088, current_k=0,
                      verify_points=[(0, 0.04)] * 22 + [(1, 0.06)])
    assert 1.65 < chooser.costs().verify(1) / 0.04 < 1.79  # alone, the points put it at 1.50
    assert chooser.choose().k == 0
