"""`spectui advise`: which drafter and k would have paid on your own saved chats, on this machine.

Every copy drafter × k (0 … 8 and auto) replayed at T = 0 over the history's replies (exact:
a copied draft is kept while it equals the reply), charged at this machine's measured costs
(kept per model and backend beside the history) or at --costs FILE's. Heavy imports inside.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from spectui.cli.common import fail
from spectui.core.errors import SpectuiError, UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from spectui.advise.advice import Advice, DraftReplay
    from spectui.advise.chats import Selection
    from spectui.advise.costs import CostProfile
    from spectui.advise.cross_draft import CrossArm, CrossPair
    from spectui.models.gguf_local import GgufModel

# Replayed when the history has nothing to time v(n) at (--save-costs on a fresh machine).
SAMPLE_CONTEXT = "def add(a, b):\n    return a + b\n\n" * 60


def advise_command(
    last: Optional[int] = typer.Option(None, "--last", min=1, help="Only the N most recent conversations."),
    conversation: Optional[int] = typer.Option(None, "--conversation", help="Only this conversation (see history list)."),
    since: Optional[str] = typer.Option(None, "--since", help="Only conversations active since DATE (YYYY-MM-DD or ISO time)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The target (default: the configured model)."),
    draft: Optional[str] = typer.Option(None, "--draft", "-d", help="Also replay this cached draft model (fixed k; of another tokenizer: TLI, SLEM, auto)."),
    draft_k: str = typer.Option("2,4,8", "--draft-k", help="Another tokenizer's draft: the ks to replay (each a real run), 2,4,8 or 1-8."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: every arm, and each reply's recorded vs replayed acceptance."),
    plots: Optional[Path] = typer.Option(None, "--plots", help="Write speed-vs-k plots (PNG) into this folder (matplotlib)."),
    costs_file: Optional[Path] = typer.Option(None, "--costs", help="Charge the replay at a cost profile from FILE (another machine's)."),
    save_costs: Optional[Path] = typer.Option(None, "--save-costs", help="Write this machine's cost profile (JSON) to FILE."),
    remeasure: bool = typer.Option(False, "--remeasure", help="Measure this machine's costs again instead of the kept profile."),
) -> None:
    """Which drafter and k pay for your chats: your saved replies replayed at T = 0 (exact) for
    every copy drafter and k, at costs measured on this machine. Speeds are predictions."""
    try:
        code = run_advise(last, conversation, since, model, as_json, plots, costs_file, save_costs, remeasure, draft, draft_k)
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


def parse_since(text: str) -> float:
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise UsageError(f"--since {text!r}: a date as YYYY-MM-DD (or an ISO time, 2026-12-06T14:00)") from None


def run_advise(last: int | None, conversation: int | None, since: str | None, model: str | None, as_json: bool,
               plots: Path | None, costs_file: Path | None, save_costs: Path | None, remeasure: bool,
               draft_name: str | None = None, draft_k: str = "2,4,8") -> int:
    from spectui.advise.costs import read_profile
    from spectui.advise.cross_draft import draft_key, parse_draft_ks

    since_time = parse_since(since) if since is not None else None
    ks = parse_draft_ks(draft_k)
    given = read_profile(costs_file) if costs_file is not None else None
    target, draft = cached_models(model, draft_name)
    cross = cross_pair(target, draft) if draft is not None else None
    if given is not None and draft is not None:
        key = draft_key(draft.name) if cross else "draft"
        if key not in given.draft_seconds:
            raise UsageError(f"--costs {costs_file} has no draft model's cost (draft_seconds.{key}) to charge --draft at")
    asked = conversation is not None or last is not None or since is not None
    selection = read_selection(target, last, conversation, since_time, must=save_costs is None or asked)
    if not selection.replies and save_costs is None:
        raise UsageError(no_reply_line(selection))
    costs = given or this_machine(target, selection, remeasure, quiet=as_json)
    teacher: DraftReplay | None = None
    arms: list[CrossArm] = []
    if draft is not None and selection.replies:
        if cross is None:
            costs, teacher = teacher_forced(draft, selection, costs, measure=given is None, quiet=as_json)
        else:
            costs, arms = replayed_across(draft, cross, selection, costs, ks, quiet=as_json)
    if save_costs is not None:
        from spectui.advise.costs import profile_json
        from spectui.core.files import write_user_file

        try:
            write_user_file(save_costs, profile_json(costs), overwrite=True)
        except OSError as error:
            raise UsageError(f"--save-costs {save_costs}: {error.strerror or error}") from None
        typer.echo(f"wrote {save_costs}", err=True)
        if not selection.replies:
            return 0
    advice = replay(selection, costs, quiet=as_json, draft=teacher)
    output(advice, as_json, cross, arms)
    if plots is not None:
        write_plots(advice, plots)
    return 0


def output(advice: Advice, as_json: bool, cross: CrossPair | None, arms: list[CrossArm]) -> None:
    """The table (or JSON), a draft of another tokenizer's arms among the others, with the pair's overlap."""
    notes: list[str] = []
    if cross is not None and arms:
        from spectui.advise.cross_draft import cross_lines, with_cross_arms

        advice = with_cross_arms(advice, arms)
        notes = cross_lines(cross, arms, advice.costs)
    if not as_json:
        show(advice, notes)
        return
    data = advice.as_dict()
    if cross is not None and arms:
        data["cross_vocabulary_draft"] = {"draft": cross.name, "draft_vocabulary_shared": cross.vocab.draft_overlap,
                                          "shared_tokens": cross.vocab.shared, "notes": notes}
    typer.echo(json.dumps(data, indent=2))


def cached_models(model: str | None, draft: str | None) -> tuple[GgufModel, GgufModel | None]:
    """The target (and draft) on this machine, each name resolved once."""
    from spectui.advise.measure import cached_gguf
    from spectui.models.registry import resolve_pair
    from spectui.settings.config import load_config

    pair = resolve_pair(model if model is not None else load_config().model, draft)
    target = cached_gguf(pair.target)
    return target, cached_gguf(pair.draft) if pair.draft is not None else None


def cross_pair(target: GgufModel, draft: GgufModel) -> CrossPair | None:
    """For a draft of another tokenizer the pair's map and both tokenizers; None for the target's
    tokenizer (teacher-forced), as the engine decides it (spectui.models.vocab_map.draft_vocab)."""
    from spectui.advise.cross_draft import CrossPair
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.models.tokenizer_json import JsonTokenizer
    from spectui.models.vocab_map import draft_vocab

    vocab = draft_vocab(target.name, target.tokenizer, draft.name, draft.tokenizer)
    if vocab.identical:
        return None
    target_tokenizer = JsonTokenizer(target.tokenizer)
    return CrossPair(draft.name, vocab, encoder_of(JsonTokenizer(draft.tokenizer)), encoder_of(target_tokenizer),
                     max(target_tokenizer.get_vocab().values()) + 1)


def replayed_across(draft: GgufModel, pair: CrossPair, selection: Selection, costs: CostProfile, ks: tuple[int, ...],
                    quiet: bool) -> tuple[CostProfile, list[CrossArm]]:
    """A draft of another tokenizer by TLI, SLEM and --vocab auto at each k, its real proposer run
    step by step over every reply (spectui.advise.cross_draft); its cost per forward measured
    here when the profile lacks it."""
    from dataclasses import replace

    from spectui.advise.cross_draft import cross_arms, draft_key, seconds_per_forward
    from spectui.advise.draft_model import draft_token_seconds
    from spectui.engines.ggml.lib import LlamaModel

    model = LlamaModel(draft.gguf)
    try:
        if seconds_per_forward(costs, pair.name) is None:
            seconds = draft_token_seconds(model, pair.draft_ids(context_ids(draft, selection)))
            costs = replace(costs, draft_seconds={**costs.draft_seconds, draft_key(pair.name): seconds})
        with progress_bar(quiet) as bar:
            task = bar.add_task(f"replaying {pair.name}", total=len(selection.replies))

            def report(arm: str, done: int, total: int) -> None:
                bar.update(task, description=f"replaying {arm}", completed=done, total=total)

            arms = cross_arms(selection.replies, pair, model, ks, costs, report)
    finally:
        model.close()
    return costs, arms


def teacher_forced(draft: GgufModel, selection: Selection, costs: CostProfile, measure: bool,
                   quiet: bool) -> tuple[CostProfile, DraftReplay]:
    """The draft's greedy token after every true prefix of every reply (one pass each), and its
    cost per token measured here when the profile lacks it."""
    from dataclasses import replace

    from spectui.advise.advice import DraftReplay
    from spectui.advise.draft_model import all_predictions, draft_token_seconds
    from spectui.engines.ggml.lib import LlamaModel

    model = LlamaModel(draft.gguf)
    try:
        if measure and "draft" not in costs.draft_seconds:
            seconds = draft_token_seconds(model, context_ids(draft, selection))
            costs = replace(costs, draft_seconds={**costs.draft_seconds, "draft": seconds})
        with progress_bar(quiet) as bar:
            task = bar.add_task(f"teacher-forcing {draft.name}", total=len(selection.replies))
            predictions = all_predictions(model, selection.replies, None,
                                          lambda done, total: bar.update(task, completed=done, total=total))
    finally:
        model.close()
    return costs, DraftReplay(f"draft {draft.name}", predictions)


def read_selection(target: GgufModel, last: int | None, conversation: int | None, since: float | None,
                   must: bool) -> Selection:
    """The replies to replay; a missing, locked or damaged history is one line (exit 2) unless
    only the costs were asked for (must False: then no history is no reply)."""
    from spectui.advise.chats import Selection, chat_replies, read_conversations
    from spectui.models.tokenizer_json import JsonTokenizer
    from spectui.store import default_store_path
    from spectui.store.records import NoSuchConversation, StoreError

    path = default_store_path()
    if not must and not path.is_file():
        return Selection()
    try:
        conversations = read_conversations(path, last, conversation, since)
    except NoSuchConversation:
        raise
    except StoreError as error:
        raise UsageError(str(error)) from None
    tokenizer = JsonTokenizer(target.tokenizer)
    return chat_replies(conversations, tokenizer, max(tokenizer.get_vocab().values()) + 1)


def no_reply_line(selection: Selection) -> str:
    left = ", ".join(f"{count} {why}" for why, count in selection.skipped.items())
    return (f"no reply to replay in {selection.conversations} conversation(s)" + (f" (left out: {left})" if left else "")
            + ": advise replays finished T = 0 replies of this model")


def this_machine(target: GgufModel, selection: Selection, remeasure: bool, quiet: bool) -> CostProfile:
    """The kept profile for this model and backend, else measured now (progress on stderr)."""
    from spectui.advise.measure import this_machine_profile
    from spectui.store import default_store_path

    context = context_ids(target, selection)
    with progress_bar(quiet) as bar:
        task = bar.add_task("measuring this machine's costs", total=None)

        def report(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"measuring {target.name}: {stage}", completed=done, total=total)

        profile, measured = this_machine_profile(target, default_store_path().parent, context, remeasure, report)
    if measured and not quiet:
        typer.echo(f"measured {target.name} on {profile.backend} (kept for the next advise)", err=True)
    return profile


def context_ids(target: GgufModel, selection: Selection) -> list[int]:
    """A conversation of the median length (prompt and reply) to time v(n) at."""
    from spectui.advise.measure import median_context_ids

    if not selection.replies:
        from spectui.models.tokenizer_json import JsonTokenizer

        return JsonTokenizer(target.tokenizer)(SAMPLE_CONTEXT, add_special_tokens=False)["input_ids"]
    return median_context_ids(selection.replies)


def replay(selection: Selection, costs: CostProfile, quiet: bool, draft: DraftReplay | None = None) -> Advice:
    from spectui.advise.advice import advise

    tokens = sum(len(reply.reply_ids) for reply in selection.replies)
    with progress_bar(quiet) as bar:
        task = bar.add_task(f"replaying {len(selection.replies)} replies ({tokens:,} tokens)", total=None)
        return advise(selection, costs, progress=lambda done, total: bar.update(task, completed=done, total=total),
                      draft=draft)


def progress_bar(quiet: bool):  # noqa: ANN201 - rich's Progress, imported here only
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True, disable=quiet)


def show(advice: Advice, notes: list[str] | None = None) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    console.print(advice_table(advice))
    console.print(costs_line(advice.costs), markup=False)
    for note in notes or ():
        console.print(note, markup=False)
    if advice.selection.skipped:
        left = ", ".join(f"{count} {why}" for why, count in advice.selection.skipped.items())
        console.print(f"left out: {left}", markup=False)
    console.print(advice.recommendation(), style="bold", markup=False)


def costs_line(costs: CostProfile) -> str:
    widths = ", ".join(f"v({rows}) {value:.2f}" for rows, value in sorted(costs.verify.items()))
    piece = f", verify in pieces of {costs.piece}" if costs.piece else ""
    llamacpp = (f"; llama.cpp plain {costs.llamacpp_plain_seconds * 1000:.1f} ms" if costs.llamacpp_plain_seconds
                else "; llama.cpp plain not measured (—)")
    return (f"predicted: replayed at T = 0, charged at the costs of {costs.model} on {costs.backend}: plain step "
            f"{costs.plain_seconds * 1000:.1f} ms at {costs.context_tokens} tokens, {widths}{piece}{llamacpp}")


def advice_table(advice: Advice) -> Table:
    from rich import box
    from rich.table import Table

    best = advice.best
    table = Table(title="Predicted speed vs k 0 on your chats (replayed at T = 0, exact acceptance)", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)
    arms = [advice.baseline, *advice.arms]
    # Replies and tokens only where arms differ (the line under the table says them): 80 columns hold the rest.
    counts = len({(arm.replies, arm.tokens) for arm in arms}) > 1
    for header in ("drafter", "k", "speed", "vs\nllama.cpp", "γ", "τ", "coloured", *(("replies", "tokens") if counts else ())):
        table.add_column(header, justify="left" if header == "drafter" else "right", no_wrap=header == "drafter")
    for arm in arms:
        style = "bold green" if arm is best and arm.speedup > 1 else None
        versus = advice.vs_llamacpp(arm)
        table.add_row(arm.drafter or "plain", str(arm.k), f"×{arm.speedup:.2f}", "—" if versus is None else f"×{versus:.2f}",
                      "–" if arm.gamma is None else f"{arm.gamma:.2f}", "–" if arm.tau is None else f"{arm.tau:.2f}",
                      f"{arm.coloured_share:.0%}", *((str(arm.replies), f"{arm.tokens:,}") if counts else ()), style=style)
    return table


def write_plots(advice: Advice, folder: Path) -> None:
    """Speed vs k per drafter, one PNG; a missing matplotlib or folder says so and the table stands."""
    from spectui.bench.plots import PlotsUnavailable, pyplot

    try:
        plt = pyplot()
        folder.mkdir(parents=True, exist_ok=True)
        figure, axes = plt.subplots(figsize=(7, 4))
        for drafter in dict.fromkeys(arm.drafter for arm in advice.arms):
            fixed = [arm for arm in advice.arms if arm.drafter == drafter and isinstance(arm.k, int)]
            axes.plot([0] + [arm.k for arm in fixed], [1.0] + [arm.speedup for arm in fixed], marker="o", label=drafter)
        axes.axhline(1.0, color="grey", linewidth=0.8)
        axes.set_xlabel("k")
        axes.set_ylabel("predicted speed vs k 0")
        axes.set_title(f"{advice.costs.model} on {advice.costs.backend} (replayed)")
        axes.legend()
        path = folder / "advise-speed-vs-k.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        typer.echo(f"wrote {path}", err=True)
    except (PlotsUnavailable, OSError) as error:
        typer.echo(f"spectui: --plots {folder}: {error}", err=True)

