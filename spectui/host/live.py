"""The live settings of a chat, held once: k, adaptive k, temperature.

A key press changes them here; whoever watches follows: a running reply's Control (when its
engine reads controls between steps), the panels and bar, the k-restart logic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from spectui.core.events import Control, check_k, check_temperature

Watcher = Callable[["LiveValues", "LiveValues"], None]  # (before, after)


@dataclass(frozen=True)
class LiveValues:
    k: int
    auto: bool  # adaptive k: the engine picks each step's k, starting from `k`
    temperature: float

    def __post_init__(self) -> None:
        check_k(self.k)
        check_temperature(self.temperature)


class LiveSettings:
    """Observable LiveValues. Changed and watched on one thread (the UI's)."""

    def __init__(self, k: int = 4, auto: bool = False, temperature: float = 0.0) -> None:
        self._values = LiveValues(k, bool(auto), float(temperature))
        self._watchers: list[Watcher] = []

    @classmethod
    def from_config(cls, config) -> "LiveSettings":
        from spectui.settings.options import parse_k

        k, auto = parse_k(config.k)
        return cls(k, auto, config.temperature)

    @property
    def values(self) -> LiveValues:
        return self._values

    @property
    def k(self) -> int:
        return self._values.k

    @property
    def auto(self) -> bool:
        return self._values.auto

    @property
    def temperature(self) -> float:
        return self._values.temperature

    def update(self, **changes) -> None:
        """Change some values (checked); watchers hear of it if anything changed."""
        before = self._values
        after = replace(before, **changes)
        if after == before:
            return
        self._values = after
        for watcher in list(self._watchers):
            watcher(before, after)

    def watch(self, watcher: Watcher) -> Callable[[], None]:
        """Call watcher(before, after) after every change; returns what stops it."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher) if watcher in self._watchers else None

    def control(self, values: LiveValues | None = None) -> Control:
        """A reply's Control, starting from `values` (default: the values now)."""
        values = values or self._values
        return Control(k=values.k, temperature=values.temperature, auto=values.auto)

    def follow(self, control: Control) -> Callable[[], None]:
        """Mirror every later change into `control` (the engine reads it before each step)."""

        def mirror(before: LiveValues, after: LiveValues) -> None:
            for name in ("k", "auto", "temperature"):
                if getattr(before, name) != getattr(after, name):
                    setattr(control, name, getattr(after, name))

        return self.watch(mirror)
