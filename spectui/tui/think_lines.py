"""`<think>` and `</think>` written inline, moved onto lines of their own for the token view.

The view draws a reasoning block from tags that stand on their own lines (spectui.tui.fences);
a model that writes `<think>Okay.</think>The answer` on one line showed the raw tags. Here
the text as it streams gets a line break before a tag that follows text on its line and after
a tag that text follows. Only what is drawn changes: the reply's text stays as written, and
spectui.core.reasoning splits it alike. A tag can arrive in pieces ("<th", "ink>"): a tail
that may still become one is held back until the next chunk says, or until `flush` (the
reply ended). Ghosts (rejected drafts) are never part of a tag. No textual here.
"""

from __future__ import annotations

from spectui.core.reasoning import THINK_CLOSE, THINK_OPEN

TAGS = (THINK_OPEN, THINK_CLOSE)
Chunk = tuple[str, str]  # (text, kind)


class ThinkLines:
    def __init__(self) -> None:
        self.held: list[Chunk] = []  # a possible tag's characters so far, and ghosts among them
        self.held_text = ""  # those characters, ghosts left out
        self.line_has_text = False  # the current drawn line shows something other than spaces
        self.after_tag = False  # a tag ended the line so far: text after it goes to the next line

    def feed(self, text: str, kind: str, in_code: bool = False) -> list[Chunk]:
        """What to draw for `text` now. in_code: inside a code block, where a tag is code."""
        if kind == "ghost":
            if self.held:
                self.held.append((text, kind))
                return []
            return [(text, kind)]
        if not self.held and not self.after_tag and "<" not in text:
            self._saw(text)  # the common case: no tag can start here
            return [(text, kind)]
        out: list[Chunk] = []
        for char in text:
            self._char(char, kind, in_code, out)
        return _joined(out)

    def flush(self) -> list[Chunk]:
        """The held characters as plain text: the reply ended without completing a tag."""
        out: list[Chunk] = []
        self._release(out)
        return _joined(out)

    def _char(self, char: str, kind: str, in_code: bool, out: list[Chunk]) -> None:
        if self.held or (char == "<" and not in_code):
            candidate = self.held_text + char
            if any(tag.startswith(candidate) for tag in TAGS):
                self.held.append((char, kind))
                self.held_text = candidate
                if candidate in TAGS:
                    self._tag(out)
                return
            self._release(out)  # not a tag: what was held is text; `char` may start another
            if char == "<" and not in_code:
                self.held, self.held_text = [(char, kind)], char
                return
        self._plain(char, kind, out)

    def _tag(self, out: list[Chunk]) -> None:
        if self.line_has_text or self.after_tag:  # after "</think>" too: each tag on its own line
            out.append(("\n", self.held[0][1]))
        out.extend(self.held)
        self.held, self.held_text = [], ""
        self.after_tag, self.line_has_text = True, False

    def _release(self, out: list[Chunk]) -> None:
        held, self.held, self.held_text = self.held, [], ""
        for text, kind in held:
            if kind == "ghost":
                out.append((text, kind))
            else:
                self._plain(text, kind, out)

    def _plain(self, char: str, kind: str, out: list[Chunk]) -> None:
        if self.after_tag and char not in " \t":  # spaces after a tag stay on its line
            self.after_tag = False
            if char != "\n":
                out.append(("\n", kind))
        out.append((char, kind))
        self._saw(char)

    def _saw(self, text: str) -> None:
        _, newline, line = text.rpartition("\n")
        if newline:
            self.line_has_text = bool(line.strip())
        elif text.strip():
            self.line_has_text = True


def _joined(chunks: list[Chunk]) -> list[Chunk]:
    """Neighbouring characters of one kind as one chunk."""
    joined: list[Chunk] = []
    for text, kind in chunks:
        if joined and joined[-1][1] == kind:
            joined[-1] = (joined[-1][0] + text, kind)
        else:
            joined.append((text, kind))
    return joined
