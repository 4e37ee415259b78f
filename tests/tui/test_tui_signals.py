"""`spectui chat` told to stop by a signal in a real terminal (issue 42): TERM and HUP leave
as INT and Ctrl+Q do, the terminal's modes put back (the main screen, no mouse tracking, no
bracketed paste, the cursor shown), read from what the app wrote to the pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX terminal")

# DEC private modes: CSI ? n[;n…] h (set) / l (reset).
PRIVATE_MODE = re.compile(r"\x1b\[\?([0-9;]+)([hl])")
ALTERNATE_SCREEN = "1049"
MOUSE = ("1000", "1002", "1003", "1006", "1015")
BRACKETED_PASTE = "2004"
CURSOR_SHOWN = "25"


class RawTerminal:
    """A command in a pseudo-terminal; every byte it writes kept as it came."""

    def __init__(self, arguments: list[str], env: dict[str, str], size=(100, 30)) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        command = [sys.executable, "-c", "from spectui.cli.app import main; main()", *arguments]
        self.process = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True
        )
        os.close(slave)
        self.master = master
        self.chunks: list[bytes] = []
        self.drained = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every writer has closed its end
                break
            if not chunk:
                break
            self.chunks.append(chunk)
        self.drained.set()

    @property
    def output(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def wait_for(self, condition, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"spectui exited ({self.process.returncode}) before {what}: {self.output[-400:]!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.output[-400:]!r}")
            time.sleep(0.02)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        os.close(self.master)


def modes_left_set(output: str) -> dict[str, bool]:
    """Each private mode the output touched, and whether its last word left it set."""
    state: dict[str, bool] = {}
    for numbers, action in PRIVATE_MODE.findall(output):
        for number in numbers.split(";"):
            state[number] = action == "h"
    return state


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_to_stop_restores_the_terminal_as_ctrl_c_does(tmp_path, signum):
    env = {**os.environ, "SPECTUI_DATA_DIR": str(tmp_path), "SPECTUI_CONFIG_DIR": str(tmp_path), "TERM": "xterm-256color"}
    terminal = RawTerminal(["chat", "--engine", "scripted", "--no-history"], env)
    try:
        terminal.wait_for(lambda: "ready" in terminal.output, "the engine to be ready")
        on_screen = modes_left_set(terminal.output)
        assert on_screen[ALTERNATE_SCREEN] and any(on_screen.get(mode) for mode in MOUSE)  # the check can fail
        terminal.process.send_signal(signum)
        code = terminal.process.wait(30)
        assert terminal.drained.wait(10)
    finally:
        terminal.close()
    left = modes_left_set(terminal.output)
    assert "\x1b[?1049l" in terminal.output
    assert not left[ALTERNATE_SCREEN]
    assert [mode for mode in MOUSE if left.get(mode)] == []
    assert not left.get(BRACKETED_PASTE)
    assert left.get(CURSOR_SHOWN, True)
    assert "Traceback" not in terminal.output
    assert code == 128 + signum
