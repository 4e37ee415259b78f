"""The engine options `generate` and `compare` share: one typer definition of each.

A command declares `k: KOption = DEFAULTS.k` and hands the values to `engine_options`,
which checks them with the same rules as the config file (spectui.settings.options). Defaults
come from EngineOptions itself, so `--help` and the checked object cannot disagree.
Only typer and stdlib here: `spectui --help` must not import torch.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from spectui.core.errors import UsageError
from spectui.settings.options import EngineOptions, parse_k


class Method(str, Enum):
    draft = "draft"
    ngram = "ngram"
    suffix = "suffix"
    eagle = "eagle"
    eagle3 = "eagle3"
    medusa = "medusa"
    mtp = "mtp"


class EngineName(str, Enum):
    auto = "auto"
    embedded = "embedded"
    vllm = "vllm"
    server = "server"


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
MethodOption = Annotated[Method, typer.Option("--method", help="Where drafts come from (eagle, medusa: vLLM, or the embedded engine with --heads; eagle3, mtp: vLLM only).")]
KOption = Annotated[str, typer.Option("--k", "-k", help="Draft tokens per step, 0-16 (0 = plain decoding), or auto: the embedded engine picks k before every step.")]
TemperatureOption = Annotated[float, typer.Option("--temperature", "-t", help="0 = greedy.")]
TopPOption = Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass, (0, 1].")]
MaxTokensOption = Annotated[int, typer.Option("--max-tokens", help="Stop after this many tokens.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed for sampling.")]
DtypeOption = Annotated[Dtype, typer.Option("--dtype", help="Target precision (auto picks the fastest lossless one).")]
DeviceOption = Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")]
LookupMinOption = Annotated[int, typer.Option("--lookup-min", help="ngram: shortest n-gram to match.")]
HeadsOption = Annotated[Optional[str], typer.Option("--heads", help="--method medusa / eagle on the embedded engine: a folder from `spectui heads train`.")]
TreeWidthOption = Annotated[int, typer.Option("--tree-width", help="--method medusa / eagle --heads: candidates per depth, verified as a tree in one forward (1 = a chain).")]
LookupMaxOption = Annotated[int, typer.Option("--lookup-max", help="ngram: longest n-gram to match.")]
EngineOption = Annotated[EngineName, typer.Option("--engine", help="auto: vLLM when installed with a GPU, else embedded.")]
ServerOption = Annotated[Optional[str], typer.Option("--server", help="--engine server: the vLLM server's URL.")]
ApiKeyOption = Annotated[Optional[str], typer.Option("--api-key", envvar="SPECTUI_API_KEY", help="--engine server: bearer token.")]
ApiKeyFileOption = Annotated[Optional[str], typer.Option("--api-key-file", envvar="SPECTUI_API_KEY_FILE", help="--engine server: a file holding the bearer token.")]
SpeculativeConfigOption = Annotated[Optional[str], typer.Option("--speculative-config", help="vLLM: a JSON speculative_config, passed through.")]
TpOption = Annotated[int, typer.Option("--tp", help="vLLM: tensor_parallel_size.")]
DraftTpOption = Annotated[Optional[int], typer.Option("--draft-tp", help="vLLM: the draft's tensor_parallel_size.")]
GpuMemoryOption = Annotated[float, typer.Option("--gpu-memory-utilization", help="vLLM: share of GPU memory to reserve.")]
MaxModelLenOption = Annotated[Optional[int], typer.Option("--max-model-len", help="vLLM: longest context.")]
SystemOption = Annotated[Optional[str], typer.Option("--system", help="A system message.")]


def check_prompt(prompt: str) -> None:
    if not prompt.strip():
        raise UsageError("the prompt is empty: give the message to reply to, e.g. spectui generate \"def add(a, b):\"")


def engine_options(
    *,
    model: str | None,
    draft: str | None,
    method: Method,
    k: int | str,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    dtype: Dtype,
    device: str,
    lookup_min: int,
    lookup_max: int,
    heads: str | None = None,
    tree_width: int = DEFAULTS.tree_width,
    engine: EngineName = EngineName.auto,
    server: str | None = None,
    api_key: str | None = None,
    api_key_file: str | None = None,
    speculative_config: str | None = None,
    tp: int = 1,
    draft_tp: int | None = None,
    gpu_memory_utilization: float = DEFAULTS.gpu_memory_utilization,
    max_model_len: int | None = None,
) -> EngineOptions:
    """Checked options; an out-of-range value raises OptionError (one line, exit 2)."""
    k, auto_k = parse_k(k)
    return EngineOptions.checked(
        model=model, draft=draft, method=method.value, k=k, auto_k=auto_k, temperature=temperature,
        top_p=top_p, max_tokens=max_tokens, seed=seed, dtype=dtype.value, device=device,
        lookup_min=lookup_min, lookup_max=lookup_max, heads=heads, tree_width=tree_width, engine=engine.value, server=server,
        api_key=api_key, api_key_file=api_key_file, speculative_config=speculative_config, tp=tp, draft_tp=draft_tp,
        gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
    )


def engine_options_from(arguments: dict) -> EngineOptions:
    """engine_options over a command's own arguments (pass its locals()): every command
    that takes the shared options names them the same way, so none lists them twice."""
    import inspect

    names = inspect.signature(engine_options).parameters
    return engine_options(**{name: arguments[name] for name in names if name in arguments})
