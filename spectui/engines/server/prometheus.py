"""vLLM's speculative-decoding counters from a Prometheus text exposition (`/metrics`).

A small parser of the text format instead of prometheus_client: spectui adds no
dependency to read five series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spectui.core.events import K_MAX

# The series vLLM's SpecDecodingProm writes (vllm/v1/spec_decode/metrics.py). Counters
# are exposed with a `_total` suffix; their `_created` twins are timestamps, not counts.
NUM_DRAFTS = "vllm:spec_decode_num_drafts_total"
NUM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
NUM_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# A draft position is below k, and k is at most K_MAX: a larger `position` label is garbage,
# which would build a huge tuple, or a k that no control can hold.
MAX_POSITIONS = K_MAX


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


class PrometheusFormatError(ValueError):
    pass


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def parse_samples(text: str) -> list[Sample]:
    """Every sample line of a text exposition; comments (# HELP, # TYPE) and blanks skipped."""
    samples = []
    # Lines end at "\n" only: splitlines() also splits at "\r", "\x1e", "\u2028"..., which
    # the format leaves unescaped inside label values and HELP text.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples.append(_parse_line(line))
        except (ValueError, IndexError) as error:
            raise PrometheusFormatError(f"line {number}: {error}: {line[:80]}") from None
    return samples


def _parse_line(line: str) -> Sample:
    brace = line.find("{")
    space = line.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        name = line[:brace]
        labels, end = _parse_labels(line, brace + 1)
        rest = line[end:]
    else:
        name, _, rest = line.partition(" ")
        labels = {}
    # After the value an optional timestamp may follow; it is not needed here.
    value = rest.split()[0]
    return Sample(name, labels, float(value))


def _parse_labels(line: str, start: int) -> tuple[dict[str, str], int]:
    """Labels from just after `{`; returns them and the index after the closing `}`.

    Walked character by character: a quoted value may hold commas, braces and escaped
    quotes, so splitting on "," would cut it.
    """
    labels: dict[str, str] = {}
    i = start
    while True:
        while line[i] in " ,":
            i += 1
        if line[i] == "}":
            return labels, i + 1
        equals = line.index("=", i)
        key = line[i:equals].strip()
        i = equals + 1
        while line[i] == " ":
            i += 1
        if line[i] != '"':
            raise ValueError(f"label {key} has no quoted value")
        i += 1
        value: list[str] = []
        while line[i] != '"':
            if line[i] == "\\":
                i += 1
                value.append(_ESCAPES.get(line[i], "\\" + line[i]))
            else:
                value.append(line[i])
            i += 1
        labels[key] = "".join(value)
        i += 1


@dataclass(frozen=True)
class SpecCounters:
    """Server-wide totals of the spec_decode counters, summed over engines and models.

    A difference of two readings (`later - earlier`) is what happened in between.
    """

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: tuple[int, ...]  # one per draft position: its length is k

    @property
    def num_positions(self) -> int:
        return len(self.accepted_per_position)

    @property
    def gamma(self) -> float | None:
        """Draft acceptance rate: accepted / drafted tokens."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @property
    def per_position_acceptance(self) -> tuple[float, ...]:
        """Fraction of drafts whose i-th token was accepted (vLLM's own definition)."""
        if not self.num_drafts:
            return ()
        return tuple(accepted / self.num_drafts for accepted in self.accepted_per_position)

    def __sub__(self, earlier: "SpecCounters") -> "SpecCounters":
        width = max(self.num_positions, earlier.num_positions)
        later_positions = _padded(self.accepted_per_position, width)
        earlier_positions = _padded(earlier.accepted_per_position, width)
        return SpecCounters(
            num_drafts=self.num_drafts - earlier.num_drafts,
            num_draft_tokens=self.num_draft_tokens - earlier.num_draft_tokens,
            num_accepted_tokens=self.num_accepted_tokens - earlier.num_accepted_tokens,
            accepted_per_position=tuple(a - b for a, b in zip(later_positions, earlier_positions)),
        )

    def as_stats(self, prefix: str = "server_") -> dict:
        return {
            f"{prefix}gamma": self.gamma,
            f"{prefix}num_drafts": self.num_drafts,
            f"{prefix}num_draft_tokens": self.num_draft_tokens,
            f"{prefix}num_accepted_tokens": self.num_accepted_tokens,
            f"{prefix}accepted_per_position": list(self.accepted_per_position),
            f"{prefix}per_position_acceptance": list(self.per_position_acceptance),
        }


def _padded(values: tuple[int, ...], width: int) -> tuple[int, ...]:
    return values + (0,) * (width - len(values))


def spec_counters(samples: Iterable[Sample]) -> SpecCounters | None:
    """The spec_decode totals; None when the server exposes none (no speculation, or no stats)."""
    totals = {NUM_DRAFTS: 0.0, NUM_DRAFT_TOKENS: 0.0, NUM_ACCEPTED_TOKENS: 0.0}
    per_position: dict[int, float] = {}
    found = False
    for sample in samples:
        if sample.name in totals:
            totals[sample.name] += sample.value
            found = True
        elif sample.name == ACCEPTED_PER_POSITION and "position" in sample.labels:
            position = _position(sample.labels["position"])
            if position is None:  # not a draft position ("x", "1e9"): the engine must not crash on it
                continue
            per_position[position] = per_position.get(position, 0.0) + sample.value
            found = True
    if not found:
        return None
    width = max(per_position) + 1 if per_position else 0
    return SpecCounters(
        num_drafts=_count(totals[NUM_DRAFTS]),
        num_draft_tokens=_count(totals[NUM_DRAFT_TOKENS]),
        num_accepted_tokens=_count(totals[NUM_ACCEPTED_TOKENS]),
        accepted_per_position=tuple(_count(per_position.get(i, 0.0)) for i in range(width)),
    )


def _position(label: str) -> int | None:
    try:
        position = int(label)
    except ValueError:
        return None
    return position if 0 <= position < MAX_POSITIONS else None


def _count(total: float) -> int:
    """round() raises on NaN and ±Inf (a NaN sample, or a sum that overflowed): no count, 0."""
    return round(total) if math.isfinite(total) else 0


def is_vllm_exposition(samples: Iterable[Sample]) -> bool:
    """True when the text came from vLLM (its series all start with `vllm:`): then a missing
    spec_decode series means the server does not speculate."""
    return any(sample.name.startswith("vllm:") for sample in samples)
