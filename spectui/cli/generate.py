"""`spectui generate`: one reply, headless."""

from __future__ import annotations

import json
import sys

from rich.console import Console

import spectui.cli.render as render
from spectui.settings.options import EngineOptions
from spectui.models.fetch import rich_progress
from spectui.models.registry import ModelPair
from spectui.core.engine import K, Engine
from spectui.core.errors import REPLY_ADVICE, SpectuiError, is_out_of_memory, one_line, out_of_memory
from spectui.core.events import Control, GenerationParams, Step
from spectui.core.reasoning import acceptance_apart_text
from spectui.measure.run import MeasuredReply, prompt_messages, reply_json, run_reply


def engine_k(engine: Engine, asked: int) -> int | None:
    """The k a reply runs: the engine's own where it fixed one at start (vLLM, a server), the
    one asked for where the engine takes it, None where a server runs a k it does not say."""
    if engine.fixed_k is not None:
        return engine.fixed_k
    return asked if engine.info.capabilities.honours(K) else None


def summary_line(reply: MeasuredReply, k: int | None, engine: Engine) -> str:
    stats = reply.stats
    gamma = f"{stats.gamma:.2f}" if stats.gamma is not None else "–"
    tau = f"{stats.tau:.2f}" if stats.tau is not None else "–"
    speed = f"{stats.tokens_per_s:.1f}" if stats.tokens_per_s else "–"
    info = engine.info
    drafting = f"{info.method} {info.draft or ''}".strip() if info.method != "none" else "no drafting"
    if info.draft_vocab and info.method == "draft":  # another tokenizer: the overlap, and TLI or SLEM
        drafting += f" (draft vocabulary: {info.draft_vocab})"
    autos = [step.auto for step in reply.steps if step.auto is not None]
    if autos:
        ks = [choice.k for choice in autos]
        k_text = f"k=auto {min(ks)}–{max(ks)} (mean {sum(ks) / len(ks):.1f}; {autos[-1].reason})"
    else:
        k_text = f"k={k}" if k is not None else "k not reported"
    return (
        f"γ {gamma} · τ {tau}{acceptance_apart_text(reply.steps)} · {speed} tok/s"
        f" · {stats.num_tokens} tokens in {stats.num_steps} steps"
        f" · {info.target} ← {drafting}, {k_text}, {info.dtype}, {info.device}"
        f" · {reply.done.finish_reason if reply.done else '?'}"
        + (" · colours approximate" if reply.done is not None and reply.done.approximate else "")
    )


def engine_failure(error: Exception) -> SpectuiError:
    """An engine's exception as the one line the CLI prints (MemoryError, RecursionError…)."""
    if isinstance(error, SpectuiError):
        return error
    if is_out_of_memory(error):
        return out_of_memory(error, "generating", REPLY_ADVICE)
    return SpectuiError(f"the engine failed: {one_line(error)}")


def open_engine(options: EngineOptions, models: ModelPair | None, scripted: bool, err: Console) -> Engine:
    """The engine a reply runs on, its load shown; where ggml was chosen but torch runs, why (on `err`)."""
    from spectui.engines.factory import build_engine

    if scripted:
        from spectui.engines.scripted import ScriptedEngine

        return ScriptedEngine()
    with rich_progress() as progress:
        engine = build_engine(options, models, progress=progress)
    if engine.info.backend.startswith("torch ") and ": " in engine.info.backend:  # ggml was the choice
        err.print(render.shown(f"spectui: on torch, not ggml: {engine.info.backend.partition(': ')[2]}"), style="yellow")
    return engine


def run_generate(
    options: EngineOptions, prompt: str, models: ModelPair | None, system: str | None, as_json: bool,
    plain: bool = False, raw: bool = False, scripted: bool = False,
) -> int:
    """One reply from the engine `options` choose, running `models` (resolved where the options
    were read); scripted: the chat's demo engine (`--engine scripted`), which runs no models."""
    err = Console(stderr=True)
    out = Console(highlight=False)
    engine = open_engine(options, models, scripted, err)
    messages = prompt_messages(prompt, system)
    params = GenerationParams(max_tokens=options.max_tokens, top_p=options.top_p, seed=options.seed)
    k = engine_k(engine, options.k)
    control = Control(k=k or 0, temperature=options.temperature, auto=options.auto_k)
    if options.auto_k and not engine.info.capabilities.live_controls:
        err.print(f"adaptive k needs an engine that changes k between steps; {engine.info.name} runs k={k}", style="yellow")

    look = render.choose_look(out, plain=plain or raw)
    warning = render.raw_warning(out) if raw else None
    if warning is not None:
        err.print(warning, style="yellow", soft_wrap=True)
    legend = render.legend(look)
    if not as_json and legend is not None:
        err.print(legend)

    def show(step: Step, _reply: object = None) -> None:
        try:
            if raw:
                render.write_raw(out, step.text)
            elif not as_json:
                out.print(render.step_text(step, look), end="")
        except OSError as error:  # the output's own failure, not the engine's: said as it is
            raise SpectuiError(f"cannot write the reply: {error.strerror or error}") from None

    try:
        reply = run_reply(engine, messages, params, control, on_step=None if as_json else show)
    except Exception as error:  # whatever the engine raised ends this reply with one line
        raise engine_failure(error) from None
    finally:
        engine.close()
    if as_json:
        json.dump(reply_json(reply, engine, k), sys.stdout)
        sys.stdout.write("\n")
    else:
        out.print()
        err.print(render.summary(summary_line(reply, k, engine), reply.done), style="dim")
    if reply.done is not None and reply.done.finish_reason == "error":
        err.print(render.shown(f"spectui: error: {reply.done.error}"), style="red")
        return 1
    return 0
