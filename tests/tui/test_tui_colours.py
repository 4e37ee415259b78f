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
from spectui.tui.token_colours import CANDIDATES

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
        # the success colour, or a shade of it where the first choices would look alike (nord)
        assert styles["draft"].color.triplet.hex in {palette[name].lower()[:7] for name in CANDIDATES["draft"]}
        colours = {kind: style.color.triplet.hex for kind, style in styles.items() if kind != "ghost"}
        assert len(set(colours.values())) == 4, colours
        assert styles["recovered"].bold and styles["ghost"].strike


def test_ciede2000_meets_sharmas_reference_pairs():
    from spectui.themes.distance import ciede2000

    # Sharma, Wu and Dalal (2005), table 1: pairs 1, 2, 7, 8, 19, 25, 34
    pairs = [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425), ((50, -1.3802, -84.2814), (50, 0, -82.7485), 1.0),
             ((50, 2.5, 0), (50, 0, -2.5), 4.3065), ((50, 2.5, 0), (73, 25, -18), 27.1492),
             ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
             ((22.7233, 20.0904, -46.694), (23.0331, 14.973, -42.5619), 2.0373),
             ((90.8027, -2.0831, 1.441), (91.1528, -1.6435, 0.0447), 1.4441)]
    for first, second, expected in pairs:
        assert ciede2000(first, second) == pytest.approx(expected, abs=1e-4)


async def test_in_every_bundled_theme_the_five_sources_look_apart(make_app):
    """Issue 59: in nord the correction and the bonus looked alike (ΔE00 12.6; the correction
    and a rejected draft 8.7). Every theme spectui ships and every one of Textual's that the
    palette offers, as drawn: each pair of the five sources at least SOURCES_APART. The ansi
    themes are left out: their colours are the terminal's, which nobody here can measure."""
    import itertools

    from spectui.themes.distance import SOURCES_APART, colour_distance

    app = make_app(scripted_engine_factory(), ChatConfig())
    async with app.run_test(size=(100, 30)) as pilot:
        await open_help(pilot)
        names = [name for name in app.available_themes if not name.startswith("ansi")]
        assert {"dark", "light", "colorblind", "nord", "gruvbox"} <= set(names)
        near = {}
        for name in names:
            app.theme = name
            await pilot.pause()
            colours = {kind: style.color.triplet.hex for kind, style in token_styles(app).items()}
            for first, second in itertools.combinations(KINDS, 2):
                distance = colour_distance(colours[first], colours[second])
                if distance < SOURCES_APART:
                    near[name, first, second] = round(distance, 1)
        assert near == {}, near
