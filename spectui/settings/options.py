"""Engine options shared by generate, chat, compare and bench, checked once."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from spectui.core.errors import UsageError
from spectui.core.events import K_MAX

ENGINES = ("auto", "embedded", "vllm", "server")
# Proposers the embedded engine has; vLLM has these and the ones that need trained heads.
EMBEDDED_METHODS = ("draft", "ngram", "suffix")
VLLM_METHODS = EMBEDDED_METHODS + ("eagle", "eagle3", "medusa", "mtp")  # suffix: needs arctic-inference
# The embedded engine runs these too, from heads trained by `spectui heads train` (--heads).
HEAD_METHODS = ("medusa", "eagle")
TREE_WIDTH_MAX = 8
# The longest suffix prompt lookup matches: past 4 tokens a match still says more (a reply
# quoting its prompt keeps copying); docs/adaptive-k.md has the replay behind it.
LOOKUP_MAX = 8


AUTO_K = "auto"
AUTO_START_K = 4  # where adaptive k starts before it has measured anything


def parse_k(value: int | str) -> tuple[int, bool]:
    """(k, adaptive) from a number of draft tokens or "auto"."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO_K:
            return AUTO_START_K, True
        if not text.lstrip("-").isdigit():
            raise OptionError("k", f"k must be from 0 to {K_MAX} or auto, got {value!r}")
        value = int(text)
    if isinstance(value, bool) or not 0 <= value <= K_MAX:
        raise OptionError("k", f"k must be from 0 to {K_MAX} or auto, got {value!r}")
    return value, False


def k_setting(value: int | str | None) -> int | str | None:
    """A command line's k as the config file holds it: a number, "auto", or None (not given)."""
    if value is None:
        return None
    k, auto = parse_k(value)
    return AUTO_K if auto else k


class OptionError(UsageError):
    """An option out of range; `setting` names it so a config file can point at its line."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True)
class EngineOptions:
    model: str | None = None
    draft: str | None = None
    method: str = "draft"
    k: int = 4
    auto_k: bool = False  # adaptive k (the embedded engine): k is where it starts
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    dtype: str = "auto"
    device: str = "auto"
    lookup_min: int = 1
    lookup_max: int = LOOKUP_MAX
    heads: str | None = None  # medusa / eagle on the embedded engine: a folder from `spectui heads train`
    tree_width: int = 1  # medusa / eagle with --heads: candidates per depth, verified as a tree (1 = a chain)
    engine: str = "auto"
    # vLLM (in-process, and what `spectui serve` passes on)
    speculative_config: str | None = None  # JSON, passed through; wins over method/draft/k
    tp: int = 1
    draft_tp: int | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    # --engine server
    server: str | None = None
    api_key: str | None = None
    api_key_file: str | None = None  # a file holding the key: kept out of shell history and ps

    @classmethod
    def checked(cls, **values) -> "EngineOptions":
        options = cls(**values)
        options.check()
        return options

    def check(self) -> None:
        if not 0 <= self.k <= K_MAX:
            raise OptionError("k", f"k must be from 0 to {K_MAX}, got {self.k}")
        if not self.temperature >= 0:
            raise OptionError("temperature", f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise OptionError("top_p", f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens <= 0:
            raise OptionError("max_tokens", f"max_tokens must be > 0, got {self.max_tokens}")
        if not 1 <= self.lookup_min <= self.lookup_max:
            raise OptionError(
                "lookup_min",
                f"lookup_min/lookup_max must satisfy 1 <= min <= max, got {self.lookup_min}/{self.lookup_max}",
            )
        if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", self.device):
            raise OptionError("device", f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
        if self.engine not in ENGINES:
            raise OptionError("engine", f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.method not in VLLM_METHODS:
            raise OptionError("method", f"method must be one of {', '.join(VLLM_METHODS)}, got {self.method!r}")
        if not 1 <= self.tree_width <= TREE_WIDTH_MAX:
            raise OptionError("tree_width", f"tree_width must be from 1 to {TREE_WIDTH_MAX}, got {self.tree_width}")
        if self.tree_width > 1 and (self.method not in HEAD_METHODS or self.heads is None):
            raise OptionError("tree_width", "--tree-width is for --method medusa or eagle with --heads DIR")
        if self.heads is not None:
            if self.method not in HEAD_METHODS:
                raise OptionError("heads", f"--heads is for --method medusa or eagle, not {self.method}")
            if self.engine not in ("auto", "embedded"):
                raise OptionError("heads", "--heads is for the embedded engine (vLLM takes its heads in --speculative-config)")
        elif self.engine == "embedded" and self.method not in EMBEDDED_METHODS:
            hint = " (pass --heads DIR from spectui heads train)" if self.method in HEAD_METHODS else ""
            raise OptionError(
                "method", f"--method {self.method} needs trained heads{hint}: use --engine vllm, or draft / ngram"
            )
        if self.tp < 1 or (self.draft_tp is not None and self.draft_tp < 1):
            raise OptionError("tp", "--tp and --draft-tp must be >= 1")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise OptionError(
                "gpu_memory_utilization",
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}",
            )
        if self.max_model_len is not None and self.max_model_len < 16:
            raise OptionError("max_model_len", f"max_model_len must be >= 16, got {self.max_model_len}")
        if self.engine == "server" and not self.server:
            raise OptionError("server", "--engine server needs --server URL (e.g. http://127.0.0.1:8000)")
        if self.speculative_config is not None:
            speculative_config_dict(self.speculative_config)

    def with_k(self, k: int) -> "EngineOptions":
        return replace(self, k=k)


def speculative_config_dict(text: str) -> dict:
    """--speculative-config as a dict; a bad one is a one-line error."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise OptionError("speculative_config", f"--speculative-config is not JSON: {error.msg} at column {error.colno}") from None
    if not isinstance(value, dict):
        raise OptionError("speculative_config", "--speculative-config must be a JSON object, e.g. '{\"method\": \"ngram\"}'")
    return value
