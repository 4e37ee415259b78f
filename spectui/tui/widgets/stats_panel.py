"""The live panel on the right: a summary always in view (speed against plain decoding, γ,
tok/s), and under it, scrolling, speculation, speed, memory and the theory line."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.segment import Segment
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from spectui.measure.metrics import MemoryReading, format_bytes
from spectui.tui.charts import bar, sparkline
from spectui.tui.k_words import k_zero_words
from spectui.chat_session.stats import PanelData, Theory
from spectui.measure.costs import CostEstimate
from spectui.tui.summary import summary_line, summary_lines, too_short

# Roles, styled by the panel's component classes (theme variables in CSS): resolving
# "$variable" styles span by span on every frame cost more than the rest of the frame.
HEADING, LABEL, VALUE, NOTE, BAR, SPARK = "heading", "label", "value", "note", "bar", "spark"
ROLES = (HEADING, LABEL, VALUE, NOTE, BAR, SPARK)
MAX_POSITIONS = 8
# A line of the panel: (text, role) parts, or bare text (no role).
Line = Sequence[tuple[str, str] | str]
REASON_LINES = 2  # adaptive k's why: "α 0.82, draft 0.45× target → k 3, up to 8 while 82% sure"


def fmt(value: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def panel_lines(data: PanelData, width: int, engine_slope: float | None = None) -> list[Line]:
    """The panel as lines of (text, role) parts; kept apart from Textual for tests."""
    inner = max(16, width)
    chart = max(8, inner - 12)
    lines: list[Line] = []
    add = lines.append

    add([("Speculation", HEADING)])
    if data.speculation_note:
        add([(f" {data.speculation_note}", NOTE)])
    if data.draft_vocab:  # "80% shared · SLEM (T = 0; 2.41 tokens a step, TLI 1.93)": wrapped, never cut
        label = " draft vocabulary: "
        wrapped = textwrap.wrap(label + data.draft_vocab, inner - 1, subsequent_indent="  ")
        add([(label, LABEL), (wrapped[0][len(label):], VALUE)] if wrapped[0].startswith(label) else [(wrapped[0], VALUE)])
        lines += [[(line, VALUE)] for line in wrapped[1:]]
    add([(" γ reply ", LABEL), (fmt(data.gamma_reply), VALUE), ("  session ", LABEL), (fmt(data.gamma_session), VALUE)])
    add([(" τ       ", LABEL), (fmt(data.tau), VALUE), (" mean accept. length", LABEL)])
    add([(" α est.  ", LABEL), (fmt(data.alpha), VALUE)])
    if data.tree_nodes_mean is not None:
        lines.extend(tree_lines(data, inner))
    if data.per_position:
        add([(" acceptance by position", LABEL)])
        for index, rate in enumerate(data.per_position[:MAX_POSITIONS], start=1):
            add([(f" {index:>2} ", LABEL), (bar(rate, chart), BAR), (f" {rate:4.2f}", VALUE)])
        if len(data.per_position) > MAX_POSITIONS:
            add([(f"    … {len(data.per_position) - MAX_POSITIONS} more", NOTE)])
    add([(" α per step", LABEL)])
    add([" ", (sparkline(data.alpha_series, inner - 2) or "–", SPARK)])
    add([])
    if data.auto is not None:
        lines.extend(adaptive_lines(data, inner, engine_slope))

    add([("Speed", HEADING)])
    add([(" now     ", LABEL), (fmt(data.rate_now, ".1f"), VALUE), (" tok/s", LABEL)])
    add([(" reply   ", LABEL), (fmt(data.rate_reply, ".1f"), VALUE), (" tok/s", LABEL)])
    add([(" TTFT    ", LABEL), (fmt(data.time_to_first_token, ".2f", " s"), VALUE)])
    add([(" tokens  ", LABEL), (str(data.num_tokens), VALUE), (" in ", LABEL), (str(data.num_steps), VALUE), (" steps", LABEL)])
    add([])

    add([("Memory", HEADING)])
    memory = data.memory
    if memory is None:
        add([(" –", LABEL)])
    else:
        lines.extend(memory_lines(memory))
    add([])

    theory = data.theory
    add([("Theory", HEADING), *([("  this reply", LABEL)] if theory is not None and theory.reply else [])])
    if theory is None:
        add([(" 1 token: nothing drafted" if too_short(data) else " waits for drafted steps", NOTE)])
    else:
        lines.extend(theory_lines(theory, inner, auto=data.auto is not None, busy=data.busy))
    return lines


def theory_lines(theory: Theory, inner: int, auto: bool, busy: bool = False) -> list[Line]:
    """One predicted speedup, what it rests on, the measured one beside it, and best k once
    v(k) is measured at two k; an ended reply described over all its steps."""
    reply = theory.reply
    lines: list[Line]
    if reply is None:
        lines = [[(f" E(α,k={theory.k}) ", LABEL), (f"{theory.expected_tokens:.2f}", VALUE), (" tokens/step", LABEL)]]
        at = f" at k={theory.k}"
    else:
        lines = [[(" k mean    ", LABEL), (f"{reply.mean_k:.1f}", VALUE)],
                 [(" tok/step  ", LABEL), (f"{reply.tokens_per_step:.2f}", VALUE), (" measured", LABEL)],
                 [(" E(α,k)    ", LABEL), (f"{reply.expected_tokens:.2f}", VALUE), (" predicted", LABEL)]]
        at = " for its k"
    lines.append([(" predicted ", LABEL), (f"×{theory.speedup:.2f}", VALUE), (at, LABEL)])
    if theory.measured_speedup is not None:
        lines.append([(" measured  ", LABEL), (f"×{theory.measured_speedup:.2f}", VALUE),
                      (f" vs {theory.measured_against.replace('undrafted steps', 'undrafted')}", LABEL)])  # fits 34 columns
    if not auto:  # adaptive k picks k itself, step by step
        if theory.best_k is not None:
            lines.append([(" best k    ", LABEL), (str(theory.best_k), VALUE), (f"  ×{theory.best_speedup:.2f} predicted", LABEL)])
        else:
            lines += [[(" " + line, NOTE)] for line in textwrap.wrap(f"best k: measuring… {theory.missing}", inner - 1)]
    cost = theory.cost
    basis = (f"from α {theory.alpha:.2f}, c {cost.draft_cost:.3f}{' est.' if cost.estimated else ''}, "
             f"v(k)=1+{cost.verify_slope:.2f}k{slope_basis(cost)}" + (" · busy machine: not comparable" if busy else ""))
    lines += [[(" " + line, NOTE)] for line in textwrap.wrap(basis, inner - 1)]
    return lines


def slope_basis(cost: CostEstimate) -> str:
    """Where v(k)'s slope came from, where not from this chat's steps."""
    if cost.slope_timed_at_load:
        return " timed at load"
    return " guessed" if cost.slope_guessed else ""


def tree_lines(data: PanelData, inner: int) -> list[Line]:
    """Candidates the target verified per step of a draft tree: the reply's mean, then the last
    step's, on the same line when the panel is wider than its default."""
    mean = [(" tree    ", LABEL), (fmt(data.tree_nodes_mean, ".1f"), VALUE), (" candidates/step", LABEL)]
    last = [(" (last ", LABEL), (str(data.tree_nodes_last), VALUE), (")", LABEL)]
    if sum(len(text) for text, _ in mean + last) <= inner:
        return [mean + last]
    return [mean, [("         last step ", LABEL), (str(data.tree_nodes_last), VALUE)]]


