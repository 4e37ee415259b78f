"""The engine's options, the settings table's engine settings (spectui.settings.table), declared and checked once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spectui.settings.checks import AUTO_K, AUTO_START_K, OptionError, k_setting, parse_k
from spectui.settings.table import (
    EMBEDDED_METHODS,
    ENGINES,
    HEAD_METHODS,
    LOOKUP_MAX,
    TREE_WIDTH_MAX,
    VLLM_METHODS,
    BY_NAME,
    engine_settings,
)

__all__ = [
    "AUTO_K", "AUTO_START_K", "EMBEDDED_METHODS", "ENGINES", "HEAD_METHODS", "LOOKUP_MAX", "TREE_WIDTH_MAX",
    "VLLM_METHODS", "EngineOptions", "EngineSettings", "OptionError", "engine_options_from_values", "k_setting", "parse_k",
    "speculative_config_dict",
]


@dataclass(frozen=True)
class EngineSettings:
    """The engine settings of the table (spectui.settings.table), declared once: EngineOptions
    and the config file's ChatConfig (spectui.settings.config) both take them from here. In the
    table's order, each with its type and default, but for k, which each holds its own way
    (tests/test_settings_declared.py holds them to the table). None is "not set": the engine picks."""

    model: str | None = None
    draft: str | None = None
    vocab: str = "auto"
    method: str = "auto"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    dtype: str = "auto"
    device: str = "auto"
    lookup_min: int = 1
    lookup_max: int = LOOKUP_MAX
    history_drafting: bool = True
    heads: str | None = None
    tree_width: int = 1
    engine: str = "auto"
    backend: str = "auto"
    server: str | None = None
    api_key: str | None = None
    api_key_file: str | None = None
    speculative_config: str | None = None
    tp: int = 1
    draft_tp: int | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None


@dataclass(frozen=True)
class EngineOptions(EngineSettings):
    """What builds an engine: the engine settings, with k as a number and auto_k beside it."""

    k: int = 4  # "auto" is auto_k, with k where adaptive k starts (engine_options_from_values)
    auto_k: bool = False  # k = "auto": adaptive k (the embedded engine), k is where it starts

    @classmethod
    def checked(cls, **values: Any) -> "EngineOptions":
        options = cls(**values)
        options.check()
        return options

    def check(self) -> None:
        """Each value by its own rule (the table's), then the rules between them."""
        for setting in engine_settings():  # the table's order: the first wrong value is the one named
            setting.checked(getattr(self, setting.name))
        check_together(self)


def engine_options_from_values(values: dict) -> EngineOptions:
    """Checked EngineOptions from setting values (k may be "auto"); None is "not given"."""
    given = {name: value for name, value in values.items() if value is not None and BY_NAME[name].in_engine}
    if "k" in given:
        given["k"], given["auto_k"] = parse_k(given["k"])
    if given.get("engine") == "scripted":
        given["engine"] = "auto"  # the app's demo engine: nothing EngineOptions builds
    return EngineOptions.checked(**given)


def check_together(options: EngineOptions) -> None:
    """The rules that tie one setting to another."""
    if options.lookup_min > options.lookup_max:
        raise OptionError(
            "lookup_min",
            f"lookup_min/lookup_max must satisfy 1 <= min <= max, got {options.lookup_min}/{options.lookup_max}",
        )
    if options.tree_width > 1 and (options.method not in HEAD_METHODS or options.heads is None):
        raise OptionError("tree_width", "--tree-width is for --method medusa or eagle with --heads DIR")
    if options.heads is not None:
        if options.method not in HEAD_METHODS:
            raise OptionError("heads", f"--heads is for --method medusa or eagle, not {options.method}")
        if options.engine not in ("auto", "embedded"):
            raise OptionError("heads", "--heads is for the embedded engine (vLLM takes its heads in --speculative-config)")
    elif options.engine == "embedded" and options.method not in EMBEDDED_METHODS + ("auto",):
        hint = " (pass --heads DIR from spectui heads train)" if options.method in HEAD_METHODS else ""
        raise OptionError(
            "method", f"--method {options.method} needs trained heads{hint}: use --engine vllm, or draft / ngram"
        )
    if options.engine == "server" and not options.server:
        raise OptionError("server", "--engine server needs --server URL (e.g. http://127.0.0.1:8000)")
    if options.speculative_config is not None:
        speculative_config_dict(options.speculative_config)


def speculative_config_dict(text: str) -> dict:
    """--speculative-config as a dict; a bad one is a one-line error."""
    import json

    from spectui.core import json_text

    try:
        # finite: 1e400 would come back out of `serve --print` as Infinity, which is not JSON
        value = json_text.loads(text, finite=True)
    except json.JSONDecodeError as error:
        raise OptionError("speculative_config", f"--speculative-config is not JSON: {error.msg} at column {error.colno}") from None
    if not isinstance(value, dict):
        raise OptionError("speculative_config", "--speculative-config must be a JSON object, e.g. '{\"method\": \"ngram\"}'")
    return value
