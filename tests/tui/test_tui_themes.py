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