def adaptive_lines(data: PanelData, inner: int, engine_slope: float | None = None) -> list[Line]:
    """Adaptive k's choices, its reason as it gave it, and at k 0 why in words and what would pay."""
    auto = data.auto
    assert auto is not None, "the panel shows adaptive k's lines while adaptive k runs"
    top = max(data.k_series, default=0) or 1
    words = [wrapped for text in k_zero_words(data, engine_slope) for wrapped in textwrap.wrap(text, inner - 1)]
    return [
        [("Adaptive k", HEADING), (f"  k {auto.k}", VALUE)],
        [(" k per step (0–", LABEL), (str(top), VALUE), (")", LABEL)],
        [" ", (sparkline([k / top for k in data.k_series], inner - 2) or "–", SPARK)],
        *([(" " + line, NOTE)] for line in textwrap.wrap(auto.reason, inner - 1)[:REASON_LINES]),
        *([(" " + line, VALUE)] for line in words),
        [],
    ]


def memory_lines(memory: MemoryReading) -> list[Line]:
    # "(all)": on CPU vLLM runs the model in its own processes, and they are counted too.
    kind = f"{memory.kind} (all)" if memory.with_children else memory.kind
    total = f" / {format_bytes(memory.total_bytes)}" if memory.total_bytes else ""
    lines: list[Line] = [[(f" {kind:<7} ", LABEL), (format_bytes(memory.used_bytes), VALUE), (total, LABEL)]]
    if memory.pool_bytes is not None:
        lines.append([(" reserved ", LABEL), (format_bytes(memory.pool_bytes), VALUE), (" up front", LABEL)])
    if memory.draft_bytes is not None:
        lines.append([(" draft   ", LABEL), (format_bytes(memory.draft_bytes), VALUE)])
    return lines


