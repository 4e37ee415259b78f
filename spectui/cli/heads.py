"""`spectui heads train`: Medusa or EAGLE heads for a target, trained here on its own replies.

Only typer and stdlib at import: `spectui --help` must not import torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from spectui.cli.common import fail, help_when_bare
from spectui.core.errors import SpectuiError, UsageError

if TYPE_CHECKING:  # loaded when the heads train
    from rich.console import Console
    from rich.progress import TaskID
    from rich.progress import Progress

    from spectui.heads.train import ProgressFn, TrainingPrompt
    from spectui.models.registry import ResolvedModel

KINDS = ("medusa", "eagle")
SUITES = ("train", "quick", "full")

heads_app = typer.Typer(
    help="Medusa and EAGLE heads for the embedded engine, trained locally.", invoke_without_command=True,
    callback=help_when_bare,
)


def default_out(model: str, kind: str) -> Path:
    from spectui.models.registry import cache_dir

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(model).name or model)
    return cache_dir() / "heads" / f"{safe}-{kind}"


# The full suite less the quick one: `spectui bench` (quick by default) then measures heads
# on prompts they never saw, as a user's prompts will be.
TRAIN_SUITE = "train"


def training_workloads(suite_name: str):
    from spectui.bench.workloads import suite

    if suite_name == TRAIN_SUITE:
        held_out = suite("quick")
        return [workload for workload in suite("full") if workload not in held_out]
    return suite(suite_name)


def check_train_options(
    kind: str, steps: int, num_heads: int, max_new_tokens: int, suite: str, texts: list[Path], vocab_sample: int = 0,
    learning_rate: float = 1e-3,
) -> None:
    if kind not in KINDS:
        raise UsageError(f"--kind must be medusa or eagle, got {kind!r}")
    if steps < 1:
        raise UsageError(f"--steps must be >= 1, got {steps}")
    if not 1 <= num_heads <= 16:
        raise UsageError(f"--num-heads must be from 1 to 16, got {num_heads}")
    if max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be >= 1, got {max_new_tokens}")
    if suite not in SUITES:
        raise UsageError(f"--suite must be train, quick or full, got {suite!r}")
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise UsageError(f"--lr must be a number > 0, got {learning_rate}")
    if vocab_sample < 0:
        raise UsageError(f"--vocab-sample must be >= 0, got {vocab_sample}")
    for path in texts:
        if not path.is_file():
            raise UsageError(f"--text {path}: no such file")


@heads_app.command("train")
def train_command(
    kind: str = typer.Option(..., "--kind", help="medusa or eagle."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Target: alias, local folder, .gguf or hub id."),
    steps: int = typer.Option(2000, "--steps", help="Training steps (one sequence each)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for the heads (default: the cache, per model and kind)."),
    text: Optional[list[Path]] = typer.Option(None, "--text", help="A local text file to train on as well (repeatable)."),
    suite: str = typer.Option(
        "train", "--suite",
        help="Workload prompts whose replies are the data: train (full less quick, so the quick bench is held out), quick or full.",
    ),
    num_heads: int = typer.Option(4, "--num-heads", help="medusa: heads, i.e. the most tokens drafted per step."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", help="Length of each greedy reply."),
    learning_rate: float = typer.Option(1e-3, "--lr", help="Adam's learning rate."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N or auto."),
    dtype: str = typer.Option("auto", "--dtype", help="The target that writes the replies: the engine's own by default."),
    vocab_sample: int = typer.Option(
        4096, "--vocab-sample", help="Softmax over the data's tokens and this many random others (0: the whole vocabulary)."
    ),
    seed: int = typer.Option(0, "--seed"),
    force: bool = typer.Option(False, "--force", help="Replace heads already in --out."),
) -> None:
    """Self-distillation: the target's greedy replies to the workload prompts (and --text
    files) are cached as features once, then the heads learn them; the target stays frozen."""
    try:
        texts = list(text or [])
        check_train_options(kind, steps, num_heads, max_new_tokens, suite, texts, vocab_sample, learning_rate)
        from spectui.models.registry import DEFAULT_TARGET, resolve

        target = resolve(model or DEFAULT_TARGET)  # an unknown name is one line, before anything loads
        check_out(out, force)  # before the training, which takes minutes to hours
        run_train(target, kind, steps, out or default_out(target.name, kind), texts, suite, num_heads,
                  max_new_tokens, learning_rate, device, seed, dtype, vocab_sample, overwrite=force or out is None)
    except SpectuiError as error:
        fail(error)


def training_progress(console: Console) -> tuple[Progress, Callable[[str, int, int, dict], None]]:
    """One bar per stage (replies, features, training) and the report that moves them."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description:<9}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(), console=console,
    )
    tasks: dict[str, TaskID] = {}

    def report(stage: str, done: int, total: int, info: dict) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=total, info="")
        shown = f"loss {info['loss']:.3f}" if "loss" in info else ""
        progress.update(tasks[stage], completed=done, total=total, info=shown)

    return progress, report


