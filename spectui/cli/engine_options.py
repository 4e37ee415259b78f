"""The engine options `generate` and `compare` share: one typer definition of each.

A command declares `k: KOption = DEFAULTS.k` and hands the values to `engine_options`,
which checks them with the same rules as the config file (spectui.options). Defaults
come from EngineOptions itself, so `--help` and the checked object cannot disagree.
Only typer and stdlib here: `spectui --help` must not import torch.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from spectui.options import EngineOptions


class Method(str, Enum):
    draft = "draft"
    ngram = "ngram"


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"
    int8 = "int8"


DEFAULTS = EngineOptions()

PromptArgument = Annotated[str, typer.Argument(help="The user message.")]
ModelOption = Annotated[Optional[str], typer.Option("--model", "-m", help="Target: alias, local folder, .gguf or hub id.")]
DraftOption = Annotated[Optional[str], typer.Option("--draft", "-d", help="Draft model (same tokenizer as the target).")]
MethodOption = Annotated[Method, typer.Option("--method", help="Where drafts come from.")]
KOption = Annotated[int, typer.Option("--k", "-k", help="Draft tokens per step, 0-16 (0 = plain decoding).")]
TemperatureOption = Annotated[float, typer.Option("--temperature", "-t", help="0 = greedy.")]
TopPOption = Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass, (0, 1].")]
MaxTokensOption = Annotated[int, typer.Option("--max-tokens", help="Stop after this many tokens.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed for sampling.")]
DtypeOption = Annotated[Dtype, typer.Option("--dtype", help="Target precision (auto picks the fastest lossless one).")]
DeviceOption = Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")]
LookupMinOption = Annotated[int, typer.Option("--lookup-min", help="ngram: shortest n-gram to match.")]
LookupMaxOption = Annotated[int, typer.Option("--lookup-max", help="ngram: longest n-gram to match.")]
SystemOption = Annotated[Optional[str], typer.Option("--system", help="A system message.")]


def engine_options(
    *,
    model: str | None,
    draft: str | None,
    method: Method,
    k: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    dtype: Dtype,
    device: str,
    lookup_min: int,
    lookup_max: int,
) -> EngineOptions:
    """Checked options; an out-of-range value raises OptionError (one line, exit 2)."""
    return EngineOptions.checked(
        model=model, draft=draft, method=method.value, k=k, temperature=temperature,
        top_p=top_p, max_tokens=max_tokens, seed=seed, dtype=dtype.value, device=device,
        lookup_min=lookup_min, lookup_max=lookup_max,
    )
