"""PNG plots of a bench run (matplotlib, imported here only: the `bench` extra)."""

from __future__ import annotations

from pathlib import Path
from statistics import median as median_of  # of lists that each hold a value: the series below make none empty
from typing import TYPE_CHECKING, Any, cast

from spectui.bench.plan import BenchResult

if TYPE_CHECKING:
    from matplotlib.ticker import MaxNLocator

    from spectui.bench.measure import CaseResult


class PlotsUnavailable(RuntimeError):
    pass


def pyplot():
    try:
        import matplotlib
    except ImportError as error:
        raise PlotsUnavailable('plots need matplotlib: pip install "spectui[bench]"') from error
    matplotlib.use("Agg")  # files only; no display is needed or wanted
    import matplotlib.pyplot as plt

    return plt


def series_name(result: BenchResult, case: CaseResult) -> str:
    """The category, and the temperature when the run had more than one."""
    several = len({c.case.temperature for c in result.cases}) > 1
    return f"{case.case.workload.category} T={case.case.temperature:g}" if several else case.case.workload.category


def speedup_by_k(result: BenchResult, method: str) -> dict[str, dict[int, float]]:
    """series -> k -> median speedup over spectui k=0 (k = 0 itself is 1)."""
    series: dict[str, dict[int, list[float]]] = {}
    for case in result.cases:
        points = series.setdefault(series_name(result, case), {})
        for arm in case.arms:
            if arm.arm.runner == "spectui" and arm.arm.method in (method, "none") and not arm.arm.auto \
                    and arm.speedup is not None:
                points.setdefault(arm.arm.k, []).append(arm.speedup)
    return {category: {k: median_of(values) for k, values in sorted(points.items())}
            for category, points in series.items()}


def gamma_by_temperature(result: BenchResult, method: str, k: int) -> dict[str, dict[float, float]]:
    series: dict[str, dict[float, list[float]]] = {}
    for case in result.cases:
        arm = next((a for a in case.arms if a.arm.runner == "spectui" and a.arm.method == method and a.arm.k == k
                    and not a.arm.auto), None)
        if arm is not None and arm.gamma is not None:
            series.setdefault(case.case.workload.category, {}).setdefault(case.case.temperature, []).append(arm.gamma)
    return {category: {t: median_of(v) for t, v in sorted(points.items())} for category, points in series.items()}


def per_position(result: BenchResult, method: str, k: int) -> dict[str, list[float]]:
    """category -> acceptance at each draft position (the first case of the category)."""
    series: dict[str, list[float]] = {}
    for case in result.cases:
        arm = next((a for a in case.arms if a.arm.runner == "spectui" and a.arm.method == method and a.arm.k == k
                    and not a.arm.auto), None)
        if arm is not None and arm.per_position:
            series.setdefault(series_name(result, case), arm.per_position)
    return series


def write_plots(result: BenchResult, folder: Path, overwrite: bool = False) -> list[Path]:
    plt = pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    methods = result.settings.get("methods", [])
    ks = [k for k in result.settings.get("ks", []) if k > 0]
    show_k = max(ks) if ks else 0
    written = []
    for method in methods:
        figure, axes = plt.subplots(figsize=(8, 5))
        for category, points in speedup_by_k(result, method).items():
            axes.plot(list(points), list(points.values()), marker="o", label=category)
        axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        cast("MaxNLocator", axes.xaxis.get_major_locator()).set_params(integer=True)  # a linear axis's AutoLocator is one
        axes.set(xlabel="k (draft tokens per step)", ylabel="decode speedup over k=0",
                 title=f"spectui {method}: speedup vs k, per category")
        axes.legend(fontsize=8, ncol=2)
        written.append(save(figure, folder / f"speedup_vs_k_{method}.png", plt, overwrite))

        figure, axes = plt.subplots(figsize=(8, 5))
        for category, points in gamma_by_temperature(result, method, show_k).items():
            axes.plot(list(points), list(points.values()), marker="o", label=category)
        axes.set(xlabel="temperature", ylabel="γ (draft acceptance rate)", ylim=(0, 1.05),
                 title=f"spectui {method}, k={show_k}: γ per category vs temperature")
        axes.legend(fontsize=8, ncol=2)
        written.append(save(figure, folder / f"gamma_vs_temperature_{method}.png", plt, overwrite))

        figure, axes = plt.subplots(figsize=(8, 5))
        for category, rates in per_position(result, method, show_k).items():
            axes.plot(range(1, len(rates) + 1), rates, marker="o", label=category)
        axes.set(xlabel="draft position", ylabel="accepted (fraction of steps that drafted it)", ylim=(0, 1.05),
                 title=f"spectui {method}, k={show_k}: acceptance per position")
        axes.legend(fontsize=8, ncol=2)
        written.append(save(figure, folder / f"per_position_{method}.png", plt, overwrite))

        bars = adaptive_bars(result, method)
        if bars:
            written.append(plot_adaptive_bars(plt, bars, method, folder, overwrite))
    bars = method_bars(result)
    if len(methods) > 1 and bars:
        figure, axes = plt.subplots(figsize=(10, 5))
        names = list(bars)
        width = 0.8 / len(methods)
        for index, method in enumerate(methods):
            offset = (index - (len(methods) - 1) / 2) * width
            axes.bar([p + offset for p in range(len(names))], [bars[n].get(method, 0.0) for n in names], width, label=method)
        axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        axes.set_xticks(list(range(len(names))), names, rotation=30, ha="right", fontsize=8)
        axes.set(ylabel="decode speedup over k=0", title="spectui: each drafting method at its fastest k > 0, per category")
        axes.legend(fontsize=8)
        written.append(save(figure, folder / "methods.png", plt, overwrite))
    return written


def method_bars(result: BenchResult) -> dict[str, dict[str, float]]:
    """series -> {method: the speedup of its fastest k > 0}, medians over the cases. Unlike
    best_arm, k = 0 is left out: the bar must show a method that loses as a loss."""
    speedups: dict[str, dict[str, list[float]]] = {}
    for case in result.cases:
        for method in result.settings.get("methods", []):
            drafted = [r.speedup for r in case.arms if r.arm.runner == "spectui" and r.arm.method == method
                       and not r.arm.auto and r.arm.k > 0 and r.speedup]
            if drafted:
                speedups.setdefault(series_name(result, case), {}).setdefault(method, []).append(max(drafted))
    return {name: {method: median_of(values) for method, values in by_method.items()} for name, by_method in speedups.items()}


def adaptive_bars(result: BenchResult, method: str) -> dict[str, tuple[float, float]]:
    """series -> (the category's best fixed k's speedup, adaptive k's speedup), as the table has them."""
    from spectui.bench.report import category_auto

    groups: dict[str, list] = {}
    for case in result.cases:
        groups.setdefault(series_name(result, case), []).append(case)
    found = {name: category_auto(cases, method) for name, cases in groups.items()}
    return {name: (auto.best_speedup, auto.auto_speedup) for name, auto in found.items() if auto is not None}


def save(figure: Any, path: Path, plt: Any, overwrite: bool = False) -> Path:
    """Through the safe writer: a regular file only, an existing one replaced only with `overwrite`."""
    import io

    from spectui.core.files import write_user_file

    figure.tight_layout()
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=110)
    plt.close(figure)
    return write_user_file(path, png.getvalue(), overwrite=overwrite)


def plot_adaptive_bars(plt: Any, bars: dict, method: str, folder: Path, overwrite: bool = False) -> Path:
    """Adaptive k against each category's best fixed k, as paired bars."""
    figure, axes = plt.subplots(figsize=(9, 5))
    names = list(bars)
    width = 0.4
    positions = range(len(names))
    axes.bar([p - width / 2 for p in positions], [bars[n][0] for n in names], width, label="the category's best fixed k")
    axes.bar([p + width / 2 for p in positions], [bars[n][1] for n in names], width, label="adaptive k")
    axes.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    axes.set_xticks(list(positions), names, rotation=30, ha="right", fontsize=8)
    axes.set(ylabel="decode speedup over k=0", title=f"spectui {method}: adaptive k against the category's best fixed k")
    axes.legend(fontsize=8)
    return save(figure, folder / f"adaptive_{method}.png", plt, overwrite)
