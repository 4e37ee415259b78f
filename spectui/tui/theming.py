"""spectui's themes as Textual themes."""

from __future__ import annotations

from textual.theme import Theme

from spectui.themes import NO_COLOUR_STYLES, PALETTE_SOURCES, PANEL_COLOURS, TOKEN_KINDS, SpectuiTheme


def textual_theme(theme: SpectuiTheme) -> Theme:
    return Theme(
        name=theme.name,
        dark=theme.dark,
        variables=theme.variables(),
        **{key: value for key, value in theme.colors.items() if key in PANEL_COLOURS},
    )


def token_variables(theme: Theme, palette: dict[str, str], no_color: bool) -> dict[str, str]:
    """The token styles' CSS variables a theme leaves to the app: all of them for a theme
    of Textual's (picked in the palette), taken from its own colours; with NO_COLOR, the
    shapes that keep the sources apart once the colours are gone."""
    variables = {}
    if f"spectui-{TOKEN_KINDS[0]}" not in theme.variables:
        for kind, (colour, style) in PALETTE_SOURCES.items():
            variables[f"spectui-{kind}"] = palette[colour]
            variables[f"spectui-{kind}-style"] = style
    if no_color:
        variables.update({f"spectui-{kind}-style": style for kind, style in NO_COLOUR_STYLES.items()})
    return variables
