"""This machine's cost profile for a target on ggml, measured with the real target: a plain step
and a decode of n rows at the conversations' length (v(n), in plain steps), each copy drafter's
time per drafting step. Kept beside the history per model and backend, so it is measured once.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from spectui.advise.costs import CostProfile, cached_profile_path, load_cached_profile, profile_json
from spectui.advise.replay import ReplayInput
from spectui.core.engine import DecodeTimings, Engine
from spectui.core.errors import UsageError
from spectui.engines.threads import BUSY_SHARE
from spectui.models.gguf_local import RECORD_FILE, GgufModel, has_gguf, tokenizer_folder
from spectui.models.registry import ResolvedModel, gguf_dir

# Timings per width, widths interleaved; the fastest is kept: on a shared machine the others
# measure the neighbours (a decode's own cost is its least time).
ROUNDS = 7
WIDEST = 9  # rows timed where the verify has no piece (k 8 and its bonus row)
CONTEXT_MAX = 1024  # the longest context timed: prefill is the measurement's dearest part
FLOOR = 0.9  # a decode of n rows below this many plain steps is noise, not a cost
Progress = Callable[[str, int, int], None]


def cached_gguf(resolved: ResolvedModel) -> GgufModel:
    """The target's GGUF and tokenizer, only if already on this machine: advise never fetches."""
    if not has_gguf(resolved):
        raise NotMeasured(f"{resolved.name} has no GGUF: advise measures on ggml", "give --costs FILE for another backend")
    if resolved.kind == "gguf":
        assert resolved.path is not None
        gguf = resolved.path
    else:
        assert resolved.spec is not None
        record = gguf_dir(resolved.spec.alias) / RECORD_FILE
        if not record.is_file():
            raise UsageError(f"{resolved.name} is not cached: `spectui models fetch {resolved.name}` first")
        import json

        gguf = Path(json.loads(record.read_text())["path"])
    if not gguf.is_file():
        raise UsageError(f"{resolved.name} is not cached ({gguf} is gone): `spectui models fetch {resolved.name}` first")
    return GgufModel(resolved.name, resolved, gguf, tokenizer_folder(resolved, gguf))


class NotMeasured(UsageError):
    """This machine's costs were not measured: `reason` says why in words for any screen; the
    message adds what to do on the command line (the chat's advise screen says its own)."""

    def __init__(self, reason: str, command_line: str, again: bool = False) -> None:
        super().__init__(f"{reason}; {command_line}" if command_line else reason)
        self.reason = reason
        self.again = again  # measuring again may succeed (the machine was busy)


def measure_profile(model: GgufModel, context_ids: Sequence[int], progress: Progress | None = None,
                    refuse_unsteady: bool = True, engine: Engine | None = None) -> CostProfile:
    """Time the real target at len(context_ids) cached tokens (capped at CONTEXT_MAX): on
    `engine` where given (the chat's, between replies: its target is not loaded twice, and
    llama.cpp's own step is not timed, which would load it again), else on ggml loaded for it.
    refuse_unsteady False (a benchmark that reports it): timings from a busy machine are kept, and
    the profile's machine says why they are not steady."""
    report = progress or (lambda stage, done, total: None)
    ids = list(context_ids[:CONTEXT_MAX])
    if engine is not None:
        timings, llamacpp = engine.time_decodes(ids, WIDEST, ROUNDS, report), None
    else:
        timings, llamacpp = timed_on_a_loaded_target(model, ids, report)
    fastest = {width: min(values) for width, values in timings.seconds.items()}
    plain = fastest[1]
    verify = {width: value / plain for width, value in fastest.items()}
    unsteady = unsteady_measure(verify, timings.neighbour_share)
    if unsteady and refuse_unsteady:
        raise NotMeasured(f"this machine's costs were not measured: {unsteady}",
                          "run advise again when it is quiet, or give --costs FILE from a quiet run", again=True)
    base = ids[:timings.context_tokens] or [0] * timings.context_tokens
    return CostProfile(model=model.name, backend=timings.backend, plain_seconds=plain, verify=verify,
                       piece=timings.piece, context_tokens=timings.context_tokens, draft_seconds=copy_draft_seconds(base),
                       machine=f"{platform.machine()} {platform.processor() or ''}".strip()
                       + (f" (unsteady: {unsteady})" if unsteady else ""),
                       llamacpp_plain_seconds=llamacpp)


