"""Speculation's costs in words: why adaptive k sits at 0, what would pay, and what the
first screen's "watch it" k costs on this machine. Plain functions, no Textual."""

from __future__ import annotations

from spectui.core.events import NOTHING_TO_COPY
from spectui.chat_session.stats import PanelData

WHAT_PAYS = "What pays: a reply that copies text the model has seen: attach a file and ask for an edit."
NOT_MEASURED = "cost not yet measured"
BUSY = "busy machine: not comparable"  # a figure timed while other processes held the cores


def verify_cost(k: int, slope: float) -> float:
    """A verify of k drafts and one more token, in plain decoding steps: v(k) = 1 + slope·k."""
    return 1.0 + slope * k


def measured_slope(data: PanelData | None, engine_slope: float | None) -> float | None:
    """v(k)'s slope as measured here: this chat's verify steps at two k or more, else the
    engine's own timing (ggml's at load); None when neither measured it."""
    theory = data.theory if data is not None else None
    if theory is not None and theory.cost.slope_measured:
        return theory.cost.verify_slope
    return engine_slope


def verify_words(k: int, slope: float | None) -> str:
    """"a verify of 5 costs 2.7 steps here", or that it is not measured yet."""
    if slope is None:
        return NOT_MEASURED
    return f"a verify of {k + 1} costs {verify_cost(k, slope):.1f} steps here"


def k_zero_short(data: PanelData) -> str | None:
    """The k 0 reason in a few words, for the one-line summary; None unless adaptive k chose 0."""
    auto = data.auto
    if auto is None or auto.k != 0:
        return None
    return "k 0: nothing to copy yet" if auto.reason.startswith(NOTHING_TO_COPY) else "k 0: drafting does not pay here"


def k_zero_words(data: PanelData, engine_slope: float | None = None) -> list[str]:
    """Why adaptive k chose k 0, and what would pay; nothing when it chose to draft."""
    auto = data.auto
    if auto is None or auto.k != 0:
        return []
    if auto.reason.startswith(NOTHING_TO_COPY):
        why = "k 0: nothing to copy from yet: the reply repeats no text the model has seen."
    else:
        facts = [] if data.gamma_reply is None else [f"drafts kept {data.gamma_reply:.0%}"]
        slope = measured_slope(data, engine_slope)
        if slope is not None:  # the chat's own timing of it, on a busy machine, is said to be
            timed_busy = data.busy and data.theory is not None and data.theory.cost.slope_measured
            facts.append(verify_words(4, slope) + (f" ({BUSY})" if timed_busy else ""))
        why = "k 0: drafting costs more than it saves here" + "".join(f"; {fact}" for fact in facts) + "."
    return [why, WHAT_PAYS]

