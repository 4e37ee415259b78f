"""Errors a user can act on. The CLI prints `str(error)` as one line and exits non-zero."""

from spectui.core.safe_text import safe_line


class SpectuiError(Exception):
    exit_code = 1


class ModelError(SpectuiError):
    """Unknown model, bad weights, offline hub, vocabulary mismatch."""

    exit_code = 2


class UsageError(SpectuiError):
    """An option out of range."""

    exit_code = 2


class OutOfMemory(SpectuiError):
    """The weights or the reply's caches did not fit in memory (host RAM or GPU)."""

    exit_code = 3


# What to try, by where memory ran out: fewer bytes per weight, fewer tokens in flight.
LOAD_ADVICE = "try --dtype int8, a smaller model, or close what else holds memory"
VLLM_LOAD_ADVICE = "try a smaller --max-model-len or --gpu-memory-utilization, a smaller model, or --tp 2"
REPLY_ADVICE = "try a smaller k, fewer --max-tokens, or a new chat (a shorter history)"


def is_out_of_memory(error: BaseException) -> bool:
    """MemoryError, torch's OutOfMemoryError (CUDA, MPS, XPU) and allocators that only say so in text."""
    if isinstance(error, (MemoryError, OutOfMemory)):
        return True
    if type(error).__name__ == "OutOfMemoryError":
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and ("out of memory" in text or "failed to allocate" in text)


def out_of_memory(error: BaseException, while_doing: str, advice: str) -> OutOfMemory:
    if isinstance(error, OutOfMemory):
        return error  # already said where and what to try
    detail = str(error).strip().splitlines()
    shown = f" ({detail[0][:120]})" if detail and detail[0] else ""
    return OutOfMemory(f"out of memory while {while_doing}{shown}: {advice}")


def one_line(error: BaseException) -> str:
    """An error as the one line a user sees: ours as worded, others with their type. A
    server's error body or a file's content may be quoted in it: controls are made visible."""
    if isinstance(error, SpectuiError):
        return safe_line(str(error))
    text = str(error).strip().splitlines()
    return safe_line(f"{type(error).__name__}: {text[0]}" if text else type(error).__name__)
