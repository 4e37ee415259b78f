"""Threads on a shared CPU: the free-core count, and the bench's busy neighbour."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from spectui.engines import threads


@pytest.mark.parametrize(("others_busy", "own", "expected"), [(0.0, 2.0, 2), (1.0, 1.0, 1), (2.0, 0.0, 1), (0.4, 1.6, 2)])
def test_free_cores_are_the_cores_other_processes_leave(monkeypatch, others_busy, own, expected):
    """Over 1 s of wall time on 2 cores: all cores' busy seconds less this process's."""
    samples = iter([(10.0, 100.0, 5.0), (11.0, 100.0 + others_busy + own, 5.0 + own)])
    monkeypatch.setattr(threads, "_sample", lambda also_ours=None: next(samples))
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "_last", None)
    monkeypatch.setattr(threads.time, "sleep", lambda seconds: None)
    assert threads.free_cores() == expected


def test_threads_follow_the_free_cores(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(threads, "free_cores", lambda: 1)
        assert threads.fit_threads() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_free_cores_reads_this_machine():
    assert 1 <= threads.free_cores() <= threads.usable_cores()


# ---------------------------------------------------------------- bench --contended


def test_the_neighbour_keeps_a_core_busy_until_closed():
    from spectui.bench.contended import BusyNeighbour

    neighbour = BusyNeighbour()
    process = psutil.Process(neighbour.process.pid)
    assert process.cpu_percent(interval=0.5) > 20  # spinning, not sleeping
    neighbour.close()
    assert neighbour.process.poll() is not None


def test_the_neighbour_ends_when_the_run_is_killed():
    parent = subprocess.run(
        [sys.executable, "-c", "import os; from spectui.bench.contended import BusyNeighbour;"
         "print(BusyNeighbour().process.pid, flush=True); os._exit(0)"],  # no cleanup runs
        capture_output=True, text=True, timeout=60,
    )
    busy = psutil.Process(int(parent.stdout.strip()))
    busy.wait(timeout=60)  # it noticed its parent was gone


def test_contention_fits_every_runners_threads(monkeypatch):
    from spectui.bench import contended
    from spectui.bench.anchors.llamacpp import LlamaCppRunner

    assert contended.start_contention(False) is None
    runners = {"spectui": lambda *args: ("spectui", args), "transformers": lambda *args: ("transformers", args)}
    assert contended.contend(runners, [], None) is runners
    fitted = []
    monkeypatch.setattr(threads, "fit_threads", lambda: fitted.append(1) or 1)

    class Neighbour:
        def close(self):
            pass

    llamacpp = LlamaCppRunner.__new__(LlamaCppRunner)  # no weights: only its threads' setting is read
    llamacpp.fit_to_free_cores = False
    engines: list = [llamacpp]
    neighbour = Neighbour()
    wrapped = contended.contend(runners, engines, neighbour)
    assert wrapped["spectui"]("arm") == ("spectui", ("arm",)) and fitted == [1]
    assert wrapped["transformers"]("arm") == ("transformers", ("arm",)) and fitted == [1, 1]
    assert engines == [llamacpp, neighbour] and llamacpp.fit_to_free_cores


def test_the_app_an_engine_process_serves_is_not_a_neighbour(monkeypatch):
    """Found in tmux: the chat's first reply ran on one thread of two (prefill 25 tok/s against
    49) because the 50 ms look fell on the app drawing the sent message and its attached file.
    Over that window only the app (pid 4242) was busy, a whole core of it."""
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(threads.os, "times", lambda: type("Times", (), {"user": 1.0, "system": 0.0})())

    def look(also_ours):
        busy, clock, app = iter([100.0, 100.05]), iter([10.0, 10.05]), iter([3.0, 3.05])
        monkeypatch.setattr(threads, "_busy_seconds", lambda: next(busy))
        monkeypatch.setattr(threads.time, "monotonic", lambda: next(clock))
        monkeypatch.setattr(threads, "_cpu_seconds_of", lambda pid: next(app))
        monkeypatch.setattr(threads, "_last", None)
        return threads.free_cores(also_ours=also_ours)

    assert look(None) == 1  # a neighbour as far as a process alone can tell
    assert look(4242) == 2


def test_free_cores_reads_a_processes_cpu_seconds():
    import os

    assert threads._cpu_seconds_of(os.getpid()) > 0
    assert threads._cpu_seconds_of(2 ** 22 + 7) == 0.0  # no such process
