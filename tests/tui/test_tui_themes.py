"""Themes as data: the built-in three, user themes, and the colour-blind one's shapes."""

from __future__ import annotations

from spectui.themes import TOKEN_KINDS, load_themes, parse_theme, theme_errors
from spectui.tui.theming import textual_theme as to_textual

SOURCES = ("draft", "recovered", "bonus", "target")


def test_builtin_themes_define_every_kind(tmp_path):
    themes = load_themes(user_dir=tmp_path)
    assert {"dark", "light", "colorblind"} <= set(themes)
    assert themes["dark"].dark and not themes["light"].dark
    for theme in themes.values():
        assert set(theme.sources) == set(TOKEN_KINDS)
        variables = theme.variables()
        for kind in TOKEN_KINDS:
            assert variables[f"spectui-{kind}"].startswith("#")
        textual_theme = to_textual(theme)
        assert textual_theme.name == theme.name
        assert textual_theme.variables["spectui-draft"] == theme.sources["draft"].color


def test_colorblind_sources_differ_in_more_than_hue(tmp_path):
    theme = load_themes(user_dir=tmp_path)["colorblind"]
    shapes = [theme.sources[kind].style for kind in SOURCES]
    assert len(set(shapes)) == 4, shapes  # tell them apart in greyscale too
    assert "strike" in theme.sources["ghost"].style
    okabe_ito = {"#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7"}
    assert {theme.sources[k].color.lower() for k in ("draft", "recovered", "bonus")} <= okabe_ito


def test_a_user_theme_is_picked_up_and_a_broken_one_is_reported(tmp_path):
    dark = (load_themes(user_dir=tmp_path)["dark"].path).read_text()
    (tmp_path / "mine.toml").write_text(dark.replace('name = "dark"', 'name = "mine"').replace("#5fd787", "#123456"))
    (tmp_path / "broken.toml").write_text('name = "broken"\n[colors]\nprimary = "#fff"\n')
    themes = load_themes(user_dir=tmp_path)
    assert themes["mine"].sources["draft"].color == "#123456"
    assert "broken" not in themes
    errors = theme_errors(tmp_path)
    assert len(errors) == 1 and "broken.toml" in errors[0] and "[sources.draft]" in errors[0]


def test_bad_style_flag_is_refused():
    text = 'name = "x"\n[colors]\nprimary = "#fff"\n' + "".join(
        f'[sources.{kind}]\ncolor = "#fff"\nstyle = "{"sparkly" if kind == "bonus" else "bold"}"\n'
        for kind in TOKEN_KINDS
    )
    try:
        parse_theme(text, "x.toml")
    except Exception as error:
        assert "sources.bonus.style" in str(error)
    else:
        raise AssertionError("a bad style flag was accepted")


# --- user files that are not what they should be ----------------------------------------------

import pytest  # noqa: E402
from hypothesis import given, strategies as st  # noqa: E402
from textual.color import Color, ColorParseError  # noqa: E402

from spectui.settings.config import ConfigError  # noqa: E402
from spectui.themes.colours import COLOUR_NAMES, is_colour  # noqa: E402


def dark_text_with(tmp_path, old: str, new: str, name: str = "mine") -> str:
    dark = load_themes(user_dir=tmp_path)["dark"].path.read_text()
    assert old in dark
    return dark.replace('name = "dark"', f'name = "{name}"').replace(old, new, 1)


def test_a_binary_theme_file_is_skipped_and_named(tmp_path):
    (tmp_path / "binary.toml").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00garbage")
    (tmp_path / "fine.toml").write_text(dark_text_with(tmp_path, "#5fd787", "#123456", name="fine"))
    themes = load_themes(user_dir=tmp_path)
    assert "fine" in themes and "dark" in themes
    [error] = theme_errors(tmp_path)
    assert error == "theme binary.toml: not UTF-8 text (byte 0): save it as UTF-8"


@pytest.mark.parametrize(
    "old, new, key",
    [
        ('primary = "#', 'primary = "#12345', "colors.primary"),  # five hex digits
        ('color = "#5fd787"', 'color = "blurple"', "sources.draft.color"),
        ('color = "#5fd787"', "color = 7", "sources.draft.color"),
        ('dark = true', 'dark = "yes"', "dark"),
    ],
)
def test_a_bad_value_names_the_file_and_the_key(tmp_path, old, new, key):
    with pytest.raises(ConfigError) as caught:
        parse_theme(dark_text_with(tmp_path, old, new), "mine.toml")
    message = str(caught.value)
    assert message.startswith(f"theme mine.toml: {key}") and "\n" not in message


def test_tables_of_the_wrong_kind_are_named():
    with pytest.raises(ConfigError, match="sources must be tables"):
        parse_theme('name = "x"\nsources = 5\n[colors]\nprimary = "#fff"\n', "x.toml")


async def test_the_app_starts_beside_broken_themes_and_says_which(tmp_path, monkeypatch, make_app):
    folder = tmp_path / "config" / "themes"
    folder.mkdir(parents=True)
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path / "config"))
    (folder / "binary.toml").write_bytes(b"\xff\xfe\x00\x01")
    (folder / "colours.toml").write_text(dark_text_with(tmp_path, 'primary = "#', 'primary = "#zz', name="colours"))
    from spectui.cli import doctor
    from fake_engines import PlanEngine, factory_for
    from tui_helpers import notices, ready

    check = doctor.check_themes()
    assert check.status == "warn" and "binary.toml" in check.found and "colors.primary" in check.found

    app = make_app(factory_for(PlanEngine([None])))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert app.host.engine is not None and "colours" not in app.spectui_themes
        messages = notices(app)
    assert any("binary.toml" in message for message in messages)


def test_every_name_textual_knows_is_a_colour_here():
    from textual._color_constants import COLOR_NAME_TO_RGB

    assert set(COLOR_NAME_TO_RGB) <= COLOUR_NAMES


def textual_accepts(text: str) -> bool:
    try:
        Color.parse(text)
    except ColorParseError:
        return False
    return True


COLOUR_LIKE = st.one_of(
    st.from_regex(r"#[0-9a-fA-Fg]{2,9}", fullmatch=True),
    st.from_regex(r"(rgb|rgba|hsl|hsla)\( ?-?[0-9]{1,3}(\.[0-9])?%?(, ?-?[0-9]{1,3}(\.[0-9])?%?){1,4} ?\)", fullmatch=True),
    st.sampled_from(sorted(COLOUR_NAMES) + ["blurple", "Red", "", "ansi_default", "ansi_nope"]),
    st.text(max_size=12),
)


@pytest.mark.parametrize(
    "text", ["#fff", "#ffff", "#12345", "#1234567", "rgb(1,2,3)", "rgb( 1 , 2 , 3 )", "rgba(1,2,3,0.5)",
             "hsl(120, 50%, 50%)", "hsl(120, 50, 50)", "red", "Red", "ansi_default", "ansi_bright_red", "ansi_nope", ""],
)
def test_the_check_agrees_with_textual_on_edge_cases(text):
    assert is_colour(text) == textual_accepts(text)


@given(COLOUR_LIKE)
def test_the_check_agrees_with_textual(text):
    assert is_colour(text) == textual_accepts(text)
