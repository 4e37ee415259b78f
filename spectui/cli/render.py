"""How `spectui generate` writes a reply: each token in its source's style, nothing raw.

The look follows the terminal: colours where it has them; with NO_COLOR, shapes (accepted
drafts underlined, the target's corrections bold); on a terminal that draws no styles at all
(TERM=dumb), accepted drafts between ⟦ ⟧ markers; piped or with --plain, the text alone.
The model's text is shown with its control characters made visible (spectui.core.safe_text);
--raw writes it exactly as it came (on a terminal, with a one-line warning on stderr).
"""

from __future__ import annotations

import enum

from rich.console import Console
from rich.text import Text

from spectui.core.events import Done, Source, Step
from spectui.core.pieces import step_pieces
from spectui.core.safe_text import safe_text


class Look(enum.Enum):
    COLOUR = "colour"
    SHAPES = "shapes"  # NO_COLOR: attributes without colour
    MARKERS = "markers"  # a terminal without attributes
    PLAIN = "plain"  # piped, --plain or --raw: the text alone


# The terminal's own palette: headless output should read on any background.
SOURCE_STYLES = {
    Look.COLOUR: {Source.DRAFT: "green", Source.RECOVERED: "bold magenta", Source.BONUS: "bold cyan", Source.TARGET: "default"},
    Look.SHAPES: {Source.DRAFT: "underline", Source.RECOVERED: "bold", Source.BONUS: "italic", Source.TARGET: "default"},
}
DRAFT_MARKERS = ("⟦", "⟧")


def choose_look(console: Console, plain: bool = False) -> Look:
    if plain or not console.is_terminal:
        return Look.PLAIN
    if console.color_system is None:
        return Look.MARKERS
    return Look.SHAPES if console.no_color else Look.COLOUR


def legend(look: Look) -> Text | None:
    """What the looks mean, for stderr; None when the text is plain."""
    if look is Look.PLAIN:
        return None
    if look is Look.MARKERS:
        return Text(f"{DRAFT_MARKERS[0]}accepted draft{DRAFT_MARKERS[1]} · target")
    styles = SOURCE_STYLES[look]
    return Text.assemble(
        ("accepted draft", styles[Source.DRAFT]), " · ",
        ("correction", styles[Source.RECOVERED]), " · ",
        ("bonus", styles[Source.BONUS]), " · ",
        ("target", styles[Source.TARGET]),
    )


def token_pieces(step: Step) -> list[str] | None:
    """The text of each token, as the engine sent it; None when the pieces do not join to
    the Step's text (the text is exact across multi-byte characters)."""
    pieces, _ = step_pieces(step)
    if len(pieces) != len(step.sources) or "".join(pieces) != step.text:
        return None
    return pieces


def step_text(step: Step, look: Look) -> Text:
    """One Step as rich Text in `look`, its control characters made visible."""
    if look is Look.PLAIN:
        return Text(safe_text(step.text))
    pieces = token_pieces(step)
    if pieces is None:  # no token boundaries: the step in its last token's look
        last = step.sources[-1] if step.sources else Source.TARGET
        pieces, sources = [step.text], [last]
    else:
        sources = list(step.sources)
    text = Text()
    if look is Look.MARKERS:
        drafted = "".join(piece for piece, source in zip(pieces, sources) if source is Source.DRAFT)
        rest = "".join(piece for piece, source in zip(pieces, sources) if source is not Source.DRAFT)
        if drafted:  # a step's accepted drafts come first, so they are one run
            text.append(f"{DRAFT_MARKERS[0]}{safe_text(drafted)}{DRAFT_MARKERS[1]}")
        text.append(safe_text(rest))
        return text
    styles = SOURCE_STYLES[look]
    for piece, source in zip(pieces, sources):
        text.append(safe_text(piece), style=styles[source])
    return text


def shown(line: str) -> Text:
    """A line that quotes a server or a model (a summary, an error): never markup, no controls."""
    return Text(safe_text(line))


def summary(line: str, done: Done | None) -> Text:
    """The summary line, and what the engine says about the speculation it could not see
    (a server that is not vLLM: "speculation not reported by this server")."""
    note = done.engine_stats.get("speculation") if done is not None else None
    return shown(f"{line} · speculation {note}" if isinstance(note, str) else line)


def raw_warning(console: Console) -> Text | None:
    """--raw to a terminal: one line for stderr, since the model's escapes will be obeyed
    (retitle, clear, set the clipboard); None when the output goes to a pipe or a file."""
    if not console.is_terminal:
        return None
    return Text("spectui: warning: --raw on a terminal: the model's control sequences reach it unfiltered")


def write_raw(console: Console, text: str) -> None:
    """--raw: the model's text exactly as it came, for a pipe that wants every byte."""
    console.file.write(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
    console.file.flush()
