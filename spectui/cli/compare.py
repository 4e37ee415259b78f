"""`spectui compare`: speculative against plain decoding, headless (a table or JSON)."""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

from spectui.cli.generate import engine_k
from spectui.core.engine import AUTO, Progress
from spectui.measure.compare import Comparison, TimedRun, compare, divergence_text
from spectui.core.events import GenerationParams
from spectui.models.fetch import rich_progress
from spectui.models.registry import ModelPair
from spectui.settings.options import EngineOptions, OptionError
from spectui.measure.run import prompt_messages, settle_before_timing

RUNS_MAX = 50


def check_compare_options(runs: int) -> None:
    if not 1 <= runs <= RUNS_MAX:
        raise OptionError("runs", f"runs must be from 1 to {RUNS_MAX}, got {runs}")


def build_pair(options: EngineOptions, models: ModelPair | None, baseline_server: str | None, progress: Progress | None = None):
    """(speculative engine, baseline engine or None when the engine runs k = 0 itself).

    vLLM fixes k when it starts, so its baseline is a second engine: the same model with no
    speculative_config, each given half the GPU memory share (both live in one process;
    only one runs at a time). --baseline-server puts the baseline on a server instead.
    """
    from dataclasses import replace

    from spectui.engines.factory import build_engine, chosen_engine

    engine_name = chosen_engine(options)
    if engine_name == "embedded" and baseline_server is None:
        return build_engine(replace(options, engine="embedded"), models, progress), None
    if engine_name == "server" and baseline_server is None:
        raise OptionError(
            "baseline_server",
            "compare on a server needs --baseline-server URL: a server of the same model without speculation",
        )
    speculative_options = replace(options, engine=engine_name)
    if engine_name == "vllm" and baseline_server is None:
        speculative_options = replace(speculative_options, gpu_memory_utilization=options.gpu_memory_utilization / 2)
    if baseline_server is not None:
        baseline_options = replace(options, engine="server", server=baseline_server, k=0, speculative_config=None)
    else:
        baseline_options = replace(speculative_options, k=0, speculative_config=None)
    baseline = build_engine(baseline_options, models, progress)
    try:
        engine = build_engine(speculative_options, models, progress)
    except BaseException:
        baseline.close()
        raise
    return engine, baseline


def run_compare(
    options: EngineOptions, prompt: str, models: ModelPair | None, system: str | None, runs: int, as_json: bool,
    baseline_server: str | None = None,
) -> int:
    err = Console(stderr=True, highlight=False)
    with rich_progress() as progress:
        engine, baseline = build_pair(options, models, baseline_server, progress)
        for built in (engine, baseline):
            if built is not None:
                settle_before_timing(built, progress)
    k = engine_k(engine, options.k)  # vLLM and servers fix k when they start; a server may not say it
    auto = options.auto_k and engine.info.capabilities.live(AUTO)
    if options.auto_k and not auto:
        err.print(f"adaptive k needs an engine that changes k between steps; {engine.info.name} runs "
                  f"{k_label(k, False)}", style="yellow")
    params = GenerationParams(max_tokens=options.max_tokens, top_p=options.top_p, seed=options.seed)

    def report(run: TimedRun) -> None:
        # A compare takes a while: one dim line per run on stderr shows it moving.
        err.print(f"{run.path} run {run.index + 1}/{runs} · {format_speed(run.tokens_per_s)} · {run.finish_reason}", style="dim")

    err.print("warm-up: one short run of each path, not counted", style="dim")
    try:
        comparison = compare(
            engine, prompt_messages(prompt, system), params, k or 0, options.temperature, runs,
            warmup=True, on_run=report, baseline=baseline, auto=auto,
        )
    finally:
        engine.close()
        if baseline is not None:
            baseline.close()
    if as_json:
        json.dump(comparison.as_dict(engine, k, baseline), sys.stdout)
        sys.stdout.write("\n")
    else:
        Console(highlight=False).print(comparison_table(comparison, k))
        Console(highlight=False).print(verdict_line(comparison))
    return exit_code(comparison, err)


def exit_code(comparison: Comparison, err: Console) -> int:
    failed = [done for run in comparison.runs if (done := run.reply.done) is not None and done.finish_reason == "error"]
    if failed:
        err.print(f"spectui: error: {failed[0].error}", style="red")
        return 1
    # Where the kernels promise lossless decoding at T = 0, a difference is a failure; elsewhere
    # it is reported (divergence_text) as the near-tie it is.
    return 1 if comparison.identical is False and comparison.promised else 0


def format_speed(tokens_per_s: float | None) -> str:
    return f"{tokens_per_s:.1f} tok/s" if tokens_per_s is not None else "– tok/s"


def k_label(k: int | None, auto: bool) -> str:
    """The speculative path's k as the user chose it: "k auto" (from k), "k=4", or unknown."""
    if auto:
        return "k auto"
    return f"k={k}" if k is not None else "k not reported"


def comparison_table(comparison: Comparison, k: int | None) -> Table:
    runs = len(comparison.of("speculative"))
    table = Table(title=f"speculative ({k_label(k, comparison.auto_k)}) vs baseline (k=0), "
                        f"median of {runs} run{'s' if runs != 1 else ''}")
    for column in ("path", "tok/s", "TTFT", "tokens", "steps", "γ"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for path in ("speculative", "baseline"):
        table.add_row(path, *path_cells(comparison.median_tokens_per_s(path), comparison.median_run(path)))
    return table


def path_cells(median_tokens_per_s: float | None, run: TimedRun | None) -> list[str]:
    """The median speed (what the speedup divides), then the median-speed run's details."""
    if run is None:
        return ["–"] * 5
    stats = run.reply.stats
    ttft = run.reply.done.time_to_first_token if run.reply.done else None
    return [
        f"{median_tokens_per_s:.1f}" if median_tokens_per_s is not None else "–",
        f"{ttft * 1000:.0f} ms" if ttft else "–",
        str(run.num_tokens),
        str(run.num_forwards),
        f"{stats.gamma:.2f}" if stats.gamma is not None else "–",
    ]


def verdict_line(comparison: Comparison) -> str:
    speedup = f"{comparison.speedup:.2f}x" if comparison.speedup is not None else "–"
    per_forward = comparison.tokens_per_forward
    parts = [f"speedup {speedup}", f"tokens per forward {per_forward:.2f}" if per_forward else "tokens per forward –"]
    if comparison.identical is True:
        parts.append("identical: yes")
    elif comparison.identical is False:
        parts.append(divergence_text(comparison))
    else:
        parts.append("identical: not expected at T > 0")
    return " · ".join(parts)
