"""What every engine implements. Stdlib only, like `events`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from spectui.core.errors import UsageError
from spectui.core.events import Control, Event, GenerationParams, Message


# What the panel and --json say for an engine whose capabilities.reports_speculation is False.
SPECULATION_NOT_REPORTED = "not reported by this server"

# The live controls a key changes: k, the sampling temperature, adaptive k.
K, TEMPERATURE, AUTO = "k", "temperature", "auto"
ALL_CONTROLS = frozenset({K, TEMPERATURE, AUTO})
PER_REPLY_CONTROLS = frozenset({K, TEMPERATURE})  # read when a reply starts (auto needs live k)


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, declared once: callers read these instead of probing for methods."""

    # Which controls (K, TEMPERATURE, AUTO) reach the next step of a running reply; True: all
    live_controls: frozenset[str] = frozenset()
    # Which controls a reply honours from its start (k by a restart where restart_for_k); a
    # server is sent the temperature, never k
    reply_controls: frozenset[str] = PER_REPLY_CONTROLS
    exact_provenance: bool = True  # sources are known, not inferred from chunk sizes
    method_switch: bool = False  # with_method(name) drafts another way over the same target
    restart_for_k: bool = False  # k is fixed when the engine starts: a new k is a new engine
    memory: bool = False  # memory() reads the engine's own footprint (its pool, its processes)
    tokenizer: bool = False  # prompt_ids(messages) gives the prompt's token ids
    restarts_itself: bool = False  # an engine process that died starts again with the next reply
    exclusive_device: bool = False  # its memory pool takes the device: close it before another loads
    # Which tokens were drafts is reported (a server that is not vLLM may not say: its replies
    # are plain target text, or counted as a whole)
    reports_speculation: bool = True
    # At T = 0 a speculative reply is guaranteed token for token the plain one: the kernels
    # compute a verify row bit for bit as a plain step (ggml, docs/ggml.md). Elsewhere a
    # near-tie can flip (bf16, int8 dynamic, servers): replies are compared, not promised.
    greedy_identical: bool = False
    # The model's chat template takes enable_thinking (Qwen3's): GenerationParams.thinking
    # turns its thinking on or off
    thinking_switch: bool = False
    # time_decodes() times decodes of n rows on the loaded target: advise measures this machine's
    # costs on the chat's engine instead of loading the target a second time
    times_decodes: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.live_controls, bool):  # Capabilities(live_controls=True): all of them
            object.__setattr__(self, "live_controls", ALL_CONTROLS if self.live_controls else frozenset())

    def honours(self, control: str) -> bool:
        """The control acts at all: on the next step, the next reply or a restart."""
        return control in self.live_controls or control in self.reply_controls

    def live(self, control: str) -> bool:
        """The control reaches the next step of a running reply."""
        return control in self.live_controls


@dataclass(frozen=True)
class Kernels:
    """What computed the forwards, as a record names it so its numbers can be re-derived:
    the backend ("ggml", "torch", "vllm", "server", "scripted"), the CPU threads it ran (None
    where they are not this process's to say), and the library and its version."""

    backend: str
    threads: int | None = None
    library: str | None = None
    version: str | None = None
    # CUDA graphs (torch on a static cache): the widths that captured, or why none run; None
    # where the engine captures none
    graphs: str | None = None


def package_version(distribution: str) -> str | None:
    """An installed distribution's version (None when it is not installed)."""
    import importlib.metadata  # here: it costs start-up time that `spectui --help` need not pay

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class EngineInfo:
    name: str  # "embedded", "vllm", "server", "scripted"
    target: str
    draft: str | None
    method: str  # "draft", "ngram", "none", ...
    dtype: str
    device: str
    capabilities: Capabilities = Capabilities()
    # What computes the forwards and why, in a line ("ggml Q4_K_M · 2 threads",
    # "torch int8: libllama could not load: ..."); "" where the engine name says it all.
    backend: str = ""
    kernels: Kernels | None = None  # the same, for the record (None: an engine that does not say)
    # A draft with another tokenizer: how much of its vocabulary the target shares ("80% shared"); "" else.
    draft_vocab: str = ""


def with_threads(info: EngineInfo, threads: int) -> EngineInfo:
    """`info` once the engine runs on `threads` CPU threads (its record says the threads that ran)."""
    if info.kernels is None or info.kernels.threads == threads:
        return info
    return replace(info, kernels=replace(info.kernels, threads=threads))


