"""The cost profile: JSON both ways, rows past the widest measured, and this machine's profile
measured once per model and backend, then read back from beside the history."""

from __future__ import annotations

from spectui.advise.costs import CostProfile, cached_profile_path, profile_from

PROFILE = CostProfile("smollm2-135m", "ggml Q4_1 · 2 threads", 0.012, {1: 1.0, 2: 1.4, 3: 1.9}, piece=3,
                      context_tokens=300, draft_seconds={"suffix": 0.0002, "ngram": 0.00001})


def test_a_profile_reads_back_as_it_was_written():
    assert profile_from(PROFILE.as_dict(), "test") == PROFILE


def test_a_width_past_the_measured_ones_follows_the_last_two():
    unpieced = CostProfile("m", "b", 0.01, {1: 1.0, 2: 1.5, 3: 2.25})
    assert unpieced.rows_cost(5) == 2.25 + 2 * 0.75
    assert unpieced.verify_steps(4, 4) == (3.75, None)  # 5 rows in one decode: no pieces


def test_this_machines_profile_is_measured_once_and_kept(tmp_path, monkeypatch):
    import spectui.advise.measure as measure
    import spectui.engines.ggml.lib as lib

    measured = []

    def fake_measure(model, context_ids, progress=None):
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
