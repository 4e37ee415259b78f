"""Which proposer drafts for a method: one table for the torch backend, the ggml backend and a
loaded engine's with_method, so a method is wired once and a name no backend can draft is
refused instead of falling through to prompt lookup (tests/test_method_lists.py pins it)."""

from __future__ import annotations

from typing import Literal

from spectui.engines.speculative.proposers import Proposer
from spectui.settings.table import EMBEDDED_METHODS, HEAD_METHODS

Drafter = Literal["draft model", "heads", "tokens"]
# Methods that draft from the tokens alone: nothing to load beside the target.
FROM_TOKENS = ("ngram", "suffix")


def drafter(method: str) -> Drafter:
    """What `method` drafts with: a second model, trained heads, or the tokens alone.
    ValueError for a method the embedded engine has no proposer for."""
    if method == "draft":
        return "draft model"
    if method in HEAD_METHODS:
        return "heads"
    if method in FROM_TOKENS:
        return "tokens"
    raise ValueError(f"the embedded engine has no proposer for method {method!r} (its methods: "
                     f"{', '.join(EMBEDDED_METHODS + HEAD_METHODS)})")


def token_proposer(method: str, tokenizer: object, lookup: tuple[int, int] | None = None,
                   history_drafting: bool = False) -> Proposer:
    """The proposer of a method that drafts from the tokens alone (drafter(method) == "tokens")."""
    if drafter(method) != "tokens":
        raise ValueError(f"method {method!r} drafts with a {drafter(method)}, loaded beside the target")
    if method == "ngram":
        from spectui.engines.speculative.proposers import NgramProposer

        return NgramProposer(*lookup) if lookup else NgramProposer()
    from spectui.engines.speculative.suffix_history import suffix_proposer

    return suffix_proposer(tokenizer, history_drafting)
