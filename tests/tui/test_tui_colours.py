"""Colours that do not alarm, and provenance that survives NO_COLOR and Textual's themes.

The target's correction (recovered) is no error: it is not red in any built-in theme. With
NO_COLOR the sources differ by shape, as `spectui generate` draws them; a theme picked from
Textual's own list (Ctrl+P, "Theme") gives the tokens its own colours."""

from __future__ import annotations

import colorsys

import pytest

from spectui.engines.scripted import scripted_engine_factory
from spectui.settings.config import ChatConfig
from spectui.themes import NO_COLOUR_STYLES, load_themes

from tui_helpers import ready

KINDS = ("draft", "recovered", "bonus", "target", "ghost")


def is_red(colour: str) -> bool:
    red, green, blue = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    hue, lightness, saturation = colorsys.rgb_to_hls(red, green, blue)
    return saturation > 0.3 and (hue * 360 < 30 or hue * 360 > 335)


@pytest.mark.parametrize("name", ["dark", "light", "colorblind"])
def test_the_correction_is_not_red_in_any_builtin_theme(tmp_path, name):
    theme = load_themes(user_dir=tmp_path)[name]
    assert not is_red(theme.sources["recovered"].color), theme.sources["recovered"]
    assert is_red("#ff8787") and is_red("#d70000") and is_red("#d55e00")  # the old ones were


def token_styles(app) -> dict[str, object]:
    """How the legend in help draws each source now (the same CSS as every reply)."""
    legend = app.screen.query_one("#legend")
    return {kind: legend.get_component_rich_style(f"tokenview--{kind}") for kind in KINDS}


async def open_help(pilot) -> None:
    await ready(pilot)
    await pilot.press(pilot.app.first_key("help"))
    await pilot.pause()


@pytest.mark.parametrize("theme", ["dark", "light", "colorblind"])
async def test_under_no_color_the_sources_differ_by_shape(make_app, monkeypatch, theme):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(scripted_engine_factory(), ChatConfig(theme=theme))
    async with app.run_test(size=(100, 30)) as pilot:
        await open_help(pilot)
        styles = token_styles(app)
        shapes = {kind: (style.bold, style.italic, style.underline, style.strike) for kind, style in styles.items()}
        assert len(set(shapes.values())) == len(KINDS), shapes
        assert styles["draft"].underline and styles["recovered"].bold and styles["bonus"].italic
        assert styles["ghost"].strike


def test_the_tui_shapes_are_generates_shapes():
    from spectui.cli.render import SOURCE_STYLES, Look
    from spectui.core.events import Source

    shapes = SOURCE_STYLES[Look.SHAPES]
    for kind in ("draft", "recovered", "bonus"):
        assert shapes[Source(kind)] == NO_COLOUR_STYLES[kind]
    assert "red" not in SOURCE_STYLES[Look.COLOUR][Source.RECOVERED]  # generate's correction is no error either


@pytest.mark.parametrize("textual_theme", ["solarized-light", "nord", "textual-light"])
async def test_a_textual_theme_gives_the_tokens_its_own_colours(make_app, textual_theme):
    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(100, 30)) as pilot:
        await open_help(pilot)
        app.theme = textual_theme
        await pilot.pause()
        await pilot.pause()
        palette = app.current_theme.to_color_system().generate()
        styles = token_styles(app)
        assert styles["target"].color.triplet.hex == palette["foreground"].lower()[:7]
        assert styles["draft"].color.triplet.hex == palette["success"].lower()[:7]
        colours = {kind: style.color.triplet.hex for kind, style in styles.items() if kind != "ghost"}
        assert len(set(colours.values())) == 4, colours
        assert styles["recovered"].bold and styles["ghost"].strike
