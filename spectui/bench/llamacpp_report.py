"""The llama.cpp anchor's part of a bench report: per category, spectui's plain and best
speeds beside llama.cpp's plain and speculative ones on the same GGUFs, each ratio paired by
round; what loading cost each. Stdlib only.

llama.cpp's draft cost c and verify cost v(k) are its own: relative to one llama.cpp
plain decode step, not spectui's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from spectui.bench.anchors.llamacpp import RUNNER
from spectui.bench.measure import BASELINE, ArmResult, CaseResult
from spectui.bench.plan import BenchResult
from spectui.bench.runs import Arm, median_of, paired_ratio
from spectui.measure.costs import timings_of

PLAIN = Arm(RUNNER, "none", 0)


def speculative_arm(case: CaseResult):
    return next((r for r in case.arms if r.arm.runner == RUNNER and r.arm.speculative), None)


def fastest_spectui(case: CaseResult) -> ArmResult | None:
    """spectui's fastest arm in the case by measured decode speed (k = 0 included)."""
    ours = [r for r in case.arms if r.arm.runner == "spectui" and r.decode_tokens_per_s]
    return max(ours, key=lambda r: r.decode_tokens_per_s or 0.0, default=None)  # each one timed


def ratio(top: ArmResult | None, bottom: ArmResult | None) -> float | None:
    if top is None or bottom is None:
        return None
    return paired_ratio(top.replies, bottom.replies)


def own_costs(case: CaseResult) -> tuple[float | None, float | None]:
    """llama.cpp's c (one drafted token) and v(k) (a full verify), over its own plain step."""
    plain, spec = case.arm(PLAIN), speculative_arm(case)
    if plain is None or spec is None:
        return None, None
    step = timings_of(reply.steps for reply in plain.replies).verify_seconds(0)  # a plain decode step
    steps = [s for reply in spec.replies for s in reply.steps[1:] if s.num_drafted]
    if not step or not steps:
        return None, None
    draft = statistics.median(s.draft_seconds / s.num_drafted for s in steps)
    full = [s.verify_seconds for s in steps if s.num_drafted == s.k]
    return draft / step, (statistics.median(full) / step if full else None)


def rows(result: BenchResult) -> list[list[str]]:
    groups: dict[tuple[str, float], list[CaseResult]] = {}
    for case in result.cases:
        if case.arm(PLAIN) is not None:
            groups.setdefault((case.case.workload.category, case.case.temperature), []).append(case)
    table = []
    for (category, temperature), cases in groups.items():
        base = [c.arm(BASELINE) for c in cases]
        plain = [c.arm(PLAIN) for c in cases]
        spec = [speculative_arm(c) for c in cases]
        best = [fastest_spectui(c) for c in cases]
        costs = [own_costs(c) for c in cases]
        labels = sorted({b.arm.label.removeprefix("spectui ") for b in best if b is not None})
        table.append([
            category, f"{temperature:g}",
            fmt(median_of(b.decode_tokens_per_s for b in base if b)),
            fmt(median_of(p.decode_tokens_per_s for p in plain if p)),
            fmt(median_of(ratio(b, p) for b, p in zip(base, plain)), "×"),
            f"{fmt(median_of(ratio(b, p) for b, p in zip(best, plain)), '×')} ({', '.join(labels) or '—'})",
            fmt(median_of(s.decode_tokens_per_s for s in spec if s)),
            spec_cell(spec, plain),
            fmt(median_of(c for c, _ in costs)), fmt(median_of(v for _, v in costs)),
            f"{fmt(median_of(b.time_to_first_token for b in base if b))} / {fmt(median_of(p.time_to_first_token for p in plain if p))}",
        ])
    return table


def spec_cell(spec: Sequence, plain: Sequence) -> str:
    gain = median_of(ratio(s, p) for s, p in zip(spec, plain))
    gamma = median_of(s.gamma for s in spec if s)
    tau = median_of(s.tau for s in spec if s)
    return fmt(gain, "×") + (f" γ {gamma:.2f}" if gamma is not None else "") + (f" τ {tau:.2f}" if tau is not None else "")


def fmt(value: float | None, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.2f}{suffix}"


HEADERS = ["category", "T", "spectui k=0 tok/s", "llama.cpp tok/s", "spectui k=0 / llama.cpp", "spectui best / llama.cpp",
           "llama.cpp spec tok/s", "llama.cpp spec / plain", "llama.cpp c", "llama.cpp v(k)", "first token s (spectui / llama.cpp)"]


def load_line(result: BenchResult) -> str:
    from spectui.measure.metrics import format_bytes

    loaded = (result.settings.get("drafters") or {}).get(RUNNER)
    if not loaded:
        return ""
    before, after, peak = loaded.get("resident_before"), loaded.get("resident_after_load"), loaded.get("resident_peak")
    draft = f" and its draft in {loaded['draft_load_seconds']:.2f} s" if loaded.get("draft_load_seconds") is not None else ""
    threads = ", ".join(str(t) for t in loaded.get("threads_used", [loaded.get("threads")]))
    return (f"llama.cpp ({threads} threads; draft p_min {loaded.get('p_min')}) loaded the target in "
            f"{loaded['load_seconds']:.2f} s{draft} by mmap; the process held {format_bytes(before)} with spectui's "
            f"engines alone, {format_bytes(after)} once llama.cpp had loaded, {format_bytes(peak)} at most after a reply "
            f"(mapped weights count as they are read).")


def markdown_section(result: BenchResult) -> str:
    table = rows(result)
    if not table:
        return ""
    lines = ["", "## llama.cpp on the same GGUFs", "",
             "Decode tokens/s, medians over rounds; every ratio is paired by round. \"spectui best\" is spectui's fastest "
             "arm of the case (its label). llama.cpp's speculation is its own (greedy drafts, at most k, none below "
             "p_min, kept while they equal the target's token); its c and v(k) are relative to its own plain step. "
             + load_line(result), "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table]
    return "\n".join(lines) + "\n"


def rich_table(result: BenchResult):
    from rich.table import Table

    table_rows = rows(result)
    if not table_rows:
        return None
    table = Table(title="llama.cpp on the same GGUFs (decode tokens/s, paired ratios)")
    for name in HEADERS:
        table.add_column(name, justify="left" if name == "category" else "right")
    for cells in table_rows:
        table.add_row(*cells)
    return table
