"""Themes as data: TOML files shipped in this package and in the user's config dir.

Each theme gives Textual's panel colours and one style per token source (plus the ghost
style for rejected drafts). Widgets never name a colour: they use the CSS variables
`$spectui-<kind>` and `$spectui-<kind>-style` that `theme_variables` defines.
Stdlib only here; the TUI turns a theme into Textual's (spectui.tui.theming).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from spectui.core.files import SETTINGS_FILE_LIMIT, read_capped_text
from spectui.settings.config import ConfigError, config_dir
from spectui.themes.colours import is_colour

TOKEN_KINDS = ("draft", "recovered", "bonus", "target", "ghost")
PANEL_COLOURS = (
    "primary", "secondary", "accent", "foreground", "background",
    "surface", "panel", "success", "warning", "error",
)
TEXT_STYLES = {"none", "bold", "italic", "underline", "strike", "dim", "reverse", "overline"}
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


def theme_variables(sources: dict[str, TokenStyle]) -> dict[str, str]:
    variables = {}
    for kind in TOKEN_KINDS:
        variables[f"spectui-{kind}"] = sources[kind].color
        variables[f"spectui-{kind}-style"] = sources[kind].style
    return variables


# NO_COLOR: the sources told apart by shape alone, in every theme (as `spectui generate`
# does: spectui.cli.render's SHAPES look).
NO_COLOUR_STYLES = {"draft": "underline", "recovered": "bold", "bonus": "italic", "target": "none", "ghost": "strike"}
# A theme that names no token styles (Textual's own): each source from its palette.
PALETTE_SOURCES = {
    "draft": ("success", "none"),
    "recovered": ("secondary", "bold"),
    "bonus": ("primary", "bold"),
    "target": ("foreground", "none"),
    "ghost": ("foreground-muted", "strike"),
}

# The CSS defaults before any theme applies.
FALLBACK_SOURCES = {
    "draft": TokenStyle("#5fd787"),
    "recovered": TokenStyle("#af87ff", "bold"),
    "bonus": TokenStyle("#5fd7ff", "bold"),
    "target": TokenStyle("#d0d0d0"),
    "ghost": TokenStyle("#6c6c6c", "strike"),
}
def parse_theme(text: str, where: str, path: Path | None = None) -> SpectuiTheme:
    """A theme from TOML text; every problem is one ConfigError naming `where` and the key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"theme {where}: {error}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"theme {where}: needs name = \"...\"")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ConfigError(f"theme {where}: dark must be true or false, got {dark!r}")
    colors = data.get("colors", {})
    if not isinstance(colors, dict) or "primary" not in colors:
        raise ConfigError(f"theme {where}: needs a [colors] table with at least primary")
    unknown = set(colors) - set(PANEL_COLOURS)
    if unknown:
        raise ConfigError(f"theme {where}: unknown colour(s) {', '.join(sorted(unknown))}")
    for key, value in colors.items():
        check_colour(where, f"colors.{key}", value)
    sources_table = data.get("sources", {})
    if not isinstance(sources_table, dict):
        raise ConfigError(f"theme {where}: sources must be tables: [sources.draft], [sources.target], ...")
    sources = {}
    for kind in TOKEN_KINDS:
        entry = sources_table.get(kind)
        if not isinstance(entry, dict) or "color" not in entry:
            raise ConfigError(f"theme {where}: needs [sources.{kind}] with color = \"#rrggbb\"")
        check_colour(where, f"sources.{kind}.color", entry["color"])
        style = entry.get("style", "none")
        flags = style.split() if isinstance(style, str) else None
        if not flags or not set(flags) <= TEXT_STYLES:
            raise ConfigError(
                f"theme {where}: sources.{kind}.style must use {', '.join(sorted(TEXT_STYLES))}"
            )
        sources[kind] = TokenStyle(entry["color"], " ".join(flags))
    return SpectuiTheme(name, dark, dict(colors), sources, path)


def check_colour(where: str, key: str, value: object) -> None:
    if not is_colour(value):
        raise ConfigError(
            f"theme {where}: {key} = {value!r} is not a colour: use #rrggbb, rgb(r, g, b), hsl(h, s%, l%) or a CSS name"
        )


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def load_themes(user_dir: Path | None = None) -> dict[str, SpectuiTheme]:
    """Built-in themes, then the user's (a user theme with a built-in's name replaces it).

    A broken user theme is skipped rather than stopping the app; `theme_errors` says why.
    """
    themes: dict[str, SpectuiTheme] = {}
    for theme in builtin_themes():
        themes[theme.name] = theme
    for theme in _themes_in(user_dir or user_themes_dir(), errors=None):
        themes[theme.name] = theme
    return themes


def builtin_themes() -> list[SpectuiTheme]:
    """The themes shipped inside the package (importlib.resources: a wheel has them too)."""
    files = sorted(
        (entry for entry in resources.files(__name__).iterdir() if entry.name.endswith(".toml")),
        key=lambda entry: entry.name,
    )
    return [
        parse_theme(entry.read_text(encoding="utf-8"), entry.name, entry if isinstance(entry, Path) else None)
        for entry in files
    ]


def theme_errors(user_dir: Path | None = None) -> list[str]:
    errors: list[str] = []
    list(_themes_in(user_dir or user_themes_dir(), errors=errors))
    return errors


def _themes_in(folder: Path, errors: list[str] | None):
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.toml")):
        try:
            yield parse_theme(read_theme_file(path), path.name, path)
        except ConfigError as error:
            if errors is not None:
                errors.append(str(error))


def read_theme_file(path: Path) -> str:
    try:
        return read_capped_text(path, SETTINGS_FILE_LIMIT)
    except UnicodeDecodeError as error:
        raise ConfigError(f"theme {path.name}: not UTF-8 text (byte {error.start}): save it as UTF-8") from None
    except OSError as error:
        raise ConfigError(f"theme {path.name}: cannot read it ({error.strerror or error})") from None
