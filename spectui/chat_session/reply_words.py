"""What a reply's line under it says: its figures when it ended (live or stored), what went
wrong, and, while a long prompt goes in, how far its prefill is. Plain functions, no Textual."""

from __future__ import annotations

from collections.abc import Sequence

from spectui.core.events import Step
from spectui.core.reasoning import acceptance_apart_text
from spectui.core.stats import ReplyStats
from spectui.core.words import counted


def reply_summary(stats: ReplyStats, steps: Sequence[Step] = (), decode_rate: float | None = None,
                  first_token: float | None = None) -> str:
    """decode_rate: tok/s from the first token on (ReplyTracker.decode_rate); first_token: the
    seconds to it, the prefill's, said as such rather than counted in the speed."""
    parts = [f"{counted(stats.num_tokens, 'token')} in {counted(stats.num_steps, 'step')}"]
    if stats.gamma is not None:
        parts.append(f"γ {stats.gamma:.2f}")
    if stats.tau is not None:
        parts.append(f"τ {stats.tau:.2f}")
    if decode_rate:
        parts.append(f"{decode_rate:.1f} tok/s")
    if first_token:
        parts.append(f"prefill {first_token:.2f} s")
    return " · ".join(parts) + acceptance_apart_text(steps)


def problem_text(finish_reason: str, error: str | None) -> str | None:
    if finish_reason in ("stop", "length", "edited"):
        return None
    if finish_reason == "cancelled":
        return "cancelled"
    if finish_reason == "interrupted":
        return "interrupted (the app stopped mid-reply)"
    return f"error: {error or 'unknown'}"


def prefill_detail(first: tuple[float, int], done: int, total: int, now: float) -> str:
    """A long prompt's prefill: tokens done of all, and once two reports apart say it, the
    rate and the time left. first: (when, done) of the first report."""
    text = f"{done}/{total}"
    seconds, tokens = now - first[0], done - first[1]
    if seconds <= 0 or tokens <= 0:
        return text
    rate = tokens / seconds
    return f"{text} · {rate:.0f} tok/s · {(total - done) / rate:.0f} s left"
