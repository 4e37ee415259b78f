"""The `spectui` command line as a user meets it: flags, --version, completion, stdin, bare
groups, help at 80 columns."""

from __future__ import annotations

import re
import subprocess
import sys
from enum import Enum

import pytest
import typer.main
from rich.cells import cell_len
from typer.testing import CliRunner

from spectui import __version__
from spectui.cli.app import app, main

runner = CliRunner()

# Every command's flags, short flags, env vars and defaults as they were before the settings
# table made them (main at c90e1dd), with the flags added since (and --method auto, the measured
# default on a CPU): the table must not move one.
FLAGS = {
    "advise": "--conversation=None --costs=None --draft/-d=None --draft-k='2,4,8' --json=False --last=None --model/-m=None --plots=None --remeasure=False --save-costs=None --since=None",
    "bench": "--anchor-k=4 --backend='auto' --categories=None --contended=False --conversation=None --device='auto' --draft/-d=None --dtype='auto' --engines='spectui,transformers' --force=False --gpu-memory-utilization=0.9 --heads=None --history=False --json=None --k/-k='0,2,4,6,8,auto' --last=None --lookup-max=8 --lookup-min=1 --markdown=None --max-model-len=None --max-tokens=None --method='draft,ngram' --methods=None --model/-m=None --plots=None --repeats=2 --report=None --since=None --suite='quick' --temperature/-t=None --temperatures=None --vllm-methods=None --vocab='auto'",
    "chat": "--api-key$SPECTUI_API_KEY=None --api-key-file$SPECTUI_API_KEY_FILE=None --backend=None --device=None --draft/-d=None --draft-tp=None --dtype=None --engine=None --file/-f=None --gpu-memory-utilization=None --heads=None --k/-k=None --lookup-max=None --lookup-min=None --max-model-len=None --max-tokens=None --method=None --model/-m=None --no-history=False --resume=False --seed=None --server=None --speculative-config=None --system=None --temperature/-t=None --theme=None --top-p=None --tp=None --tree-width=None --vocab=None conversation_id=None",
    "compare": "--api-key$SPECTUI_API_KEY=None --api-key-file$SPECTUI_API_KEY_FILE=None --backend='auto' --baseline-server=None --device='auto' --draft/-d=None --draft-tp=None --dtype='auto' --engine='auto' --gpu-memory-utilization=0.9 --heads=None --json=False --k/-k=4 --lookup-max=8 --lookup-min=1 --max-model-len=None --max-tokens=512 --method='auto' --model/-m=None --runs=3 --seed=0 --server=None --speculative-config=None --system=None --table=False --temperature/-t=0.0 --top-p=1.0 --tp=1 --tree-width=1 --vocab='auto' prompt=None",
    "config init": "--force=False",
    "config path": "",
    "doctor": "--json=False",
    "generate": "--api-key$SPECTUI_API_KEY=None --api-key-file$SPECTUI_API_KEY_FILE=None --backend='auto' --device='auto' --draft/-d=None --draft-tp=None --dtype='auto' --engine='auto' --file/-f=None --gpu-memory-utilization=0.9 --heads=None --json=False --k/-k=4 --lookup-max=8 --lookup-min=1 --max-model-len=None --max-tokens=512 --method='auto' --model/-m=None --plain=False --raw=False --seed=0 --server=None --speculative-config=None --system=None --temperature/-t=0.0 --top-p=1.0 --tp=1 --tree-width=1 --vocab='auto' prompt=None",
    "heads train": "--device='cpu' --dtype='auto' --force=False --kind=None --lr=0.001 --max-new-tokens=128 --model/-m=None --num-heads=4 --out=None --seed=0 --steps=2000 --suite='train' --text=None --vocab-sample=4096",
    "history export": "--force=False --format/-f='md' --output/-o=None conversation_id=None",
    "history list": "--all=False --json=False --limit=200",
    "history rename": "conversation_id=None title=None",
    "history rm": "--yes/-y=False conversation_id=None",
    "history salvage": "--output/-o=None",
    "history search": "--all=False --json=False --limit=200 text=None",
    "models fetch": "name=None",
    "models rm": "--yes/-y=False name=None",
    "models verify": "name=None",
    "models list": "--for=None --json=False",
    "screenshots": "--draft=None --engine='scripted' --method=None --model=None --out/-o=PosixPath('screenshots') --screen=None --theme=None",
    "serve": "--draft/-d=None --draft-tp=None --dtype='auto' --gpu-memory-utilization=0.9 --host='127.0.0.1' --k/-k=4 --lookup-max=8 --lookup-min=1 --max-model-len=None --method='auto' --model/-m=None --no-chat=False --port=8000 --print=False --speculative-config=None --tp=1 --vocab='auto'",
}


def leaf_commands() -> dict[str, object]:
    """Every command that runs (not a group), by its path: "history export"."""
    found = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), [])
    return found


def flags_line(command) -> str:
    items = []
    for param in sorted(command.params, key=lambda param: sorted(param.opts + param.secondary_opts)):
        opts = sorted(param.opts + param.secondary_opts)
        if opts == ["--help"]:
            continue
        env = f"${param.envvar}" if param.envvar else ""
        default = param.default.value if isinstance(param.default, Enum) else param.default  # Literal or Enum
        items.append(f"{'/'.join(opts)}{env}={default!r}")
    return " ".join(items)


def run_main(monkeypatch, capsys, *arguments: str) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.argv", ["spectui", *arguments])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_every_flag_short_flag_and_default_is_as_before_the_table_made_them():
    commands = leaf_commands()
    assert sorted(commands) == sorted(FLAGS)
    for path, command in commands.items():
        assert flags_line(command) == FLAGS[path], path


