"""What the engine host says when a load ends: the notes under the chat and its notices."""

from __future__ import annotations


def ready_note(label: str, seconds: float, restarted_k: int | None, own_k: int | None, swapped_to: str | None) -> str | None:
    """How a restart or a switch went; None for a first load."""
    if restarted_k is not None:
        pinned = f" (it runs k = {own_k}, as its speculative config says)" if own_k not in (None, restarted_k) else ""
        return f"{label} restarted with k = {restarted_k} in {seconds:.1f} s{pinned}; the conversation goes on."
    if swapped_to is not None:
        return f"Switched to {swapped_to} in {seconds:.1f} s; the conversation goes on."
    return None


def failure_text(label: str, error: str, restarted_k: int | None, swapped_to: str | None) -> tuple[str, str | None]:
    """What failed, and what the user can do about it (None: nothing here)."""
    if swapped_to is not None:
        return f"Could not switch to {swapped_to}: {error}", "the model screen can try another"
    if restarted_k is not None:
        return f"Could not restart {label} with k = {restarted_k}: {error}", "press a k key to try again"
    return f"Could not load the engine: {error}", None
