"""`spectui chat` killed mid-reply in a real terminal (SIGKILL: no chance to clean up; SIGINT):
the conversation is there on restart, up to the last step that arrived."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest

from spectui.store import Store
from spectui.engines.scripted import ScriptedEngine
from spectui.tui.widgets.conversation import ReplyView

from fake_engines import factory_for
from tui_helpers import ready

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX terminal")

ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>NOPMc78])")


class Terminal:
    """`spectui chat` in a pseudo-terminal, its screen output collected as plain text."""

    def __init__(self, arguments: list[str], env: dict[str, str], size=(110, 32)) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        command = [sys.executable, "-c", "from spectui.cli.app import main; main()", *arguments]
        self.process = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True
        )
        os.close(slave)
        self.master = master
        self.output = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += ESCAPES.sub("", chunk.decode("utf-8", errors="replace"))

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_for(self, condition, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"spectui exited ({self.process.returncode}) before {what}: {self.output[-500:]!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.output[-500:]!r}")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        os.close(self.master)


def steps_saved(database) -> tuple[int, bool]:
    """(steps committed so far, whether the reply was finished), read as another process would."""
    if not database.exists():
        return 0, False
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1) as connection:
        try:
            steps = connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
            finished = connection.execute(
                "SELECT COUNT(*) FROM messages WHERE role = 'assistant' AND finish_reason IS NOT NULL"
            ).fetchone()[0]
        except sqlite3.OperationalError:  # tables not created yet
            return 0, False
    return steps, finished > 0


def chat_mid_reply(tmp_path) -> tuple[Terminal, object]:
    """`spectui chat` on the scripted engine, five steps into its first reply."""
    env = {**os.environ, "SPECTUI_DATA_DIR": str(tmp_path), "SPECTUI_CONFIG_DIR": str(tmp_path), "TERM": "xterm-256color"}
    database = tmp_path / "history.sqlite3"
    # k = 0: one token per step, so the reply takes a few seconds and the signal lands inside it.
    terminal = Terminal(["chat", "--engine", "scripted", "-k", "0"], env)
    try:
        terminal.wait_for(lambda: "ready" in terminal.output, "the engine to be ready")
        terminal.type("tell me about speculative decoding\r")
        terminal.wait_for(lambda: steps_saved(database)[0] >= 5, "five steps in the history")
    except BaseException:
        terminal.kill()
        raise
    return terminal, database


async def test_killed_mid_reply_the_conversation_survives_up_to_the_last_step(tmp_path, make_app):
    terminal, database = chat_mid_reply(tmp_path)
    terminal.kill()
    steps_at_kill, finished = steps_saved(database)
    assert not finished, "the reply should have been cut off"

    store = Store(database)
    conversation = store.load_conversation(store.latest_conversation_id())
    store.close()
    user, reply = conversation.messages[-2:]
    assert user.content == "tell me about speculative decoding"
    assert reply.finish_reason == "interrupted"
    assert len(reply.steps) >= steps_at_kill >= 5  # nothing committed was lost
    assert reply.content == "".join(stored.step.text for stored in reply.steps)
    # The steps are the start of the scripted reply, in order (it opens by echoing the turn).
    assert reply.content.lstrip().startswith("Turn 1. You asked:")

    app = make_app(factory_for(ScriptedEngine()), resume=conversation)
    async with app.run_test(size=(110, 32)) as pilot:
        await ready(pilot)
        view = app.chat_screen.query(ReplyView).last()
        assert view.token_view.text == reply.content
        assert "interrupted" in str(view.note.render())


def test_sigint_mid_reply_exits_without_a_traceback_and_keeps_the_reply(tmp_path):
    terminal, database = chat_mid_reply(tmp_path)
    try:
        terminal.process.send_signal(signal.SIGINT)
        code = terminal.process.wait(20)
        time.sleep(0.2)  # the reader thread drains the last output
    finally:
        terminal.kill()
    assert code in (0, 130), terminal.output[-500:]
    assert "Traceback" not in terminal.output
    store = Store(database)
    reply = store.load_conversation(store.latest_conversation_id()).messages[-1]
    store.close()
    assert reply.role == "assistant" and len(reply.steps) >= 5
    assert reply.finish_reason in ("cancelled", "interrupted")
    assert reply.content == "".join(stored.step.text for stored in reply.steps)
