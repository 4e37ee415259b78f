"""The token colours a theme of Textual's (one that names no token styles) gets from its
palette: each source's first choice unless two of the five would look alike, then the
earliest other palette colours that keep every pair SOURCES_APART (ΔE00)."""

from __future__ import annotations

import itertools

from textual.color import Color

from spectui.themes import PALETTE_SOURCES, TOKEN_KINDS
from spectui.themes.distance import SOURCES_APART, colour_distance

# Each source's palette colours, first choice first (PALETTE_SOURCES's); the correction is
# never the error colour (it is no error), the plain text and the rejected drafts stay grey.
CANDIDATES = {
    "draft": ("success", "success-lighten-2", "success-darken-2"),
    "recovered": ("secondary", "accent", "secondary-lighten-2", "accent-lighten-2", "secondary-darken-2", "primary-lighten-2"),
    "bonus": ("primary", "primary-lighten-2", "accent", "warning", "primary-darken-2", "accent-lighten-2"),
    "target": ("foreground",),
    "ghost": ("foreground-muted", "foreground-disabled", "foreground-darken-3"),
}


def drawn_hex(palette: dict[str, str], name: str) -> str | None:
    """#rrggbb as a palette colour is drawn (one with alpha over the background); None for a
    colour the terminal decides (ansi_*), whose distance nobody can know."""
    try:
        colour = Color.parse(palette[name])
        background = Color.parse(palette.get("background", "#000000"))
    except (KeyError, Exception):  # noqa: BLE001 - a palette without it, or a value Textual does not parse
        return None
    if colour.ansi is not None or background.ansi is not None:
        return None
    return (background + colour).hex[:7]


def nearest_pair(colours: dict[str, str]) -> float:
    return min(colour_distance(colours[a], colours[b]) for a, b in itertools.combinations(colours, 2))


def palette_colours(palette: dict[str, str]) -> dict[str, str]:
    """Each source's palette name: the earliest choices (in CANDIDATES' order) whose colours
    are all SOURCES_APART; where none are, the choices whose nearest pair is farthest."""
    first: dict[str, str] = {kind: CANDIDATES[kind][0] for kind in TOKEN_KINDS}
    options = [[name for name in CANDIDATES[kind] if drawn_hex(palette, name) is not None] for kind in TOKEN_KINDS]
    if not all(options):
        return first  # a terminal's own colours: nothing to measure
    best, best_gap = first, -1.0
    for names in itertools.product(*options):
        if len(set(names)) < len(names):
            continue
        chosen: dict[str, str] = dict(zip(TOKEN_KINDS, names))
        gap = nearest_pair({kind: drawn_hex(palette, name) or "" for kind, name in chosen.items()})
        if gap >= SOURCES_APART:
            return chosen
        if gap > best_gap:
            best, best_gap = chosen, gap
    return best


def palette_sources(palette: dict[str, str]) -> dict[str, tuple[str, str]]:
    """kind -> (colour, style) for a theme that names no token styles: solid colours, as
    measured (a muted one blended over the background), so no widget's own background
    moves them nearer."""
    names = palette_colours(palette)
    return {kind: (drawn_hex(palette, names[kind]) or palette[names[kind]], PALETTE_SOURCES[kind][1])
            for kind in TOKEN_KINDS}
