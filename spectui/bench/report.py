"""What a bench run found: per-category figures, the targets, a rich table, Markdown.

Every ratio divides two arms of the same case, measured in the same rounds; a category's
figure is the median over its cases (adaptive k: geometric means, against one k for the
category). Stdlib apart from rich (imported where it draws).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spectui.bench.measure import BASELINE, CaseResult
from spectui.bench.plan import TRANSFORMERS_METHOD, BenchResult
from spectui.bench.runs import Arm, median_of, paired_ratio
from spectui.settings.options import AUTO_START_K

CODE_AND_JSON = ("json", "code-python", "code-typescript", "code-go")
LOOKUP_FRIENDLY = ("summarize", "retrieval")


def anchored(methods: Sequence[str]) -> list[str]:
    """The methods transformers has an anchor for (not medusa or eagle)."""
    return [method for method in methods if method in TRANSFORMERS_METHOD]


def ratio(case: CaseResult, top: Arm, bottom: Arm) -> float | None:
    upper, lower = case.arm(top), case.arm(bottom)
    if upper is None or lower is None:
        return None
    return paired_ratio(upper.replies, lower.replies)


def best_arm(case: CaseResult, method: str):
    """spectui's fastest arm drafting by `method`, by its measured speedup over k = 0 (k = 0
    included: it may win)."""
    timed = [r for r in case.arms if r.arm.runner == "spectui" and r.arm.method in (method, "none")
             and not r.arm.auto and r.speedup is not None]
    if not any(r.arm.method == method for r in timed):
        return None  # the method did not run: k = 0 alone says nothing about it
    return max(timed, key=lambda r: r.speedup or 0.0, default=None)  # each one timed


def auto_arm(method: str) -> Arm:
    return Arm("spectui", method, AUTO_START_K, auto=True)


@dataclass
class CategoryAuto:
    """Adaptive k against one fixed k for the whole category, each a geometric mean of its
    speedups over k = 0 across the category's cases (by measured decode speed, or with every
    step replayed at its case's median costs)."""

    best_k: int
    best_speedup: float
    auto_speedup: float

    @property
    def over_best(self) -> float:
        return self.auto_speedup / self.best_speedup


def category_auto(cases: Sequence[CaseResult], method: str, by: str = "speedup") -> CategoryAuto | None:
    """The category's best fixed k is the one k (k = 0 included) a user would set for that
    kind of work: the fastest over all its cases. Picking each case's own fastest arm instead
    would compare adaptive k with the luckiest of several noisy arms per prompt, which is
    biased upwards by the noise alone."""
    per_k: dict[int, list[float]] = {}
    autos = []
    for case in cases:
        for result in case.arms:
            arm, value = result.arm, getattr(result, by)
            if arm.runner != "spectui" or not value:
                continue
            if arm.auto and arm.method == method:
                autos.append(value)
            elif not arm.auto and arm.method in (method, "none"):
                per_k.setdefault(arm.k, []).append(value)
    complete = {k: statistics.geometric_mean(values) for k, values in per_k.items() if len(values) == len(cases)}
    if len(autos) != len(cases) or 0 not in complete or not any(k > 0 for k in complete):
        return None  # the method did not run everywhere: k = 0 alone says nothing about it
    best_k = max(complete, key=lambda k: complete[k])
    return CategoryAuto(best_k, complete[best_k], statistics.geometric_mean(autos))


def with_auto(result: BenchResult) -> bool:
    return any(r.arm.auto for case in result.cases for r in case.arms)


@dataclass
class CategoryRow:
    category: str
    temperature: float
    cases: int
    baseline_tokens_per_s: float | None
    best: dict[str, tuple[int, float | None, float | None, float | None]]  # method -> (k, speedup, γ and τ at that k)
    predicted_k: dict[str, int | None]
    vs_transformers: float | None  # spectui k = 0 / transformers plain
    vs_anchor: dict[str, float | None]  # method -> spectui at anchor k / transformers' same method
    vllm_speedup: dict[str, float | None]  # method -> vLLM speculative / vLLM plain
    auto: dict[str, CategoryAuto | None]  # method -> adaptive k against the category's best fixed k
    auto_replayed: dict[str, CategoryAuto | None]  # the same, every step at its case's median costs


def category_rows(result: BenchResult) -> list[CategoryRow]:
    anchor_k = result.settings.get("anchor_k", 4)
    methods = result.settings.get("methods", [])
    groups: dict[tuple[str, float], list[CaseResult]] = {}
    for case in result.cases:
        groups.setdefault((case.case.workload.category, case.case.temperature), []).append(case)
    rows = []
    for (category, temperature), cases in groups.items():
        best = {}
        for method in methods:
            arms = [best_arm(case, method) for case in cases]
            ks = [arm.arm.k for arm in arms if arm is not None]
            best[method] = (
                statistics.median_low(ks) if ks else 0,
                median_of(arm.speedup for arm in arms if arm is not None),
                median_of(arm.gamma for arm in arms if arm is not None),
                median_of(arm.tau for arm in arms if arm is not None),
            )
        rows.append(CategoryRow(
            category=category,
            temperature=temperature,
            cases=len(cases),
            baseline_tokens_per_s=median_of(arm.decode_tokens_per_s for c in cases if (arm := c.arm(BASELINE))),
            best=best,
            predicted_k={m: statistics.median_low(ks) if (ks := [c.best[m]["predicted_k"] for c in cases
                         if "predicted_k" in c.best.get(m, {})]) else None for m in methods},
            vs_transformers=median_of(ratio(c, BASELINE, Arm("transformers", "none", 0)) for c in cases),
            vs_anchor={m: median_of(ratio(c, Arm("spectui", m, anchor_k), Arm("transformers", TRANSFORMERS_METHOD[m], anchor_k))
                                    for c in cases) for m in anchored(methods)},
            vllm_speedup={m: median_of(ratio(c, Arm("vllm", m, anchor_k), Arm("vllm", "none", 0)) for c in cases)
                          for m in methods},
            auto={m: category_auto(cases, m) for m in methods},
            auto_replayed={m: category_auto(cases, m, "replayed_speedup") for m in methods},
        ))
    return rows


@dataclass
class Target:
    claim: str
    goal: float
    measured: float | None

    @property
    def met(self) -> bool | None:
        return None if self.measured is None else self.measured >= self.goal


def targets(result: BenchResult) -> list[Target]:
    """The issue's targets, each a median over the cases it names."""
    anchor_k = result.settings.get("anchor_k", 4)
    greedy = [c for c in result.cases if c.case.temperature == 0]

    def best_speedup(categories: Sequence[str], method: str) -> float | None:
        arms = [best_arm(c, method) for c in result.cases if c.case.workload.category in categories]
        return median_of(arm.speedup for arm in arms if arm is not None)

    def best_config_speedup(categories: Sequence[str]) -> float | None:
        """The issue's "best speculative config": per case, the fastest arm of any method run."""
        methods = result.settings.get("methods", [])
        per_case = [[arm.speedup for m in methods if (arm := best_arm(c, m)) is not None and arm.speedup is not None]
                    for c in result.cases if c.case.workload.category in categories]
        return median_of(max(speedups) for speedups in per_case if speedups)

    rows = category_rows(result)
    adaptive = []
    if with_auto(result):
        for method in result.settings.get("methods", []):
            for figures, how in (("auto", ""), ("auto_replayed", ", replayed")):
                found = [auto for row in rows if (auto := getattr(row, figures)[method]) is not None]
                worst_best = [auto.over_best for auto in found]
                worst_plain = [auto.auto_speedup for auto in found]
                adaptive += [
                    Target(f"adaptive k ({method}) vs the best fixed k, worst category{how}", 0.95, min(worst_best, default=None)),
                    Target(f"adaptive k ({method}) vs k=0, worst category{how}", 0.97, min(worst_plain, default=None)),
                ]
    return adaptive + [
        Target("spectui k=0 vs transformers greedy generate", 1.00,
               median_of(ratio(c, BASELINE, Arm("transformers", "none", 0)) for c in greedy)),
        Target(f"spectui draft vs transformers assisted generation, k={anchor_k}", 1.25,
               median_of(ratio(c, Arm("spectui", "draft", anchor_k), Arm("transformers", "assisted", anchor_k))
                         for c in result.cases)),
        Target(f"spectui n-gram vs transformers prompt lookup, k={anchor_k}", 1.00,
               median_of(ratio(c, Arm("spectui", "ngram", anchor_k), Arm("transformers", "prompt-lookup", anchor_k))
                         for c in result.cases)),
        Target("spectui best draft k vs its k=0, code and JSON", 1.5, best_speedup(CODE_AND_JSON, "draft")),
        *([Target("spectui best config (any method, any k) vs its k=0, code and JSON", 1.5,
                  best_config_speedup(CODE_AND_JSON))] if len(result.settings.get("methods", [])) > 1 else []),
        Target("spectui best n-gram k vs its k=0, summarize and retrieval", 2.5, best_speedup(LOOKUP_FRIENDLY, "ngram")),
        # adaptive k is a config a user picks too (-k auto), and prompt lookup is its best case:
        # it verifies as many drafts as each match's length has earned
        *([Target("spectui n-gram with adaptive k vs its k=0, summarize and retrieval", 2.5,
                  median_of(ratio(c, auto_arm("ngram"), BASELINE) for c in result.cases
                            if c.case.workload.category in LOOKUP_FRIENDLY))]
          if with_auto(result) and "ngram" in result.settings.get("methods", []) else []),
    ]


