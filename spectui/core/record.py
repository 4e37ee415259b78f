"""A reply's record as JSON: one shape for `generate --json`, each reply of `compare --json`,
benchmarks/gpu_vllm.py, the history's JSONL trace and every engine. Stdlib only.

What a record promises, whatever the engine:
- a reply that ended on a stop token has it last in `token_ids` (a special token's piece is
  ""), and `stop_token_id` names it; `finish_reason` says why the reply ended;
- no step is empty: every step emitted at least one token;
- `num_accepted` is what the target accepted; a step in which the reply stopped before all of
  them were emitted has fewer "draft" sources than that. So γ, τ and per-position acceptance
  recompute exactly from the steps alone;
- `stats` holds ReplyStats's figures, `per_position_acceptance`, and the timing:
  `time_to_first_token` (the engine's, from its Done) and `tokens_per_s_wall` (tokens over the
  caller's wall clock, prefill included; None where the caller did not time the reply).
"""

from __future__ import annotations

from collections.abc import Sequence

from spectui.core.engine import EngineInfo, Kernels
from spectui.core.events import AutoChoice, Done, Source, Step
from spectui.core.stats import per_position_acceptance


def step_record(step: Step) -> dict:
    return {
        "token_ids": list(step.token_ids),
        "sources": [source.value for source in step.sources],
        "pieces": list(step.pieces),
        "text": step.text,
        "drafted": list(step.drafted),
        "num_drafted": step.num_drafted,
        "num_accepted": step.num_accepted,
        "rejected_text": step.rejected_text,
        "k": step.k,
        "auto": auto_record(step.auto),
        "temperature": step.temperature,
        "method": step.method,
        "exact": step.exact,
        "tree_nodes": step.tree_nodes,  # drafted nodes verified, for a tree step; None for a chain
        "margins": list(step.margins),  # T = 0: each token's top-two logit gap
        "verified_count": step.verified_count,  # drafts the verify ran, where it stopped early
        "draft_seconds": step.draft_seconds,
        "verify_seconds": step.verify_seconds,
    }


def auto_record(choice: AutoChoice | None) -> dict | None:
    if choice is None:
        return None
    return {"k": choice.k, "predicted_speedup": choice.predicted_speedup,
            "realised_speedup": choice.realised_speedup, "reason": choice.reason}


def step_from_record(record: dict) -> Step:
    """The Step a step_record was made from (draft_count and accepted_count are set only where
    the drafted ids and the sources do not already say them)."""
    drafted = tuple(record["drafted"])
    sources = tuple(Source(value) for value in record["sources"])
    emitted_drafts = sum(1 for source in sources if source is Source.DRAFT)
    auto = record.get("auto")
    return Step(
        token_ids=tuple(record["token_ids"]),
        sources=sources,
        text=record["text"],
        drafted=drafted,
        k=record["k"],
        temperature=record["temperature"],
        draft_seconds=record["draft_seconds"],
        verify_seconds=record["verify_seconds"],
        exact=record["exact"],
        method=record["method"],
        draft_count=None if record["num_drafted"] == len(drafted) else record["num_drafted"],
        accepted_count=None if record["num_accepted"] == emitted_drafts else record["num_accepted"],
        auto=AutoChoice(**auto) if auto else None,
        tree_nodes=record["tree_nodes"],
        pieces=tuple(record["pieces"]),
        rejected_text=record["rejected_text"],
        margins=tuple(record.get("margins", ())),
        verified_count=record.get("verified_count"),
    )


def reply_record(steps: Sequence[Step], done: Done | None, stats: dict,
                 tokens_per_s_wall: float | None = None) -> dict:
    """The whole reply: its steps, why it ended, and `stats` (a ReplyStats.as_dict()) with
    per-position acceptance from the steps and the timing (module docstring)."""
    timing = {"time_to_first_token": done.time_to_first_token if done else None,
              "tokens_per_s_wall": tokens_per_s_wall}
    return {
        "text": "".join(step.text for step in steps),
        "finish_reason": done.finish_reason if done else None,
        "stop_token_id": done.stop_token_id if done else None,
        "error": done.error if done else None,
        "approximate": done.approximate if done else False,
        "prompt_token_ids": list(done.prompt_token_ids) if done else [],
        "token_ids": [token for step in steps for token in step.token_ids],
        "steps": [step_record(step) for step in steps],
        "stats": {"per_position_acceptance": per_position_acceptance(steps), **stats, **timing},
        "engine_stats": dict(done.engine_stats) if done else {},
    }


def kernels_record(kernels: Kernels | None) -> dict:
    """Which kernels ran: the bar says "ggml Q4_K_M · 2 threads", the record the same, and the
    library's version (a number from another build of it is another number)."""
    if kernels is None:
        return {"backend": None, "threads": None, "library": None, "library_version": None, "graphs": None}
    return {"backend": kernels.backend, "threads": kernels.threads, "library": kernels.library,
            "library_version": kernels.version, "graphs": kernels.graphs}


def model_record(info: EngineInfo, k: int | None) -> dict:
    return {
        "engine": info.name,
        "target": info.target,
        "draft": info.draft,
        "method": info.method,
        "k": k,
        "dtype": info.dtype,
        **kernels_record(info.kernels),
        "device": info.device,
        "exact_provenance": info.capabilities.exact_provenance,
        "greedy_identical": info.capabilities.greedy_identical,
    }
