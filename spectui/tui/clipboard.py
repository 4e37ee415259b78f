"""Copying text out of the app: OSC 52 through the terminal, and the system clipboard where
there is one.

OSC 52 asks the terminal itself to set its clipboard, so it works over ssh, where a local
clipboard tool cannot. Textual's `copy_to_clipboard` writes it. Inside tmux that sequence
reaches the terminal outside only with `set -g set-clipboard on`; the same sequence wrapped
in tmux's passthrough (which needs `set -g allow-passthrough on` from tmux 3.3) is written
too, so either setting is enough. A terminal without OSC 52 (macOS Terminal) is served by
pyperclip, when it is installed and finds a clipboard tool (pbcopy, wl-copy, xclip, xsel).

The clipboard gets what the screen shows (spectui.core.safe_text): a reply's escapes, pasted
into a shell, would run there, and could end a bracketed paste early.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping

from textual.app import App

from spectui.core.safe_text import safe_text


def osc52(text: str) -> str:
    """The sequence that sets the clipboard to `text` (UTF-8, base64), as Textual writes it."""
    return f"\x1b]52;c;{base64.b64encode(text.encode('utf-8')).decode('ascii')}\a"


def tmux_passthrough(sequence: str) -> str:
    """`sequence` wrapped for tmux to hand to the terminal outside it (each ESC doubled)."""
    return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"


def extra_sequences(text: str, environ: Mapping[str, str]) -> list[str]:
    """What to write besides Textual's own OSC 52: the tmux-wrapped copy inside tmux."""
    return [tmux_passthrough(osc52(text))] if environ.get("TMUX") else []


def system_clipboard(text: str) -> bool:
    """Copy with pyperclip if it is installed and finds a clipboard tool; False otherwise."""
    try:
        import pyperclip
    except ImportError:
        return False
    try:
        pyperclip.copy(text)
    except Exception:  # pyperclip.PyperclipException: no clipboard tool here (a server, a container)
        return False
    return True


def copy_text(app: App, text: str, environ: Mapping[str, str] = os.environ) -> str:
    """Put `text`, as the screen shows it, on every clipboard within reach; returns a note for
    the user ("" or " · also on the system clipboard")."""
    text = safe_text(text)
    app.copy_to_clipboard(text)  # OSC 52, and Textual's own clipboard (Ctrl+V in the message box)
    driver = app._driver  # Textual writes its OSC 52 here: the tmux copy goes the same way
    if driver is not None:
        for sequence in extra_sequences(text, environ):
            driver.write(sequence)
    return " · also on the system clipboard" if system_clipboard(text) else ""
