"""The embedded engine in a process of its own: the same tokens as in-process, the live
knobs cross over, and a dead engine process ends a reply, not the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from spectui.core.errors import SpectuiError
from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.core.pieces import splitter_for
from tiny_models import build_tiny_engine

MESSAGES = [{"role": "user", "content": "def add(a, b):"}]


def reply(engine, control, max_tokens=40, messages=MESSAGES):
    events = list(engine.stream(messages, GenerationParams(max_tokens=max_tokens), control))
    assert isinstance(events[-1], Done) and all(isinstance(e, Step) for e in events[:-1])
    return events[:-1], events[-1]


@pytest.fixture(scope="module")
def process_engine():
    from spectui.engines.process import ProcessEngine

    stages = []
    engine = ProcessEngine(partial(build_tiny_engine), lambda *stage: stages.append(stage))
    assert stages == [("tiny models", 0, 1), ("tiny models", 1, 1)]  # the child's progress arrives
    yield engine
    engine.close()


def test_same_tokens_sources_and_pieces_as_the_engine_in_this_process(process_engine):
    local = build_tiny_engine()
    assert process_engine.info == local.info
    assert process_engine.pid != os.getpid()
    for k in (0, 3):
        for temperature in (0.0, 1.0):
            steps, done = reply(process_engine, Control(k=k, temperature=temperature))
            local_steps, local_done = reply(local, Control(k=k, temperature=temperature))
            assert [(s.token_ids, s.sources, s.text, s.drafted) for s in steps] == [
                (s.token_ids, s.sources, s.text, s.drafted) for s in local_steps
            ]
            assert done.finish_reason == local_done.finish_reason
    # The pieces the child sent are what a splitter in this process would make.
    local_splitter, sent = splitter_for(local), splitter_for(process_engine)
    steps, _ = reply(process_engine, Control(k=3))
    for step in steps:
        assert sent.split(step) == local_splitter.split(step)
    assert any(step.num_drafted and step.rejected for step in steps)  # ghosts were split too


def test_tree_steps_cross_over_whole():
    """A tree step's tree_nodes survives the pipe, and a seeded sampled tree reply is the same
    in the engine process as in this one."""
    from spectui.engines.process import ProcessEngine
    from tiny_models import build_tiny_tree_engine

    local = build_tiny_tree_engine()
    engine = ProcessEngine(partial(build_tiny_tree_engine))
    try:
        for temperature in (0.0, 1.0):
            steps, _ = reply(engine, Control(k=3, temperature=temperature), max_tokens=24)
            local_steps, _ = reply(local, Control(k=3, temperature=temperature), max_tokens=24)
            assert [(s.token_ids, s.sources, s.drafted, s.tree_nodes) for s in steps] == [
                (s.token_ids, s.sources, s.drafted, s.tree_nodes) for s in local_steps
            ]
            tree_steps = [s for s in steps if s.drafted]
            assert tree_steps and all(s.tree_nodes is not None and s.tree_nodes > len(s.drafted) for s in tree_steps)
            assert {s.method for s in tree_steps} == {"medusa"}
    finally:
        engine.close()


def test_k_temperature_and_cancel_reach_the_running_reply():
    from spectui.engines.process import ProcessEngine

    engine = ProcessEngine(partial(build_tiny_engine, step_delay=0.25))
    try:
        control = Control(k=6)
        stream = engine.stream(MESSAGES, GenerationParams(max_tokens=400, seed=1), control)
        steps = [next(stream), next(stream)]
        assert steps[1].k == 6
        control.k, control.temperature = 2, 0.9
        # The step in flight started before the change; the one after it sees it.
        steps += [next(stream), next(stream)]
        assert steps[-1].k == 2 and len(steps[-1].drafted) == 2 and steps[-1].temperature == 0.9
        control.auto = True
        steps.append(next(stream))
        steps.append(next(stream))
        assert steps[-1].auto is not None  # adaptive k chose this step's k
        cancelled_at = time.monotonic()
        control.cancel()
        rest = list(stream)
        assert isinstance(rest[-1], Done) and rest[-1].finish_reason == "cancelled"
        # the step in flight (0.25 s when it drafts), perhaps a few fast plain ones, then Done:
        # counted in time, since adaptive k may well pick k = 0 for so dear a draft
        assert time.monotonic() - cancelled_at < 1.5
        # The next reply starts clean on the same process.
        control = Control(k=3)
        steps, done = reply(engine, control, max_tokens=8)
        assert done.finish_reason in ("length", "stop") and steps
    finally:
        engine.close()


def test_a_killed_engine_process_ends_the_reply_and_the_next_message_restarts_it():
    from spectui.engines.process import ProcessEngine

    engine = ProcessEngine(partial(build_tiny_engine, step_delay=0.2))
    try:
        stream = engine.stream(MESSAGES, GenerationParams(max_tokens=400), Control(k=2))
        kept = [next(stream), next(stream)]
        first_pid = engine.pid
        os.kill(first_pid, signal.SIGKILL)
        rest = list(stream)
        done = rest[-1]
        assert isinstance(done, Done) and done.finish_reason == "error"
        assert "the engine process ended while generating (killed by SIGKILL)" in done.error
        assert "starts again with the next message" in done.error
        assert all(isinstance(e, Step) for e in rest[:-1]) and kept
        steps, done = reply(engine, Control(k=2), max_tokens=6)
        assert engine.pid != first_pid and done.finish_reason in ("length", "stop")
        assert sum(len(s.token_ids) for s in steps) == 6 or done.finish_reason == "stop"
    finally:
        engine.close()
    assert not engine.alive


def test_an_unknown_model_fails_as_it_does_in_process(tmp_path, monkeypatch):
    from spectui.engines.factory import build_engine
    from spectui.engines.process import ProcessEngine
    from spectui.settings.options import EngineOptions

    options = EngineOptions(model="no-such-model-xyz", engine="embedded")
    with pytest.raises(SpectuiError) as here:
        build_engine(options)
    with pytest.raises(SpectuiError) as there:
        ProcessEngine(partial(build_engine, options))
    assert str(there.value) == str(here.value) and "\n" not in str(there.value)


def test_method_views_share_the_process(process_engine):
    ngram = process_engine.with_method("ngram")
    assert ngram.info.method == "ngram" and ngram.info.draft is None
    steps, _ = reply(ngram, Control(k=4), messages=[{"role": "user", "content": "ab ab ab ab ab ab"}])
    assert {s.method for s in steps if s.drafted} <= {"ngram"}
    steps, _ = reply(process_engine, Control(k=4))
    assert {s.method for s in steps if s.drafted} == {"draft"}
    with pytest.raises(SpectuiError, match="no draft model is loaded"):
        process_engine.with_method("medusa")


def test_a_caller_that_stops_reading_leaves_the_process_ready(process_engine):
    stream = process_engine.stream(MESSAGES, GenerationParams(max_tokens=300), Control(k=3))
    next(stream)
    stream.close()  # a consumer that gave up mid-reply
    steps, done = reply(process_engine, Control(k=0), max_tokens=5)
    assert done.finish_reason in ("length", "stop")
    assert all(s.sources == (Source.TARGET,) for s in steps)


def test_the_engine_process_leaves_when_its_parent_is_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
from functools import partial
from spectui.engines.process import ProcessEngine
from tiny_models import build_tiny_engine
if __name__ == "__main__":
    engine = ProcessEngine(partial(build_tiny_engine))
    open({str(pid_file)!r}, "w").write(str(engine.pid))
    time.sleep(600)
"""
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.2)
        child_pid = int(pid_file.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child_pid):
            assert time.monotonic() < deadline, "the engine process outlived its parent"
            time.sleep(0.2)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
