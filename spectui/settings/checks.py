"""The checks every setting's value goes through, wherever it comes from: the command line,
the config file, the bench's lists. k and temperature follow core's rules (what `Control`
enforces when a key changes them), worded for the user."""

from __future__ import annotations

import math
import re
from typing import TypeGuard
from collections.abc import Callable
from dataclasses import dataclass

from spectui.core.errors import UsageError
from spectui.core.events import K_MAX, check_k, check_temperature

AUTO_K = "auto"
AUTO_START_K = 4  # where adaptive k starts before it has measured anything


class OptionError(UsageError):
    """An option out of range; `setting` names it so a config file can point at its line."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


Check = Callable[[str, object], None]  # (setting name, value) -> None, or OptionError


def parse_k(value: int | str) -> tuple[int, bool]:
    """(k, adaptive) from a number of draft tokens or "auto"."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO_K:
            return AUTO_START_K, True
        if re.fullmatch(r"-?\d+", text):
            value = int(text)
    try:
        return check_k(value), False  # type: ignore[arg-type]  # a non-numeric string: check_k refuses it, said below
    except ValueError:
        raise OptionError("k", f"k must be from 0 to {K_MAX} or auto, got {value!r}") from None


def k_setting(value: int | str | None) -> int | str | None:
    """A k as the config file holds it: a number, "auto", or None (not given)."""
    if value is None:
        return None
    k, auto = parse_k(value)
    return AUTO_K if auto else k


def check_temperature_setting(name: str, value: object) -> None:
    try:
        check_temperature(value)  # type: ignore[arg-type]  # any config value: check_temperature refuses a non-number
    except ValueError as error:
        raise OptionError(name, str(error)) from None


@dataclass(frozen=True)
class Within:
    """A numeric range; an open end excludes its bound, a missing one is unbounded."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def __call__(self, name: str, value: object) -> None:
        if not (self._number(value) and self._above_low(value) and (self.high is None or value <= self.high)):
            raise OptionError(name, f"{name} must be {self.rule()}, got {value!r}")

    @staticmethod
    def _number(value: object) -> TypeGuard[float]:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    def _above_low(self, value: float) -> bool:
        return self.low is None or (value > self.low if self.low_open else value >= self.low)

    def rule(self) -> str:
        if self.low is not None and self.high is not None:
            if self.low_open:
                return f"in ({self.low:g}, {self.high:g}]"
            return f"from {self.low:g} to {self.high:g}"
        if self.low is not None:
            return f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
        return f"<= {self.high:g}"


@dataclass(frozen=True)
class Matches:
    """A text that matches a pattern; `shape` says which in the message."""

    pattern: str
    shape: str

    def __call__(self, name: str, value: object) -> None:
        if not isinstance(value, str) or not re.fullmatch(self.pattern, value):
            raise OptionError(name, f"{name} must be {self.shape}, got {value!r}")


SEED_LIMIT = 2**63  # torch and vLLM take a signed 64-bit seed: 2**64 loaded the models, then overflowed


def check_seed(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < SEED_LIMIT:
        raise OptionError(name, f"{name} must be an integer from 0 to 2**63 - 1, got {value!r}")


def check_model_name(name: str, value: object) -> None:
    """An empty name (-m "") is a mistake, not a request for the default pair."""
    if not isinstance(value, str) or not value.strip():
        raise OptionError(name, f"{name} must name a model (an alias, a folder, a .gguf file or a hub id), got {value!r}")


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise OptionError(name, f"{name} must be one of {', '.join(choices)}, got {value!r}")


def check_temperature_list(text: str) -> list[float]:
    """A comma list of temperatures, each under the one rule."""
    try:
        values = [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        values = []
    if not values:
        raise OptionError("temperatures", f"--temperatures takes a comma list of numbers; got {text!r}")
    for value in values:
        check_temperature_setting("temperature", value)
    return values


def check_k_list(text: str) -> tuple[list[int], bool]:
    """The fixed ks of a comma list, and whether "auto" (adaptive k) is among them."""
    try:
        parsed = [parse_k(item) for item in text.split(",") if item.strip()]
    except OptionError:
        parsed = []
    if not parsed:
        raise OptionError("k", f"--k takes a comma list of k from 0 to {K_MAX} or auto, e.g. 0,2,4,auto; got {text!r}")
    return sorted({k for k, adaptive in parsed if not adaptive}), any(adaptive for _, adaptive in parsed)
