"""The user's config file: defaults for `spectui chat`, key remapping, the theme.

TOML in platformdirs' user config dir (SPECTUI_CONFIG_DIR overrides it). A bad file is a
one-line error that names the file and the line, never a traceback. Stdlib + platformdirs.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from spectui.core.errors import UsageError
from spectui.settings.options import LOOKUP_MAX, EngineOptions, OptionError, parse_k

CONFIG_FILE_NAME = "config.toml"

# Binding id -> default keys (comma-separated alternatives, Textual key names).
# Function and ctrl keys only: printable keys belong to the prompt input.
DEFAULT_KEYS: dict[str, str] = {
    "k_down": "f5,ctrl+down",
    "k_up": "f6,ctrl+up",
    "k_auto": "f9",
    "temperature_down": "f7",
    "temperature_up": "f8",
    "engine_info": "f3",
    "ghosts": "ctrl+g",
    "markdown": "ctrl+r",
    "compare": "f4",
    "rerun": "r",
    "sweep": "s",
    "swap_method": "m",
    "cancel": "escape",
    "new_chat": "ctrl+n",
    "trim": "ctrl+o",
    "history": "f2",
    "help": "f1",
    "theme": "ctrl+t",
    "screenshot": "ctrl+s",
}

KEY_DESCRIPTIONS: dict[str, str] = {
    "k_down": "k −1",
    "k_up": "k +1",
    "k_auto": "adaptive k on / off",
    "temperature_down": "T −0.1",
    "temperature_up": "T +0.1",
    "engine_info": "engine info",
    "ghosts": "show rejected drafts",
    "markdown": "Markdown / tokens",
    "compare": "compare view (closes it too)",
    "rerun": "compare: run both again",
    "sweep": "compare: sweep k = 0..8",
    "swap_method": "compare: draft model / prompt lookup",
    "cancel": "cancel the reply",
    "new_chat": "new chat",
    "trim": "resend without the oldest turns (after a too-long chat)",
    "history": "history",
    "help": "help",
    "theme": "next theme",
    "screenshot": "save a screenshot",
}


class ConfigError(UsageError):
    """The config file cannot be used as it is."""


@dataclass(frozen=True)
class ChatConfig:
    """Everything `spectui chat` takes from the config file; CLI options override it."""

    model: str | None = None
    draft: str | None = None
    method: str = "draft"
    engine: str = "auto"  # auto, embedded, vllm, server, scripted (a demo without weights)
    k: int | str = 4  # or "auto"
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    dtype: str = "auto"
    device: str = "auto"
    system: str | None = None
    theme: str = "dark"
    ghosts: bool = False
    lookup_min: int = 1
    lookup_max: int = LOOKUP_MAX
    heads: str | None = None  # medusa / eagle on the embedded engine: a folder from `spectui heads train`
    tree_width: int = 1
    # vLLM engines
    server: str | None = None
    baseline_server: str | None = None  # the compare view's baseline, for engines with a fixed k
    api_key: str | None = None
    api_key_file: str | None = None
    speculative_config: str | None = None
    tp: int = 1
    draft_tp: int | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    keys: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_KEYS))

    def with_overrides(self, **values) -> "ChatConfig":
        """CLI options win; None means 'not given on the command line'."""
        given = {name: value for name, value in values.items() if value is not None}
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        merged = replace(self, **given)
        check_values(merged)
        return merged


_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "draft": (str,),
    "method": (str,),
    "engine": (str,),
    "k": (int, str),
    "temperature": (int, float),
    "top_p": (int, float),
    "max_tokens": (int,),
    "seed": (int,),
    "system": (str,),
    "theme": (str,),
    "ghosts": (bool,),
    "lookup_min": (int,),
    "lookup_max": (int,),
    "heads": (str,),
    "tree_width": (int,),
    "server": (str,),
    "baseline_server": (str,),
    "api_key": (str,),
    "api_key_file": (str,),
    "speculative_config": (str,),
    "tp": (int,),
    "draft_tp": (int,),
    "gpu_memory_utilization": (int, float),
    "max_model_len": (int,),
}


def config_dir() -> Path:
    override = os.environ.get("SPECTUI_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("spectui"))


def config_path() -> Path:
    return config_dir() / CONFIG_FILE_NAME


def load_config(path: Path | None = None) -> ChatConfig:
    """The config file's settings over the defaults; a missing file is the defaults."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ChatConfig()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    return parse_config(text, str(path))


