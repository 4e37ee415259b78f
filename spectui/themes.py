"""Themes as data: TOML files in the top-level themes/ folder and in the user's config dir.

Each theme gives Textual's panel colours and one style per token source (plus the ghost
style for rejected drafts). Widgets never name a colour: they use the CSS variables
`$spectui-<kind>` and `$spectui-<kind>-style` that `theme_variables` defines.
Stdlib only here; `to_textual_theme` imports textual when called.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from spectui.config import ConfigError, config_dir

TOKEN_KINDS = ("draft", "recovered", "bonus", "target", "ghost")
PANEL_COLOURS = (
    "primary", "secondary", "accent", "foreground", "background",
    "surface", "panel", "success", "warning", "error",
)
TEXT_STYLES = {"none", "bold", "italic", "underline", "strike", "dim", "reverse", "overline"}
BUILTIN_THEMES_DIR = Path(__file__).resolve().parent.parent / "themes"
DEFAULT_THEME = "dark"


@dataclass(frozen=True)
class TokenStyle:
    color: str
    style: str = "none"  # space-separated Textual text-style flags


@dataclass(frozen=True)
class SpectuiTheme:
    name: str
    dark: bool
    colors: dict[str, str]
    sources: dict[str, TokenStyle]  # one per TOKEN_KINDS
    path: Path | None = None

    def variables(self) -> dict[str, str]:
        return theme_variables(self.sources)

    def to_textual_theme(self):
        from textual.theme import Theme

        return Theme(
            name=self.name,
            dark=self.dark,
            variables=self.variables(),
            **{key: value for key, value in self.colors.items() if key in PANEL_COLOURS},
        )


def theme_variables(sources: dict[str, TokenStyle]) -> dict[str, str]:
    variables = {}
    for kind in TOKEN_KINDS:
        variables[f"spectui-{kind}"] = sources[kind].color
        variables[f"spectui-{kind}-style"] = sources[kind].style
    return variables


# Used when the themes/ folder is missing (an install without data files) and as the
# CSS defaults before any theme applies.
FALLBACK_SOURCES = {
    "draft": TokenStyle("#5fd787"),
    "recovered": TokenStyle("#ff8787", "bold"),
    "bonus": TokenStyle("#5fd7ff", "bold"),
    "target": TokenStyle("#d0d0d0"),
    "ghost": TokenStyle("#6c6c6c", "strike"),
}
FALLBACK_THEME = SpectuiTheme(
    name=DEFAULT_THEME,
    dark=True,
    colors={"primary": "#5fafff", "accent": "#ffaf5f", "background": "#16181d"},
    sources=FALLBACK_SOURCES,
)


def parse_theme(text: str, where: str, path: Path | None = None) -> SpectuiTheme:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"theme {where}: {error}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"theme {where}: needs name = \"...\"")
    colors = data.get("colors", {})
    if not isinstance(colors, dict) or "primary" not in colors:
        raise ConfigError(f"theme {where}: needs a [colors] table with at least primary")
    unknown = set(colors) - set(PANEL_COLOURS)
    if unknown:
        raise ConfigError(f"theme {where}: unknown colour(s) {', '.join(sorted(unknown))}")
    sources_table = data.get("sources", {})
    sources = {}
    for kind in TOKEN_KINDS:
        entry = sources_table.get(kind)
        if not isinstance(entry, dict) or not isinstance(entry.get("color"), str):
            raise ConfigError(f"theme {where}: needs [sources.{kind}] with color = \"#rrggbb\"")
        style = entry.get("style", "none")
        flags = style.split() if isinstance(style, str) else None
        if not flags or not set(flags) <= TEXT_STYLES:
            raise ConfigError(
                f"theme {where}: sources.{kind}.style must use {', '.join(sorted(TEXT_STYLES))}"
            )
        sources[kind] = TokenStyle(entry["color"], " ".join(flags))
    return SpectuiTheme(name, bool(data.get("dark", True)), dict(colors), sources, path)


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def load_themes(
    builtin_dir: Path = BUILTIN_THEMES_DIR, user_dir: Path | None = None
) -> dict[str, SpectuiTheme]:
    """Built-in themes, then the user's (a user theme with a built-in's name replaces it).

    A broken user theme is skipped rather than stopping the app; `theme_errors` says why.
    """
    themes: dict[str, SpectuiTheme] = {}
    for theme in _themes_in(builtin_dir, errors=None):
        themes[theme.name] = theme
    for theme in _themes_in(user_dir or user_themes_dir(), errors=None):
        themes[theme.name] = theme
    if DEFAULT_THEME not in themes:
        themes[DEFAULT_THEME] = FALLBACK_THEME
    return themes


def theme_errors(user_dir: Path | None = None) -> list[str]:
    errors: list[str] = []
    list(_themes_in(user_dir or user_themes_dir(), errors=errors))
    return errors


def _themes_in(folder: Path, errors: list[str] | None):
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.toml")):
        try:
            yield parse_theme(path.read_text(encoding="utf-8"), path.name, path)
        except (ConfigError, OSError) as error:
            if errors is not None:
                errors.append(str(error))
