"""Copying text out of the app: OSC 52 through the terminal, and the system clipboard where
there is one.

OSC 52 asks the terminal itself to set its clipboard, so it works over ssh, where a local
clipboard tool cannot. Textual's `copy_to_clipboard` writes it. Inside tmux that sequence
reaches the terminal outside only with `set -g set-clipboard on`; the same sequence wrapped
in tmux's passthrough (which needs `set -g allow-passthrough on` from tmux 3.3) is written
too, so either setting is enough. With neither (tmux's default set-clipboard is external) the
copy may not arrive, and the notice says so instead of "Copied". A terminal without OSC 52 (macOS Terminal) is served by
pyperclip, when it is installed and finds a clipboard tool (pbcopy, wl-copy, xclip, xsel).

The clipboard gets what the screen shows (spectui.core.safe_text): a reply's escapes, pasted
into a shell, would run there, and could end a bracketed paste early.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

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


TMUX_ASK_SECONDS = 0.5  # a tmux that does not answer at once is taken as one whose settings are unknown


@dataclass(frozen=True)
class Copied:
    """What a copy did: `sure` when the text surely reached a clipboard; `note` for the user."""

    sure: bool
    note: str = ""

    @property
    def verb(self) -> str:
        return "Copied" if self.sure else "Sent"


def tmux_option(name: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str | None:
    """A global tmux option's value (`tmux show -gv NAME`); None when tmux does not say."""
    try:
        done = run(["tmux", "show", "-gv", name], capture_output=True, text=True, timeout=TMUX_ASK_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def tmux_blocks(environ: Mapping[str, str], option: Callable[[str], str | None] | None = None) -> str | None:
    """Why tmux may keep an OSC 52 copy from the terminal outside it; None outside tmux, or
    where set-clipboard is on or passthrough is allowed (one of the two copies goes through)."""
    if not environ.get("TMUX"):
        return None
    option = option or tmux_option
    clipboard = option("set-clipboard")
    if clipboard == "on" or option("allow-passthrough") in ("on", "all"):
        return None
    said = f"set-clipboard is {clipboard}" if clipboard else "set-clipboard could not be read"
    return f"tmux's {said}: it may not reach your clipboard (`set -g set-clipboard on` in tmux.conf lets it)"


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


def copy_text(app: App, text: str, environ: Mapping[str, str] = os.environ) -> Copied:
    """Put `text`, as the screen shows it, on every clipboard within reach; says whether it
    surely arrived, and a note for the user (" · also on the system clipboard")."""
    text = safe_text(text)
    app.copy_to_clipboard(text)  # OSC 52, and Textual's own clipboard (Ctrl+V in the message box)
    driver = app._driver  # Textual writes its OSC 52 here: the tmux copy goes the same way
    if driver is not None:
        for sequence in extra_sequences(text, environ):
            driver.write(sequence)
    if system_clipboard(text):
        return Copied(True, " · also on the system clipboard")
    blocked = tmux_blocks(environ)
    if blocked is not None:
        return Copied(False, f" · to the terminal via OSC 52; {blocked}")
    return Copied(True)
