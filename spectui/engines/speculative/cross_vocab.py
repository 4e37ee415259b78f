"""Drafting across vocabularies, lossless: TLI (token-level intersection, Timor et al. 2025).

The draft proposes only tokens the target's vocabulary also holds (its logits elsewhere set to
-inf before it samples), each mapped to the target's id with its probability; the loop's verify
and sampling rules run unchanged on the target's ids, so every emitted token is the target's
(the rejection rule holds for any draft distribution over the target's ids). The draft's own
cache is fed the draft's ids: the target's sequence as the draft's tokenizer writes it
(DraftContext), its drafts kept as they were drafted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from spectui.engines.speculative.arrays import ops_of
from spectui.engines.speculative.cached_model import CachedLogits, common_prefix_len
from spectui.engines.speculative.proposers import DraftModelProposer, Proposal, Proposer
from spectui.engines.speculative.sampling import Generator, sample, target_probs

if TYPE_CHECKING:
    from spectui.models.vocab_map import VocabMap

Encode = Callable[[str], list[int]]  # text -> the draft tokenizer's ids, no special tokens added


def encoder_of(tokenizer: Any) -> Encode:
    """A tokenizer (transformers' or spectui.models.tokenizer_json's) as an Encode."""
    return lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])


class DraftContext:
    """The draft's ids for the target's sequence, kept in step as the sequence grows.

    A target token the draft also has becomes that draft token; the text of any other (a
    longer token, a special, bytes that are half a character) is tokenized by the draft's
    tokenizer once the character it is part of is whole. Marks record where the two sequences
    cover the same bytes: when the target's sequence changes (a new prompt, rejected drafts)
    the draft's ids go back to the last mark before the change and are rebuilt from there."""

    def __init__(self, vocab: VocabMap, encode: Encode) -> None:
        self.vocab = vocab
        self.encode = encode
        self.target_to_draft = vocab.target_to_draft()
        self.reset()

    def reset(self) -> None:
        self.target: list[int] = []
        self.draft: list[int] = []
        self.marks: list[tuple[int, int]] = [(0, 0)]  # (target length, draft length) covering the same bytes

    def ids_for(self, target_ids: Sequence[int]) -> list[int]:
        """The draft's ids for target_ids (a copy, the caller may extend it)."""
        same = common_prefix_len(self.target, target_ids)
        while self.marks[-1][0] > same:
            self.marks.pop()
        kept_target, kept_draft = self.marks[-1]
        self.target, self.draft = list(target_ids[:kept_target]), self.draft[:kept_draft]
        pending = b""
        for token in target_ids[kept_target:]:
            self.target.append(token)
            mapped = None if pending else self.target_to_draft.get(token)
            if mapped is not None:
                self.draft.append(mapped)
            else:
                pending += self.vocab.target_piece(token)
                text = whole_text(pending)
                if text is None:
                    continue  # a character cut between tokens: wait for its other bytes
                self.draft.extend(self.encode(text))
                pending = b""
            self.marks.append((len(self.target), len(self.draft)))
        # Half a character at the end: its bytes as the draft's one-byte tokens, unmarked (the
        # next call rebuilds them once the character is whole).
        tail = [int(self.vocab.draft_byte_ids[byte]) for byte in pending]
        return self.draft + [token for token in tail if token >= 0]


