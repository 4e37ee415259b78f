"""Proposers that draft from the target's own features: Medusa heads and EAGLE.

They need the target's last hidden state at the verified positions, which the loop
hands them after every verify (`needs_hidden`, `observe_hidden`); they draft from the
feature of the position before the last token, the one whose logits chose that token.
Chain drafting (one candidate per depth), or with tree_width > 1 a tree of each depth's
top candidates, at any temperature: the tree's candidates are fixed by the context, and
the target's walk down it (spectui.engines.speculative.tree) keeps sampled output exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from spectui.engines.torch_backend.kv import common_prefix_len
from spectui.engines.speculative.proposers import Proposal, Proposer
from spectui.engines.speculative.sampling import sample, target_probs
from spectui.heads.lm import embed, lm_logits

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from spectui.heads.eagle import EagleDrafter, KeysValues
    from spectui.heads.medusa import MedusaHeads

    DrafterState = tuple[torch.Tensor, KeysValues]  # EAGLE's predicted feature and its attention cache


class FeatureHistory:
    """The target's features by position, for the tokens it verified.

    Kept with the tokens they came from: a feature depends on every token up to its
    position, so one is only used while the current sequence still starts with them
    (another reply, or an engine variant sharing the target's cache, may have moved on).
    """

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.features: list[torch.Tensor | None] = []

    def observe(self, token_ids: Sequence[int], first_position: int, hidden: torch.Tensor) -> None:
        """hidden[i] is the feature at position first_position + i of token_ids."""
        kept = min(common_prefix_len(self.tokens, token_ids), first_position, len(self.features))
        self.features = self.features[:kept] + [None] * (first_position - kept) + list(hidden.unbind(0))
        self.tokens = list(token_ids)

    def window(self, token_ids: Sequence[int], size: int) -> tuple[int, torch.Tensor] | None:
        """(start, features [m, H]) of the up to `size` known positions ending at the one
        before the last token; None when that position's feature is not known."""
        last = len(token_ids) - 2
        valid = common_prefix_len(self.tokens, token_ids)
        if last < 0 or last >= min(valid, len(self.features)) or self.features[last] is None:
            return None
        start = last
        while start > max(0, last - size + 1) and self.features[start - 1] is not None:
            start -= 1
        # every one is known: the walk above stopped at the first unknown
        known = [feature for feature in self.features[start : last + 1] if feature is not None]
        return start, torch.stack(known).float()


def draw(logits: torch.Tensor, temperature: float, top_p: float,
         generator: torch.Generator | None) -> tuple[int, torch.Tensor | None]:
    """A draft token from one row of logits, and the distribution it was drawn from (None at
    T = 0): the verifier's rejection rule needs exactly that distribution to stay lossless."""
    if temperature == 0.0:
        return int(torch.argmax(logits)), None
    p_draft = target_probs(logits, temperature, top_p)
    return sample(p_draft, generator), p_draft


class _FeatureProposer(Proposer):
    needs_hidden = True  # the prompt's features come from the target's prefill, through observe_hidden

    def __init__(self) -> None:
        self.history = FeatureHistory()

    def reset(self) -> None:
        self.history = FeatureHistory()

    def observe_hidden(self, token_ids: Sequence[int], first_position: int, hidden: torch.Tensor) -> None:
        self.history.observe(token_ids, first_position, hidden)


class MedusaProposer(_FeatureProposer):
    """Head i drafts the token i + 1 places after the target's next one, all from one feature.

    The heads do not see each other's drafts, so at most num_heads tokens are drafted, and
    each draft's distribution does not depend on the drafts before it (what the rejection
    rule assumes holds trivially).
    """

    method = "medusa"

    def __init__(self, heads: MedusaHeads, lm_head: torch.nn.Module, tree_width: int = 1) -> None:
        super().__init__()
        self.heads = heads
        self.lm_head = lm_head
        # Candidates per depth, verified as a tree; 1 drafts a chain.
        self.tree_width = tree_width

    @torch.inference_mode()
    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: torch.Generator | None) -> Proposal:
        window = self.history.window(token_ids, 1)
        if window is None:
            return Proposal([], None)
        _, features = window
        num_drafts = min(k, self.heads.num_heads)
        logits = lm_logits(self.lm_head, self.heads(features[-1])[:num_drafts])
        if self.tree_width > 1:
            candidates = logits.topk(min(self.tree_width, logits.shape[-1]), dim=-1).indices.tolist()
            drafted, parents = medusa_tree(candidates)
            return Proposal(drafted, None, parents)
        drafted: list[int] = []
        rows: list[torch.Tensor] = []
        for row in logits:
            token, p_draft = draw(row, temperature, top_p, generator)
            drafted.append(token)
            if p_draft is not None:
                rows.append(p_draft)
        return Proposal(drafted, torch.stack(rows) if rows else None)