def parse_config(text: str, where: str = CONFIG_FILE_NAME) -> ChatConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{where}: {_toml_message(error, text)}") from None

    values: dict = {}
    keys = dict(DEFAULT_KEYS)
    for name, value in data.items():
        line = _line_of(text, name)
        if name == "keys":
            if not isinstance(value, dict):
                raise ConfigError(f"{where} line {line}: [keys] must be a table")
            keys.update(_check_keys(value, text, where))
            continue
        if name not in _TYPES:
            known = ", ".join([*_TYPES, "keys"])
            raise ConfigError(f"{where} line {line}: unknown setting {name!r} (known: {known})")
        expected = _TYPES[name]
        # bool is an int to Python; a TOML true is never a valid k.
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            type_name = " or ".join(t.__name__ for t in expected)
            raise ConfigError(f"{where} line {line}: {name} must be {type_name}, got {value!r}")
        values[name] = float(value) if float in expected and not isinstance(value, str) else value

    config = replace(ChatConfig(), keys=keys, **values)
    try:
        check_values(config)
    except OptionError as error:
        raise ConfigError(f"{where} line {_line_of(text, error.setting)}: {error}") from None
    return config


def engine_options(config: ChatConfig) -> EngineOptions:
    return EngineOptions(
        model=config.model, draft=config.draft, method=config.method, **k_and_auto(config.k),
        temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
        seed=config.seed, dtype=config.dtype, device=config.device,
        lookup_min=config.lookup_min, lookup_max=config.lookup_max, heads=config.heads, tree_width=config.tree_width,
        # scripted is the TUI's demo engine, not one EngineOptions builds
        engine="auto" if config.engine == "scripted" else config.engine,
        server=config.server, api_key=config.api_key, api_key_file=config.api_key_file, speculative_config=config.speculative_config,
        tp=config.tp, draft_tp=config.draft_tp, gpu_memory_utilization=float(config.gpu_memory_utilization),
        max_model_len=config.max_model_len,
    )


def k_and_auto(k: int | str) -> dict:
    """EngineOptions' k and auto_k from a config's k (a number or "auto")."""
    k, auto_k = parse_k(k)
    return {"k": k, "auto_k": auto_k}


def check_values(config: ChatConfig) -> None:
    """The same rules as the command line's (spectui.settings.options)."""
    engine_options(config).check()


def _check_keys(table: dict, text: str, where: str) -> dict[str, str]:
    checked = {}
    for action, keys in table.items():
        line = _line_of(text, action)
        if action not in DEFAULT_KEYS:
            raise ConfigError(
                f"{where} line {line}: unknown key action {action!r} (known: {', '.join(DEFAULT_KEYS)})"
            )
        if not isinstance(keys, str) or not keys.strip():
            raise ConfigError(f"{where} line {line}: keys.{action} must be a key name such as \"f6\"")
        checked[action] = ",".join(part.strip() for part in keys.split(","))
    return checked


def _toml_message(error: tomllib.TOMLDecodeError, text: str) -> str:
    # Python 3.11's message ends "(at line 3, column 5)" or "(at end of document)":
    # turn it into our "line 3: ..." form.
    message = str(error)
    match = re.search(r"\(at line (\d+), column \d+\)$", message)
    if match:
        return f"line {match.group(1)}: {message[: match.start()].strip()}"
    match = re.search(r"\(at end of document\)$", message)
    if match:
        last_line = max(1, len(text.rstrip("\n").splitlines()))
        return f"line {last_line}: {message[: match.start()].strip()} (at the end of the file)"
    return message


def _line_of(text: str, key: str) -> int:
    """The first line that assigns `key` (or opens a [key] table); 1 if none is found."""
    pattern = re.compile(rf"^\s*(\[\s*{re.escape(key)}\s*\]|\"?{re.escape(key)}\"?\s*=)")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return 1


def example_config(default_target: str, default_draft: str) -> str:
    """A commented config file with every setting at its default."""
    lines = [
        "# spectui chat's config: every setting is optional; command-line options override these.",
        "# (generate, bench and compare --table/--json take theirs from the command line only.)",
        f"# model = \"{default_target}\"",
        f"# draft = \"{default_draft}\"",
        "method = \"draft\"        # draft or ngram; with vLLM also eagle, eagle3, medusa, mtp",
        "engine = \"auto\"         # auto (vLLM with a GPU, else embedded), embedded, vllm, server",
        "# server = \"http://127.0.0.1:8000\"   # for engine = \"server\"",
        "k = 4                   # draft tokens per step, 0-16, or \"auto\"",
        "temperature = 0.0",
        "max_tokens = 512",
        "theme = \"dark\"          # dark, light, colorblind or a file in themes/ here",
        "ghosts = false          # show rejected drafts from the start",
        "",
        "[keys]                  # Textual key names; several keys separated by commas",
    ]
    lines += [f"# {action} = \"{keys}\"" for action, keys in DEFAULT_KEYS.items()]
    return "\n".join(lines) + "\n"
