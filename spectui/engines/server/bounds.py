"""What a server's numbers may be: bounded by what the request allows and by a fixed cap.

A count, length or position past these is no measurement but a broken (or hostile) server:
used as it came, 1e11 drafted tokens would build per-position lists of 1e11 entries. Each
check gives one line naming the value, which ends that reply as a protocol error.
"""

from __future__ import annotations

from collections.abc import Mapping

from spectui.core.events import K_MAX
from spectui.engines.server.chunks import DraftCounts

# No server drafts more than this many tokens per step (spectui's own k range).
MAX_DRAFTS_PER_STEP = K_MAX


def draft_counts_problem(counts: DraftCounts | None, max_tokens: int) -> str | None:
    """llama-server's or LM Studio's whole-reply counts against the max_tokens sent."""
    if counts is None:
        return None
    if counts.accepted > max_tokens:
        return f"{counts.accepted} accepted drafts for a reply of at most {max_tokens} tokens"
    if counts.drafted > max_tokens * MAX_DRAFTS_PER_STEP:
        return (
            f"{counts.drafted} drafted tokens for a reply of at most {max_tokens} tokens"
            f" (at most {MAX_DRAFTS_PER_STEP} a step)"
        )
    return None


def record_problem(record: Mapping | None, max_tokens: int) -> str | None:
    """vLLM's per-step record: one entry per step that verified drafts, each step emitting a
    token at least, so no more entries than max_tokens, and each step's drafts within k."""
    if not record:
        return None
    for name in ("per_step_drafted", "per_step_accepted"):
        values = record.get(name)
        if isinstance(values, list) and len(values) > max_tokens:
            return f"a per-step record of {len(values)} steps ({name}) for a reply of at most {max_tokens} tokens"
    drafted = record.get("per_step_drafted")
    if isinstance(drafted, list):
        largest = max((n for n in drafted if isinstance(n, int)), default=0)
        if largest > MAX_DRAFTS_PER_STEP:
            return f"a step of {largest} drafted tokens (per_step_drafted; at most {MAX_DRAFTS_PER_STEP})"
    accepted = record.get("per_step_accepted")
    if isinstance(accepted, list) and isinstance(drafted, list):
        for step, (kept, proposed) in enumerate(zip(accepted, drafted)):
            if isinstance(kept, int) and isinstance(proposed, int) and kept > proposed:
                return f"step {step} of the per-step record accepted {kept} of {proposed} drafted tokens"
    return None
