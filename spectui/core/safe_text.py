"""Text from models, servers and files, made safe to show on a terminal.

A terminal obeys the control characters it is sent: ESC starts a sequence that can clear
the screen, retitle the window, write the clipboard (OSC 52) or fake a prompt; C1 controls
(U+0080–U+009F, CSI = U+009B) are the same sequences in one code point for many terminals.
What is shown replaces each control with a visible picture (ESC becomes "␛", so an OSC
reads `␛]0;…` and does nothing); what is stored is never changed.

Bidi controls (embeddings, overrides, isolates, the marks) are obeyed by the terminal's text
layout rather than its parser, with the same effect: "safe", U+202E, "txt.exe" reads "safeexe.txt".
They are shown as their escapes (U+202E as `\\u202e`).
"""

from __future__ import annotations

import re

# ALM, LRM and RLM, the embeddings and overrides (LRE RLE PDF LRO RLO), the isolates (LRI RLI FSI PDI).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
# C0 except tab and newline, DEL, C1, bidi controls, and lone surrogates (a JSON "\ud800"
# escape decodes to one: the terminal's encoder would raise on it). "\r\n" is a line end, kept as "\n".
_CONTROLS = f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}\ud800-\udfff]"
_UNSAFE = re.compile("\r\n|" + _CONTROLS)
_LINE_BREAKS = re.compile("[\n\t]")


def _picture(char: str) -> str:
    """One visible character for a control: Unicode's control pictures (␀ … ␛ … ␟, ␍ for a
    lone CR), ␡ for DEL, � for the rest."""
    code = ord(char)
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"


def _visible(match: re.Match) -> str:
    char = match.group()
    if char == "\r\n":
        return "\n"
    if "\x80" <= char <= "\x9f":
        return f"\\x{ord(char):02x}"  # C1 controls have no pictures
    if _BIDI.match(char):
        return f"\\u{ord(char):04x}"
    return _picture(char)


def safe_text(text: str) -> str:
    """`text` with every control but newline and tab made visible; linear in its length."""
    return _UNSAFE.sub(_visible, text)


def safe_line(text: str) -> str:
    """Like safe_text, for a place that holds one line (a title, an error): newlines and
    tabs become spaces."""
    return _LINE_BREAKS.sub(" ", safe_text(text))


ECHO_LIMIT = 60  # characters of what the user typed that a one-line answer repeats


def echoed(text: str, limit: int = ECHO_LIMIT) -> str:
    """What the user typed, repeated in a one-line answer: one safe line, cut past `limit`
    characters (a 100 KB argument would otherwise fill the screen with its echo)."""
    line = safe_line(text)
    return line if len(line) <= limit else f"{line[:limit]}… ({len(text):,} characters)"


# What json.dumps(..., ensure_ascii=False) leaves raw that a terminal may act on (DEL, C1)
# or cannot encode (lone surrogates) or lays out reordered (bidi controls); U+2028/9 end
# lines in some readers.
_JSON_RAW = re.compile(f"[\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}\ud800-\udfff]")


def escaped_json(text: str) -> str:
    """A JSON document with those characters written as \\uXXXX escapes: the same value,
    nothing for a terminal to obey (they can only occur inside strings)."""
    return _JSON_RAW.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


_CELL_UNSAFE = re.compile(_CONTROLS)


def safe_cells(text: str) -> str:
    """Like safe_text, one visible character for each control (C1, bidi controls and
    surrogates become "�"), so an editor's cursor stays over the character it is on."""
    return _CELL_UNSAFE.sub(lambda match: _picture(match.group()), text)
