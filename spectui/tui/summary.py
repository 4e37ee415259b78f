"""The panel's summary: speed against plain decoding, what that figure rests on, γ and tok/s.

Three lines on top of the stats panel, always in view; one line under the conversation when
the panel is put away. A speed against plain decoding is shown only when it is measured (the
chat timed plain steps, or the compare view ran them) or labelled a prediction with the α and
k it comes from. Plain functions, no Textual.
"""

from __future__ import annotations

from spectui.tui.k_words import BUSY, k_zero_short
from spectui.chat_session.stats import PanelData

LABEL, VALUE, NOTE = "label", "value", "note"


def too_short(data: PanelData) -> bool:
    """The reply ended at its first token (a /continue that added one): no step drafted, and none
    could have; "not measured yet" would say a measurement is to come."""
    return data.theory is None and data.num_steps == 1 and data.status == "idle"


def speed_vs_plain(data: PanelData) -> tuple[str, str, str]:
    """(figure, how it is known, what it rests on): "×0.92", "measured", "over k=0 steps"."""
    theory = data.theory
    if too_short(data):
        return "–", "too short to measure", "1 token: nothing drafted"
    if theory is None:
        return "–", "not measured yet", "waits for a reply with drafts"
    if theory.measured_speedup is not None:
        against = "the compare view's k=0" if "compare" in theory.measured_against \
            else f"this chat's {theory.measured_against}"  # k=0 steps only where the chat ran k = 0
        return f"×{theory.measured_speedup:.2f}", "measured", f"over {against}"
    k = f"{theory.reply.mean_k:.1f}" if theory.reply is not None else str(theory.k)
    estimated = ", v(k) est." if not theory.cost.slope_measured else ""
    return f"×{theory.speedup:.2f}", "predicted", f"from α {theory.alpha:.2f}, k {k}{estimated}"


def rate(data: PanelData) -> float | None:
    return data.rate_now if data.rate_now is not None else data.rate_reply


def gamma(data: PanelData) -> float | None:
    return data.gamma_reply if data.gamma_reply is not None else data.gamma_session


def summary_lines(data: PanelData) -> list[list[tuple[str, str]]]:
    """The three lines on top of the panel, as (text, role) parts."""
    figure, known, basis = speed_vs_plain(data)
    shown_gamma, shown_rate = gamma(data), rate(data)
    return [
        [("vs plain ", LABEL), (figure, VALUE), (f" {known}", LABEL)],
        *([[(f" {BUSY}", NOTE)]] if data.busy and data.theory is not None else []),
        [(f" {basis}", NOTE)],
        [("γ ", LABEL), ("–" if shown_gamma is None else f"{shown_gamma:.2f}", VALUE), (" · ", LABEL),
         ("–" if shown_rate is None else f"{shown_rate:.1f}", VALUE), (" tok/s", LABEL)],
    ]


def summary_line(data: PanelData, width: int | None = None) -> list[tuple[str, str]]:
    """The summary in one line, for when the panel is put away; within `width` columns the
    rest shortens first (what the figure rests on, then γ and tok/s, then how it is known):
    the busy mark and the reason for k 0 are never the part cut."""
    figure, known, basis = speed_vs_plain(data)
    rate_part = summary_lines(data)[-1]
    busy = f" ({BUSY})" if data.busy and figure != "–" else ""
    why = k_zero_short(data)  # the panel's words for it are out of view
    tail = [(" · ", LABEL), (why, NOTE)] if why else []
    if figure == "–":
        shapes = [[("vs plain ", LABEL), (known, NOTE), (" · ", LABEL), *rate_part],
                  [("vs plain ", LABEL), (known, NOTE)], [("vs plain –", LABEL)]]
    else:
        speed = [(figure, VALUE), (" vs plain ", LABEL)]
        shapes = [[*speed, (f"{known} {basis}{busy}", NOTE), (" · ", LABEL), *rate_part],
                  [*speed, (f"{known}{busy}", NOTE), (" · ", LABEL), *rate_part],
                  [*speed, (f"{known}{busy}", NOTE)],
                  [(figure, VALUE), (" vs plain", LABEL), *([(f", {BUSY}", NOTE)] if busy else [])],
                  [*speed, *([("(busy)", NOTE)] if busy else [])]]
    for shape in shapes:
        if width is None or sum(len(text) for text, _ in shape + tail) <= width:
            return shape + tail
    return shapes[-1] + tail
