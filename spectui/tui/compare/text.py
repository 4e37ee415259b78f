"""The compare view's numbers as text: each pane's summary, the result line, the k sweep."""

from __future__ import annotations

from spectui.core.engine import EngineInfo
from spectui.core.words import counted
from spectui.measure.compare import PATHS, Comparison, SweepPoint, TimedRun, best_k, divergence_text
from spectui.tui.charts import bar


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def head_text(info: EngineInfo, messages: list, k_label: str, temperature: float, seed: int | None, status: str) -> str:
    """The view's head: what runs, with which settings, and the prompt (the last user message)."""
    prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    prompt = prompt if len(prompt) <= 70 else prompt[:69] + "…"
    draft = f" drafted by {info.draft}" if info.method == "draft" and info.draft else ""
    return (f"Compare · {info.target}{draft} · method {info.method} · {k_label} · T = {temperature:.2f} "
            f"· seed {seed}{status}\n“{prompt}”")


def pane_summary(path: str, run: TimedRun | None, comparison: Comparison) -> str:
    if run is None:
        return "waiting for its turn"
    stats = run.reply.stats
    done = run.reply.done
    ttft = done.time_to_first_token if done is not None and done.time_to_first_token > 0 else None
    parts = [
        f"{fmt(run.tokens_per_s, '.1f')} tok/s (median {fmt(comparison.median_tokens_per_s(path), '.1f')})",
        f"TTFT {fmt(ttft, '.2f', ' s')}",
        f"{counted(stats.num_tokens, 'token')} in {counted(stats.num_steps, 'step')}",
    ]
    if path == "speculative":
        parts.append(f"γ {fmt(stats.gamma, '.2f')}")
    if not run.finished:
        parts.append(run.finish_reason or "unfinished")
    return " · ".join(parts)


def result_text(comparison: Comparison) -> tuple[str, bool]:
    """The result line and whether it reports a problem."""
    if min(len(comparison.finished_of(path)) for path in PATHS) == 0:
        return "the result shows once both paths have run", False
    rounds = len(comparison.rounds())
    parts = [
        f"speedup ×{fmt(comparison.speedup, '.2f')} (decode speed, median of {rounds} round{'s' if rounds != 1 else ''})",
        f"{fmt(comparison.tokens_per_forward, '.2f')} tokens per target forward",
    ]
    if comparison.overlapping():
        return " · ".join(parts + ["RUNS OVERLAPPED: timing invalid"]), True
    identical = comparison.identical
    if identical is None:
        parts.append("T > 0: replies may differ")
    elif identical:
        parts.append("token-identical ✓" if comparison.promised else "token-identical ✓ (measured: these kernels do not promise it)")
    else:
        parts.append(divergence_text(comparison))
        return " · ".join(parts), True
    return " · ".join(parts), False


def sweep_lines(points: list[SweepPoint], width: int = 24) -> list[str]:
    """One line per k: a bar of tokens/s, the value, γ, and the best k marked."""
    best = best_k(points)
    fastest = max((p.tokens_per_s or 0.0 for p in points), default=0.0) or 1.0
    lines = []
    for point in points:
        mark = "  ◀ best" if best is not None and point.k == best.k else ""
        gamma = "  γ –   " if point.gamma is None else f"  γ {point.gamma:.2f}"
        lines.append(
            f"k={point.k:<2} {bar((point.tokens_per_s or 0.0) / fastest, width)} "
            f"{fmt(point.tokens_per_s, '6.1f')} tok/s{gamma}{mark}"
        )
    return lines