Progress = Callable[[str, int, int], None]  # progress(stage, done, total)


@dataclass(frozen=True)
class DecodeTimings:
    """Decodes of 1..widest rows after `context_tokens` cached tokens, each width timed a few
    times, interleaved (Engine.time_decodes): what advise's cost profile is made of."""

    seconds: dict[int, list[float]]  # rows -> the seconds of each timing
    context_tokens: int
    piece: int | None  # rows a T = 0 verify runs at a time (ggml); None: any width at once
    backend: str  # what computed them ("ggml Q4_K_M · 2 threads")
    # The share of the cores (0..1) other processes kept busy meanwhile, where it was measured
    neighbour_share: float | None = None


@dataclass(frozen=True)
class MemoryReading:
    """A memory reading (spectui.measure reads them; an engine that reads its own returns one)."""

    kind: str  # "VRAM" or "RSS"
    used_bytes: int
    total_bytes: int | None = None
    source: str = ""  # "nvml", "torch.cuda", "psutil"
    draft_bytes: int | None = None  # the draft model's share, where the engine says
    pool_bytes: int | None = None  # what the engine reserved up front (vLLM's KV cache pool)
    with_children: bool = False  # RSS of this process and its children (vLLM's engine processes)


class Engine:
    """The engine protocol: `stream` and `close`, and the optional methods with the defaults of
    an engine that cannot do them. An engine overrides what its capabilities declare."""

    info: EngineInfo
    # The draft model's share of the engine's memory, where the engine knows it.
    draft_bytes: int | None = None
    # v(k)'s slope (a verify of k drafts costs 1 + slope·k plain steps) where the engine timed
    # it on this machine (ggml probes it once per GGUF and CPU); None: not measured.
    measured_verify_slope: float | None = None

    @property
    def capabilities(self) -> Capabilities:
        return self.info.capabilities

    @property
    def fixed_k(self) -> int | None:
        """The k the engine runs whatever Control says (fixed when it started), or None."""
        return None

    @property
    def context_length(self) -> int | None:
        """Prompt and reply tokens the model holds, when known."""
        return None

    def stream(
        self, messages: Sequence[Message], params: GenerationParams, control: Control
    ) -> Iterator[Event]:
        """Yield one Step per target forward pass, then exactly one Done; before the first
        Step, a long prompt's Prefill progress if the engine says it (a consumer may skip it)."""
        raise NotImplementedError

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """The prompt's token ids (capabilities.tokenizer)."""
        raise UsageError(f"the {self.info.name} engine has no tokenizer on this side")

    def with_method(self, method: str) -> "Engine":
        """The same target drafting by `method` (capabilities.method_switch)."""
        if method == self.info.method:
            return self
        raise UsageError(f"the {self.info.name} engine drafts by {self.info.method} only")

    def memory(self) -> MemoryReading | None:
        """The engine's own memory reading (a spectui.measure MemoryReading; capabilities.memory),
        or None: then a generic probe of the device answers."""
        return None

    def use_threads(self, threads: int) -> None:
        """Compute the next reply with this many threads (the cores other processes leave
        free: spectui.engines.threads); an engine that binds its own threads ignores it."""

    def settle(self, stop: Callable[[], bool] = lambda: False,
               progress: Callable[[int, int], None] | None = None) -> bool:
        """Finish, while idle, what loading put off to be ready sooner, until stop() is true:
        True once nothing is left. Replies are the same either way, only faster once settled.
        progress(done, total) counts the pieces of work."""
        return True

    def set_restart_progress(self, progress: Progress | None) -> None:
        """Who hears progress while a reply starts the engine again (capabilities.restarts_itself)."""

    def time_decodes(self, context_ids: Sequence[int], widest: int, rounds: int,
                     progress: Progress | None = None) -> DecodeTimings:
        """Time decodes of 1..widest rows (a verify's piece at most) after context_ids on the
        loaded target, `rounds` times each (capabilities.times_decodes). Between replies only."""
        raise UsageError(f"the {self.info.name} engine cannot time its decodes")

    def forget_prompts(self) -> None:
        """Drop cached prompts: the next reply is prefilled anew (a no-op without a cache)."""

    def close(self) -> None:
        """Let go of what the engine holds."""
