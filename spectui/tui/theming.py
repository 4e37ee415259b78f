"""spectui's themes as Textual themes."""

from __future__ import annotations

from textual.theme import Theme

from spectui.themes import NO_COLOUR_STYLES, TOKEN_KINDS, SpectuiTheme
from spectui.tui.token_colours import palette_sources


def textual_theme(theme: SpectuiTheme) -> Theme:
    colors = theme.colors
    return Theme(
        name=theme.name,
        dark=theme.dark,
        variables=theme.variables(),
        # the panel colours by name (a theme file must give primary; the others default as in Textual)
        primary=colors["primary"], secondary=colors.get("secondary"), accent=colors.get("accent"),
        foreground=colors.get("foreground"), background=colors.get("background"), surface=colors.get("surface"),
        panel=colors.get("panel"), success=colors.get("success"), warning=colors.get("warning"), error=colors.get("error"),
    )


def token_variables(theme: Theme, palette: dict[str, str], no_color: bool) -> dict[str, str]:
    """The token styles' CSS variables a theme leaves to the app: all of them for a theme
    of Textual's (picked in the palette), taken from its own colours and held apart; with NO_COLOR, the
    shapes that keep the sources apart once the colours are gone."""
    variables = {}
    if f"spectui-{TOKEN_KINDS[0]}" not in theme.variables:
        for kind, (colour, style) in palette_sources(palette).items():
            variables[f"spectui-{kind}"] = colour
            variables[f"spectui-{kind}-style"] = style
    if no_color:
        variables.update({f"spectui-{kind}-style": style for kind, style in NO_COLOUR_STYLES.items()})
    return variables
