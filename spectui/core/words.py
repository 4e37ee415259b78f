"""Counts in words: "1 token", "2 tokens" (a summary that said "1 tokens in 1 steps", issue 59)."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None, *, thousands: bool = False) -> str:
    """`count` and `noun`, the noun singular for exactly one (plural: where it is not noun + "s");
    thousands: the count with its separators (1,024)."""
    number = f"{count:,}" if thousands else str(count)
    return f"{number} {noun if count == 1 else plural or noun + 's'}"
