"""spectui's themes as Textual themes."""

from __future__ import annotations

from textual.theme import Theme

from spectui.themes import PANEL_COLOURS, SpectuiTheme


def textual_theme(theme: SpectuiTheme) -> Theme:
    return Theme(
        name=theme.name,
        dark=theme.dark,
        variables=theme.variables(),
        **{key: value for key, value in theme.colors.items() if key in PANEL_COLOURS},
    )
