"""Drafting across vocabularies by SLEM (string-level exact match, Timor et al. 2025), greedy.

The draft writes with its whole vocabulary; its text is tokenized by the target's tokenizer,
after the last few target tokens' text (the anchor) so the target's tokens across the boundary
are the ones its tokenizer would write there, and the target token that may still grow (the
last) is dropped; the target verifies those ids greedily like any draft. At T = 0 the target
keeps a draft only where it equals its own argmax, so the reply is its plain greedy reply
whatever the draft wrote. At T > 0 SLEM has no draft distribution over the target's ids for
the rejection rule: it drafts by TLI there (CrossVocabProposer), which is lossless.

k counts the target's tokens: the draft writes until its text holds k whole target tokens (or
its chain's confidence falls below adaptive k's floor, or it writes a special token).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectui.engines.speculative.arrays import ops_of
from spectui.engines.speculative.cached_model import CachedLogits, common_prefix_len
from spectui.engines.speculative.cross_vocab import CrossVocabProposer, Encode, draft_model_proposer
from spectui.engines.speculative.proposers import Proposal, Proposer
from spectui.engines.speculative.sampling import Generator

if TYPE_CHECKING:
    from spectui.models.vocab_map import VocabMap

ANCHOR_TOKENS = 3  # target tokens re-tokenized before the draft's text (more only to reach a character's start)
SLEM_AT_T = "SLEM at T = 0, TLI at T > 0"  # what the panel says beside the overlap
TRIAL_STEPS = 8  # --vocab auto: greedy steps each of TLI and SLEM drafts before it keeps one


class SlemProposer(CrossVocabProposer):
    """A draft model with another tokenizer, its text re-tokenized into the target's ids (SLEM)."""

    def __init__(self, draft: CachedLogits, vocab: VocabMap, encode: Encode, target_width: int,
                 target_encode: Encode, choose: bool = False) -> None:
        """choose (--vocab auto): greedy steps by TLI and by SLEM in turn, TRIAL_STEPS each, then
        the one whose steps emitted more target tokens on average (TLI on a tie)."""
        super().__init__(draft, vocab, encode, target_width)
        if vocab.draft_offsets is None:
            raise ValueError("SLEM reads the draft's own text: the vocabulary map has no draft pieces")
        self.target_encode = target_encode
        self.draft_width = len(vocab.draft_offsets) - 1
        self.fallbacks = 0  # steps whose anchor the target's tokenizer wrote otherwise (the draft's text alone used)
        self.greedy = "trial" if choose else "slem"
        self.trials: dict[str, list[int]] = {"tli": [], "slem": []}  # target tokens each trial step emitted
        # The last trial step's method, context length, last context tokens and drafts.
        self._pending: tuple[str, int, tuple[int, ...], list[int]] | None = None
        self.vocab_words = self.words()

    def words(self) -> str:
        """The panel's line: the overlap and which method drafts."""
        if self.greedy == "trial":
            return f"{self.vocab.panel_words()} · TLI or SLEM, trying both"
        if self.greedy == "tli" or not self.trials["tli"]:
            return f"{self.vocab.panel_words()} · {'TLI' if self.greedy == 'tli' else SLEM_AT_T}"
        slem, tli = (sum(steps) / len(steps) for steps in (self.trials["slem"], self.trials["tli"]))
        return f"{self.vocab.panel_words()} · SLEM (T = 0; {slem:.2f} tokens a step, TLI {tli:.2f})"

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None, stop_below: float = 0.0) -> Proposal:
        if temperature > 0.0:
            return super().propose(token_ids, k, temperature, top_p, generator, stop_below)
        how = self.settle_trial(token_ids)
        if how == "tli":
            proposal = super().propose(token_ids, k, temperature, top_p, generator, stop_below)
        else:
            proposal = self.slem_propose(token_ids, k, stop_below)
        if self.greedy == "trial":
            self._pending = (how, len(token_ids), tuple(token_ids[-ANCHOR_TOKENS:]), proposal.drafted)
        return proposal

    def settle_trial(self, token_ids: Sequence[int]) -> str:
        """Which method drafts this greedy step; in a trial, the last step's tokens counted first
        (accepted drafts + the target's own), where the sequence still holds that step's context."""
        if self.greedy != "trial":
            return self.greedy
        if self._pending is not None:
            how, start, tail, drafted = self._pending
            if len(token_ids) > start and tuple(token_ids[start - len(tail):start]) == tail:
                emitted = token_ids[start:start + len(drafted) + 1]
                self.trials[how].append(common_prefix_len(emitted, drafted) + 1)
            self._pending = None
        tli, slem = self.trials["tli"], self.trials["slem"]
        if min(len(tli), len(slem)) >= TRIAL_STEPS:
            self.greedy = "slem" if sum(slem) / len(slem) > sum(tli) / len(tli) else "tli"
            self.vocab_words = self.words()
            return self.greedy
        return "tli" if len(tli) <= len(slem) else "slem"

    def slem_propose(self, token_ids: Sequence[int], k: int, stop_below: float) -> Proposal:
        """Greedy drafts by SLEM: up to k target tokens of the draft's text."""
        context = self.context.ids_for(token_ids)
        anchor = self.anchor(token_ids)
        written = b""
        found: list[int] = []
        chain = 1.0
        for _ in range(2 * k + 2 if context and k > 0 else 0):  # draft tokens are the shorter ones
            logits = self.draft.logits(context, num_rows=1)[0][: self.draft_width]
            token, prob = ops_of(logits).argmax_and_prob(logits)
            piece = self.vocab.draft_piece(token)
            if not piece:  # a special token (the draft's end of turn): its text is no draft
                break
            context.append(token)  # the draft's cache holds its own ids for its text
            written += piece
            found = self.retokenized(anchor, written)
            chain *= prob
            if len(found) >= k or chain < stop_below:
                break
        return Proposal(found[:k], None)

    def anchor(self, token_ids: Sequence[int]) -> tuple[list[int], bytes]:
        """The last few target tokens and their bytes, starting at a character's first byte."""
        start = max(0, len(token_ids) - ANCHOR_TOKENS)
        data = b"".join(self.vocab.target_piece(token) for token in token_ids[start:])
        while start > 0 and data and 0x80 <= data[0] < 0xC0:  # a character's later byte: reach back
            start -= 1
            data = self.vocab.target_piece(token_ids[start]) + data
        return list(token_ids[start:]), data

    def retokenized(self, anchor: tuple[list[int], bytes], written: bytes) -> list[int]:
        """The target's tokens for the draft's text after the anchor, the last (which more text
        may extend) dropped. Where the target's tokenizer writes the anchor otherwise (the
        draft's text merges with it), the draft's text alone; nothing if that is no text."""
        anchor_ids, anchor_bytes = anchor
        ids = self.target_encode(text_before_cut(anchor_bytes + written))
        if ids[: len(anchor_ids)] == anchor_ids:
            return ids[len(anchor_ids):-1]
        self.fallbacks += 1
        if not is_text(anchor_bytes) or not starts_text(written):
            return []
        return self.target_encode(text_before_cut(written))[:-1]


