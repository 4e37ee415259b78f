"""Where the stats panel goes: beside the conversation on a wide terminal, put away on a
narrow one, where its summary shows as one line under the conversation instead."""

from __future__ import annotations

from spectui.tui.chat.scroll import ConversationScroll
from spectui.chat_session.stats import PanelData
from spectui.tui.widgets.stats_panel import StatsPanel, SummaryLine

# Below this width the panel steps aside by itself: its 38 columns would leave the
# conversation under 62. Its key still shows it down to PANEL_MIN_WIDTH.
PANEL_AUTO_WIDTH = 100
PANEL_MIN_WIDTH = 70  # narrower, the conversation would keep < 32 columns: never shown


class PanelPlace:
    def __init__(self, panel: StatsPanel, summary_line: SummaryLine, scroll: ConversationScroll) -> None:
        self.panel, self.summary_line, self.scroll = panel, summary_line, scroll
        self.chosen: bool | None = None  # the key's choice; None: by the terminal's width

    def place(self, width: int) -> None:
        wanted = width >= PANEL_AUTO_WIDTH if self.chosen is None else self.chosen
        self.panel.display = wanted and width >= PANEL_MIN_WIDTH
        self.summary_line.display = not self.panel.display
        self.scroll.end_if_following()  # a narrower conversation is taller: keep its end in view

    def toggle(self, width: int) -> str | None:
        """The key: the other of shown and hidden, kept through resizes; a note when too narrow."""
        self.chosen = not self.panel.display
        self.place(width)
        if self.chosen and not self.panel.display:
            return f"The stats panel needs a terminal {PANEL_MIN_WIDTH} columns wide; its summary stays below."
        return None

    def show(self, data: PanelData, engine_slope: float | None) -> None:
        self.panel.show(data, engine_slope)
        self.summary_line.show(data)
