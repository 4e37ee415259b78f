"""The config file: defaults, overrides, and one-line errors that name the line."""

from __future__ import annotations

import pytest

from spectui.core.errors import UsageError

from spectui.settings.config import DEFAULT_KEYS, ChatConfig, ConfigError, config_path, load_config, parse_config
from spectui.core.errors import SpectuiError


def test_missing_file_is_the_defaults(tmp_path):
    assert load_config(tmp_path / "none.toml") == ChatConfig()


def test_values_and_keys_are_read(tmp_path):
    config = parse_config('k = 6\ntemperature = 1\ntheme = "light"\n[keys]\nk_up = "f9, ctrl+k"\n')
    assert (config.k, config.temperature, config.theme) == (6, 1.0, "light")
    assert isinstance(config.temperature, float)
    assert config.keys["k_up"] == "f9,ctrl+k"
    assert config.keys["k_down"] == DEFAULT_KEYS["k_down"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('model = "a"\nk = \n', "line 2: Invalid value"),
        ('theme = "x"\n\nk = "four"\n', "line 3: k must be from 0 to 16 or auto, got 'four'"),
        ('k = true\n', "line 1: k must be int"),
        ('\nk = 40\n', "line 2: k must be from 0 to 16 or auto, got 40"),
        ('method = "magic"\n', "line 1: method must be one of draft, ngram, eagle"),
        ('colour = "red"\n', "line 1: unknown setting 'colour'"),
        ('k = 1\n[keys]\nfly = "f1"\n', "line 3: unknown key action 'fly'"),
        ('[keys]\nk_up = 3\n', "line 2: keys.k_up must be a key name"),
    ],
)
def test_bad_files_give_one_line_naming_the_line(text, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "config.toml")
    message = str(caught.value)
    assert message.startswith("config.toml line ") or message.startswith("config.toml: line ")
    assert expected in message
    assert "\n" not in message
    assert isinstance(caught.value, SpectuiError)


def test_cli_overrides_win_and_are_checked():
    config = ChatConfig(k=2, theme="dark").with_overrides(k=7, theme=None, model="m")
    assert (config.k, config.theme, config.model) == (7, "dark", "m")
    # A command-line value out of range is a usage error, with the command line's wording.
    with pytest.raises(UsageError, match="k must be from 0 to 16"):
        ChatConfig().with_overrides(k=99)


def test_env_var_moves_the_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    assert config_path() == tmp_path / "config.toml"
    (tmp_path / "config.toml").write_text("k = 3\n")
    assert load_config().k == 3


def test_k_auto_in_the_file_turns_adaptive_k_on():
    from spectui.settings.config import engine_options

    config = parse_config('k = "auto"\n')
    options = engine_options(config)
    assert (options.k, options.auto_k) == (4, True)
    assert engine_options(parse_config("k = 6\n")).auto_k is False