class PanelLines(Widget):
    """Lines of (text, role) parts, drawn line by line from cached strips: the panel changes
    every frame while a reply streams. Its height is its line count (the panel scrolls it)."""

    COMPONENT_CLASSES = {f"panellines--{role}" for role in ROLES}
    DEFAULT_CSS = """
    PanelLines { height: auto; }
    PanelLines > .panellines--heading { color: $primary; text-style: bold; }
    PanelLines > .panellines--label { color: $text-muted; }
    PanelLines > .panellines--value { color: $foreground; text-style: bold; }
    PanelLines > .panellines--note { color: $text-muted; text-style: italic; }
    PanelLines > .panellines--bar { color: $success; }
    PanelLines > .panellines--spark { color: $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.plain = ""
        self._lines: list[list[tuple[str, str | None]]] = []
        self._base_style = None  # self.rich_style walks the DOM: once per style change, not per line

    def show(self, parts: Sequence[Sequence[tuple[str, str] | str]]) -> None:
        lines: list[list[tuple[str, str | None]]] = [
            [part if isinstance(part, tuple) else (part, None) for part in line] for line in parts]
        old, self._lines = self._lines, lines
        self.plain = "\n".join("".join(text for text, _ in line) for line in lines)
        if len(old) != len(lines):
            self.refresh(layout=True)
            return
        # Redraw only the rows that changed: Textual's per-line cost is most of a frame.
        changed = [Region(0, y, self.outer_size.width, 1) for y, line in enumerate(lines) if line != old[y]]
        if changed:
            self.refresh(*changed)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_style = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self._base_style is None:
            self._base_style = self.rich_style
        base = self._base_style
        if y >= len(self._lines):
            return Strip.blank(width, base)
        segments = [
            Segment(text, self.get_component_rich_style(f"panellines--{role}") if role else base)
            for text, role in self._lines[y]
        ]
        return Strip(segments).extend_cell_length(width, base).crop(0, width)


class StatsPanel(Vertical):
    """The summary's three lines, then the rest, which scrolls when the terminal is short."""

    DEFAULT_CSS = """
    StatsPanel {
        width: 38;
        height: 1fr;
        padding: 0 0 0 1;
        background: $panel;
        border-left: vkey $primary 40%;
    }
    StatsPanel > #stats-summary { border-bottom: hkey $primary 30%; margin-right: 1; }
    StatsPanel > VerticalScroll { height: 1fr; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    StatsPanel > VerticalScroll > PanelLines { margin-right: 1; }
    """

    def __init__(self, data: PanelData, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = data
        self.engine_slope: float | None = None  # the engine's own v(k) timing, for the k 0 words
        self.summary = PanelLines(id="stats-summary")
        self.body = PanelLines(id="stats-body")

    def compose(self):
        yield self.summary
        with VerticalScroll(id="stats-scroll"):
            yield self.body

    def on_mount(self) -> None:
        self.show(self.data)

    def on_resize(self) -> None:
        self.show(self.data)  # the bars are drawn to the body's width

    @property
    def plain(self) -> str:
        return f"{self.summary.plain}\n{self.body.plain}"

    def show(self, data: PanelData, engine_slope: float | None = None) -> None:
        self.data = data
        self.engine_slope = engine_slope if engine_slope is not None else self.engine_slope
        width = self.body.content_region.width if self.body.is_mounted and self.body.content_region.width else 34
        self.summary.show(summary_lines(data))
        self.body.show(panel_lines(data, width, self.engine_slope))


class SummaryLine(Static):
    """The panel's summary in one line under the conversation, while the panel is put away."""

    DEFAULT_CSS = """
    SummaryLine { height: 1; margin: 0 1; color: $text-muted; }
    """

    def show(self, data: PanelData) -> None:
        styles = {"label": "$text-muted", "value": "bold $foreground", "note": "italic $text-muted"}
        # The room is its container's less its margins, not its own width, which its text may set.
        parent = self.parent
        room = parent.size.width - 2 if self.display and isinstance(parent, Widget) and parent.size.width > 2 else None
        self.update(Content.assemble(*((text, styles[role]) for text, role in summary_line(data, room))))
