"""The verify half of speculative decoding: which drafts the target keeps, and its next token.

Two rules, one per sampling mode:
- greedy (T = 0): keep drafts while they equal the target's argmax. The output is then
  token-identical to the target decoding alone.
- sampled (T > 0): the rejection rule of Leviathan et al. / Chen et al. Keep draft i with
  probability min(1, p_target/p_draft); at the first rejection draw from the residual
  norm(max(0, p_target - p_draft)). Every emitted token is then distributed exactly as
  the target's own sample would be, whatever the draft proposed.

Row i of the target's tensors is its prediction for the position of draft i; row k comes
after all k drafts, which is where the bonus token is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from spectui.engines.embedded.sampling import sample
from spectui.events import Source

# Below this a residual is rounding noise: both rows agree and no token is left to recover.
_RESIDUAL_EPS = 1e-6


@dataclass(frozen=True)
class Verdict:
    num_accepted: int  # drafts accepted, 0..k
    next_token: int  # the target's token after the accepted prefix
    next_source: Source  # RECOVERED after a rejection, BONUS if all k passed, TARGET if k == 0


def verify_greedy(drafted: Sequence[int], target_logits: torch.Tensor) -> Verdict:
    k = len(drafted)
    _check_rows("target_logits", target_logits, k + 1)
    predicted = target_logits.argmax(dim=-1).tolist()
    for i, draft in enumerate(drafted):
        if predicted[i] != draft:
            return Verdict(i, predicted[i], Source.RECOVERED)
    return Verdict(k, predicted[k], _source_after_all_accepted(k))


def verify_sampled(
    drafted: Sequence[int],
    p_target: torch.Tensor,
    p_draft: torch.Tensor | None,
    generator: torch.Generator | None,
) -> Verdict:
    """p_draft is None for a deterministic proposer (n-gram): a point mass on each draft."""
    k = len(drafted)
    _check_rows("p_target", p_target, k + 1)
    vocab = p_target.shape[-1]
    if any(not 0 <= draft < vocab for draft in drafted):
        raise ValueError(f"drafted ids {list(drafted)} out of range for a vocabulary of {vocab}")
    device = p_target.device
    rows = torch.arange(k, device=device)
    ids = torch.tensor(drafted, dtype=torch.long, device=device)
    target_of_draft = p_target[rows, ids]
    if p_draft is None:
        draft_of_draft = torch.ones_like(target_of_draft)
    else:
        _check_rows("p_draft", p_draft, k)
        if p_draft.shape[-1] != vocab:
            raise ValueError(f"p_draft has {p_draft.shape[-1]} columns, p_target has {vocab}")
        p_draft = p_draft.to(device=device, dtype=p_target.dtype)
        draft_of_draft = p_draft[rows, ids]

    # Keep draft i when u < p_target/p_draft, written without the division: a draft the
    # proposer gave probability 0 is still kept if the target likes it, and 0/0 rejects.
    uniforms = torch.rand(k, generator=generator, device=device, dtype=p_target.dtype)
    accepted = (uniforms * draft_of_draft < target_of_draft).tolist()
    for i in range(k):
        if not accepted[i]:
            draft_row = None if p_draft is None else p_draft[i]
            residual = _residual(p_target[i], draft_row, drafted[i])
            return Verdict(i, sample(residual, generator), Source.RECOVERED)
    return Verdict(k, sample(p_target[k], generator), _source_after_all_accepted(k))


def _residual(target_row: torch.Tensor, draft_row: torch.Tensor | None, draft: int) -> torch.Tensor:
    """norm(max(0, p_target - p_draft)): the target's mass the draft did not already cover."""
    if draft_row is None:
        # A point mass on the draft: the residual is the target with that id removed.
        residual = target_row.clone()
        residual[draft] = 0.0
    else:
        residual = torch.clamp(target_row - draft_row, min=0.0)
    total = float(residual.sum())
    if total < _RESIDUAL_EPS:
        # Only rounding is left (the rows agree up to float error): draw from the target.
        return target_row / target_row.sum()
    return residual / total


def _source_after_all_accepted(k: int) -> Source:
    return Source.BONUS if k > 0 else Source.TARGET


def _check_rows(name: str, tensor: torch.Tensor, rows: int) -> None:
    if tensor.dim() != 2 or tensor.shape[0] != rows:
        raise ValueError(f"{name} must have shape [{rows}, V], got {tuple(tensor.shape)}")
