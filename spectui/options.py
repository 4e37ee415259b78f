"""Engine options shared by generate, chat, compare and bench, checked once."""

from __future__ import annotations

from dataclasses import dataclass, replace

from spectui.errors import UsageError
from spectui.events import K_MAX


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
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    dtype: str = "auto"
    device: str = "auto"
    lookup_min: int = 1
    lookup_max: int = 4

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
        if self.method not in ("draft", "ngram"):
            raise OptionError("method", f"method must be draft or ngram, got {self.method!r}")

    def with_k(self, k: int) -> "EngineOptions":
        return replace(self, k=k)
