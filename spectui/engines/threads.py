"""Torch's threads on a CPU that other processes share.

OpenMP's threads spin a while when they wait for work; beside one busy process on two cores,
two threads that spin take the time slice their partner needs, and a step waits for the
slowest: decoding fell to 0.05x of its idle speed. As many threads as the cores the other
processes leave free keep it at 0.6x. Sleeping waits (OMP_WAIT_POLICY=PASSIVE) added nothing
beside that and cost 30% of the idle speed: a forward's hundreds of parallel regions each
wait for the threads to wake (benchmarks/reports/contended.md). Call fit_threads() before each reply.
Stdlib only.
"""

from __future__ import annotations

import os
import time

_last: tuple[float, float, float] | None = None  # (wall, all cores' busy seconds, our processes' CPU seconds)


# Other processes' share of the cores past which timings are marked (the chat) or refused (advise).
BUSY_SHARE = 0.25


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _busy_seconds() -> float | None:
    """Seconds all CPUs have spent busy since boot (/proc/stat), or None off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds_of(pid: int) -> float:
    """A process's CPU seconds (/proc/PID/stat), 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # the name in parentheses may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return 0.0


def _sample(also_ours: int | None = None) -> tuple[float, float, float] | None:
    busy = _busy_seconds()
    if busy is None:
        return None
    times = os.times()
    ours = times.user + times.system + (_cpu_seconds_of(also_ours) if also_ours is not None else 0.0)
    return time.monotonic(), busy, ours


def cpu_sample(also_ours: int | None = None) -> tuple[float, float, float] | None:
    """(wall, all cores' busy seconds, our CPU seconds) now; None off Linux. Two of them give
    the share of the cores other processes kept busy between (others_share)."""
    return _sample(also_ours)


def others_share(before: tuple[float, float, float] | None, after: tuple[float, float, float] | None) -> float | None:
    """The share of all cores (0..1) that other processes kept busy between two samples."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    wall, busy, own = (b - a for a, b in zip(before, after))
    return min(1.0, max(0.0, busy - own) / wall / usable_cores())


def free_cores(window: float = 0.05, also_ours: int | None = None) -> int:
    """Cores the other processes left free since the last call (the first call looks for
    `window` seconds): all cores less the others' busy time per second, at least one.
    also_ours: a process whose CPU is ours too (the app an engine process serves: its burst
    at a send, drawing the message, is not a neighbour to make room for)."""
    global _last
    now = _sample(also_ours)
    if now is None:
        return usable_cores()
    if _last is None or now[0] - _last[0] < window:
        time.sleep(window)
        _last, now = now, _sample(also_ours)
        assert now is not None, "the sampling that answered a moment ago answers again"
    wall, busy, own = (b - a for a, b in zip(_last, now))
    _last = now
    others = max(0.0, busy - own) / wall if wall > 0 else 0.0
    return max(1, min(usable_cores(), round(usable_cores() - others)))


def fit_threads() -> int:
    """torch's threads set to the cores free now; returns the count."""
    import torch

    threads = free_cores()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads
