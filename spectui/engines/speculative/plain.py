"""Plain decoding on either backend: the loop at k = 0, with a proposer that needs nothing loaded."""

from __future__ import annotations

from dataclasses import replace

from spectui.models.registry import ModelPair
from spectui.settings.options import EngineOptions


def plain_stand_in(options: EngineOptions, models: ModelPair) -> EngineOptions:
    """Plain decoding needs no draft model: prompt lookup stands in (at k = 0 it drafts
    nothing, and the engine info says ngram should k be raised later)."""
    if options.method == "draft" and options.k == 0 and not options.auto_k and not models.has_draft:
        return replace(options, method="ngram")
    return options
