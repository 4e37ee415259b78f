"""The token view: a reply drawn token by token, each in its source's theme style.

A Line API widget over an incremental wrapper (spectui.tui.wrappings, the text laid out at
the widths asked for): appending redraws only the lines that changed, so thousands of tokens a second cost little. Its height is its line count; the
conversation around it scrolls. A Markdown code fence is drawn as a code block while it
streams: the opening fence becomes the block's label (its language), the closing one its
last line, and each token inside keeps its source's style on the block's background.
A reasoning model's `<think>` block is drawn apart from the answer the same way: labelled,
behind a bar, dimmed, each token still in its source's colour; a click on its label folds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from spectui.tui.fences import CLOSE, CODE, OPEN, PROSE, THINK, THINK_CLOSE, THINK_OPEN
from spectui.tui.find_marks import LineMarks, Span, marked_runs
from spectui.tui.wrap import CODE_PAD, StyledWrapper, WrappedLine
from spectui.tui.wrappings import Wrappings

KINDS = ("draft", "recovered", "bonus", "target", "ghost", "edited")  # edited: the user's text in a reply
BLOCK_CLASSES = ("code", "code-label", "code-edge", "reasoning")
MARK_CLASSES = ("found", "found-current")  # /find's matches, and the one it went to
# An opening fence is drawn as the block's top edge with its language set in it ("─ python ───"),
# not as a line of text that reads " python" (issue 59).
EDGE = "─"
REASONING_LABEL = " reasoning "
REASONING_BAR = "│ "  # as wide as the code block's padding, so both wrap alike
FOLD_MARKS = {False: "▾ ", True: "▸ folded: click to show "}


class TokenView(Widget):
    COMPONENT_CLASSES = {f"tokenview--{name}" for name in KINDS + BLOCK_CLASSES + MARK_CLASSES}
    DEFAULT_CSS = """
    TokenView { height: auto; width: 1fr; }
    TokenView > .tokenview--draft { color: $spectui-draft; text-style: $spectui-draft-style; }
    TokenView > .tokenview--recovered { color: $spectui-recovered; text-style: $spectui-recovered-style; }
    TokenView > .tokenview--bonus { color: $spectui-bonus; text-style: $spectui-bonus-style; }
    TokenView > .tokenview--target { color: $spectui-target; text-style: $spectui-target-style; }
    TokenView > .tokenview--ghost { color: $spectui-ghost; text-style: $spectui-ghost-style; }
    TokenView > .tokenview--edited { color: $foreground; text-style: italic; }
    TokenView > .tokenview--code { background: $surface; }
    TokenView > .tokenview--code-label { background: $surface; color: $text-muted; text-style: italic; }
    TokenView > .tokenview--code-edge { background: $surface; color: $text-muted 50%; }
    TokenView > .tokenview--reasoning { color: $text-muted; }
    TokenView > .tokenview--found { background: $warning 30%; }
    TokenView > .tokenview--found-current { background: $warning; color: $background; }
    """

    def __init__(
        self,
        chunks: Iterable[tuple[str, str]] = (),
        show_ghosts: bool = False,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._wrappings = Wrappings(chunks, show_ghosts)  # the text, laid out at the widths asked for
        # Drawn lines, reused until their text, the width or the styles change.
        self._strips: dict[int, Strip] = {}
        self._strips_width = -1
        self._base_style = None
        self._reasoning_folded = False
        self._folded_lines: list[WrappedLine] | None = None  # the lines drawn while folded
        self._marks: LineMarks | None = None  # /find's matches in the drawn lines

    # content

    def append_chunks(self, chunks: Iterable[tuple[str, str]]) -> None:
        chunks = list(chunks)
        if not chunks:
            return
        shown = self._wrappings.get(self.size.width)
        before = (len(shown.lines) - 1, shown.num_lines) if shown is not None else None
        self._wrappings.extend(chunks)
        if shown is None or before is None or self._reasoning_folded:
            if self._reasoning_folded:  # the drawn lines are not the wrapper's: draw them anew
                self._forget_lines()
            self.refresh(layout=True)
            return
        first_changed, lines_before = before
        if shown.rewrapped_from is not None:  # a line turned into a fence, or out of one
            first_changed = min(first_changed, shown.rewrapped_from)
        for y in [y for y in self._strips if y >= first_changed]:
            del self._strips[y]
        # Taller: the conversation makes room, one layout per frame at most (the replies flush
        # once a frame); no spare lines ahead of the text, which left blanks below a streaming
        # reply and pushed the question off a small screen (issue 59).
        if shown.num_lines != lines_before:
            self.refresh(layout=True)
        # The old last line and everything after it (a word may have moved down).
        self.refresh(Region(0, first_changed, self.size.width, shown.num_lines - first_changed + 1))

    def clear(self) -> None:
        self._wrappings.clear()
        self._forget_lines()
        self.refresh(layout=True)

    @property
    def chunks(self) -> list[tuple[str, str]]:
        """(text, kind) as the model wrote them."""
        return self._wrappings.chunks

    @property
    def streaming(self) -> bool:
        return self._wrappings.streaming

    @streaming.setter
    def streaming(self, value: bool) -> None:
        if value != self._wrappings.streaming:
            if value:
                self._wrappings.streaming = True
            elif self._wrappings.end_stream():
                self._forget_lines()  # the reply ended on what looked like the start of a tag
            self.refresh(layout=True)  # a tag held back at the end may have become text

    def _height(self, num_lines: int) -> int:
        return max(1, num_lines)

    @property
    def num_text_lines(self) -> int:
        """Lines of text now (without the spare lines kept while streaming)."""
        return self._wrapped(self.size.width).num_lines

    @property
    def show_ghosts(self) -> bool:
        return self._wrappings.show_ghosts

    @show_ghosts.setter
    def show_ghosts(self, value: bool) -> None:
        if value != self._wrappings.show_ghosts:
            self._wrappings.show_ghosts = value
            self._wrappings.forget()
            self._forget_lines()
            self.refresh(layout=True)

    @property
    def text(self) -> str:
        """The reply's text as the model wrote it (controls included), ghosts left out."""
        return "".join(text for text, kind in self.chunks if kind != "ghost")

    # layout and drawing

    def _wrapped(self, width: int) -> StyledWrapper:
        return self._wrappings.at(width)

    @property
    def reasoning_folded(self) -> bool:
        return self._reasoning_folded

    @reasoning_folded.setter
    def reasoning_folded(self, value: bool) -> None:
        if value != self._reasoning_folded:
            self._reasoning_folded = value
            self._forget_lines()
            self.refresh(layout=True)

    def _forget_lines(self) -> None:
        self._folded_lines = None
        self._strips.clear()
        if self._marks is not None:
            self._marks.forget()

    def mark(self, needle: str, current: int = -1) -> None:
        """Draw `needle`'s matches (any case) marked, the `current`th of them (from 0) most;
        an empty needle marks nothing."""
        self._marks = LineMarks(needle, current) if needle else None
        self._strips.clear()
        self.refresh()

    def _shown_lines(self, wrapper: StyledWrapper) -> list[WrappedLine]:
        """The wrapped lines drawn: all, or, folded, all but the reasoning's body (kept until
        the text or the width changes: render_line asks once per line)."""
        if not self._reasoning_folded:
            return wrapper.lines[: wrapper.num_lines]
        if self._folded_lines is None:
            self._folded_lines = [line for line in wrapper.lines[: wrapper.num_lines]
                                  if line.block not in (THINK, THINK_CLOSE)]
        return self._folded_lines

    def on_click(self, event: events.Click) -> None:
        lines = self._shown_lines(self._wrapped(self.size.width))
        if 0 <= event.y < len(lines) and lines[event.y].block == THINK_OPEN:
            self.reasoning_folded = not self._reasoning_folded

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if self._reasoning_folded:
            return self._height(len(self._shown_lines(self._wrapped(width))))
        return self._height(self._wrapped(width).num_lines)

    def on_resize(self) -> None:
        self._wrapped(self.size.width)

    def rendered_lines(self) -> list[list[tuple[str, str]]]:
        """(text, kind) runs of each wrapped line, as drawn now: for tests and the benchmark.
        A fence's lines give their label (kind "code-label") or nothing."""
        return [runs for _, runs in self.rendered_blocks()]

    def rendered_blocks(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Each wrapped line's block (spectui.tui.fences: prose, open, code, close) and runs."""
        return [(line.block, line_runs(line)) for line in self._shown_lines(self._wrapped(self.size.width or 80))]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # a new theme: every line is drawn again
        self._base_style = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._strips_width:
            self._forget_lines()
            self._strips_width = width
        strip = self._strips.get(y)
        if strip is not None:
            return strip
        if self._base_style is None:
            self._base_style = self.rich_style  # walks the DOM: once per style change
        base = self._base_style
        wrapper = self._wrapped(width)
        folded = self._shown_lines(wrapper) if self._reasoning_folded else None
        if y >= (len(folded) if folded is not None else wrapper.num_lines):
            return Strip.blank(width, base)
        lines = folded if folded is not None else wrapper.lines[: wrapper.num_lines]
        spans = self._marks.spans(lines, y) if self._marks is not None else ()
        segments, fill = self._draw(lines[y], base, spans)
        strip = Strip(segments).extend_cell_length(width, fill).crop(0, width)
        self._strips[y] = strip
        return strip

    def _draw(self, line: WrappedLine, base: Style, spans: Sequence[Span] = ()) -> tuple[list[Segment], Style]:
        """The line's segments, and the style that fills the rest of its width; `spans`: the
        characters /find marks."""
        style = self.get_component_rich_style

        def marked(mark: str | None) -> Style:
            return style(f"tokenview--{mark}") if mark else Style()

        if line.block == PROSE:
            return [text_segment(text, style(f"tokenview--{kind}") + marked(mark))
                    for text, kind, mark in marked_runs(line_runs(line), spans)], base
        if line.block in (THINK_OPEN, THINK, THINK_CLOSE):
            return draw_reasoning(line, base, style, self._reasoning_folded), base
        block = base + style("tokenview--code")
        if line.block == OPEN:
            return draw_edge(line, base, style, self.size.width), block
        background = Style(bgcolor=block.bgcolor)  # after the token's style, which has the view's own
        padding = [text_segment(" " * CODE_PAD, block)] if line.block == CODE else []
        return padding + [text_segment(text, base + style(f"tokenview--{kind}") + background + marked(mark))
                          for text, kind, mark in marked_runs(line_runs(line), spans)], block


def draw_edge(line: WrappedLine, base: Style, style: Callable[[str], Style], width: int) -> list[Segment]:
    """A code block's top edge: a rule across the view with the block's language in it."""
    edge = base + style("tokenview--code-edge")
    label = "".join(text for text, _ in line_runs(line))
    rest = max(0, width - CODE_PAD - len(label))
    return [text_segment(EDGE * CODE_PAD, edge), text_segment(label, base + style("tokenview--code-label")),
            text_segment(EDGE * rest, edge)]


def draw_reasoning(line: WrappedLine, base: Style, style: Callable[[str], Style], folded: bool) -> list[Segment]:
    """A line of a <think> block: the label (which says whether it is folded), or the bar
    and the tokens dimmed, each in its own colour; the closing tag's line shows nothing."""
    if line.block == THINK_OPEN:
        label = REASONING_LABEL + FOLD_MARKS[folded]
        return [text_segment(label, base + style("tokenview--code-label"))]
    if line.block != THINK:
        return []  # the closing tag
    dimmed = Style(dim=True)
    return [text_segment(REASONING_BAR, base + style("tokenview--reasoning"))] + [
        text_segment(text, style(f"tokenview--{kind}") + dimmed) for text, kind in line_runs(line)]


def line_runs(line: WrappedLine) -> list[tuple[str, str]]:
    """What a wrapped line shows: its runs; an opening fence's label; nothing for the closing one.
    A <think> block's opening tag is its label; its closing tag shows nothing."""
    if line.block == OPEN:
        return [(f" {line.language or 'code'} ", "code-label")]
    if line.block == THINK_OPEN:
        return [(REASONING_LABEL, "code-label")]
    if line.block in (CLOSE, THINK_CLOSE):
        return []
    return line.runs()


def text_segment(text: str, style: Style | None) -> Segment:
    """Every piece of text the view draws goes through here."""
    return Segment(text, style)
