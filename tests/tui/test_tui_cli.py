"""The chat-side commands: config path, history list/export, option errors; fast imports."""

from __future__ import annotations

import json
import subprocess
import sys

import typer
from typer.testing import CliRunner

from spectui.cli.chat import register
from spectui.events import Source, Step
from spectui.store import Store

runner = CliRunner()


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # keep sub-commands as sub-commands
        pass

    register(app)
    return app


def test_config_path_and_init_follow_the_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    result = runner.invoke(cli(), ["config", "path"])
    assert result.exit_code == 0 and result.stdout.strip() == str(tmp_path / "config.toml")
    result = runner.invoke(cli(), ["config", "init"])
    assert result.exit_code == 0
    from spectui.config import load_config

    assert load_config().k == 4  # the written example parses
    result = runner.invoke(cli(), ["config", "init"])
    assert result.exit_code == 2 and "exists" in result.stderr


def test_history_list_and_export(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    store = Store(tmp_path / "history.sqlite3")
    conversation = store.new_conversation({})
    store.add_message(conversation, "user", "question")
    reply = store.add_message(conversation, "assistant", "")
    store.add_step(reply, 0, Step((1,), (Source.TARGET,), "answer"), ["answer"], "", 0.1)
    store.finish_message(reply, "answer", "stop")
    store.close()
    result = runner.invoke(cli(), ["history", "list", "--json"])
    assert json.loads(result.stdout)["title"] == "question"
    result = runner.invoke(cli(), ["history", "export", str(conversation)])
    assert "## assistant\n\nanswer" in result.stdout
    out = tmp_path / "trace.jsonl"
    result = runner.invoke(cli(), ["history", "export", str(conversation), "-f", "jsonl", "-o", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text())["sources"] == ["target"]
    result = runner.invoke(cli(), ["history", "export", "42"])
    assert result.exit_code == 1 and result.stderr.strip().startswith("spectui: error: no conversation 42")


def test_chat_option_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    result = runner.invoke(cli(), ["chat", "-k", "40"])
    assert result.exit_code == 2 and result.stderr.strip() == "spectui: error: k must be from 0 to 16, got 40"
    result = runner.invoke(cli(), ["chat", "--resume"])
    assert result.exit_code == 1 and "no saved conversation to resume yet" in result.stderr
    result = runner.invoke(cli(), ["chat", "7"])
    assert result.exit_code == 2 and "goes with --resume" in result.stderr
    (tmp_path / "config.toml").write_text("k = [\n")
    result = runner.invoke(cli(), ["chat"])
    assert result.exit_code == 2 and "config.toml: line 1:" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_importing_the_cli_module_does_not_import_textual_or_torch():
    code = "import sys, spectui.cli.chat, spectui.config, spectui.store, spectui.metrics, spectui.themes; " \
           "print(sorted(m for m in ('textual', 'torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
