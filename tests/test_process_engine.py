"""The embedded engine in a process of its own: the same tokens as in-process, the live
knobs cross over, and a dead engine process ends a reply, not the caller."""

from __future__ import annotations

import os
import signal
import select
import subprocess
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from spectui.core.errors import SpectuiError
from spectui.core.events import Control, Done, GenerationParams, Source, Step
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


def gated_engine():
    """A ProcessEngine whose drafting steps each wait for gate.release() in this process."""
    import multiprocessing

    from spectui.engines.process import ProcessEngine

    gate = multiprocessing.get_context("spawn").Semaphore(0)
    return ProcessEngine(partial(build_tiny_engine, gate=gate)), gate


def test_same_steps_pieces_included_as_the_engine_in_this_process(process_engine):
    local = build_tiny_engine()
    here, there = local.info.capabilities, process_engine.info.capabilities
    assert process_engine.info == replace(local.info, capabilities=there)
    # The process restarts itself and reads its own memory; prompt ids stay in the child.
    assert (there.restarts_itself, there.memory, there.tokenizer) == (True, True, False)
    assert replace(there, restarts_itself=False, memory=False, tokenizer=True) == here
    assert process_engine.pid != os.getpid()
    for k in (0, 3):
        for temperature in (0.0, 1.0):
            steps, done = reply(process_engine, Control(k=k, temperature=temperature))
            local_steps, local_done = reply(local, Control(k=k, temperature=temperature))
            # timings aside, the very same Steps: pieces and ghost text come through the pipe; the
            # margins to float rounding (the child's threads may sum the logits in another order)
            assert [replace(s, draft_seconds=0, verify_seconds=0, margins=()) for s in steps] == [
                replace(s, draft_seconds=0, verify_seconds=0, margins=()) for s in local_steps
            ]
            assert [m for s in steps for m in s.margins] == pytest.approx([m for s in local_steps for m in s.margins], abs=1e-4)
            assert done.finish_reason == local_done.finish_reason
            assert all(len(s.pieces) == len(s.token_ids) and "".join(s.pieces) == s.text for s in steps)
    assert any(step.rejected_text for step in steps)  # ghosts came along too


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


def test_k_temperature_and_auto_reach_the_next_step_of_the_running_reply():
    engine, gate = gated_engine()
    try:
        control = Control(k=6)
        stream = engine.stream(MESSAGES, GenerationParams(max_tokens=400, seed=1), control)
        first = next(stream)  # the prefill: nothing drafted, nothing gated
        gate.release()
        second = next(stream)
        assert first.drafted == () and second.k == 6
        control.live.update(k=2, temperature=0.9)
        # The third step may have read the knobs before the change; it waits at the gate, and
        # the fourth starts only after it: that one sees the change.
        gate.release()
        gate.release()
        next(stream)
        fourth = next(stream)
        assert fourth.k == 2 and len(fourth.drafted) == 2 and fourth.temperature == 0.9
        control.live.update(auto=True)
        gate.release()
        gate.release()
        next(stream)
        assert next(stream).auto is not None  # adaptive k chose this step's k
        control.cancel()
        for _ in range(400):
            gate.release()  # the step in flight may be waiting, however auto k drafts
        assert list(stream)[-1].finish_reason == "cancelled"
    finally:
        engine.close()


def test_a_k_key_reaches_the_engine_process_through_the_chats_one_live_holder():
    """The chat's path: a k key changes the chat's LiveSettings, the reply's Control reads it
    and its one watcher writes the shared slots, so the child's next step drafts at that k."""
    import queue
    import time

    from spectui.core.events import LiveSettings
    from spectui.host.host import EngineHost
    from spectui.host.plan import EnginePlan

    engine, gate = gated_engine()
    host = EngineHost(EnginePlan(lambda progress: engine), LiveSettings(6))
    try:
        host.start()
        deadline = time.monotonic() + 60
        while not host.state.ready and time.monotonic() < deadline:
            host.pump()
            time.sleep(0.01)
        events: queue.SimpleQueue = queue.SimpleQueue()
        params = GenerationParams(max_tokens=400, seed=1)
        control = host.start_reply("spectui-reply-test", lambda e, c: [events.put(x) for x in e.stream(MESSAGES, params, c)])
        events.get(timeout=60)  # the prefill
        gate.release()
        assert events.get(timeout=60).k == 6
        host.keys.step_k(-4)  # what k- pressed four times does in the chat
        gate.release()
        gate.release()
        events.get(timeout=60)  # may have read the knobs before the key press
        fourth = events.get(timeout=60)
        assert (host.live.k, fourth.k, len(fourth.drafted)) == (2, 2, 2)
        control.cancel()
        for _ in range(400):
            gate.release()
    finally:
        assert host.close(60)


def test_the_engine_process_settles_while_idle_and_a_message_comes_first():
    """Settling (joining the int8 weights' load slices) runs while no request waits: a message
    stops it between two pieces of work, is answered, and settling goes on after the reply."""
    import multiprocessing

    from spectui.engines.process import ProcessEngine

    context = multiprocessing.get_context("spawn")
    gate, log = context.Semaphore(0), context.Queue()
    engine = ProcessEngine(partial(build_tiny_engine, settling=(gate, log)))
    try:
        gate.release()
        assert log.get(timeout=60) == "join 1"
        steps, done = reply(engine, Control(k=3), max_tokens=12)  # the gate stays shut meanwhile
        assert done.finish_reason in ("length", "stop") and steps
        assert log.get(timeout=60) == "stopped"
        gate.release()
        gate.release()
        assert [log.get(timeout=60) for _ in range(3)] == ["join 2", "join 3", "settled"]
        reply(engine, Control(k=3), max_tokens=4)
        assert log.empty()  # settled once: not asked again
    finally:
        engine.close()


