"""The verify half of speculative decoding: which drafts the target keeps, and its next token.

Two rules, one per sampling mode:
- greedy (T = 0): keep drafts while they equal the target's argmax. The output is then
  token-identical to the target decoding alone.
- sampled (T > 0): the rejection rule of Leviathan et al. / Chen et al. Keep draft i with
  probability min(1, p_target/p_draft); at the first rejection draw from the residual
  norm(max(0, p_target - p_draft)). Every emitted token is then distributed exactly as
  the target's own sample would be, whatever the draft proposed. For drafts that are point
  masses (prompt lookup) this is the same as: the target draws its own token x at each
  position and keeps the draft while it equals x (verify_copies). Drawn from randomness
  keyed by position, that reply is the same whatever k.

Row i of the target's tensors is its prediction for the position of draft i; row k comes
after all k drafts, which is where the bonus token is drawn. The rules take numpy rows (the
ggml backend) or torch tensors alike (spectui.engines.speculative.arrays).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectui.engines.speculative.arrays import ops_of
from spectui.engines.speculative.sampling import Array, Draws, Generator, sample
from spectui.core.events import Source

# Below this a residual is rounding noise: both rows agree and no token is left to recover.
_RESIDUAL_EPS = 1e-6


@dataclass(frozen=True)
class Verdict:
    num_accepted: int  # drafts accepted, 0..k
    next_token: int  # the target's token after the accepted prefix
    next_source: Source  # RECOVERED after a rejection, BONUS if all k passed, TARGET if k == 0


def verify_greedy(drafted: Sequence[int], target_logits: Array) -> Verdict:
    _check_rows("target_logits", target_logits, len(drafted) + 1)
    verdict = greedy_verdict(drafted, target_logits.argmax(-1).tolist())
    assert verdict is not None  # k + 1 rows always decide
    return verdict


def verify_greedy_with_gaps(drafted: Sequence[int], target_logits: Array) -> tuple[Verdict, list[float]]:
    """verify_greedy, and every row's top-two gap (how near a tie it was), from one read of the
    device: a step's only wait on it."""
    _check_rows("target_logits", target_logits, len(drafted) + 1)
    predicted, gaps = ops_of(target_logits).greedy_rows(target_logits)
    verdict = greedy_verdict(drafted, predicted)
    assert verdict is not None  # k + 1 rows always decide
    return verdict, gaps


def greedy_verdict(drafted: Sequence[int], predicted: Sequence[int]) -> Verdict | None:
    """The T = 0 verdict as far as the target's choices for the first rows decide it; None
    while every row so far kept its draft and the row after them is still to come."""
    for i, token in enumerate(predicted):
        if i == len(drafted):
            return Verdict(i, token, _source_after_all_accepted(i))
        if token != drafted[i]:
            return Verdict(i, token, Source.RECOVERED)
    return None


def verify_sampled(
    drafted: Sequence[int],
    p_target: Array,
    p_draft: Array | None,
    generator: Generator | None,
) -> Verdict:
    """p_draft is None for a deterministic proposer (n-gram): a point mass on each draft,
    verified by verify_copies with every row drawn from `generator`."""
    if p_draft is None:
        return verify_copies(drafted, p_target, lambda i: generator)
    k = len(drafted)
    _check_rows("p_target", p_target, k + 1)
    vocab = p_target.shape[-1]
    _check_ids(drafted, vocab)
    _check_rows("p_draft", p_draft, k)
    if p_draft.shape[-1] != vocab:
        raise ValueError(f"p_draft has {p_draft.shape[-1]} columns, p_target has {vocab}")
    ops = ops_of(p_target)
    draft_rows = ops.like(p_draft, p_target)
    rows, ids = list(range(k)), list(drafted)
    target_of_draft, draft_of_draft = p_target[rows, ids], draft_rows[rows, ids]

    # Keep draft i when u < p_target/p_draft, written without the division: a draft the
    # proposer gave probability 0 is still kept if the target likes it, and 0/0 rejects.
    uniforms = ops.uniforms(generator, k, p_target)
    accepted = (uniforms * draft_of_draft < target_of_draft).tolist()
    for i in range(k):
        if not accepted[i]:
            residual = _residual(p_target[i], draft_rows[i])
            return Verdict(i, sample(residual, generator), Source.RECOVERED)
    return Verdict(k, sample(p_target[k], generator), _source_after_all_accepted(k))


def verify_copies(drafted: Sequence[int], p_target: Array, draws: Draws) -> Verdict:
    """Drafts that are point masses (prompt lookup), at T > 0: the target draws its own token
    x_i ~ p_target[i] from draws(i), and draft i is kept while it equals x_i.

    The rejection rule for a point mass keeps the draft with probability p(draft) and else
    draws from p with the draft removed: the emitted token is x ~ p either way, and this
    draws x once. Every row's draw comes from draws(i), so with draws keyed by position
    the reply does not depend on how many drafts each step verified."""
    k = len(drafted)
    _check_rows("p_target", p_target, k + 1)
    _check_ids(drafted, p_target.shape[-1])
    for i, draft in enumerate(drafted):
        token = sample(p_target[i], draws(i))
        if token != draft:
            return Verdict(i, token, Source.RECOVERED)
    return Verdict(k, sample(p_target[k], draws(k)), _source_after_all_accepted(k))


def _residual(target_row: Array, draft_row: Array) -> Array:
    """norm(max(0, p_target - p_draft)): the target's mass the draft did not already cover."""
    residual = (target_row - draft_row).clip(min=0.0)
    total = float(residual.sum())
    if total < _RESIDUAL_EPS:
        # Only rounding is left (the rows agree up to float error): draw from the target.
        return target_row / target_row.sum()
    return residual / total


def _source_after_all_accepted(k: int) -> Source:
    return Source.BONUS if k > 0 else Source.TARGET


def _check_ids(drafted: Sequence[int], vocab: int) -> None:
    if any(not 0 <= draft < vocab for draft in drafted):
        raise ValueError(f"drafted ids {list(drafted)} out of range for a vocabulary of {vocab}")


def _check_rows(name: str, tensor: Array, rows: int) -> None:
    if len(tensor.shape) != 2 or tensor.shape[0] != rows:
        raise ValueError(f"{name} must have shape [{rows}, V], got {tuple(tensor.shape)}")
