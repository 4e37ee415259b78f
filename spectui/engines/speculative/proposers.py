"""Proposers: where the k drafted tokens of a step come from."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spectui.engines.speculative.arrays import ops_of
from spectui.engines.speculative.cached_model import CachedLogits
from spectui.engines.speculative.ngram import lookup_ngram
from spectui.settings.options import LOOKUP_MAX
from spectui.engines.speculative.sampling import Array, Generator, sample, target_probs

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Proposal:
    drafted: list[int]
    # Distributions the drafts were sampled from, [len(drafted), V]; None when the
    # proposer is deterministic (a point mass on each drafted id) or at T = 0.
    p_draft: Array | None
    # A draft tree (deterministic candidates, p_draft None): the parent of each drafted
    # id, -1 for the context's last token; None for a chain. See spectui.engines.speculative.tree.
    parents: list[int] | None = None
    # What the proposer knew of its drafts' odds before anyone verified them (prompt lookup:
    # its Match); adaptive k keeps acceptance apart per value.
    evidence: Hashable | None = None


class Proposer:
    """Where a step's drafts come from: `propose`, and optional capabilities with the defaults
    of a proposer that has none of them."""

    method: str
    # Drafts from the target's own features: the loop hands it the target's hidden states
    # after every verify (observe_hidden).
    needs_hidden = False
    # Drafting costs next to nothing and says its evidence: adaptive k may draft first and
    # then choose how many of the drafts to verify (prompt lookup).
    looks_first = False
    # propose(..., stop_below=floor) ends the chain where the proposer's confidence falls below it.
    stops_early = False
    # A draft with another tokenizer: how much of its vocabulary the target shares, for the panel.
    vocab_words = ""

    def propose(
        self,
        token_ids: Sequence[int],
        k: int,
        temperature: float,
        top_p: float,
        generator: Generator | None,
    ) -> Proposal:
        """Up to k drafts for what follows token_ids; a proposer that stops_early also takes
        stop_below=floor."""
        raise NotImplementedError

    def propose_at(self, whole: Sequence[int], length: int, k: int) -> Proposal:
        """propose(whole[:length], k) at T = 0, greedy (a replay's); a proposer that reads its
        context in place skips the copy."""
        return self.propose(whole[:length], k, 0.0, 1.0, None)

    def prefill(self, token_ids: Sequence[int]) -> None:
        """Read a new prompt before the first drafting step (a no-op for proposers without a cache)."""

    def observe_hidden(self, token_ids: Sequence[int], first_position: int, hidden: torch.Tensor) -> None:
        """The target's features at the verified positions (for proposers that need_hidden)."""

    def reset(self) -> None:
        """Forget cached prompts."""


class DraftModelProposer(Proposer):
    """A smaller model with the target's tokenizer drafts k tokens autoregressively."""

    method = "draft"
    stops_early = True

    def __init__(self, draft: CachedLogits, target_width: int | None = None, sampled_width: int | None = None) -> None:
        """draft: the draft model on its backend, with its cache (torch_backend.backend.torch_draft_proposer
        wraps a torch model; ggml's a LlamaCached). sampled_width: the ids that are real tokens
        in both (spectui.models.vocab_map.VocabMap.same_width); None: all the target has."""
        self.draft = draft
        # Draft and target may pad their vocabularies differently (the shared ids mean the
        # same tokens). The draft never proposes an id the target lacks, nor a padding row, and
        # gives the target's other ids probability 0: the rejection rule stays exact.
        self.target_width = target_width
        self.sampled_width = min(sampled_width, target_width) if sampled_width and target_width else sampled_width or target_width

    def reset(self) -> None:
        self.draft.reset()

    def prefill(self, token_ids: Sequence[int]) -> None:
        self.draft.logits(token_ids, num_rows=1)

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None, stop_below: float = 0.0) -> Proposal:
        """Up to k drafts; with stop_below, none after the one where the product of the draft's
        probabilities for its drafts (the chain's confidence) falls below it: the draft's
        probability is a fair guess of acceptance (docs/adaptive-k.md)."""
        drafted: list[int] = []
        rows: list = []
        context = list(token_ids)
        chain = 1.0
        ops = None
        for _ in range(k):
            logits = self.draft.logits(context, num_rows=1)[0][: self.sampled_width]
            ops = ops or ops_of(logits)
            if temperature == 0.0:
                if stop_below:  # the token and its probability in one read from the device
                    token, prob = ops.argmax_and_prob(logits)
                    chain *= prob
                else:
                    token = int(logits.argmax())
            else:
                p_draft = target_probs(logits, temperature, top_p)
                if self.target_width and p_draft.shape[0] < self.target_width:
                    p_draft = ops.pad_columns(p_draft, self.target_width)
                rows.append(p_draft)
                token = sample(p_draft, generator)
                chain *= float(p_draft[token])
            drafted.append(token)
            context.append(token)
            if chain < stop_below:
                break
        return Proposal(drafted, ops.stack(rows) if rows and ops else None)


class NgramProposer(Proposer):
    """Prompt lookup: copy what followed the last n-gram the last time it appeared."""

    method = "ngram"
    looks_first = True

    def __init__(self, lookup_min: int = 1, lookup_max: int = LOOKUP_MAX) -> None:
        self.lookup_min = lookup_min
        self.lookup_max = lookup_max

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None) -> Proposal:
        drafted, match = lookup_ngram(token_ids, k, self.lookup_min, self.lookup_max)
        return Proposal(drafted, None, evidence=match if match.length else None)