def test_cancel_ends_the_reply_after_the_step_in_flight_and_the_next_reply_starts_clean():
    engine, gate = gated_engine()
    try:
        control = Control(k=3)
        stream = engine.stream(MESSAGES, GenerationParams(max_tokens=400), control)
        next(stream)
        gate.release()
        next(stream)
        # The third step drafts, so it waits at the gate: nothing has run past it.
        control.cancel()
        gate.release()
        rest = list(stream)
        assert rest[-1].finish_reason == "cancelled"
        assert len(rest) <= 2, "at most the step in flight before the cancel was seen"
        steps, done = reply(engine, Control(k=0), max_tokens=8)  # no drafting: nothing gated
        assert done.finish_reason in ("length", "stop") and steps
    finally:
        engine.close()


def test_a_killed_engine_process_ends_the_reply_and_the_next_message_restarts_it():
    engine, gate = gated_engine()
    try:
        stream = engine.stream(MESSAGES, GenerationParams(max_tokens=400), Control(k=2))
        gate.release()
        kept = [next(stream), next(stream)]  # the third step now waits at the gate
        first_pid = engine.pid
        os.kill(first_pid, signal.SIGKILL)
        rest = list(stream)
        done = rest[-1]
        assert isinstance(done, Done) and done.finish_reason == "error"
        assert "the engine process ended while generating (killed by SIGKILL)" in done.error
        assert "starts again with the next message" in done.error
        assert all(isinstance(e, Step) for e in rest[:-1]) and kept
        for _ in range(6):
            gate.release()  # the new process waits on the same gate
        steps, done = reply(engine, Control(k=2), max_tokens=6)
        assert engine.pid != first_pid and done.finish_reason in ("length", "stop")
        assert sum(len(s.token_ids) for s in steps) == 6 or done.finish_reason == "stop"
    finally:
        engine.close()
    assert not engine.alive


def test_a_model_that_cannot_run_fails_as_it_does_in_process(tmp_path, monkeypatch):
    from spectui.engines.factory import build_engine
    from spectui.engines.process import ProcessEngine
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    # The draft method for a target without a preset draft: refused inside the build, before any weights load.
    options = EngineOptions(model="smollm2-135m", engine="embedded", method="draft", k=4, backend="torch", device="cpu")
    models = resolve_pair(options.model, None)
    with pytest.raises(SpectuiError) as here:
        build_engine(options, models)
    with pytest.raises(SpectuiError) as there:
        ProcessEngine(partial(build_engine, options, models))
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


def test_the_chats_engine_times_its_decodes_in_its_process_and_a_reply_follows(process_engine):
    """Advise measures this machine's costs on the chat's engine (its target is not loaded a
    second time): the child times the widths, its progress crosses over, and a progress that
    raises (the advise screen closed) is raised once the child answered, the pipe in step."""
    stages = []
    timed = process_engine.time_decodes(list(range(20)), 3, 2, lambda *stage: stages.append(stage))
    assert process_engine.capabilities.times_decodes
    assert sorted(timed.seconds) == [1, 2, 3] and all(len(values) == 2 and min(values) > 0 for values in timed.seconds.values())
    assert timed.context_tokens == 17 and timed.piece is None  # the tiny torch target verifies any width at once
    assert ("verify widths", 2, 2) in stages
    assert timed.neighbour_share is None or 0 <= timed.neighbour_share <= 1

    class Closed(Exception):
        pass

    def closed(*stage):
        raise Closed

    with pytest.raises(Closed):
        process_engine.time_decodes(list(range(20)), 3, 2, closed)
    steps, done = reply(process_engine, Control(k=3), max_tokens=5)
    assert done.finish_reason in ("length", "stop") and steps


def test_the_engine_process_leaves_when_its_parent_is_killed():
    told, tell = os.pipe()  # the parent writes the engine process's pid here once it is up
    script = f"""
import os, sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
from functools import partial
from spectui.engines.process import ProcessEngine
from tiny_models import build_tiny_engine
if __name__ == "__main__":
    engine = ProcessEngine(partial(build_tiny_engine))
    os.write({tell}, str(engine.pid).encode())
    time.sleep(600)
"""
    parent = subprocess.Popen([sys.executable, "-c", script], pass_fds=(tell,))
    os.close(tell)
    try:
        pid = os.read(told, 64).decode()  # once written; "" if the parent died first
        assert pid.isdigit(), f"the parent ended without starting its engine (exit {parent.poll()})"
        child = os.pidfd_open(int(pid))
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        # Readable once the engine process has exited; the timeout only keeps a broken watcher
        # from hanging the suite.
        readable, _, _ = select.select([child], [], [], 120)
        os.close(child)
        assert readable, "the engine process outlived its parent"
    finally:
        parent.kill()
        os.close(told)


def test_prefill_progress_crosses_over_before_the_steps(process_engine):
    from spectui.core.events import Prefill

    words = "w " * 150  # a prompt longer than the torch engine's prefill chunk (256), shorter than its context (512)
    events = list(process_engine.stream([{"role": "user", "content": words}], GenerationParams(max_tokens=4),
                                        Control(0, 0.0)))
    progress = [event for event in events if isinstance(event, Prefill)]
    assert progress and progress[0].done == 0 and events[: len(progress)] == progress
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length")
    assert all(isinstance(event, Step) for event in events[len(progress):-1])
