"""One command-line vocabulary (issue 40): the same names and defaults across chat, generate,
compare and bench, help that shows defaults and no `<bool>`, the same exit code for the same
error, confirmations before deleting, and what the app needs said in one line."""

from __future__ import annotations

import io
import re

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app, main
from spectui.core.errors import UsageError
from spectui.settings.config import ChatConfig
from spectui.settings.table import settings_for
from spectui.store import Store

runner = CliRunner()


def help_of(monkeypatch, capsys, *command: str) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("sys.argv", ["spectui", *command, "--help"])
    with pytest.raises(SystemExit):
        main()
    return capsys.readouterr().out


# --- names and defaults ---------------------------------------------------------------------


def test_chat_takes_a_seed(data_dir, monkeypatch):
    seen = {}
    monkeypatch.setattr("spectui.cli.chat.run_chat", lambda overrides, **kw: seen.update(overrides) or 0)
    assert runner.invoke(app, ["chat", "--seed", "7"]).exit_code == 0
    assert seen["seed"] == 7


def test_max_tokens_has_one_default():
    defaults = {command: next(s.default for s in settings_for(command) if s.name == "max_tokens")
                for command in ("generate", "compare")}
    table = next(s.default for s in settings_for("generate") if s.name == "max_tokens")
    assert defaults == {"generate": table, "compare": table} and table == 512
    assert ChatConfig().max_tokens is None  # a chat's reply may fill what the model's context leaves


@pytest.mark.parametrize(("args", "message"), [
    (["-k", "0,99"], "from 0 to 16"),
    (["--method", "ngram,medusa"], "medusa needs --heads"),
    (["--methods", "ngram,medusa"], "medusa needs --heads"),  # the old name still works
    (["-t", "0,warm"], "takes a comma list of numbers"),
    (["--temperature", "0,3"], "temperature must be from 0 to 2"),
    (["--temperatures", "0,3"], "temperature must be from 0 to 2"),
])
def test_bench_takes_the_names_of_the_other_commands(args, message):
    result = runner.invoke(app, ["bench", *args])
    assert result.exit_code == 2 and message in result.stderr


def test_help_shows_the_chats_defaults_and_no_bool_label(monkeypatch, capsys):
    chat = help_of(monkeypatch, capsys, "chat")
    assert "(config default: 4)" in chat and "--seed" in chat
    # The chat starts at k auto under the default --method auto on a CPU (issue 59): the help says so
    assert "as any k above 0 does under --method auto on a CPU" in " ".join(chat.replace("│", " ").split())
    assert "(default: what the model's context leaves)" in " ".join(chat.replace("│", " ").split())
    for command in (["chat"], ["generate"], ["compare"], ["bench"], ["history", "rm"], ["models", "rm"]):
        assert "<bool>" not in help_of(monkeypatch, capsys, *command), command
    assert "<int|auto>" in chat


def test_help_names_the_right_command_and_any_server(monkeypatch, capsys):
    compare = help_of(monkeypatch, capsys, "compare")
    assert "spectui compare 'explain this' -" in compare and "spectui generate" not in compare
    assert "OpenAI-compatible" in compare and "vLLM server's URL" not in compare


# --- the same error, the same exit code -------------------------------------------------------


@pytest.mark.parametrize("saved", [False, True])
def test_an_unknown_conversation_is_a_usage_error_everywhere(data_dir, saved, monkeypatch):
    if saved:
        store = Store(data_dir / "history.sqlite3")
        store.add_message(store.new_conversation({}), "user", "hello")
        store.close()
    monkeypatch.setattr("spectui.cli.chat.require_terminal", lambda: None)  # chat --resume: as if on a terminal
    for args in (["history", "export", "999"], ["history", "rm", "999", "-y"], ["history", "rename", "999", "new"],
                 *([["chat", "--resume", "999"]] if saved else [])):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("spectui: error: no conversation 999") and len(result.stderr.splitlines()) == 1


