"""`spectui serve`: vLLM's OpenAI-compatible server with spectui's options, then the chat on it.

The plan (the checks, the models as vLLM loads them, the argv) is
spectui.engines.vllm.serve_plan's; this parses the options and prints or runs it. `--print` shows
the `vllm serve` line and stops; otherwise the server starts in its own process group, its
log goes to a file, the chat opens once /health answers, and the server is stopped (SIGTERM,
then SIGKILL) whatever way the chat ends.

Only typer and stdlib at import: `spectui --help` must stay instant.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Annotated

import typer

from spectui.cli.common import fail
from spectui.cli.engine_options import PASSED_BY_TAKES_SETTINGS, Given, takes_settings
from spectui.core.errors import SpectuiError
from spectui.engines.vllm.serve_plan import Launch, Plan, plan_serve
from spectui.engines.vllm.server_process import ServerFailed, exited, start_server, stop_server, wait_until_healthy
from spectui.models.registry import ModelPair
from spectui.settings.checks import AUTO_K
from spectui.settings.options import EngineOptions, OptionError


# --- the command --------------------------------------------------------------------------


@takes_settings("serve")
def serve_command(
    settings: Given = PASSED_BY_TAKES_SETTINGS,
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
        from spectui.models.registry import resolve_pair

        # An unknown name fails here, before anything is converted or started.
        models = resolve_pair(options.model, options.draft)
        code = run_serve(options, models, host=host, port=port, print_only=print_only, chat=not no_chat)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


def run_serve(options: EngineOptions, models: ModelPair, *, host: str, port: int, print_only: bool, chat: bool) -> int:
    plan, launch = plan_serve(options, models, host, port, print_only=print_only, note=_note)
    if launch is None:
        from spectui.engines.vllm.args import shell_line

        typer.echo(shell_line(plan.argv))
        return 0
    return serve_and_chat(plan, launch, chat=chat)


class _Stopped(Exception):
    """SIGTERM or SIGHUP reached spectui: stop the server like Ctrl+C does."""


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
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


def serve_and_chat(plan: Plan, launch: Launch, *, chat: bool) -> int:
    from rich.console import Console

    err = Console(stderr=True, highlight=False)
    command, env, log_path, url = launch.command, launch.env, launch.log_path, launch.url
    err.print(f"spectui: starting {launch.env_note}{_shell_line(command)}", soft_wrap=True)
    err.print(f"spectui: vLLM's log: {log_path}", soft_wrap=True)

    process = None
    code = 0
    try:
        with _stop_signals_raise():
            process = start_server(command, env, log_path)
            with err.status("starting vLLM …") as status:
                wait_until_healthy(process, url, log_path, lambda seconds, last: status.update(
                    f"starting vLLM … {seconds:.0f} s" + (f" · {_short(last)}" if last else "")
                ))
            err.print(f"spectui: vLLM is serving {plan.target_ref} at {url}/v1", soft_wrap=True)
            if chat:
                from spectui.cli.chat import run_chat

                # The served name, so a model set in the config file cannot point elsewhere.
                code = run_chat({"engine": "server", "server": url, "model": plan.served_model})
            else:
                err.print("spectui: serving in the foreground; Ctrl+C stops it")
                raise exited(process.wait(), log_path, "while serving")
    except ServerFailed as failure:
        if failure.tail:
            err.print(f"--- last lines of {failure.log_path} ---", soft_wrap=True)
            for line in failure.tail:
                err.print(line, markup=False, soft_wrap=True)
            err.print("---")
        raise
    except (KeyboardInterrupt, _Stopped):
        code = 0
    finally:
        if process is not None:
            with err.status("stopping vLLM …"):
                stop_server(process)
            err.print("spectui: vLLM stopped")
    return code


def _short(line: str, width: int = 90) -> str:
    from rich.markup import escape

    line = line.strip()
    return escape(line if len(line) <= width else line[: width - 1] + "…")


def _shell_line(argv: list[str]) -> str:
    from rich.markup import escape

    from spectui.engines.vllm.args import shell_line

    return escape(shell_line(argv))


def _note(text: str) -> None:
    typer.echo(f"spectui: {text}", err=True)
