"""JSON from outside (a server, a file, an option) parsed with a depth limit. Stdlib only.

Python's json module recurses once per nesting level, so `[[[[…` a few thousand deep raises
RecursionError, which no `except ValueError` catches. Here the depth is measured first (in
linear time, strings left out) and anything deeper than MAX_DEPTH is a json.JSONDecodeError
like any other malformed text: every caller's existing handler turns it into one line.
"""

from __future__ import annotations

import json
import math
import re

MAX_DEPTH = 100  # far above any config, chunk or header spectui reads (they nest a few levels)

# A JSON string, escapes included (unrolled so a long string costs one pass).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_TOKEN = re.compile(_STRING.pattern + r"|[\[\]{}]", re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_AS_PARENTHESES = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


class JsonTooDeep(json.JSONDecodeError):
    """Nested deeper than the limit: refused before the parser could overflow its stack."""


def loads(text: str | bytes, *, max_depth: int | None = MAX_DEPTH, finite: bool = False):
    """json.loads, refusing nesting deeper than `max_depth` (JsonTooDeep) and, with `finite`,
    numbers that are not finite (NaN, Infinity, 1e400): a JSONDecodeError either way.
    max_depth None: no pass before the parser (a large file whose reader walks nothing nested);
    nesting past the parser's own stack is still a JsonTooDeep."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if max_depth is not None:
        _check_depth(text, max_depth)
    try:
        if finite:
            return json.loads(text, parse_float=lambda s: _finite(s, text), parse_constant=lambda s: _finite(s, text))
        return json.loads(text)
    except RecursionError:  # the stack was already deep where this was called
        raise JsonTooDeep("nested too deeply to read", text, 0) from None


def _check_depth(text: str, max_depth: int) -> None:
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot be deeper: the usual case costs two counts
    # Brackets outside strings, as "(" and ")"; each pass strips the innermost pairs, so a
    # pair left after max_depth passes sits deeper, and so do more unclosed "(" than that.
    outside_strings = _STRING.sub("", text).encode("utf-8", "replace")
    brackets = outside_strings.translate(_AS_PARENTHESES, _NOT_BRACKETS)
    for _ in range(max_depth):
        brackets = brackets.replace(b"()", b"")
        if b"()" not in brackets:
            if brackets.count(b"(") <= max_depth:
                return
            break
    raise JsonTooDeep(f"nested deeper than {max_depth} levels", text, _too_deep_at(text, max_depth))


def _too_deep_at(text: str, max_depth: int) -> int:
    """Where the first bracket past `max_depth` is (for the column an error names)."""
    depth = 0
    for match in _TOKEN.finditer(text):
        depth += _STEP.get(match.group(), 0)
        if depth > max_depth:
            return match.start()
    return 0


def _finite(literal: str, text: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{literal} is not a finite number", text, max(0, text.find(literal)))
    return value
