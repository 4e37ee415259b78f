"""What every engine implements. Stdlib only, like `events`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from spectui.core.events import Control, Done, GenerationParams, Message, Step


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, declared once: callers read these instead of probing for methods."""

    live_controls: bool = False  # k, auto and temperature reach the next step of a running reply
    exact_provenance: bool = True  # sources are known, not inferred from chunk sizes
    method_switch: bool = False  # with_method(name) drafts another way over the same target
    restart_for_k: bool = False  # k is fixed when the engine starts: a new k is a new engine
    memory: bool = False  # memory() reads the engine's own footprint (its pool, its processes)
    tokenizer: bool = False  # prompt_ids(messages) gives the prompt's token ids
    restarts_itself: bool = False  # an engine process that died starts again with the next reply


@dataclass(frozen=True)
class EngineInfo:
    name: str  # "embedded", "vllm", "server"
    target: str
    draft: str | None
    method: str  # "draft", "ngram", "none"
    dtype: str
    device: str
    live_k: bool  # True when a k change applies to the next step of a running reply
    exact: bool = True  # provenance is known, not inferred


@runtime_checkable
class Engine(Protocol):
    info: EngineInfo

    def stream(
        self, messages: Sequence[Message], params: GenerationParams, control: Control
    ) -> Iterator[Step | Done]:
        """Yield one Step per target forward pass, then exactly one Done."""
        ...

    def close(self) -> None: ...
