"""Token ids to text, a few tokens at a time, without re-decoding the whole reply.

Decoding tokens one by one is wrong in two ways: a multi-byte character split over
tokens decodes to U+FFFD until its last byte arrives, and SentencePiece-style decoders
drop the leading space of whichever token comes first. So each step decodes a short
window twice, with and without the new tokens, starting at the same token (vLLM's
prefix_offset/read_offset): whatever the decoder does to the window's first token it
does to both, and the difference is the new text. Text ending in U+FFFD is held back
until the character completes. With byte-fallback vocabularies (<0xNN> tokens) a run of
byte tokens is decoded as a whole and replaced byte by byte if it is not valid UTF-8, so
a later byte can change earlier text: text is held while the window ends in a byte token.

The window holds the ids already shown as text in the previous emission (ids[:read])
and the ids not shown yet (ids[read:]); it is trimmed on every emission, so an add
costs the same at token 10 and at token 10,000.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# Prompt tokens kept as context for the first reply token (vLLM keeps 5 as well).
_PROMPT_CONTEXT = 5
_INCOMPLETE = "\ufffd"


class IncrementalDetokenizer:
    """Text deltas for ids as they are generated, special tokens skipped.

    With prompt_ids=None the deltas plus flush() join to
    tokenizer.decode(generated, skip_special_tokens=True), however the ids are split
    into add() calls. With prompt_ids, the reply is decoded as a continuation of the
    prompt (a SentencePiece first token keeps its leading space); for byte-level
    tokenizers (Qwen, SmolLM2) that is the same text.
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, prompt_ids: Sequence[int] | None = None
    ) -> None:
        self._tokenizer = tokenizer
        self._special_ids = _special_ids(tokenizer)
        self._byte_ids = _byte_fallback_ids(tokenizer)
        context = self._without_special(prompt_ids or ())
        self._ids = context[-_PROMPT_CONTEXT:]
        self._read = len(self._ids)

    def add(self, token_ids: Sequence[int]) -> str:
        """The new text these ids complete ("" while a character is still partial)."""
        self._ids.extend(self._without_special(token_ids))
        shown = self._decode(self._ids[: self._read])
        text = self._decode(self._ids)
        if len(text) <= len(shown) or text.endswith(_INCOMPLETE) or self._in_byte_run():
            return ""
        return self._emit(text, shown)

    def flush(self) -> str:
        """Whatever is held back, incomplete characters included (end of the reply)."""
        shown = self._decode(self._ids[: self._read])
        text = self._decode(self._ids)
        if len(text) <= len(shown):
            return ""
        return self._emit(text, shown)

    def _emit(self, text: str, shown: str) -> str:
        # The ids just shown become the next window's context; everything older is dropped.
        self._ids = self._ids[self._read :]
        self._read = len(self._ids)
        return text[len(shown) :]

    def _in_byte_run(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._byte_ids

    def _decode(self, ids: list[int]) -> str:
        # No clean-up of spaces: it rewrites text across token boundaries ("a ." -> "a."),
        # which no incremental decoder can reproduce.
        text = self._tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        assert isinstance(text, str), "one list of ids decodes to one string"
        return text

    def _without_special(self, token_ids: Iterable[int]) -> list[int]:
        # Dropped before they reach the window, as decode(skip_special_tokens=True) drops
        # them before its decoder runs: a byte run interrupted by a special token is still
        # one run to the decoder, so it must still look open to the hold-back rule.
        return [int(i) for i in token_ids if int(i) not in self._special_ids]


def _special_ids(tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """The ids decode(skip_special_tokens=True) leaves out."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # The Rust decoder skips added tokens flagged special, and only those.
        added = backend.get_added_tokens_decoder()
    else:
        added = tokenizer.added_tokens_decoder
    special = {i for i, token in added.items() if token.special}
    if backend is None:
        special |= set(tokenizer.all_special_ids)
    return frozenset(special)


def _byte_fallback_ids(tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """Ids of the <0x00>..<0xFF> tokens of a byte-fallback BPE (empty for byte-level BPE)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not getattr(backend.model, "byte_fallback", False):
        return frozenset()
    ids = (backend.token_to_id(f"<0x{byte:02X}>") for byte in range(256))
    return frozenset(i for i in ids if i is not None)
