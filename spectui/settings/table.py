"""Every engine and chat setting, declared once.

Each `Setting` says its name (the Python name and the config file's key), type, default,
help, check, command-line flags, which commands take it and whether it changes live in the
app. From this table come the config file's parser and example (spectui.settings.config), the
checks, and the typer options of generate, compare, chat, bench and serve
(spectui.cli.engine_options). Its engine settings are fields of `EngineSettings`
(spectui.settings.options), in code a type checker reads, which `EngineOptions` and the config
file's `ChatConfig` extend (k apart: a number in one, "auto" too in the other); the chat's own
settings are fields of `ChatConfig`. tests/test_settings_declared.py holds their names, types
and defaults to this table. Adding a setting is one entry here, its field in `EngineSettings`
(or `ChatConfig` for the chat's own), and the code that uses its value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from spectui.core.events import K_MAX, TEMPERATURE_MAX
from spectui.settings.checks import (
    Check,
    Matches,
    Within,
    check_choice,
    check_model_name,
    check_seed,
    check_temperature_setting,
    k_setting,
)

COMMANDS = ("generate", "compare", "chat", "bench", "serve")
CONFIG = "chat"  # the config file holds the chat's settings: its variant of each entry

ENGINES = ("auto", "embedded", "vllm", "server")
CHAT_ENGINES = ENGINES + ("scripted",)  # scripted: the app's demo engine, no weights
# Each engine's own list, spelt out: a proposer added to the embedded engine is not a vLLM
# method until engines/vllm/args.py maps it (tests/test_method_lists.py holds both to their code).
EMBEDDED_METHODS = ("draft", "ngram", "suffix")
VLLM_METHODS = ("draft", "ngram", "suffix", "eagle", "eagle3", "medusa", "mtp")  # suffix: vLLM needs arctic-inference
# The embedded engine runs these too, from heads trained by `spectui heads train` (--heads).
HEAD_METHODS = ("medusa", "eagle")
# auto: the method measured fastest where the engine runs (engines/factory.py settled_method).
METHODS = ("auto",) + tuple(dict.fromkeys(EMBEDDED_METHODS + VLLM_METHODS))  # every engine's, once
BACKENDS = ("auto", "ggml", "torch")
VOCAB_RULES = ("auto", "tli", "slem")  # how a draft with another tokenizer drafts
DTYPES = ("auto", "float32", "bfloat16", "float16", "int8")
VLLM_DTYPES = ("auto", "float32", "bfloat16", "float16")
TREE_WIDTH_MAX = 8
# The longest suffix prompt lookup matches: past 4 tokens a match still says more (a reply
# quoting its prompt keeps copying); docs/adaptive-k.md has the replay behind it.
LOOKUP_MAX = 8

RUNS = frozenset({"generate", "compare", "chat"})  # the commands that run one engine and reply
ALL = frozenset(COMMANDS)
VLLM_COMMANDS = RUNS | {"bench", "serve"}


@dataclass(frozen=True)
class Setting:
    name: str  # the Python name, EngineSettings' or ChatConfig's field, the config file's key
    kind: type  # str, int, float or bool
    default: Any  # None: not set (the engine picks)
    help: str
    flags: tuple[str, ...] = ()  # on the command line: ("--k", "-k"); () for none
    commands: frozenset[str] = frozenset()  # the commands whose command line takes it
    check: Check | None = None  # (name, value) -> None or OptionError
    choices: tuple[str, ...] = ()
    parse: Callable[[Any], Any] | None = None  # also given as text, turned into the value by this
    in_engine: bool = True  # a field of EngineOptions
    in_config: bool = True  # a key of the config file
    live: bool = False  # changed in the app while it runs (keys); the others are fixed at launch
    envvar: str | None = None
    example: Any = None  # shown in the example config file when the default is None
    # Per command (CONFIG for the config file): the fields that differ there.
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def for_command(self, command: str) -> "Setting":
        return replace(self, **self.variants[command]) if command in self.variants else self

    def checked(self, value: Any) -> Any:
        """The value as this setting holds it (k: a number or "auto"), or OptionError; None is "not set"."""
        if value is None:
            return None
        if self.parse is not None:
            value = self.parse(value)
        if self.choices:
            check_choice(self.name, value, self.choices)
        if self.check is not None:
            self.check(self.name, value)
        return value

    def toml_types(self) -> tuple[type, ...]:
        """What a config file may hold for it (bool is an int to Python: never a number here)."""
        if self.parse is not None:
            return (self.kind, str)
        return (int, float) if self.kind is float else (self.kind,)


SETTINGS: tuple[Setting, ...] = (
    Setting("model", str, None, "Target: alias, local folder, .gguf or hub id.",
            ("--model", "-m"), ALL, check=check_model_name),
    Setting("draft", str, None, "Draft model (another tokenizer drafts by TLI, on the tokens both vocabularies share).",
            ("--draft", "-d"), ALL, check=check_model_name),
    Setting("vocab", str, "auto",
            "A --draft with another tokenizer: tli (the shared tokens; lossless at every temperature), slem "
            "(the draft's whole vocabulary, its text re-tokenized for the target; T = 0, TLI at T > 0), or auto "
            "(at T = 0 both tried for 8 steps each, the one with more tokens a step kept; docs/cross-vocab.md).",
            ("--vocab",), ALL, choices=VOCAB_RULES),
    Setting("method", str, "auto",
            "Where drafts come from: auto (suffix with adaptive k on a CPU, where a draft model does not pay; "
            "draft where a GPU runs the target or --draft names one), draft, ngram, or suffix "
            "(embedded engine: the prompt and past replies); medusa or eagle with --heads (embedded engine); "
            "with vLLM also eagle, eagle3, medusa, mtp.",
            ("--method",), RUNS | {"serve"}, choices=METHODS,
            variants={"serve": {"help": "vLLM's drafts: auto (= draft), draft, ngram, suffix, eagle, eagle3, medusa, mtp."}}),
    Setting("k", int, 4,
            f"Draft tokens per step, 0-{K_MAX} (0 = plain decoding), or auto: the embedded engine picks k "
            "before every step (as any k above 0 does under --method auto on a CPU).",
            ("--k", "-k"), RUNS | {"serve"}, parse=k_setting, live=True,
            variants={"serve": {"help": f"Draft tokens per step, 0-{K_MAX} (0 = plain decoding): vLLM fixes it at start."}}),
    Setting("temperature", float, 0.0, f"0 = greedy; at most {TEMPERATURE_MAX:g}.",
            ("--temperature", "-t"), RUNS, check=check_temperature_setting, live=True),
    Setting("top_p", float, 1.0, "Nucleus sampling mass, (0, 1].",
            ("--top-p",), RUNS, check=Within(0, 1, low_open=True)),
    Setting("max_tokens", int, 512, "Stop after this many tokens.",
            ("--max-tokens",), RUNS | {"bench"}, check=Within(0, low_open=True),
            variants={"bench": {"default": None, "help": "Reply budget for every case (default: the workload's)."},
                      # A chat's reply may fill what the model's context leaves; a number caps it.
                      CONFIG: {"default": None, "example": 1024,
                               "help": "Stop a reply after this many tokens (default: what the model's context leaves)."}}),
    Setting("seed", int, 0, "Seed for sampling.", ("--seed",), RUNS, check=check_seed),
    Setting("dtype", str, "auto",
            "Target precision: auto (the fastest lossless one), float32, bfloat16, float16 or int8.",
            ("--dtype",), ALL, choices=DTYPES,
            variants={"serve": {"choices": VLLM_DTYPES,
                                "help": "vLLM's dtype: auto (the model's own), float32, bfloat16 or float16."}}),
    Setting("device", str, "auto", "cpu, cuda, cuda:N, mps or auto.", ("--device",), RUNS | {"bench"},
            check=Matches(r"auto|cpu|mps|cuda(:\d+)?", "auto, cpu, cuda, cuda:N or mps")),
    Setting("lookup_min", int, 1, "ngram: shortest n-gram to match.", ("--lookup-min",), ALL, check=Within(1)),
    Setting("lookup_max", int, LOOKUP_MAX, "ngram: longest n-gram to match.", ("--lookup-max",), ALL,
            check=Within(1)),
    Setting("history_drafting", bool, True,
            "--method suffix also drafts from the replies in your history (it only proposes: the target decides every token)."),
    Setting("heads", str, None, "--method medusa / eagle on the embedded engine: a folder from `spectui heads train`.",
            ("--heads",), RUNS, example="~/.cache/spectui/heads/qwen2.5-coder-1.5b-medusa"),
    Setting("tree_width", int, 1,
            "--method medusa / eagle --heads: candidates per depth, verified as a tree in one forward (1 = a chain).",
            ("--tree-width",), RUNS, check=Within(1, TREE_WIDTH_MAX)),
    Setting("system", str, None, "A system message.", ("--system",), RUNS, in_engine=False, example="Answer briefly.",
            variants={CONFIG: {"help": "A system message for new chats."}}),
    Setting("engine", str, "auto",
            "auto (vLLM when installed with a GPU, else embedded), embedded, vllm or server.",
            ("--engine",), RUNS, choices=ENGINES,
            variants={CONFIG: {"choices": CHAT_ENGINES,
                               "help": "auto (vLLM when installed with a GPU, else embedded), embedded, vllm, "
                                       "server, or scripted (a demo, no weights)."},
                      "generate": {"choices": CHAT_ENGINES,  # the chat's demo engine, headless too
                                   "help": "auto (vLLM when installed with a GPU, else embedded), embedded, vllm, "
                                           "server, or scripted (a demo, no weights)."}}),
    Setting("backend", str, "auto",
            "The embedded engine's kernels: auto (ggml on a CPU when libllama loads and the models have GGUFs, "
            "else torch), ggml or torch.",
            ("--backend",), RUNS | {"bench"}, choices=BACKENDS),
    Setting("server", str, None, "--engine server: the URL of an OpenAI-compatible server (vLLM, llama.cpp, SGLang, ...).", ("--server",), RUNS,
            example="http://127.0.0.1:8000"),
    Setting("api_key", str, None, "--engine server: bearer token.", ("--api-key",), RUNS,
            envvar="SPECTUI_API_KEY", example="YOUR-KEY"),
    Setting("api_key_file", str, None, "--engine server: a file holding the bearer token.",
            ("--api-key-file",), RUNS, envvar="SPECTUI_API_KEY_FILE",
            example="~/.config/spectui/api-key"),
    Setting("speculative_config", str, None, "vLLM: a JSON speculative_config, passed through.",
            ("--speculative-config",), RUNS | {"serve"}, example='{"method": "ngram", "num_speculative_tokens": 4}'),
    Setting("tp", int, 1, "vLLM: tensor_parallel_size.", ("--tp",), RUNS | {"serve"}, check=Within(1)),
    Setting("draft_tp", int, None, "vLLM: the draft's tensor_parallel_size.", ("--draft-tp",), RUNS | {"serve"},
            check=Within(1), example=1),
    Setting("gpu_memory_utilization", float, 0.9, "vLLM: share of GPU memory to reserve.",
            ("--gpu-memory-utilization",), VLLM_COMMANDS, check=Within(0, 1, low_open=True)),
    Setting("max_model_len", int, None, "vLLM: longest context.", ("--max-model-len",), VLLM_COMMANDS,
            check=Within(16), example=4096),
    Setting("baseline_server", str, None, "Run the baseline on this vLLM server (no speculation) instead.",
            ("--baseline-server",), frozenset({"compare"}), in_engine=False, example="http://127.0.0.1:8001",
            variants={CONFIG: {"help": "The compare view's baseline, for engines with a fixed k."}}),
    Setting("theme", str, "dark", "dark, light, colorblind or a user theme.", ("--theme",), frozenset({"chat"}),
            in_engine=False),
    Setting("ghosts", bool, False, "Show rejected drafts from the start.", in_engine=False),
)

BY_NAME: dict[str, Setting] = {setting.name: setting for setting in SETTINGS}


def settings_for(command: str) -> list[Setting]:
    """The settings a command's command line takes, as that command declares them."""
    return [setting.for_command(command) for setting in SETTINGS if command in setting.commands and setting.flags]


def config_settings() -> list[Setting]:
    """The settings of the config file, as the chat (whose defaults it holds) declares them."""
    return [setting.for_command(CONFIG) for setting in SETTINGS if setting.in_config]


def engine_settings() -> list[Setting]:
    return [setting for setting in SETTINGS if setting.in_engine]


LIVE = tuple(setting.name for setting in SETTINGS if setting.live)
