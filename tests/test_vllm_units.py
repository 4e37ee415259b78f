"""The vLLM engine's pairing of outputs with counters, and its options, without vLLM itself."""

from __future__ import annotations

import pytest

from spectui.engines.provenance import StepCount
from spectui.engines.vllm.args import VllmModels, engine_kwargs, speculative_config
from spectui.engines.vllm.engine import _ReplyState
from spectui.core.events import Source
from spectui.settings.options import EngineOptions, OptionError

D, R, B, T = Source.DRAFT, Source.RECOVERED, Source.BONUS, Source.TARGET


def state(k=4):
    return _ReplyState(k=k, temperature=0.0, method="ngram", started=0.0)


def test_one_output_per_step_takes_the_counters_sources():
    reply = state()
    steps = [
        *reply.steps_for([1], "a", [StepCount(1, 0, 0)], 1.0),
        *reply.steps_for([2, 3, 4], "bcd", [StepCount(3, 4, 2)], 2.0),
        *reply.steps_for([5], "e", [StepCount(1, 0, 0)], 3.0),  # n-gram found nothing to propose
        *reply.steps_for([6, 7, 8, 9, 10], "fghij", [StepCount(5, 4, 4)], 4.0),
    ]
    assert [s.sources for s in steps] == [(T,), (D, D, R), (T,), (D, D, D, D, B)]
    assert [s.num_drafted for s in steps] == [0, 4, 0, 4]
    assert all(s.exact is False for s in steps)
    assert reply.approximate is False
    done = reply.done((0,), None, cancelled=False)
    assert done.engine_stats["num_accepted"] == 6 and done.engine_stats["num_drafted"] == 8


def test_a_merged_output_is_split_by_the_counters_of_its_steps():
    # The consumer lagged: one output carries two engine steps; their counters say where
    # one ends, so the colours stay the engine's.
    reply = state()
    reply.steps_for([1], "a", [StepCount(1, 0, 0)], 1.0).__next__()
    steps = list(reply.steps_for([2, 3, 4, 5, 6], "bcdef", [StepCount(2, 4, 1), StepCount(3, 4, 2)], 2.0))
    assert [s.token_ids for s in steps] == [(2, 3), (4, 5, 6)]
    assert [s.sources for s in steps] == [(D, R), (D, D, R)]
    assert "".join(s.text for s in steps) == "bcdef"
    assert reply.approximate is False


def test_counters_that_do_not_add_up_make_the_reply_approximate():
    reply = state()
    reply.steps_for([1], "a", [StepCount(1, 0, 0)], 1.0).__next__()
    (step,) = reply.steps_for([2, 3, 4], "bcd", [StepCount(2, 4, 1)], 2.0)
    assert step.sources == (D, D, R)  # the size-based guess
    assert reply.done((0,), None, cancelled=False).approximate is True


def test_a_record_that_disagrees_restates_the_reply():
    class Record:  # only one step verified drafts: the one-token step proposed nothing
        per_step_accepted = [2]
        per_step_drafted = [4]

    class Final:
        finish_reason = "stop"
        spec_decode_metrics = Record()

    reply = state()
    list(reply.steps_for([1], "a", [StepCount(1, 0, 0)], 1.0))
    list(reply.steps_for([2], "b", [], 2.0))  # counters lost: guessed as a rejected draft
    list(reply.steps_for([3, 4, 5], "cde", [], 3.0))
    done = reply.done((0,), Final(), cancelled=False)
    assert done.engine_stats["reconciled"] is False
    assert [s.sources for s in done.restated_steps] == [(T,), (T,), (D, D, R)]
    assert [s.num_drafted for s in done.restated_steps] == [0, 0, 4]
    assert done.approximate is False


def test_speculative_config_follows_the_options():
    models = VllmModels("/models/target", "/models/draft")
    assert speculative_config(EngineOptions(k=0), models) is None
    assert speculative_config(EngineOptions(method="draft", k=5), models) == {
        "method": "draft_model", "num_speculative_tokens": 5, "model": "/models/draft",
    }
    assert speculative_config(EngineOptions(method="ngram", k=3, lookup_min=2, lookup_max=5), models) == {
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 5,
    }
    passed = EngineOptions(speculative_config='{"method": "suffix"}', k=6)
    assert speculative_config(passed, models) == {"method": "suffix", "num_speculative_tokens": 6}
    with pytest.raises(OptionError, match="needs --draft"):
        speculative_config(EngineOptions(method="eagle", k=3), VllmModels("/t"))


def test_engine_kwargs_start_quickly_on_cpu_and_reconcile_only_when_speculating():
    cpu = engine_kwargs(EngineOptions(method="ngram", k=4), VllmModels("/t"), on_cpu=True)
    assert cpu["enforce_eager"] is True and cpu["max_model_len"] == 4096
    assert cpu["per_request_spec_decode_metrics"] == "detailed"
    plain = engine_kwargs(EngineOptions(k=0, tp=2, max_model_len=2048), VllmModels("/t"), on_cpu=False)
    assert "enforce_eager" not in plain and plain["max_model_len"] == 2048 and plain["tensor_parallel_size"] == 2
    assert "per_request_spec_decode_metrics" not in plain
    with pytest.raises(OptionError, match="--dtype int8"):
        engine_kwargs(EngineOptions(dtype="int8"), VllmModels("/t"), on_cpu=True)


def test_vllm_logging_settings_are_written_safely(tmp_path, monkeypatch):
    """The file vLLM reads its logging from goes through the one safe writer (issue 48):
    replaced whole when it exists, and a FIFO in its place is one line, never a hang."""
    import json
    import os

    from spectui.core.errors import UsageError
    from spectui.engines.vllm.build import route_vllm_logs

    for name in ("VLLM_LOGGING_CONFIG_PATH", "PYTHONWARNINGS"):
        monkeypatch.delenv(name, raising=False)
    log = tmp_path / "vllm.log"
    settings = tmp_path / "vllm.logging.json"
    settings.write_text("from an earlier start")
    route_vllm_logs(log)
    assert json.loads(settings.read_text())["handlers"]["file"]["filename"] == str(log)
    assert os.environ["VLLM_LOGGING_CONFIG_PATH"] == str(settings)
    settings.unlink()
    os.mkfifo(settings)
    reader = os.open(settings, os.O_RDONLY | os.O_NONBLOCK)  # a writer that opened it would not wait
    try:
        with pytest.raises(UsageError, match="a FIFO, not a regular file"):
            route_vllm_logs(log)
    finally:
        os.close(reader)