def whole_text(data: bytes) -> str | None:
    """data as text; None while it ends inside a character (bytes that can never be text are
    replaced, as a decoder would)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.reason == "unexpected end of data" and len(data) - error.start < 4:
            return None
        return data.decode("utf-8", errors="replace")


class CrossVocabProposer(Proposer):
    """A draft model with another tokenizer, drafting on the shared tokens (TLI)."""

    method = "draft"
    stops_early = True

    def __init__(self, draft: CachedLogits, vocab: VocabMap, encode: Encode, target_width: int) -> None:
        import numpy

        self.draft = draft
        self.vocab = vocab
        self.context = DraftContext(vocab, encode)
        self.vocab_words = vocab.panel_words()
        self.target_width = target_width
        shared = (vocab.draft_to_target >= 0) & (vocab.draft_to_target < target_width)
        self.shared_drafts = shared.nonzero()[0]
        self.shared_targets = vocab.draft_to_target[self.shared_drafts]
        self.bias = numpy.where(shared, 0.0, -numpy.inf).astype(numpy.float32)
        self._in_kind: dict[str, tuple[Any, Any, Any]] = {}

    def reset(self) -> None:
        self.draft.reset()
        self.context.reset()

    def prefill(self, token_ids: Sequence[int]) -> None:
        context = self.context.ids_for(token_ids)
        if context:
            self.draft.logits(context, num_rows=1)

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None, stop_below: float = 0.0) -> Proposal:
        """Up to k drafts as target ids; with stop_below, none after the one where the chain's
        confidence (the product of the masked draft's probabilities) falls below it."""
        context = self.context.ids_for(token_ids)
        drafted: list[int] = []
        rows: list = []
        chain = 1.0
        for _ in range(k if context else 0):
            logits = self.masked(self.draft.logits(context, num_rows=1)[0])
            ops = ops_of(logits)
            if temperature == 0.0:
                token = int(logits.argmax())
                if stop_below:
                    chain *= ops.prob_of(logits, token)
            else:
                p_draft = target_probs(logits, temperature, top_p)
                token = sample(p_draft, generator)
                chain *= float(p_draft[token])
                rows.append(self.in_target_ids(p_draft))
            drafted.append(int(self.vocab.draft_to_target[token]))
            context.append(token)  # the draft's cache holds its own id for its draft
            if chain < stop_below:
                break
        return Proposal(drafted, ops_of(rows[0]).stack(rows) if rows else None)

    def masked(self, logits: Any) -> Any:
        """The draft's row with every token the target lacks at -inf (its padding rows too)."""
        bias, _, _ = self._arrays(logits)
        width = min(logits.shape[-1], bias.shape[-1])
        return logits[:width] + bias[:width]

    def in_target_ids(self, p_draft: Any) -> Any:
        """The draft's distribution over the target's ids: each shared token's probability at
        its target id, 0 elsewhere (the map is one to one, so it still sums to 1)."""
        import numpy

        _, drafts, targets = self._arrays(p_draft)
        if isinstance(drafts, numpy.ndarray):
            row = numpy.zeros(self.target_width, dtype=p_draft.dtype)
        else:
            row = p_draft.new_zeros(self.target_width)
        row[targets] = p_draft[drafts]
        return row

    def _arrays(self, like: Any) -> tuple[Any, Any, Any]:
        """The bias and index arrays in like's kind (numpy rows on ggml, tensors on torch), made once."""
        import numpy

        kind = "numpy" if isinstance(like, numpy.ndarray) else f"torch:{like.device}"
        if kind not in self._in_kind:
            arrays: tuple[Any, Any, Any] = (self.bias, self.shared_drafts, self.shared_targets)
            if kind != "numpy":
                import torch

                bias, drafts, targets = (torch.as_tensor(array).to(like.device) for array in arrays)
                arrays = (bias, drafts, targets)
            self._in_kind[kind] = arrays
        bias, drafts, targets = self._in_kind[kind]
        return ops_of(like).like(bias, like), drafts, targets



def draft_model_proposer(draft: CachedLogits, target_width: int, vocab: VocabMap | None = None,
                         encode: Encode | None = None) -> Proposer:
    """The proposer for a draft model on either backend: the plain one when the draft has the
    target's tokenizer (vocab None or identical: padding rows never drafted), TLI when not
    (slem.vocab_proposer: SLEM, or the better of the two)."""
    if vocab is None or vocab.identical:
        return DraftModelProposer(draft, target_width, vocab.same_width if vocab is not None else None)
    if encode is None:
        raise ValueError("a draft with another tokenizer needs its tokenizer to read the target's text")
    return CrossVocabProposer(draft, vocab, encode, target_width)
