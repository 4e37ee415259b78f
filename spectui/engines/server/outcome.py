"""A finished reply's Done: the server's counts and records laid over the streamed steps."""

from __future__ import annotations

from dataclasses import replace

from spectui.core.engine import SPECULATION_NOT_REPORTED, EngineInfo
from spectui.core.events import K_MAX, Done, FinishReason
from spectui.engines.server.prometheus import SpecCounters
from spectui.engines.server.reconcile import reconcile, spread_counts
from spectui.engines.server.reply import ReplyState

SPECULATION_COUNTED = "counted by the server per reply"


def k_in_record(record: dict | None) -> int | None:
    """k as the per-request record names it; None when absent or garbled."""
    k = (record or {}).get("num_spec_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= K_MAX:
        return None
    return k


def learned_k(info: EngineInfo, k: int) -> EngineInfo:
    """The engine's info once k is known: a server found not to speculate says so."""
    return replace(info, method="none") if info.method == "server" and k == 0 else info


def reply_done(
    reply: ReplyState,
    counters: tuple[SpecCounters | None, SpecCounters | None],
    finish_reason: FinishReason,
    timing: dict,
    *,
    server_k: int | None,
    method: str,
) -> Done:
    """`counters`: the server's before and after the reply (None: not read)."""
    engine_stats: dict = dict(reply.record or {})
    before, after = counters
    if before is not None and after is not None:
        # Server-wide: other clients' requests in the same interval count too.
        engine_stats.update((after - before).as_stats())
    engine_stats["server_k"] = server_k
    if reply.usage and isinstance(reply.usage.get("completion_tokens"), int):
        # The server's own count: a lost chunk would show as a mismatch with the steps.
        engine_stats["completion_tokens"] = reply.usage["completion_tokens"]
    if reply.plain:
        result = spread_counts(reply.steps, reply.draft_counts, method=method)
        if reply.draft_counts is None:
            engine_stats["speculation"] = SPECULATION_NOT_REPORTED
        else:
            engine_stats["speculation"] = SPECULATION_COUNTED
            engine_stats["server_num_draft_tokens"] = reply.draft_counts.drafted
            engine_stats["server_num_accepted_tokens"] = reply.draft_counts.accepted
    else:
        result = reconcile(reply.steps, reply.record, k=server_k or 0, method=method)
    if result.ambiguous:
        engine_stats["recovered_ambiguous"] = True
    # spectui sends stop token ids, never stop strings: a "stop" reply from vLLM ends with its
    # stop token. A server that sends text alone never shows it.
    last = reply.steps[-1].token_ids[-1] if reply.steps and not reply.plain else None
    return Done(
        finish_reason,
        stop_token_id=last if finish_reason == "stop" else None,
        engine_stats=engine_stats,
        approximate=result.approximate,
        restated_steps=result.restated_steps,
        **timing,
    )
