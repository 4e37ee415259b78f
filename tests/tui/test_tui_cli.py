"""The chat-side commands: config path, history list/export, option errors; fast imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from spectui.cli.chat import register
from spectui.core.events import Source, Step
from spectui.host.state import Phase
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
    from spectui.settings.config import load_config

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
    assert result.exit_code == 2 and result.stderr.strip().startswith("spectui: error: no conversation 42")


def test_chat_option_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr("spectui.cli.chat.require_terminal", lambda: None)  # as if on a terminal
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    result = runner.invoke(cli(), ["chat", "-k", "40"])
    assert result.exit_code == 2 and result.stderr.strip() == "spectui: error: k must be from 0 to 16 or auto, got 40"
    result = runner.invoke(cli(), ["chat", "--resume"])
    assert result.exit_code == 1 and "no saved conversation to resume yet" in result.stderr
    result = runner.invoke(cli(), ["chat", "7"])
    assert result.exit_code == 2 and "goes with --resume" in result.stderr
    (tmp_path / "config.toml").write_text("k = [\n")
    result = runner.invoke(cli(), ["chat"])
    assert result.exit_code == 2 and "config.toml: line 1:" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_more_bad_input_is_one_line_before_anything_loads(tmp_path, monkeypatch):
    from spectui.cli.app import app as spectui_cli

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    monkeypatch.setattr("spectui.engines.factory.build_engine", lambda *a, **k: pytest.fail("nothing should load"))
    cases = {
        ("chat", "--theme", "nope"): "no theme 'nope': known are colorblind, dark, light",
        ("chat", "--device", "tpu"): "device must be auto, cpu, cuda, cuda:N or mps, got 'tpu'",
        ("generate", "hi", "--device", "tpu"): "device must be auto, cpu, cuda, cuda:N or mps, got 'tpu'",
        ("generate", "   "): "the prompt is empty",
        ("compare", "", "--table"): "the prompt is empty",
        ("generate", "hi", "--max-tokens", "0"): "max_tokens must be > 0, got 0",
        ("generate", "hi", "-t", "-0.5"): "temperature must be from 0 to 2, got -0.5",
    }
    (tmp_path / "themes").mkdir()
    (tmp_path / "themes" / "mine.toml").write_text('name = "mine"\n[colors\n')
    cases[("chat", "--theme", "mine")] = "theme mine.toml: "  # a broken file says why, not "no theme"
    for arguments, expected in cases.items():
        result = runner.invoke(cli() if arguments[0] == "chat" else spectui_cli, list(arguments))
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, (arguments, result.stderr)
        assert lines[0].startswith(f"spectui: error: {expected}"), (arguments, lines[0])


def test_chat_engine_options_are_checked_before_the_app(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    result = runner.invoke(cli(), ["chat", "--engine", "server"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "spectui: error: --engine server needs --server URL (e.g. http://127.0.0.1:8000)"
    result = runner.invoke(cli(), ["chat", "--engine", "embedded", "--method", "eagle"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--method eagle needs trained heads" in result.stderr
    monkeypatch.setattr("spectui.engines.factory.chosen_engine", lambda options: "embedded")  # no vLLM, no GPU
    result = runner.invoke(cli(), ["chat", "--method", "mtp"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--method mtp needs vLLM" in result.stderr
    result = runner.invoke(cli(), ["chat", "--speculative-config", "{nope"])
    assert result.exit_code == 2 and result.stderr.startswith("spectui: error: --speculative-config is not JSON")
    result = runner.invoke(cli(), ["chat", "--engine", "vllm", "--model", "no-such-model-anywhere"])
    assert result.exit_code == 2 and "unknown model 'no-such-model-anywhere'" in result.stderr
    result = runner.invoke(cli(), ["chat", "--method", "medusa", "--heads", str(tmp_path / "no-heads")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "no-heads" in result.stderr
    result = runner.invoke(cli(), ["chat", "--method", "draft", "--tree-width", "2"])
    assert result.exit_code == 2 and "--tree-width is for --method medusa or eagle" in result.stderr


def test_chat_engines_come_from_the_factory(monkeypatch):
    from spectui.host.plan import engine_factory_for, engine_factory_for_k
    from spectui.models.registry import resolve_pair
    from spectui.settings.config import ChatConfig

    built = []
    monkeypatch.setattr("spectui.engines.factory.build_engine",
                        lambda options, models, progress: built.append((options, models)) or "engine")
    config = ChatConfig(engine="server", server="http://gpu-box:8000", api_key="secret", k=3)
    assert engine_factory_for(config, None)(None) == "engine"
    options, _ = built[-1]
    assert (options.engine, options.server, options.api_key) == ("server", "http://gpu-box:8000", "secret")
    assert engine_factory_for_k(config, None) is None  # a server's k is the server's
    vllm, models = ChatConfig(engine="vllm", tp=2, k=3), resolve_pair(None, None)
    engine_factory_for_k(vllm, models)(7)(None)
    options, built_models = built[-1]
    assert (options.engine, options.k, options.tp) == ("vllm", 7, 2) and built_models is models
    assert engine_factory_for_k(ChatConfig(engine="scripted"), None) is None


def test_the_embedded_engine_runs_in_a_process_of_its_own_unless_asked_not_to(monkeypatch):
    from spectui.host.plan import engine_factory_for
    from spectui.models.registry import resolve_pair
    from spectui.settings.config import ChatConfig
    from spectui.engines.factory import build_engine

    started = []
    monkeypatch.setattr("spectui.engines.process.ProcessEngine", lambda build, progress: started.append(build) or "proxy")
    monkeypatch.setattr("spectui.engines.factory.chosen_engine", lambda options: options.engine.replace("auto", "embedded"))
    smollm2 = resolve_pair("smollm2-135m", None)
    assert engine_factory_for(ChatConfig(engine="auto", model="smollm2-135m", k=5), smollm2)(None) == "proxy"
    build = started[-1]
    assert build.func is build_engine and (build.args[0].model, build.args[0].k) == ("smollm2-135m", 5)
    assert build.args[1] is smollm2  # the models travel to the engine's process resolved
    engine_factory_for(ChatConfig(engine="embedded", method="eagle", heads="/heads/eagle", tree_width=3), smollm2)(None)
    assert (started[-1].args[0].heads, started[-1].args[0].tree_width) == ("/heads/eagle", 3)
    monkeypatch.setattr("spectui.engines.factory.build_engine", lambda options, models, progress: "in this process")
    monkeypatch.setenv("SPECTUI_ENGINE_PROCESS", "0")
    assert engine_factory_for(ChatConfig(engine="embedded"), smollm2)(None) == "in this process"


def test_importing_the_cli_module_does_not_import_textual_or_torch():
    code = "import sys, spectui.cli.chat, spectui.settings.config, spectui.store, spectui.measure.metrics, spectui.themes; " \
           "print(sorted(m for m in ('textual', 'torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("arguments, expected", [
    (["generate", "hi", "--engine", "warp"], "spectui: error: Invalid value for '--engine': 'warp' is not one of"),
    (["chat", "--dtype", "bogus"], "spectui: error: Invalid value for '--dtype': 'bogus' is not one of 'auto', 'float32'"),
    (["models", "fetch"], "spectui: error: Missing argument 'name'. (see spectui models fetch --help)"),
    (["history", "export", "abc"], "spectui: error: Invalid value for 'conversation_id'"),
    (["nosuchcommand"], "spectui: error: No such command 'nosuchcommand'. (see spectui --help)"),
])
def test_the_console_command_gives_usage_errors_in_one_line(arguments, expected, monkeypatch, capsys):
    from spectui.cli.app import main

    monkeypatch.setattr("sys.argv", ["spectui", *arguments])
    with pytest.raises(SystemExit) as exited:
        main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and len(lines) == 1 and lines[0].startswith(expected), lines


def test_the_console_command_exits_0_after_help(monkeypatch, capsys):
    from spectui.cli.app import main

    monkeypatch.setattr("sys.argv", ["spectui", "generate", "--help"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 0 and "Usage: spectui generate" in capsys.readouterr().out


def test_chat_starts_loading_the_engine_before_the_app_exists(tmp_path, monkeypatch):
    """The engine (process) loads while Textual starts and draws: the load is under way
    by the time the app is built."""
    import threading

    from spectui.cli.chat import run_chat
    monkeypatch.setattr("spectui.cli.chat.require_terminal", lambda: None)  # pytest's stdin is no terminal
    from spectui.host.plan import EnginePlan

    from fake_engines import PlanEngine

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    building = threading.Event()

    def build(progress):
        building.set()
        return PlanEngine([None])

    seen = {}

    class App:
        return_code = 0
        history_left = None  # every turn saved

        def __init__(self, host, config, store, **options):
            seen["loading"] = building.wait(10)  # no app yet, no loop: the host began on its own
            seen["phase"] = host.state.phase

        def run(self):
            for thread in threading.enumerate():
                if thread.name == "spectui-load":
                    thread.join(10)

    monkeypatch.setattr("spectui.host.plan.plan_for", lambda config, models: EnginePlan(build))
    monkeypatch.setattr("spectui.tui.app.SpectuiApp", App)
    assert run_chat({"engine": "scripted"}, history=False) == 0
    assert seen == {"loading": True, "phase": Phase.LOADING}


def test_chat_takes_top_p_from_the_command_line_over_the_config_file(tmp_path, monkeypatch):
    from spectui.settings.config import load_config

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    (tmp_path / "config.toml").write_text("top_p = 0.5\nseed = 3\n")
    configs = []
    monkeypatch.setattr("spectui.cli.chat.run_chat", lambda overrides, **kw: configs.append(load_config().with_overrides(**overrides)) or 0)
    assert runner.invoke(cli(), ["chat", "--top-p", "0.9"]).exit_code == 0
    assert runner.invoke(cli(), ["chat"]).exit_code == 0
    assert [(config.top_p, config.seed) for config in configs] == [(0.9, 3), (0.5, 3)]
    result = runner.invoke(cli(), ["chat", "--top-p", "0"])
    assert result.exit_code == 2 and result.stderr.strip() == "spectui: error: top_p must be in (0, 1], got 0.0"