def check_out(out: Path | None, force: bool) -> None:
    """--out's two files refused as the safe writer would refuse them: not regular files
    always, heads already there unless --force (the cache's own folder is retrained in place)."""
    from spectui.core.files import WouldOverwrite, check_user_file, reason
    from spectui.heads.store import CONFIG_FILE, WEIGHTS_FILE

    if out is None:
        return
    for name in (WEIGHTS_FILE, CONFIG_FILE):
        try:
            check_user_file(out / name, overwrite=force)
        except WouldOverwrite:
            raise UsageError(f"--out {out} holds heads already: name a new folder, or add --force to replace them") from None
        except OSError as error:
            raise UsageError(f"--out {out}: cannot write {name} there ({reason(error)})") from None


def training_replies(target_model: ResolvedModel, dtype: str, device: str, workloads: Sequence[TrainingPrompt],
                     max_new_tokens: int, progress: Progress, report: ProgressFn) -> list[list[int]]:
    """The target's greedy replies to `workloads`, written by the engine that runs it (int8 on a
    CPU, several times faster than float32): what the heads must learn to predict."""
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.heads import train
    from spectui.models.fetch import rich_progress
    from spectui.models.registry import ModelPair
    from spectui.settings.options import EngineOptions

    with rich_progress() as load_progress:
        # the model as typed: what the cached replies, features and heads are keyed by
        writer = build_embedded_engine(EngineOptions(model=target_model.name, method="ngram", dtype=dtype, device=device),
                                       ModelPair(target_model), load_progress)
    try:
        with progress:
            return train.engine_replies(writer, workloads, max_new_tokens, report)
    finally:
        writer.close()


def run_train(target_model: ResolvedModel, kind: str, steps: int, out: Path, texts: list[Path], suite: str, num_heads: int,
              max_new_tokens: int, learning_rate: float, device: str, seed: int, dtype: str = "auto",
              vocab_sample: int = 0, overwrite: bool = False) -> None:
    import torch
    from rich.console import Console

    from spectui.engines.torch_backend.build import resolve_device
    from spectui.heads import train
    from spectui.heads.store import fingerprint, save_heads
    from spectui.models.fetch import rich_progress
    from spectui.models.load import load_model, resolve_dtype

    err = Console(stderr=True)
    name = target_model.name  # as typed: what the cached replies, features and heads are keyed by
    device = resolve_device(device)
    reply_dtype = resolve_dtype(dtype, device)
    workloads = training_workloads(suite)
    replies_file = train.replies_path(name, reply_dtype, workloads, max_new_tokens)
    torch.manual_seed(seed)
    progress, report = training_progress(err)

    sequences = train.cached_replies(replies_file, lambda: training_replies(target_model, reply_dtype, device, workloads,
                                                                            max_new_tokens, progress, report))
    with rich_progress() as load_progress:
        # float32: the LM head the heads learn against is the target's own, unrounded.
        target, tokenizer = load_model(target_model, "float32", device, load_progress)
    with progress:
        sequences += train.text_sequences(tokenizer, texts)
        examples = train.cached_features(train.features_path(name, sequences),
                                         lambda: train.cache_features(target, sequences, report))
        heads = train.new_heads(kind, target.config.hidden_size, num_heads).to(device)
        loss_of = train.loss_function(kind, heads, target, vocab_sample, examples)
        record = train.train_heads(heads, loss_of, examples, steps, learning_rate, seed, report)
    record.update(suite=suite, reply_dtype=reply_dtype, vocab_sample=vocab_sample)
    folder = save_heads(out, kind, heads, fingerprint(target, name), record, overwrite=overwrite)
    err.print(
        f"{kind} heads for {name}: loss {record['loss_before']:.3f} → {record['loss_after']:.3f} "
        f"in {record['seconds']:.0f} s on {record['sequences']} sequences ({record['tokens']:,} tokens): {folder}"
    )
    err.print(f"use them with: spectui generate PROMPT --model {name} --method {kind} --heads {folder}", style="dim")