def medusa_tree(candidates: list[list[int]]) -> tuple[list[int], list[int]]:
    """A sparse tree from each depth's ranked candidates: the main chain (every depth's top
    candidate) first, then, under each main-chain node, the other candidates for the next
    depth, each continued by the top candidates of the depths after it.

    Medusa's heads do not see the path, so a depth's candidates are the same under every
    parent; this tree grows as width * depth^2 / 2 rather than width^depth.
    """
    depth = len(candidates)
    drafted = [candidates[d][0] for d in range(depth)]
    parents = list(range(-1, depth - 1))
    for d in range(depth):
        for alternative in candidates[d][1:]:
            parent = d - 1  # the main chain's node one depth up (-1: the root)
            for token in [alternative] + [candidates[e][0] for e in range(d + 1, depth)]:
                drafted.append(token)
                parents.append(parent)
                parent = len(drafted) - 1
    return drafted, parents


class EagleProposer(_FeatureProposer):
    """EAGLE drafting: predict the next feature, read a token from it through the target's
    LM head, feed both back, k times; with tree_width > 1, a tree whose main chain is the
    argmax chain."""

    method = "eagle"

    def __init__(self, drafter: EagleDrafter, lm_head: torch.nn.Module, embedding: torch.nn.Module, tree_width: int = 1) -> None:
        super().__init__()
        self.drafter = drafter
        self.lm_head = lm_head
        self.embedding = embedding
        self.tree_width = tree_width

    @torch.inference_mode()
    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: torch.Generator | None) -> Proposal:
        window = self.history.window(token_ids, self.drafter.window)
        if window is None:
            return Proposal([], None)
        start, features = window
        # Pair j: the feature at position j with the token at j + 1.
        next_ids = torch.tensor(list(token_ids[start + 1 :]), dtype=torch.long, device=features.device)
        state = self.drafter.start(features, embed(self.embedding, next_ids))
        if self.tree_width > 1:
            drafted, parents = self._tree(state, k)
            return Proposal(drafted, None, parents)
        drafted: list[int] = []
        rows: list[torch.Tensor] = []
        for depth in range(k):
            token, p_draft = draw(self._logits(state), temperature, top_p, generator)
            drafted.append(token)
            if p_draft is not None:
                rows.append(p_draft)
            if depth + 1 < k:
                state = self._extend(state, token)
        return Proposal(drafted, torch.stack(rows) if rows else None)

    def _logits(self, state: DrafterState) -> torch.Tensor:
        return lm_logits(self.lm_head, state[0])

    def _extend(self, state: DrafterState, token: int) -> DrafterState:
        """The state after drafting token from state's predicted feature."""
        predicted, keys_values = state
        token_embedding = embed(self.embedding, torch.tensor([token], device=predicted.device))[0]
        return self.drafter.step(predicted, token_embedding, keys_values)

    def _tree(self, state: DrafterState, k: int) -> tuple[list[int], list[int]]:
        """The shape of medusa_tree: the main chain of argmax drafts, and under each of its
        nodes the other top candidates, each continued greedily to depth k. Unlike Medusa,
        a continuation is predicted from its own branch."""
        drafted: list[int] = []
        parents: list[int] = []
        branch_points = []
        for depth in range(k):
            logits = self._logits(state)
            top = logits.topk(min(self.tree_width, logits.shape[-1])).indices.tolist()
            drafted.append(top[0])
            parents.append(depth - 1)
            branch_points.append((depth, state, top[1:]))
            if depth + 1 < k:
                state = self._extend(state, top[0])
        for depth, base, alternatives in branch_points:
            for token in alternatives:
                drafted.append(token)
                parents.append(depth - 1)
                branch = base
                for _ in range(depth + 1, k):
                    branch = self._extend(branch, token)
                    token = int(self._logits(branch).argmax())
                    drafted.append(token)
                    parents.append(len(drafted) - 2)
        return drafted, parents


def head_proposer(heads: torch.nn.Module, kind: str, model: PreTrainedModel,
                  tree_width: int = 1) -> MedusaProposer | EagleProposer:
    """The proposer for trained heads of `kind` on the target `model` (frozen LM head and
    embedding). tree_width > 1: a draft tree, that many candidates per depth."""
    from spectui.heads.eagle import EagleDrafter
    from spectui.heads.medusa import MedusaHeads

    lm_head = model.get_output_embeddings()
    assert lm_head is not None, "a causal LM has its LM head"
    if kind == "medusa":
        assert isinstance(heads, MedusaHeads), "heads of kind medusa are MedusaHeads"
        return MedusaProposer(heads, lm_head, tree_width)
    assert isinstance(heads, EagleDrafter), "heads of kind eagle are an EagleDrafter"
    return EagleProposer(heads, lm_head, model.get_input_embeddings(), tree_width)
