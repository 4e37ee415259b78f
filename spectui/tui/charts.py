"""Text charts for narrow panels: a sparkline and a horizontal bar. Plain functions."""

from __future__ import annotations

from collections.abc import Sequence

SPARK_LEVELS = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"


def bucket_means(values: Sequence[float | None], width: int) -> list[float | None]:
    """At most `width` values: consecutive buckets averaged (None where a bucket is empty)."""
    if width <= 0:
        return []
    if len(values) <= width:
        return list(values)
    buckets: list[float | None] = []
    for b in range(width):
        start = b * len(values) // width
        end = (b + 1) * len(values) // width
        known = [v for v in values[start:end] if v is not None]
        buckets.append(sum(known) / len(known) if known else None)
    return buckets


def sparkline(values: Sequence[float | None], width: int) -> str:
    """Values in [0, 1] as block heights; a step with nothing drafted is a gap."""
    cells = []
    for value in bucket_means(values, width):
        if value is None:
            cells.append(" ")
        else:
            level = round(min(max(value, 0.0), 1.0) * (len(SPARK_LEVELS) - 1))
            cells.append(SPARK_LEVELS[level])
    return "".join(cells)


def bar(fraction: float, width: int) -> str:
    """A bar of `width` cells filled to `fraction` in eighths of a cell."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part and full < width else "")
    return text.ljust(width)