# --- --version ----------------------------------------------------------------------------


def test_version_is_one_line_and_exit_0(monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "--version")
    assert (code, out, err) == (0, f"spectui {__version__}\n", "")


def test_doctor_names_the_version():
    from spectui.cli.doctor import run_checks

    first = run_checks(probe_network=lambda url, timeout: True)[0]
    assert (first.name, first.status) == ("spectui", "ok") and first.found.startswith(f"{__version__} (")


# --- shell completion ---------------------------------------------------------------------


def test_completion_can_be_shown_and_offers_the_tables_choices(monkeypatch, capsys):
    # typer's --show-completion is a flag: the shell comes from the processes above this one,
    # and a run with no shell among them (a CI runner, nohup) found none and exited 1.
    monkeypatch.setattr("typer.completion._get_shell_name", lambda: "bash")
    code, out, _ = run_main(monkeypatch, capsys, "--show-completion")
    assert code == 0 and "_SPECTUI_COMPLETE=complete_bash" in out
    # What the shell asks for when Tab is pressed after `spectui generate --method `:
    monkeypatch.setenv("_SPECTUI_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "spectui generate --method ")
    monkeypatch.setenv("COMP_CWORD", "3")
    code, out, _ = run_main(monkeypatch, capsys)
    assert code == 0 and out.split() == ["auto", "draft", "ngram", "suffix", "eagle", "eagle3", "medusa", "mtp"]


def test_help_lists_completion_and_loads_nothing_heavy():
    code = ("import sys; sys.argv = ['spectui', '--help']\nfrom spectui.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'textual', 'transformers', 'numpy', 'rich.progress') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--install-completion" in result.stdout and "--version" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


# --- the prompt from stdin ----------------------------------------------------------------


@pytest.fixture
def prompts(monkeypatch):
    """What generate and compare --table would answer, without an engine."""
    seen = []
    monkeypatch.setattr("spectui.cli.generate.run_generate", lambda options, prompt, **kw: seen.append(prompt) or 0)
    monkeypatch.setattr("spectui.cli.compare.run_compare", lambda options, prompt, **kw: seen.append(prompt) or 0)
    monkeypatch.setattr("spectui.cli.chat.run_chat", lambda *a, **kw: pytest.fail("the app opened"))
    return seen


@pytest.mark.parametrize("command", [["generate"], ["compare", "--table"]])
def test_dash_is_the_text_on_stdin_after_the_instruction(command, prompts):
    result = runner.invoke(app, [*command, "explain this", "-"], input="def add(a, b):\n    return a + b\n")
    assert result.exit_code == 0, result.output
    assert prompts == ["explain this\n\ndef add(a, b):\n    return a + b"]


def test_a_piped_stdin_is_the_prompt_when_none_is_given(prompts):
    result = runner.invoke(app, ["generate", "-k", "2"], input="summarise: spectui shows drafts\n")
    assert result.exit_code == 0, result.output
    assert prompts == ["summarise: spectui shows drafts"]


def test_parts_are_joined_and_stdin_is_undecodable_bytes_replaced(prompts):
    result = runner.invoke(app, ["generate", "-", "now in French"], input=b"caf\xe9\n")
    assert result.exit_code == 0, result.output
    assert prompts == ["caf\ufffd\n\nnow in French"]


@pytest.mark.parametrize("arguments, stdin, words", [
    (["generate", "-"], "", "the prompt is empty"),
    (["generate"], "\n\n", "the prompt is empty"),
    (["generate", "-", "-"], "x", "- (stdin) can be given once"),
    (["compare", "-"], "def f(): pass", "with a prompt from stdin add --json or --table"),
])
def test_stdin_mistakes_are_one_line(arguments, stdin, words, prompts):
    result = runner.invoke(app, arguments, input=stdin)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and prompts == [] and len(lines) == 1
    assert lines[0].startswith("spectui: error: ") and words in lines[0]


# --- groups and help ----------------------------------------------------------------------


@pytest.mark.parametrize("group", ["config", "history", "heads"])
def test_a_group_alone_prints_its_help_and_exits_0(group, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, group)
    assert (code, err) == (0, "")
    assert f"Usage: spectui {group} [OPTIONS] COMMAND [ARGS]..." in out


def test_models_alone_lists_the_models(monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "models")
    assert (code, err) == (0, "") and "qwen2.5-coder-1.5b" in out


@pytest.mark.parametrize("path", ["", *FLAGS, "config", "history", "heads", "models"])
def test_help_fits_80_columns_and_shows_every_flag_whole(path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main(monkeypatch, capsys, *path.split(), "--help")
    assert code == 0
    too_wide = [line for line in out.splitlines() if cell_len(line) > 80]
    assert not too_wide, too_wide
    assert "…" not in out
    command = leaf_commands().get(path)
    params = [param for param in command.params if not getattr(param, "hidden", False)] if command else []
    flags = [opt for param in params for opt in param.opts if opt.startswith("-")]  # old names stay hidden
    shown = set(re.findall(r"(?<![\w-])(--?[\w-]+)", out))
    assert set(flags) <= shown, set(flags) - shown


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-0.001"])
def test_heads_train_refuses_a_learning_rate_that_cannot_train(value, monkeypatch):
    monkeypatch.setattr("spectui.cli.heads.run_train", lambda *a, **k: pytest.fail("training started"))
    result = runner.invoke(app, ["heads", "train", "--kind", "medusa", "--lr", value])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("spectui: error: --lr must be a number > 0, got ")