def text_before_cut(data: bytes) -> str:
    """data as text, without a character cut at its end (bytes that are never text replaced)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.reason == "unexpected end of data":
            return data[: error.start].decode("utf-8", errors="replace")
        return data.decode("utf-8", errors="replace")


def is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def starts_text(data: bytes) -> bool:
    """Whether data begins at a character's first byte (a lone tail of a character does not)."""
    return not data or not 0x80 <= data[0] < 0xC0


def vocab_proposer(draft: CachedLogits, target_width: int, vocab: VocabMap | None = None, encode: Encode | None = None,
                   target_encode: Encode | None = None, how: str = "tli") -> Proposer:
    """A draft model's proposer on either backend, as --vocab says (how): the plain one for the
    target's tokenizer; for another, TLI ("tli"), SLEM ("slem") or the two tried and the better
    kept ("auto"). target_encode: the target's tokenizer, which reads the draft's text."""
    if how not in ("slem", "auto") or vocab is None or vocab.identical or encode is None:
        return draft_model_proposer(draft, target_width, vocab, encode)
    if target_encode is None:
        if how == "slem":
            raise ValueError("SLEM needs the target's tokenizer to read the draft's text")
        return draft_model_proposer(draft, target_width, vocab, encode)
    return SlemProposer(draft, vocab, encode, target_width, target_encode, choose=how == "auto")
