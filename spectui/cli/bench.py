"""`spectui bench`: the workload suite through spectui and its anchors, in one run."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.bench.measure import Case, Runner
from spectui.bench.plan import (
    METHODS, RUNNERS, BenchOptions, BenchResult, default_vllm_methods, plan_arms, plan_cases, run_bench,
)
from spectui.bench.runs import Arm, ArmReply
from spectui.bench.workloads import ALL_CATEGORIES, suite
from spectui.core.engine import Engine, Progress
from spectui.core.errors import SpectuiError, UsageError
from spectui.core.events import K_MAX
from spectui.models.registry import ModelPair
from spectui.settings.checks import OptionError, check_k_list, check_temperature_list
from spectui.settings.options import EngineOptions

if TYPE_CHECKING:  # rich loads when the bench runs
    from rich.console import Console

REPEATS_MAX = 20


def parse_list(name: str, text: str, allowed: tuple[str, ...]) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise OptionError(name, f"--{name} takes a comma list of {', '.join(allowed)}; got {text!r}")
    return items


def build_runners(options: EngineOptions, models: ModelPair, bench: BenchOptions, progress: Progress) -> tuple[dict, list, dict]:
    """{runner name: callable(arm, messages, params, temperature)}, the engines to close and
    {method: what its drafter costs in memory}."""
    from spectui.bench.drafters import add_drafters
    from spectui.bench.runners import TransformersRunner, run_engine
    from spectui.engines.torch_backend.build import build_embedded_engine, checked_draft_vocab
    from spectui.measure.run import settle_before_timing

    from spectui.bench.drafters import add_ggml_drafters
    from spectui.engines.factory import engine_choice
    from spectui.engines.ggml.build import BackendChoice, build_ggml_engine

    target_options = replace(options, engine="embedded", method="ngram", heads=None, tree_width=1)
    runner_names, methods, anchor_k, vllm_methods, heads = bench.runners, bench.methods, bench.anchor_k, bench.vllm_methods, bench.heads
    # transformers' generate and trained heads need torch's models
    on_torch = "transformers" in runner_names or bool(heads) or options.backend == "torch"
    # the backend the engine's own choice gives the heaviest method asked for (a draft model needs its GGUF too)
    heaviest = replace(target_options, method="draft" if "draft" in methods else "ngram")
    if not on_torch and engine_choice(heaviest, models).backend == BackendChoice("ggml"):
        engine = build_ggml_engine(target_options, models, progress)
        drafters = add_ggml_drafters(engine, models, methods, progress, options.vocab)
    else:
        if "draft" in methods:  # a draft that cannot pair with the target: one line, before anything loads
            checked_draft_vocab(models.target, models.draft_model(), progress)
        # The target alone first, so that each drafter's memory is measured as it loads.
        # Heads read hidden states a static cache does not keep: then every arm runs on the dynamic one.
        engine = build_embedded_engine(replace(target_options, backend="torch"), models, progress,
                                       static=False if heads else None)
        drafters = add_drafters(engine, models, methods, heads or {}, progress)
    settle_before_timing(engine, progress)
    engines = [engine]
    runners: dict[str, Runner] = {"spectui": lambda arm, *rest: run_engine(engine, arm, *rest)}
    if "transformers" in runner_names:
        anchor = TransformersRunner(engine)
        runners["transformers"] = anchor.run
    if "vllm" in runner_names:
        by_method = vllm_engines(options, models, default_vllm_methods(methods) if vllm_methods is None else vllm_methods,
                                 anchor_k, progress)
        engines += by_method.values()
        runners["vllm"] = lambda arm, *rest: run_engine(by_method[arm.method], arm, *rest)
    if "llamacpp" in runner_names:  # llama.cpp on the same GGUFs: spectui.bench.anchors.llamacpp
        from spectui.bench.anchors.llamacpp import add_llamacpp

        runners["llamacpp"] = add_llamacpp(engine, models, methods, engines, drafters, progress)
    return runners, engines, drafters


def vllm_engines(options: EngineOptions, models: ModelPair, vllm_methods: list[str], anchor_k: int,
                 progress: Progress) -> dict[str, Engine]:
    """vLLM fixes k when it starts: {method: its engine}, and "none": one without speculation,
    the GPU shared between them."""
    from spectui.engines.vllm.build import build_vllm_engine

    share = options.gpu_memory_utilization / (len(vllm_methods) + 1)
    by_method = {}
    for method in ("none", *vllm_methods):
        k = 0 if method == "none" else anchor_k
        vllm_options = replace(options, engine="vllm", method=method if method != "none" else (vllm_methods or ["ngram"])[0], k=k,
                               dtype="auto" if options.dtype == "int8" else options.dtype,
                               gpu_memory_utilization=share)
        by_method[method] = build_vllm_engine(vllm_options, models, progress)
    return by_method


def run_with_progress(err: Console, cases: list[Case], arms: list[Arm], runners: dict[str, Runner], repeats: int, settings: dict,
                      json_path: Path | None) -> BenchResult:
    """Warm up, then every round of every case under one bar; the JSON rewritten after each case."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    total = len(cases) * len(arms) * repeats
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn(), console=err)
    try:
        with bar:
            task = bar.add_task("warm-up", total=total)
            warm_up(runners, arms, cases[0])

            def on_reply(case: Case, reply: ArmReply) -> None:
                speed = reply.decode_tokens_per_s
                bar.update(task, advance=1, description=f"{case.workload.name} T={case.temperature:g} "
                           f"{reply.arm.label}: {speed:.1f} tok/s" if speed else case.workload.name)

            return run_bench(cases, arms, runners, repeats, settings, on_reply,
                             on_case=lambda partial: write_json(partial, json_path))
    except Exception as error:  # a runner that fails: one line, not the anchors' stack
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise SpectuiError(f"bench stopped: {type(error).__name__}: {first}") from error