def test_an_empty_history_says_so(data_dir):
    result = runner.invoke(app, ["history", "list"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "no conversations saved yet" in result.stderr and str(data_dir) in result.stderr
    store = Store(data_dir / "history.sqlite3")
    store.close()
    assert "no conversations saved yet" in runner.invoke(app, ["history", "list"]).stderr


# --- models rm asks; models verify and the list say what their numbers are ----------------------


@pytest.fixture
def cached_model(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "models" / "mine"
    folder.mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"x" * 1000)
    return folder


def test_models_rm_refuses_without_a_terminal_unless_yes(cached_model):
    result = runner.invoke(app, ["models", "rm", "mine"])
    assert result.exit_code == 2 and "--yes" in result.stderr and cached_model.exists()
    result = runner.invoke(app, ["models", "rm", "mine", "--yes"])
    assert result.exit_code == 0 and not cached_model.exists()


@pytest.mark.parametrize(("answer", "removed"), [("n\n", False), ("y\n", True), ("", False)])
def test_models_rm_asks_on_a_terminal(cached_model, monkeypatch, answer, removed):
    monkeypatch.setattr("spectui.cli.models.stdin_is_terminal", lambda: True)
    result = runner.invoke(app, ["models", "rm", "mine"], input=answer)
    assert "Remove mine (" in result.stderr
    assert (result.exit_code, cached_model.exists()) == ((0, False) if removed else (1, True))


def test_models_verify_says_what_each_size_is(monkeypatch, tmp_path):
    import json

    from spectui.models.cache import FLOAT32_FOLDER, CachedModel
    from spectui.models.registry import MARKER_FILE

    (tmp_path / FLOAT32_FOLDER).mkdir()
    for folder, size in ((tmp_path, 169_000_000), (tmp_path / FLOAT32_FOLDER, 542_000_000)):
        (folder / MARKER_FILE).write_text(json.dumps({"format": 2, "files": {"w.bin": {"size": size, "sha256": "x"}}}))
    model = CachedModel("mine", tmp_path, 711_000_000, "int8")
    monkeypatch.setattr("spectui.models.cache.cached_models", lambda: [model])

    def verify(folder, progress):
        progress(542_000_000, 542_000_000)
        return None

    monkeypatch.setattr("spectui.models.cache.verify_folder", verify)
    result = runner.invoke(app, ["models", "verify"])
    assert result.exit_code == 0
    assert ("mine: ok, every byte matches its sha256: 169 MB int8 store + 542 MB float32 copy; 711 MB on disk in all"
            in " ".join(result.stderr.split()))


def test_the_model_list_says_why_split_packages_are_safe(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "300")
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0 and "sha256" in result.stdout and "never installed or imported" in result.stdout


# --- stdin and the terminal ------------------------------------------------------------------


class TerminalStdin(io.TextIOWrapper):
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8")

    def isatty(self) -> bool:
        return True


def test_a_prompt_typed_at_a_terminal_is_announced(monkeypatch, capsys):
    from spectui.cli.prompt import read_prompt

    monkeypatch.setattr("sys.stdin", TerminalStdin(b"typed text\n"))
    assert read_prompt(["-"]) == ("typed text", True)
    assert capsys.readouterr().err == "spectui: reading the prompt from stdin; Ctrl+D ends it\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"piped\n"), encoding="utf-8"))
    assert read_prompt(["-"]) == ("piped", True)
    assert capsys.readouterr().err == ""  # a pipe is not told


def test_chat_refuses_a_pipe_in_one_line(data_dir, monkeypatch):
    monkeypatch.setattr("spectui.tui.app.SpectuiApp", lambda *a, **kw: pytest.fail("the app opened"))
    result = runner.invoke(app, ["chat", "--engine", "scripted", "--no-history"], input="")
    assert result.exit_code == 2
    assert re.fullmatch(r"spectui: error: the chat app needs a terminal, but stdin is not one: .*\n", result.stderr)
    result = runner.invoke(app, ["chat", "--engine", "scripted"], input="")
    assert result.exit_code == 2 and list(data_dir.iterdir()) == []  # no history file made for it



def test_chat_refuses_a_dumb_terminal_in_one_line(monkeypatch):
    """Issue 59 item 8: TERM=dumb drew the full-screen app anyway."""
    from spectui.cli.chat import require_terminal

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("sys.stdout", Terminal())
    monkeypatch.setenv("TERM", "dumb")
    with pytest.raises(UsageError) as caught:
        require_terminal()
    assert caught.value.exit_code == 2 and str(caught.value) == (
        "the chat app needs a terminal that can draw a full screen, and TERM=dumb cannot: "
        "use spectui generate for one reply, or set TERM (e.g. xterm-256color)")
    monkeypatch.setenv("TERM", "xterm-256color")
    require_terminal()
