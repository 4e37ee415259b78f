"""Keep the terminal for the TUI alone while an engine runs processes of its own.

vLLM starts engine processes that inherit the terminal as stdout and stderr and print to
it (library notices, C++ warnings, progress bars): they would draw over the screen. While
the app runs, file descriptors 1 and 2 point to a log file, and Textual draws on its own
copies of the terminal. Stdlib only, but for the log's path.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spectui.settings.config import ChatConfig


def start_process_helpers() -> None:
    """multiprocessing's resource tracker hands its process `sys.stderr.fileno()`; under
    Textual sys.stderr is a capture whose fileno() is -1 and the spawn fails ("bad value(s)
    in fds_to_keep"). Started now, before the app, the tracker gets the real one."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


@contextlib.contextmanager
def terminal_for_app_only(log: Path) -> Iterator[None]:
    if not (sys.__stdout__ and sys.__stderr__ and os.isatty(1) and os.isatty(2)):
        yield  # not a terminal (tests, pipes): nothing to protect
        return
    saved = {name: getattr(sys, name) for name in ("__stdout__", "__stderr__", "stdout", "stderr")}
    saved_fds = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    # Textual writes to sys.__stderr__ and sizes the screen from sys.__stdout__.
    sys.__stdout__ = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="replace")
    sys.__stderr__ = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace")
    log.parent.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    try:
        yield
    finally:
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
                stream.close()
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        for name, stream in saved.items():
            setattr(sys, name, stream)


def engine_terminal(config: ChatConfig) -> AbstractContextManager[None]:
    """While the app runs, engine processes (the embedded engine's, vLLM's) print to a log,
    not over the screen."""
    if config.engine not in ("auto", "embedded", "vllm"):
        return contextlib.nullcontext()
    from spectui.engines.vllm.build import log_path

    start_process_helpers()
    return terminal_for_app_only(log_path())
