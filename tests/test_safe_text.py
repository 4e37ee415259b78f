"""safe_text: every control a terminal would obey becomes a visible symbol; nothing else changes."""

from __future__ import annotations

import json
import re

from hypothesis import given, strategies as st

from spectui.core.errors import SpectuiError, one_line
from spectui.core.safe_text import escaped_json, safe_cells, safe_line, safe_text

# The bidi controls reorder what the terminal lays out: obeyed as surely as an escape.
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
OBEYED = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}\ud800-\udfff]")
EVERY_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_escape_sequences_become_visible():
    assert safe_text("\x1b]0;pwned\x07\x1b[2J\x1b[31m") == "␛]0;pwned␇␛[2J␛[31m"
    assert safe_text("\x9b2J \x90dcs\x9c \x7f") == "\\x9b2J \\x90dcs\\x9c ␡"
    assert safe_text("a\r\nb\rc\x00") == "a\nb␍c␀"
    assert safe_text("tab\tand\nnewline, 日本, é, \u200b") == "tab\tand\nnewline, 日本, é, \u200b"
    assert safe_text("lone \ud800 surrogate") == "lone \ufffd surrogate"
    assert safe_line("two\nlines\tand \x1b[2J") == "two lines and ␛[2J"


def test_bidi_controls_are_shown_as_their_escapes_everywhere():
    # "safe", RIGHT-TO-LEFT OVERRIDE, "txt.exe" lays out as "safeexe.txt".
    assert safe_text("safe\u202etxt.exe") == "safe\\u202etxt.exe"
    assert safe_line("a\u2066b\u2069\nc") == "a\\u2066b\\u2069 c"
    assert safe_cells("safe\u202etxt") == "safe\ufffdtxt"  # one cell for one character
    assert escaped_json('"safe\u202etxt"') == '"safe\\u202etxt"'
    for text in (safe_text(EVERY_BIDI), safe_line(EVERY_BIDI), safe_cells(EVERY_BIDI), escaped_json(EVERY_BIDI)):
        assert not OBEYED.search(text), ascii(text)
    assert safe_text("عربي עברית") == "عربي עברית"  # right-to-left text itself is left alone


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_nothing_obeyed_survives_and_plain_text_is_untouched(text):
    shown = safe_text(text)
    assert not OBEYED.search(shown)
    if not OBEYED.search(text) and "\r" not in text:
        assert shown == text
    assert not OBEYED.search(safe_line(text)) and "\n" not in safe_line(text)


@given(st.recursive(st.text() | st.integers(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))
def test_escaped_json_is_the_same_value_with_no_control(value):
    text = escaped_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert not OBEYED.search(text)


def test_error_lines_show_what_a_server_said_without_obeying_it():
    assert one_line(SpectuiError("the server said \x1b]0;x\x07\nmore")) == "the server said ␛]0;x␇ more"
    assert one_line(ValueError("\x9b2J bad")) == "ValueError: \\x9b2J bad"
