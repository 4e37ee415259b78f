"""Run a child process in a real pseudo-terminal whose output is read as fast as it comes.

Shared by the TUI benchmarks: the app under test uses Textual's Linux driver, exactly as
in a terminal emulator, and this process plays the terminal (it drains the output and can
type keys). CLOCK_MONOTONIC (time.perf_counter) is shared by both processes.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def print_summary(summary: dict, as_json: bool) -> None:
    """A benchmark's result, with the day and the CPU it ran on (these VMs change CPU between
    days, and speed with it): one JSON line, or aligned `name  value` lines."""
    from spectui.bench.plan import cpu_model  # the scripts that import this put ROOT on sys.path

    summary = {"date": time.strftime("%Y-%m-%d"), "processor": cpu_model(), **summary}
    if as_json:
        print(json.dumps(summary))
        return
    width = max(len(key) for key in summary)
    for key, value in summary.items():
        print(f"{key:<{width}}  {value}")


def run_in_terminal(
    argv: list[str],
    *,
    size: tuple[int, int] = (120, 40),
    timeout: float = 600.0,
    started: Path | None = None,
    while_running: Callable[[Callable[[str], None], Callable[[], bool]], None] | None = None,
) -> int:
    """Run `python argv...` in a pty; returns the bytes the terminal received.

    When `started` is given, `while_running(type_text, running)` is called once that file
    exists; it may type into the terminal while running() is true.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", HF_HUB_OFFLINE="1")
    process = subprocess.Popen(
        [sys.executable, *argv], stdin=slave, stdout=slave, stderr=slave, env=env,
        start_new_session=True, cwd=str(ROOT),
    )
    os.close(slave)
    received = {"bytes": 0}
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    received["bytes"] += len(os.read(master, 1 << 16))
                except OSError:
                    return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    try:
        if started is not None and while_running is not None:
            while not started.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if process.poll() is None:
                while_running(lambda text: os.write(master, text.encode()), lambda: process.poll() is None)
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        raise SystemExit(f"the app did not finish within {timeout:.0f} s")
    finally:
        stop.set()
        reader.join(1)
        os.close(master)
    return received["bytes"]