def run_bench_command(options: EngineOptions, bench: BenchOptions, heads: list[Path] | None = None,
                      vllm_methods: str | None = None) -> int:
    """The checked options run on the workload suite (--history: spectui.cli.bench_history)."""
    from spectui.bench.drafters import heads_by_method
    from spectui.bench.plan import VLLM_METHODS
    from spectui.models.registry import resolve_pair

    heads_folders = heads_by_method(list(heads or []), bench.methods)
    models = resolve_pair(options.model, options.draft)  # the bench runs its engines here
    bench = replace(bench, heads=heads_folders,
                    vllm_methods=parse_list("vllm-methods", vllm_methods, VLLM_METHODS) if vllm_methods else None)
    return run_suite(options, models, bench)


def run_suite(options: EngineOptions, models: ModelPair, bench: BenchOptions) -> int:
    from rich.console import Console

    # Imported before the run, which can last an hour: the report must be the code it started with.
    import spectui.bench.plots  # noqa: F401
    import spectui.bench.report  # noqa: F401
    from spectui.bench.contended import contend, start_contention
    from spectui.bench.conversations import fill_case_replies
    from spectui.models.fetch import rich_progress

    err = Console(stderr=True, highlight=False)
    workloads = [w for w in suite(bench.suite) if bench.categories is None or w.category in bench.categories]
    if bench.max_tokens is not None:
        workloads = [replace(w, max_tokens=bench.max_tokens) for w in workloads]
    cases = plan_cases(workloads, bench.temperatures)
    arms = plan_arms(bench.runners, bench.methods, sorted({0, bench.anchor_k, *bench.ks}), bench.anchor_k, bench.auto,
                     bench.vllm_methods)
    neighbour = start_contention(bench.contended)  # one busy process beside the run: spectui.bench.contended
    with rich_progress() as progress:
        runners, engines, drafters = build_runners(options, models, bench, progress)
    runners = contend(runners, engines, neighbour)
    cases = fill_case_replies(cases, engines[0])  # a conversation's earlier turns: the target's own replies
    settings = run_settings(bench, engines[0], drafters)
    try:
        result = run_with_progress(err, cases, arms, runners, bench.repeats, settings, bench.json_path)
    finally:
        for engine in engines:
            engine.close()
    if bench.json_path is not None:
        err.print(f"wrote {bench.json_path}")
    report_outputs(result, bench.markdown_path, bench.plots_dir, settings["command"], bench.force)
    return 0


def run_settings(bench: BenchOptions, engine: Engine, drafters: dict) -> dict:
    """What the saved run says it ran (its JSON's "settings"; the report reads them back)."""
    return {"suite": bench.suite, "model": engine.info.target, "draft": drafters.get("draft", {}).get("name"),
            "drafters": drafters, "dtype": engine.info.dtype, "backend": engine.info.backend or "torch",
            "runners": bench.runners, "methods": bench.methods,
            "vllm_methods": bench.vllm_methods or default_vllm_methods(bench.methods), "ks": bench.ks,
            "auto": bench.auto, "anchor_k": bench.anchor_k, "contended": bench.contended,
            "temperatures": bench.temperatures, "max_tokens": bench.max_tokens, "categories": bench.categories,
            "command": "spectui " + " ".join(shlex.quote(a) for a in sys.argv[1:])}