def fmt(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def auto_cell(auto: CategoryAuto | None) -> str:
    return "—" if auto is None else f"{auto.over_best:.2f}× k={auto.best_k} / {auto.auto_speedup:.2f}×"


def row_cells(row: CategoryRow, methods: Sequence[str], with_vllm: bool, with_adaptive: bool = False) -> list[str]:
    cells = [row.category, f"{row.temperature:g}", fmt(row.baseline_tokens_per_s, ".2f")]
    for method in methods:
        k, gain, gamma, tau = row.best[method]
        cells.append(f"k={k} {fmt(gain, '.2f', '×')}" + (f" γ {gamma:.2f}" if gamma is not None else "")
                     + (f" τ {tau:.2f}" if tau is not None and k > 0 else ""))
        cells.append(str(row.predicted_k.get(method) if row.predicted_k.get(method) is not None else "—"))
    cells.append(fmt(row.vs_transformers, ".2f", "×"))
    cells += [fmt(row.vs_anchor[m], ".2f", "×") for m in anchored(methods)]
    if with_vllm:
        cells += [fmt(row.vllm_speedup[m], ".2f", "×") for m in methods]
    if with_adaptive:
        cells += [f"{auto_cell(row.auto[m])} (replayed {auto_cell(row.auto_replayed[m])})" for m in methods]
    return cells


def headers(methods: Sequence[str], anchor_k: int, with_vllm: bool, with_adaptive: bool = False) -> list[str]:
    names = ["category", "T", "k=0 tok/s"]
    for method in methods:
        names += [f"best {method}", "model's k"]
    names.append("k=0 / HF greedy")
    names += [f"{method} / HF {TRANSFORMERS_METHOD[method]} (k={anchor_k})" for method in anchored(methods)]
    if with_vllm:
        names += [f"vLLM {method} / plain" for method in methods]
    if with_adaptive:
        names += [f"auto {method} / the category's best fixed k, / k=0" for method in methods]
    return names


def with_vllm(result: BenchResult) -> bool:
    return "vllm" in result.settings.get("runners", [])


DRAFTER_HEADERS = ["method", "drafter", "weights in memory", "RSS added at load", "KV cache per 1k tokens", "on disk", "training"]


def drafter_rows(result: BenchResult) -> list[list[str]]:
    """What each method's drafter costs: the memory column of the seed's comparison, measured."""
    from spectui.measure.metrics import format_bytes

    rows = []
    for method, cost in (result.settings.get("drafters") or {}).items():
        if method not in result.settings.get("methods", []):
            continue
        training = cost.get("training") or {}
        trained = (f"{training['steps']} steps, {training['seconds'] / 60:.1f} min, {training.get('tokens', 0):,} tokens"
                   f" ({training.get('suite', '?')} prompts)" if "steps" in training and "seconds" in training else "—")
        kv = cost.get("kv_bytes_per_token")
        resident = cost.get("resident_bytes")
        # freed pages the drafter's load reused can make the process shrink: say so, signed
        rss = f"−{format_bytes(-resident)}" if resident is not None and resident < 0 else format_bytes(resident)
        name = (cost.get("name") or "—").replace(str(Path.home()), "~", 1)
        rows.append([
            method, name, format_bytes(cost["weights_bytes"]) if "weights_bytes" in cost else "—", rss,
            format_bytes(kv * 1000) if kv else "—", format_bytes(cost.get("file_bytes")) if cost.get("file_bytes") else "—", trained,
        ])
    return rows


def rich_tables(result: BenchResult):
    from rich.table import Table

    methods = result.settings.get("methods", [])
    anchor_k = result.settings.get("anchor_k", 4)
    table = Table(title="speedup over spectui k=0 (decode tokens/s, medians)")
    for name in headers(methods, anchor_k, with_vllm(result), with_auto(result)):
        table.add_column(name, justify="left" if name == "category" else "right")
    for row in category_rows(result):
        table.add_row(*row_cells(row, methods, with_vllm(result), with_auto(result)))
    goals = Table(title="targets")
    for name in ("claim", "goal", "measured", "met"):
        goals.add_column(name)
    for target in targets(result):
        met = {True: "[green]yes[/]", False: "[red]no[/]", None: "not run"}[target.met]
        goals.add_row(target.claim, f"≥ {target.goal:.2f}×", fmt(target.measured, ".2f", "×"), met)
    drafters = Table(title="what each drafter costs")
    for name in DRAFTER_HEADERS:
        drafters.add_column(name)
    for cells in drafter_rows(result):
        drafters.add_row(*cells)
    return (table, goals, drafters) if drafters.row_count else (table, goals)


ADAPTIVE_NOTE = (
    " Adaptive k is compared with one fixed k per category, the one (k = 0 included) whose "
    "speedups over k = 0 have the highest geometric mean over the category's prompts, as a user "
    "would set k for that kind of work; each prompt's own fastest arm would be the luckiest of "
    "several noisy measurements. Both sides of that ratio are geometric means over the prompts."
    " \"Replayed\" ratios charge every step of an arm at the case's median cost for its kind (a "
    "verify of n drafts, one drafted token, a draft model's catch-up after plain steps): each arm's "
    "own choices and acceptances, without the machine's moment-to-moment speed, which moves two "
    "rounds of one arm by more than the 5% the adaptive targets ask about."
)


def prefill_note(result: BenchResult) -> str:
    """What reading the prompt costs a draft model: it happens before the first token."""
    gaps = []
    for case in result.cases:
        base = case.arm(BASELINE)
        drafting = median_of(r.time_to_first_token for r in case.arms
                             if r.arm.runner == "spectui" and r.arm.method == "draft" and r.arm.speculative)
        if base is not None and base.time_to_first_token is not None and drafting is not None:
            gaps.append(drafting - base.time_to_first_token)
    extra = median_of(gaps)
    if extra is None:
        return ""
    return (f"A draft model reads the prompt while the target prefills it (as vLLM does), so its arms "
            f"start later: time to first token +{extra:.2f} s over k = 0 in the median case. ")


def markdown(result: BenchResult, command: str) -> str:
    methods = result.settings.get("methods", [])
    anchor_k = result.settings.get("anchor_k", 4)
    vllm = with_vllm(result)
    adaptive = with_auto(result)
    names = headers(methods, anchor_k, vllm, adaptive)
    lines = [
        "# spectui bench",
        "",
        f"Reproduce: `{command}`",
        "",
        f"Machine: {', '.join(f'{k} {v}' for k, v in result.machine.items())}. "
        f"Settings: {', '.join(f'{k} {v}' for k, v in result.settings.items() if k not in ('arms', 'drafters'))}. "
        f"{len(result.cases)} cases × {len(result.settings.get('arms', []))} arms × "
        f"{result.settings.get('repeats')} rounds in {result.seconds / 60:.0f} min.",
        "",
        "Speed is decode tokens/s (after the first token), the median over rounds whose order "
        "alternates; each ratio is the median over the case's rounds of two arms' replies in the "
        "same round, so a machine that slows for a while slows both sides of it. " + prefill_note(result) +
        "\"model's k\" is the best k that S(k) = E(α,k) / (k·c + v(k)) predicts from the α, draft cost c "
        "and verify cost v measured in the case." + (ADAPTIVE_NOTE if adaptive else ""),
        "",
        "## Targets",
        "",
        "| claim | goal | measured | met |",
        "|---|---|---|---|",
    ]
    for target in targets(result):
        met = {True: "yes", False: "**no**", None: "not run"}[target.met]
        lines.append(f"| {target.claim} | ≥ {target.goal:.2f}× | {fmt(target.measured, '.2f', '×')} | {met} |")
    lines += ["", "## Per category", "", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in category_rows(result):
        lines.append("| " + " | ".join(row_cells(row, methods, vllm, adaptive)) + " |")
    drafters = drafter_rows(result)
    if drafters:
        lines += ["", "## What each drafter costs", "",
                  "Weights are counted from the drafter's tensors (packed int8 at its packed size); RSS is the "
                  "process's resident memory before and after it loaded, which reused freed pages can make "
                  "smaller than the weights; a draft model's KV cache grows with the reply on top of them. Heads are trained by `spectui heads train` "
                  "on the target's replies to workload prompts: the train prompts are the full suite less the "
                  "quick one, so a quick bench measures heads on prompts they never saw.", "",
                  "| " + " | ".join(DRAFTER_HEADERS) + " |", "|" + "---|" * len(DRAFTER_HEADERS)]
        lines += ["| " + " | ".join(cells) + " |" for cells in drafters]
    return "\n".join(lines) + "\n"
