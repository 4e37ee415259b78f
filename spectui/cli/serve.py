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
import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

import typer

from spectui.cli.common import fail
from spectui.cli.engine_options import Given, takes_settings
from spectui.core.errors import SpectuiError
from spectui.engines.vllm.server_process import (
    Launcher,
    ServerFailed,
    base_url,
    check_port_free,
    exited,
    find_launcher,
    log_file_path,
    on_cpu,
    run_argv,
    server_environment,
    start_server,
    stop_server,
    wait_until_healthy,
)
from spectui.settings.checks import AUTO_K
from spectui.settings.options import EngineOptions, OptionError, speculative_config_dict


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
    cpu = on_cpu(launcher)
    argv = run_argv(plan.argv, launcher, cpu)
    env, env_note = server_environment(cpu)
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
    import shlex

    from rich.markup import escape

    return escape(" ".join(shlex.quote(part) for part in argv))


def _note(text: str) -> None:
    typer.echo(f"spectui: {text}", err=True)
