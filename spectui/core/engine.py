"""What every engine implements. Stdlib only, like `events`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from spectui.core.events import Control, Done, GenerationParams, Message, Step


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
