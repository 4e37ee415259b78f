"""Per-token text for a Step, so every token can carry its own source's colour.

Engines fill `Step.pieces` and `Step.rejected_text` with StepPieces over their tokenizer;
whoever shows a Step reads them with `step_pieces`. A Step's `text` is the exact delta for
all its tokens; a tokenizer's `decode` splits it.
Decoding with a few ids of left context keeps leading spaces right (SentencePiece-style
tokenizers drop them when a token is decoded alone). The pieces always join to the
Step's text: where they disagree (a multi-byte character split across steps), the
Step's text wins and the leftover goes to the last token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from spectui.core.events import Source, Step

Decode = Callable[[Sequence[int]], str]
CONTEXT_IDS = 6  # left context for decoding; enough for any merge we have seen

SOURCE_KIND = {
    Source.DRAFT: "draft",
    Source.RECOVERED: "recovered",
    Source.BONUS: "bonus",
    Source.TARGET: "target",
}


def step_pieces(step: Step) -> tuple[list[str], str]:
    """(pieces, ghost text) the engine sent with the step; guessed from the text for a step
    that has none (one stored or built before Steps carried them)."""
    if step.pieces or not step.token_ids:
        return list(step.pieces), step.rejected_text
    return guessed_pieces(step.text, len(step.token_ids)), "✗" * len(step.rejected)


def tokenizer_decoder(tokenizer: Any) -> Decode:
    """A transformers tokenizer's decode, as shown text: special tokens (a stop token) are ""."""
    return lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True)


def decoded_pieces(decode: Decode, context: Sequence[int], token_ids: Sequence[int]) -> list[str]:
    window = list(context[-CONTEXT_IDS:])
    previous = decode(window)
    pieces = []
    for token_id in token_ids:
        window.append(token_id)
        current = decode(window)
        if current.startswith(previous) and not current.endswith("\ufffd"):
            pieces.append(current[len(previous) :])
            previous = current
        else:
            pieces.append("")  # an incomplete character: its text comes with a later token
    return pieces


def align_pieces(pieces: Sequence[str], text: str) -> list[str]:
    """Pieces that join to exactly `text`, keeping as many of the given ones as match."""
    aligned = []
    position = 0
    for piece in pieces:
        if piece and text.startswith(piece, position):
            aligned.append(piece)
            position += len(piece)
        else:
            aligned.append("")
    if position < len(text):
        if not aligned:
            return [text]
        # What did not match (a character completed late) belongs to the step's end.
        aligned[-1] += text[position:]
    return aligned


def guessed_pieces(text: str, num_tokens: int) -> list[str]:
    """Without a tokenizer: one word per token, the last token takes the rest."""
    if num_tokens <= 1:
        return [text] if num_tokens == 1 else []
    words = re.findall(r"\s*\S+|\s+", text)
    pieces = words[: num_tokens - 1]
    pieces.append("".join(words[num_tokens - 1 :]))
    pieces += [""] * (num_tokens - len(pieces))
    return pieces


class StepPieces:
    """Turns Steps into (per-token pieces, ghost text) and keeps the left context."""

    def __init__(self, decode: Decode | None, prompt_tail: Sequence[int] = ()) -> None:
        self.decode = decode
        self.context: list[int] = list(prompt_tail[-CONTEXT_IDS:])

    def split(self, step: Step) -> tuple[list[str], str]:
        if self.decode is None or step.pieces or not step.token_ids:
            pieces, ghost = step_pieces(step)
        else:
            pieces = align_pieces(decoded_pieces(self.decode, self.context, step.token_ids), step.text)
            ghost = self._ghost_text(step)
        self.context = (self.context + list(step.token_ids))[-CONTEXT_IDS:]
        return pieces, ghost

    def fill(self, step: Step) -> Step:
        """The step with its pieces and ghost text, as an engine sends it."""
        pieces, ghost = self.split(step)
        return replace(step, pieces=tuple(pieces), rejected_text=ghost)

    def _ghost_text(self, step: Step) -> str:
        rejected = step.rejected
        if not rejected or self.decode is None:
            return ""
        accepted = list(step.token_ids[: step.num_accepted])
        before = (self.context + accepted)[-CONTEXT_IDS:]
        return "".join(decoded_pieces(self.decode, before, rejected)) or "✗" * len(rejected)


def display_chunks(step: Step, pieces: Sequence[str], ghost: str) -> list[tuple[str, str]]:
    """(text, kind) in reading order: accepted drafts, the rejected ghosts, then the rest."""
    chunks = []
    accepted = step.num_accepted
    # A rejected newline would move the text around; show it as a mark instead.
    ghost = ghost.replace("\n", "↵")
    for index, (piece, source) in enumerate(zip(pieces, step.sources)):
        if index == accepted and ghost:
            chunks.append((ghost, "ghost"))
        if piece:
            chunks.append((piece, SOURCE_KIND[source]))
    if ghost and accepted >= len(pieces):
        chunks.append((ghost, "ghost"))
    return chunks
