"""Output that cannot be written as asked (issue 59 item 8): a full disk (/dev/full) gave
tracebacks and, for `generate`, "the engine failed"; a latin-1 or ascii stdout lost the reply
to a UnicodeEncodeError; `serve --print` wrote a model folder's control characters raw."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app
from spectui.store import Store

MAIN = "from spectui.cli.app import main; main()"


def spectui(args: list[str], tmp_path, stdout=subprocess.PIPE, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "SPECTUI_DATA_DIR": str(tmp_path / "data"), "NO_COLOR": "1", **env}
    return subprocess.run([sys.executable, "-c", MAIN, *args], stdout=stdout, stderr=subprocess.PIPE,
                          encoding=env.get("PYTHONIOENCODING", "utf-8"), env=environment, timeout=60, check=False)


@pytest.fixture
def model_folder(tmp_path):
    folder = tmp_path / "model\x1b]0;pwned\x07\x1b[2J"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_exit_1_for_every_command(tmp_path, model_folder):
    (tmp_path / "data").mkdir()
    store = Store(tmp_path / "data" / "history.sqlite3")
    store.add_message(store.new_conversation({}, "hi"), "user", "hello")
    store.close()
    commands = {
        "history list": ["history", "list"],
        "history export": ["history", "export", "1"],
        "models list": ["models", "list"],
        "generate --json": ["generate", "--engine", "scripted", "--json", "hi"],
        "serve --print": ["serve", "--model", str(model_folder), "--method", "ngram", "-k", "2", "--print"],
        "generate": ["generate", "--engine", "scripted", "hi"],
    }
    with open("/dev/full", "w") as full:
        for name, args in commands.items():
            result = spectui(args, tmp_path, stdout=full)
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 1 and "Traceback" not in result.stderr, (name, result.stderr)
            assert lines[-1].endswith("No space left on device") and "engine failed" not in lines[-1], (name, lines)
            assert sum(line.startswith("spectui: error") for line in lines) == 1, (name, lines)
    assert lines[-1] == "spectui: error: cannot write the reply: No space left on device"


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_a_stdout_that_cannot_encode_a_character_keeps_the_reply(tmp_path, encoding):
    result = spectui(["generate", "--engine", "scripted", "--plain", "say ✓ γ"], tmp_path, PYTHONIOENCODING=encoding)
    assert result.returncode == 0, result.stderr
    assert "say ? ?" in result.stdout and "guess the next few tokens" in result.stdout
    assert "UnicodeEncodeError" not in result.stderr


def test_serve_print_shows_a_folders_controls_as_escapes_that_still_paste(model_folder):
    result = CliRunner().invoke(app, ["serve", "--model", str(model_folder), "--method", "ngram", "-k", "2", "--print"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    word = result.stdout.split()[2]
    assert word == "$'" + str(model_folder.parent) + "/model\\x1b]0;pwned\\x07\\x1b[2J'"
    echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True)
    assert echoed.stdout == str(model_folder)


def test_generate_says_why_it_runs_on_torch(monkeypatch, capsys):
    """Issue 59 item 8: generate fell back from ggml to torch without a word."""
    from dataclasses import replace

    from spectui.cli.generate import run_generate
    from spectui.engines.scripted import ScriptedEngine
    from spectui.settings.options import EngineOptions

    def torch_engine(options, models, progress=None):
        engine = ScriptedEngine()
        engine.info = replace(engine.info, backend="torch float32: libllama could not load: libggml.so: no such file")
        return engine

    monkeypatch.setattr("spectui.engines.factory.build_engine", torch_engine)
    assert run_generate(EngineOptions(max_tokens=8), "hi", models=None, system=None, as_json=False) == 0
    err = capsys.readouterr().err
    assert "spectui: on torch, not ggml: libllama could not load: libggml.so: no such file" in err.replace("\n", " ")