def check_outputs(json_path: Path | None, markdown_path: Path | None, force: bool) -> None:
    """--json and --markdown refused before anything loads or runs (spectui.core.files'
    safe writer): a device, FIFO or folder always; an existing file unless --force."""
    from spectui.core.files import WouldOverwrite, check_user_file, reason

    for flag, path in (("--json", json_path), ("--markdown", markdown_path)):
        if path is None:
            continue
        try:
            check_user_file(path, overwrite=force)
        except WouldOverwrite:
            raise UsageError(f"{flag} {path} exists: name a new file, or add --force to replace it") from None
        except OSError as error:
            raise UsageError(f"{flag} {path}: cannot write it ({reason(error)})") from None


def report_outputs(result: BenchResult, markdown_path: Path | None, plots_dir: Path | None, command: str, force: bool = False) -> None:
    """The rich tables, then the Markdown summary and the plots where asked (check_outputs
    passed: the Markdown file is new or --force replaces it; a plot is replaced only with --force)."""
    from spectui.core.files import write_user_file
    from rich.console import Console

    from spectui.bench.llamacpp_report import markdown_section, rich_table
    from spectui.bench.plots import PlotsUnavailable, write_plots
    from spectui.bench.report import markdown, rich_tables

    err = Console(stderr=True, highlight=False)
    console = Console(highlight=False)
    for table in (*rich_tables(result), rich_table(result)):
        if table is not None:
            console.print(table)
    if markdown_path is not None:
        write_user_file(markdown_path, markdown(result, command) + markdown_section(result), overwrite=True)
        err.print(f"wrote {markdown_path}")
    if plots_dir is not None:
        try:
            for path in write_plots(result, plots_dir, overwrite=force):
                err.print(f"wrote {path}")
        except (PlotsUnavailable, OSError) as error:  # the tables and the JSON are out already
            err.print(f"spectui: --plots {plots_dir}: {error}", style="yellow", markup=False)


def run_report_command(report: str, markdown_path: Path | None, plots_dir: Path | None, force: bool = False) -> int:
    """Tables, Markdown and plots again from saved JSON (--report's comma list of files: their cases together)."""
    from spectui.bench.saved import command_from_settings, load_results

    result = load_results([Path(item.strip()) for item in report.split(",") if item.strip()])
    command = result.settings.get("command") or command_from_settings(result.settings)
    report_outputs(result, markdown_path, plots_dir, command, force)
    return 0


def write_json(result: BenchResult, path: Path | None) -> None:
    """Every number so far, rewritten after each case: a run cut short keeps its cases.
    check_outputs passed before the run: the file is new or --force replaces it."""
    from spectui.core.files import write_user_file

    if path is not None:
        write_user_file(path, json.dumps(result.as_dict(), indent=1), overwrite=True)


def warm_up(runners: dict, arms: list[Arm], case: Case) -> None:
    """One short reply per arm, uncounted: first calls pay one-off costs (allocations, the
    draft's first forward) that would land on whichever arm happened to run first."""
    short = replace(case.workload, max_tokens=4)
    for arm in arms:
        runners[arm.runner](arm, short.as_messages(), replace(case, workload=short).params, case.temperature)


def check_bench_options(suite_name: str, engines: str, methods: str, ks: str, anchor_k: int,
                        temperatures: str | None, repeats: int, categories: str | None, **rest: Any) -> BenchOptions:
    """The command line's bench options checked, each bad one a one-line OptionError; `rest`
    (the outputs, max_tokens, contended) passes through as given."""
    from spectui.bench.workloads import SUITES

    if suite_name not in SUITES:
        raise OptionError("suite", f"--suite must be one of {', '.join(SUITES)}; got {suite_name!r}")
    if not 1 <= repeats <= REPEATS_MAX:
        raise OptionError("repeats", f"--repeats must be from 1 to {REPEATS_MAX}; got {repeats}")
    if not 1 <= anchor_k <= K_MAX:
        raise OptionError("anchor_k", f"--anchor-k must be from 1 to {K_MAX}; got {anchor_k}")
    runner_names = parse_list("engines", engines, RUNNERS)
    if "spectui" not in runner_names:
        runner_names.insert(0, "spectui")  # every ratio divides by spectui's k = 0
    method_names = parse_list("methods", methods, METHODS)
    k_list, auto = check_k_list(ks)
    return BenchOptions(
        suite_name, runner_names, method_names, k_list, auto, anchor_k, repeats,
        temperatures=check_temperature_list(temperatures) if temperatures else None,
        categories=parse_list("categories", categories, ALL_CATEGORIES) if categories else None,
        **rest,
    )
