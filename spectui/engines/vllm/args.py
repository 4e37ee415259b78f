"""spectui's options as vLLM's: the speculative_config, the engine arguments, `vllm serve`.

One mapping for the in-process engine and for `spectui serve`, so the two cannot drift.
Stdlib only: `spectui serve --print` must work where vLLM is not installed.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from spectui.core.safe_text import safe_text
from spectui.settings.options import EngineOptions, OptionError, speculative_config_dict

# spectui's --method -> vLLM's speculative_config "method"
VLLM_METHOD = {
    "draft": "draft_model",
    "ngram": "ngram",
    "suffix": "suffix",  # vLLM imports it from arctic-inference, which must be installed
    "eagle": "eagle",
    "eagle3": "eagle3",
    "medusa": "medusa",
    "mtp": "mtp",
}
# Methods whose drafts come from a second checkpoint (a model, or trained heads).
NEEDS_DRAFT_CHECKPOINT = ("draft", "eagle", "eagle3", "medusa")
VLLM_DTYPES = {"auto": "auto", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


@dataclass(frozen=True)
class VllmModels:
    """Where vLLM reads the weights: a local folder or a hub id."""

    target: str
    draft: str | None = None  # the draft model or the heads' checkpoint
    # The draft model has another tokenizer: vLLM's TLI (use_heterogeneous_vocab, checked installed).
    other_vocab: bool = False


def speculative_config(options: EngineOptions, models: VllmModels) -> dict | None:
    """vLLM's speculative_config for these options; None means plain decoding (k = 0)."""
    if options.speculative_config is not None:
        config = speculative_config_dict(options.speculative_config)
        config.setdefault("num_speculative_tokens", options.k)
        return config
    if options.k == 0:
        return None
    config: dict = {"method": VLLM_METHOD[options.method], "num_speculative_tokens": options.k}
    if options.method == "ngram":
        config["prompt_lookup_min"] = options.lookup_min
        config["prompt_lookup_max"] = options.lookup_max
    elif options.method in NEEDS_DRAFT_CHECKPOINT:
        if models.draft is None:
            raise OptionError("draft", f"--method {options.method} needs --draft (the draft model or heads checkpoint)")
        config["model"] = models.draft
        if models.other_vocab and options.method == "draft":
            config["use_heterogeneous_vocab"] = True
    elif models.draft is not None:  # mtp: the heads usually live in the target's own checkpoint
        config["model"] = models.draft
    if options.draft_tp is not None:
        config["draft_tensor_parallel_size"] = options.draft_tp
    return config


def vllm_dtype(options: EngineOptions) -> str:
    if options.dtype not in VLLM_DTYPES:
        raise OptionError("dtype", f"--dtype {options.dtype} is not one of vLLM's: {', '.join(VLLM_DTYPES)}")
    return VLLM_DTYPES[options.dtype]


def engine_kwargs(options: EngineOptions, models: VllmModels, *, on_cpu: bool) -> dict:
    """Keyword arguments for vLLM's AsyncEngineArgs.

    On CPU the engine starts eager (CUDA graphs and compilation would cost minutes) and
    with a bounded context, so the KV cache the CPU backend reserves stays small.
    """
    kwargs = {
        "model": models.target,
        "dtype": vllm_dtype(options),
        "tensor_parallel_size": options.tp,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "seed": options.seed,
        "speculative_config": speculative_config(options, models),
        "enable_log_requests": False,
    }
    if kwargs["speculative_config"] is not None:
        # Per-step accepted counts per request: the colouring is reconciled against them.
        kwargs["per_request_spec_decode_metrics"] = "detailed"
    if options.max_model_len is not None:
        kwargs["max_model_len"] = options.max_model_len
    elif on_cpu:
        kwargs["max_model_len"] = 4096
    if on_cpu:
        kwargs["enforce_eager"] = True
    return kwargs


def serve_argv(options: EngineOptions, models: VllmModels, host: str = "127.0.0.1", port: int = 8000) -> list[str]:
    """`vllm serve` as an argument list: the modern --speculative-config form.

    (Older docs show --speculative-model / --num-speculative-tokens; vLLM removed them.)
    """
    argv = ["vllm", "serve", models.target, "--host", host, "--port", str(port)]
    if options.tp != 1:
        argv += ["--tensor-parallel-size", str(options.tp)]
    if options.dtype != "auto":
        argv += ["--dtype", vllm_dtype(options)]
    if options.max_model_len is not None:
        argv += ["--max-model-len", str(options.max_model_len)]
    if options.gpu_memory_utilization != EngineOptions.gpu_memory_utilization:
        argv += ["--gpu-memory-utilization", str(options.gpu_memory_utilization)]
    config = speculative_config(options, models)
    if config is not None:
        argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    return argv


def shell_line(argv: list[str]) -> str:
    """The command as a shell reads it, every word quoted; a word holding a control (a model
    folder's name) in bash's $'…' form, so the line is still exact and the terminal obeys nothing."""
    return " ".join(shell_word(part) for part in argv)


def shell_word(part: str) -> str:
    if safe_text(part) == part and "\n" not in part and "\t" not in part:
        return shlex.quote(part)
    return "$'" + "".join(_ansi_c(char) for char in part) + "'"


def _ansi_c(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if safe_text(char) == char and char not in "\n\t":
        return char
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
