"""Every way out ends the process (issue 48): Ctrl+Q, then the terminal closed (a killed tmux,
a closed tab) left spectui running with parent PID 1 at 20-65 % of a core. The hang-up's
SIGCONT made Textual take back the dead terminal while the app was quitting: a new input
thread spun on it and kept the process alive. Here the terminal is a real pseudo-terminal
the chat controls, as a shell's would be."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

psutil = pytest.importorskip("psutil")
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs a Linux pseudo-terminal")

# The chat in the terminal it controls (TIOCSCTTY: a hang-up then signals it, as in a shell),
# its engine slow to close as a real one is (the child process joined): the closing is the
# moment a hang-up used to land in, and the engine marks it with a file.
CHAT = """
import fcntl, os, pathlib, termios, time
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
import spectui.engines.scripted as scripted
close = scripted.ScriptedEngine.close
def slow_close(self):
    pathlib.Path(os.environ["CLOSING_MARK"]).touch()
    time.sleep(2.0)
    close(self)
scripted.ScriptedEngine.close = slow_close
from spectui.cli.app import main
main()
"""


def start_chat(tmp_path) -> tuple[subprocess.Popen, int]:
    master, slave = os.openpty()
    env = {**os.environ, "SPECTUI_DATA_DIR": str(tmp_path), "SPECTUI_CONFIG_DIR": str(tmp_path),
           "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30", "CLOSING_MARK": str(tmp_path / "closing")}
    process = subprocess.Popen([sys.executable, "-c", CHAT, "chat", "--engine", "scripted", "--no-history"],
                               stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    return process, master


def read_until(master: int, process: subprocess.Popen, text: bytes, timeout: float = 120.0) -> None:
    seen, deadline = b"", time.monotonic() + timeout
    while text not in seen:
        assert process.poll() is None, f"spectui exited before drawing: {seen[-300:]!r}"
        assert time.monotonic() < deadline, f"spectui did not draw: {seen[-300:]!r}"
        if select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 65536)


def wait_for_file(path, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None and time.monotonic() < deadline, "spectui did not start closing its engine"
        time.sleep(0.02)


def gone(process: subprocess.Popen, family: list, timeout: float = 30.0) -> bool:
    """Whether the chat and every process it started have ended within `timeout`."""
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    _, alive = psutil.wait_procs(family, timeout=10)
    return not alive


@pytest.mark.parametrize("way_out", ["ctrl+q then the terminal closed", "the terminal closed", "SIGHUP"])
def test_every_way_out_ends_the_chat_and_its_children(tmp_path, way_out):
    process, master = start_chat(tmp_path)
    try:
        read_until(master, process, b"ready")
        family = psutil.Process(process.pid).children(recursive=True)
        if way_out == "SIGHUP":
            process.send_signal(signal.SIGHUP)
        if way_out.startswith("ctrl+q"):
            os.write(master, b"\x11")
            wait_for_file(tmp_path / "closing", process)  # quitting: the engine is closing now
        if way_out != "SIGHUP":
            os.close(master)
            master = -1
        assert gone(process, family), f"spectui still runs after {way_out}"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        if master >= 0:
            os.close(master)
