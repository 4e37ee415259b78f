"""The config file: defaults, overrides, and one-line errors that name the line."""

from __future__ import annotations

import os

import pytest

from spectui.core.errors import UsageError

from spectui.settings.config import DEFAULT_KEYS, ChatConfig, ConfigError, config_path, load_config, parse_config
from spectui.core.errors import SpectuiError


def test_missing_file_is_the_defaults(tmp_path):
    assert load_config(tmp_path / "none.toml") == ChatConfig()


def test_values_and_keys_are_read(tmp_path):
    config = parse_config('k = 6\ntemperature = 1\ntheme = "light"\n[keys]\nk_up = "f20, ctrl+k"\n')
    assert (config.k, config.temperature, config.theme) == (6, 1.0, "light")
    assert isinstance(config.temperature, float)
    assert config.keys["k_up"] == "f20,ctrl+k"
    assert config.keys["k_down"] == DEFAULT_KEYS["k_down"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('model = "a"\nk = \n', "line 2: Invalid value"),
        ('theme = "x"\n\nk = "four"\n', "line 3: k must be from 0 to 16 or auto, got 'four'"),
        ('k = true\n', "line 1: k must be int"),
        ('\nk = 40\n', "line 2: k must be from 0 to 16 or auto, got 40"),
        ('method = "magic"\n', "line 1: method must be one of auto, draft, ngram, suffix, eagle"),
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


# --- the file itself: never a traceback -----------------------------------------------------


def test_invalid_utf8_names_the_file_and_the_line(tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes(b'k = 4\ntheme = "caf\xe9"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path} line 2: not UTF-8 text (byte 0xe9): save it as UTF-8, or start again with spectui config init --force"
    )


def test_a_folder_where_the_file_should_be_is_one_line(tmp_path):
    (tmp_path / "config.toml").mkdir()
    with pytest.raises(ConfigError, match=r"config.toml is a folder, not a config file: move it away"):
        load_config(tmp_path / "config.toml")


def test_an_unreadable_file_says_what_to_do(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text("k = 4\n")

    def refuse(file, limit):
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr("spectui.settings.config.read_capped", refuse)  # the one reader of user files
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: cannot read it (Permission denied): check its permissions, or set SPECTUI_CONFIG_DIR to a folder of your own"
    )


def init(monkeypatch, capsys, config_dir, *extra):
    from spectui.cli.app import main

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(config_dir))
    monkeypatch.setattr("sys.argv", ["spectui", "config", "init", *extra])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return exited.value.code, captured.err.strip().splitlines()


def test_config_init_into_a_path_under_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "not-a-folder").write_text("")
    code, lines = init(monkeypatch, capsys, tmp_path / "not-a-folder" / "spectui")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"spectui: error: {tmp_path / 'not-a-folder' / 'spectui' / 'config.toml'}: cannot write it (")
    assert lines[0].endswith("set SPECTUI_CONFIG_DIR to a folder of your own")


def test_config_init_into_a_read_only_folder_is_one_line(tmp_path, monkeypatch, capsys):
    def refuse(file, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    # root ignores chmod: the safe writer's open refuses as a read-only disk would
    monkeypatch.setattr("spectui.core.files.open", refuse, raising=False)
    code, lines = init(monkeypatch, capsys, tmp_path)
    assert code == 2 and lines == [
        f"spectui: error: {tmp_path / 'config.toml'}: cannot write it (Permission denied): check its permissions, "
        "or set SPECTUI_CONFIG_DIR to a folder of your own"
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_config_init_into_a_chmod_read_only_folder_is_one_line(tmp_path, monkeypatch, capsys):
    tmp_path.chmod(0o500)
    try:
        code, lines = init(monkeypatch, capsys, tmp_path / "spectui")
    finally:
        tmp_path.chmod(0o700)
    assert code == 2 and len(lines) == 1 and "cannot write it (Permission denied)" in lines[0]


def test_config_init_over_a_folder_is_one_line_even_forced(tmp_path, monkeypatch, capsys):
    (tmp_path / "config.toml").mkdir()
    for extra in ((), ("--force",)):
        code, lines = init(monkeypatch, capsys, tmp_path, *extra)
        assert code == 2 and lines == [f"spectui: error: {tmp_path / 'config.toml'} is a folder, not a config file: move it away first"]


def test_config_init_creates_a_missing_folder(tmp_path, monkeypatch, capsys):
    code, lines = init(monkeypatch, capsys, tmp_path / "new" / "spectui")
    assert code == 0 and lines == []
    assert load_config(tmp_path / "new" / "spectui" / "config.toml") == ChatConfig()


def test_chat_and_doctor_report_a_non_utf8_file_in_one_line(tmp_path, monkeypatch, capsys):
    from spectui.cli.app import main
    from spectui.cli.doctor import check_config

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    (tmp_path / "config.toml").write_bytes(b"\xff\xfek = 4\n")
    monkeypatch.setattr("sys.argv", ["spectui", "chat"])
    with pytest.raises(SystemExit) as exited:
        main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(lines) == 1 and "config.toml line 1: not UTF-8 text (byte 0xff)" in lines[0]
    check = check_config()
    assert check.status == "fail" and "line 1: not UTF-8 text" in check.found