def timed_on_a_loaded_target(model: GgufModel, ids: list[int], report: Progress) -> tuple[DecodeTimings, float]:
    """The target loaded on ggml for the measurement (and closed), and llama.cpp's own plain step."""
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.engines.speculative.decode_timing import time_decodes
    from spectui.models.tokenizer_json import JsonTokenizer

    report("load", 0, 1)
    engine = load_ggml_engine(model.gguf, JsonTokenizer(model.tokenizer), "ngram", target_name=model.name)
    report("load", 1, 1)
    try:
        timings = time_decodes(engine.target, engine.info.backend or "ggml", ids, WIDEST, ROUNDS, report,
                               engine.tokenizer)
    finally:
        engine.close()
    report("llama.cpp plain", 0, 1)
    base = ids[:timings.context_tokens] or [0] * timings.context_tokens
    return timings, llamacpp_plain_step(model.gguf, base[:timings.context_tokens] + base[:1])


def llamacpp_plain_step(gguf: Path, context: Sequence[int]) -> float:
    """llama.cpp's own plain step on the same GGUF at len(context) cached tokens, with its
    defaults (as the bench's llamacpp arm runs it): the fastest of ROUNDS one-token decodes."""
    from spectui.advise.draft_model import draft_token_seconds
    from spectui.engines.ggml.lib import LlamaModel

    anchor = LlamaModel(gguf, batch_invariant=False)
    try:
        return draft_token_seconds(anchor, context, rounds=ROUNDS)
    finally:
        anchor.close()


def unsteady_measure(verify: dict[int, float], busy_share: float | None) -> str | None:
    """Why timings cannot be this machine's costs, or None: other processes held the cores (a
    share of BUSY_SHARE or more), or a decode of several rows timed under one row's cost, which
    only a machine whose speed moved under the measurement shows."""
    if busy_share is not None and busy_share >= BUSY_SHARE:
        return f"other processes took {busy_share:.0%} of the cores meanwhile"
    cheap = [(width, cost) for width, cost in sorted(verify.items()) if width > 1 and cost < FLOOR]
    if cheap:
        width, cost = cheap[0]
        return f"a decode of {width} rows timed at {cost:.2f} of one row (the machine's speed moved meanwhile)"
    return None


def copy_draft_seconds(context: Sequence[int]) -> dict[str, float]:
    """Seconds per drafting step of each copy drafter over `context` (the median of a few)."""
    from spectui.engines.speculative.proposers import NgramProposer
    from spectui.engines.speculative.suffix import SuffixProposer

    out = {}
    for proposer in (SuffixProposer(use_history=False), NgramProposer()):
        proposer.prefill(list(context))
        times = []
        for end in range(max(1, len(context) - 16), len(context) + 1):
            started = time.perf_counter()
            proposer.propose(list(context[:end]), 8, 0.0, 1.0, None)
            times.append(time.perf_counter() - started)
        out[proposer.method] = statistics.median(times)
    return out


def this_machine_profile(model: GgufModel, data_dir: Path, context_ids: Sequence[int], remeasure: bool = False,
                         progress: Progress | None = None, engine: Engine | None = None) -> tuple[CostProfile, bool]:
    """(profile, whether it was measured now): the kept one for this model and backend, else measured
    (on `engine` where given: measure_profile) and kept."""
    from spectui.engines.ggml.lib import library_problem

    problem = library_problem() if engine is None else None
    if problem:
        raise NotMeasured(f"advise measures costs on ggml, which cannot run here ({problem})", "give --costs FILE")
    kept = sorted((data_dir / "advise-costs").glob(f"{cached_profile_path(data_dir, model.name, '').stem}*.json")) \
        if (data_dir / "advise-costs").is_dir() else []
    if kept and not remeasure:
        profile = load_cached_profile(kept[-1])
        if profile is not None:
            return profile, False
    profile = measure_profile(model, context_ids, progress, engine=engine)
    path = cached_profile_path(data_dir, model.name, profile.backend)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(profile_json(profile), encoding="utf-8")
    partial.replace(path)
    return profile, True


def median_context_ids(replies: Sequence[ReplayInput]) -> list[int]:
    """A conversation of the median length (prompt and reply) to time v(n) at; [] without replies."""
    if not replies:
        return []
    ranked = sorted(replies, key=lambda reply: len(reply.prompt_ids) + len(reply.reply_ids))
    middle = ranked[len(ranked) // 2]
    return [*middle.prompt_ids, *middle.reply_ids]
