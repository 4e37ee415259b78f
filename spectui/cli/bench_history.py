"""`spectui bench --history`: the bench's timed arms on your own saved prompts, each beside the
replay's predicted speed for it (spectui.bench.history), to check `spectui advise` on this machine."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.core.errors import UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from spectui.bench.history import TimedVsReplayed
    from spectui.bench.plan import BenchOptions
    from spectui.settings.options import EngineOptions


@dataclass(frozen=True)
class HistoryChoice:
    """Which saved chats (advise's flags) and what a history bench writes."""

    last: int | None = None
    conversation: int | None = None
    since: str | None = None
    max_tokens: int | None = None  # each reply cut at this many tokens, timed and replayed alike
    json_path: Path | None = None


def check_history_flags(history: bool, choice: HistoryChoice, reports: dict[str, object]) -> None:
    """advise's chat flags belong to --history; --history prints its table and writes --json,
    not the suite's reports (`reports`: those flags and their values)."""
    given = [flag for flag, value in (("--last", choice.last), ("--conversation", choice.conversation),
                                      ("--since", choice.since)) if value is not None]
    if given and not history:
        raise UsageError(f"{', '.join(given)}: these choose saved chats for --history, which was not given")
    if choice.last is not None and choice.last < 1:
        raise UsageError(f"--last must be 1 or more; got {choice.last}")
    refused = [flag for flag, value in reports.items() if value is not None]
    if history and refused:
        raise UsageError(f"--history prints its own table (and --json): {', '.join(refused)} is the suite's, leave it out")


def history_methods(methods: list[str]) -> list[str]:
    """The copy drafters of --method: the ones the replay runs; none is one line."""
    from spectui.bench.history import HISTORY_METHODS

    kept = [method for method in methods if method in HISTORY_METHODS]
    if not kept:
        raise UsageError(f"--history times the drafters advise replays ({', '.join(HISTORY_METHODS)}): "
                         f"--method {','.join(methods)} has none")
    return kept


def run_history_bench(options: EngineOptions, given: BenchOptions, choice: HistoryChoice) -> int:
    """Read the chats, replay them (advise's code, this machine's kept costs), time the same arms, print both."""
    import spectui.cli.bench as bench_cli
    from rich.console import Console

    from spectui.advise.advice import KS, advise
    from spectui.bench.history import capped, history_cases, history_drafters, timed_vs_replayed
    from spectui.bench.plan import BenchOptions, plan_arms
    from spectui.cli.advise import cached_models, no_reply_line, parse_since, read_selection, this_machine
    from spectui.models.fetch import rich_progress
    from spectui.models.registry import ModelPair
    from spectui.settings.options import AUTO_START_K

    since = parse_since(choice.since) if choice.since is not None else None
    methods, ks, auto, repeats = history_methods(given.methods), given.ks, given.auto, given.repeats
    target, _ = cached_models(options.model, None)
    selection = read_selection(target, choice.last, choice.conversation, since, must=True)
    if not selection.replies:
        raise UsageError(no_reply_line(selection))
    selection.replies = capped(selection.replies, choice.max_tokens)
    costs = this_machine(target, selection, remeasure=False, quiet=False)
    drafters = history_drafters(methods, (options.lookup_min, options.lookup_max))
    advice = advise(selection, costs, list(drafters.values()), [k for k in KS if k in ks or (auto and k == "auto")])
    bench = BenchOptions("history", ["spectui"], methods, ks, auto, AUTO_START_K, repeats, json_path=choice.json_path)
    arms = plan_arms(bench.runners, methods, sorted({0, *ks}), bench.anchor_k, auto)
    cases = history_cases(selection.replies)
    err = Console(stderr=True, highlight=False)
    with rich_progress() as progress:
        runners, engines, drafter_costs = bench_cli.build_runners(options, ModelPair(target.resolved), bench, progress)
    settings = bench_cli.run_settings(bench, engines[0], drafter_costs)
    try:
        result = bench_cli.run_with_progress(err, cases, arms, runners, repeats, settings, None)
    finally:
        for engine in engines:
            engine.close()
    rows = timed_vs_replayed(result.cases, arms, advice, drafters, selection.replies)
    console = Console(highlight=False)
    console.print(history_table(rows, len(selection.replies)))
    console.print(history_note(rows), markup=False)
    if choice.json_path is not None:
        write_history_json(choice.json_path, result.as_dict(), rows, advice.costs.as_dict())
        err.print(f"wrote {choice.json_path}")
    return 0


def write_history_json(path: Path, bench: dict, rows: list[TimedVsReplayed], costs: dict) -> None:
    from spectui.core.files import write_user_file

    data = {**bench, "history": [row.as_dict() for row in rows], "replay_costs": costs}
    write_user_file(path, json.dumps(data, indent=1), overwrite=True)


def history_table(rows: list[TimedVsReplayed], replies: int) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=f"Timed vs replayed on {replies} of your saved prompts (T = 0; speeds over k 0)",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in ("arm", "timed tok/s", "timed", "replayed", "diff", "kept", "same reply"):
        table.add_column(header, justify="left" if header == "arm" else "right", no_wrap=header == "arm")
    for row in rows:
        table.add_row(row.arm.label, ratio(row.timed_tokens_per_s, "{:.1f}"), ratio(row.timed_speedup),
                      ratio(row.predicted_speedup), "—" if row.difference is None else f"{row.difference:+.1%}",
                      f"{ratio(row.timed_accepted, '{}')}/{ratio(row.replayed_accepted, '{}')}",
                      f"{row.same_replies}/{row.replies}")
    return table


def history_note(rows: list[TimedVsReplayed]) -> str:
    """What the columns are, and a warning where the timed replies are not the saved ones."""
    note = ("timed: decode speed over k 0 in this run; replayed: advise's prediction for the same replies at this "
            "machine's kept costs; diff: replayed over timed, less one; kept: drafts kept, timed (first round) / replayed")
    differ = max((row.replies - row.same_replies for row in rows), default=0)
    if differ:
        note += (f"\n{differ} of {rows[0].replies} timed replies differ from the saved ones (another model, "
                 "backend or build wrote those): the replay predicts the saved tokens, the run timed others")
    return note


def ratio(value: float | None, shape: str = "×{:.2f}") -> str:
    return "—" if value is None else shape.format(value)
