"""Tree drafting: several candidates per depth, verified in one target forward.

A tree is a flat list of drafted tokens and, for each, the index of its parent (-1: the
last token of the context, the root). One forward runs the whole tree under a 4D
attention mask where each node sees the context and its own ancestors only, at the
position its depth gives it; the target then walks down the tree and emits the path it
accepts and its own next token: at T = 0 it keeps the child it would have chosen itself
(walk_greedy), at T > 0 the child its own sample names (walk_sampled, SpecInfer's
multi-candidate rule for deterministic candidates), so the output is the target's either way.

The tree's first branch must be a chain from the root (its main chain): the cache keeps
those entries, valid as a continuation of the context, and forgets the other branches,
which the next forward recomputes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from spectui.engines.speculative.sampling import Draws, sample, target_probs
from spectui.engines.speculative.verify import Verdict
from spectui.core.events import Source


def node_depths(parents: Sequence[int]) -> list[int]:
    """Depth of each node (a child of the root has depth 1); parents come before children."""
    depths: list[int] = []
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(f"node {i}'s parent {parent} must be -1 or an earlier node")
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return depths


def main_chain_length(parents: Sequence[int]) -> int:
    """How many leading nodes form a chain from the root (node i the child of node i - 1)."""
    length = 0
    while length < len(parents) and parents[length] == length - 1:
        length += 1
    return length


def tree_attention_mask(parents: Sequence[int], num_cached: int, num_tail: int, dtype: torch.dtype,
                        device: torch.device | str) -> torch.Tensor:
    """[1, 1, num_tail + N, num_cached + num_tail + N] additive mask: the tail (context tokens not
    in the cache yet, the root last) is causal; a node sees the context, its ancestors and itself."""
    num_nodes = len(parents)
    rows = num_tail + num_nodes
    allowed = torch.zeros(rows, num_cached + rows, dtype=torch.bool)
    allowed[:, :num_cached] = True
    allowed[:num_tail, num_cached : num_cached + num_tail] = torch.ones(num_tail, num_tail).tril().bool()
    allowed[num_tail:, num_cached : num_cached + num_tail] = True
    for i, parent in enumerate(parents):
        row = num_tail + i
        allowed[row, num_cached + row] = True
        if parent >= 0:
            allowed[row] |= allowed[num_tail + parent]  # the parent's row already holds its ancestors
    mask = torch.zeros(rows, num_cached + rows, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None].to(device)


def walk_greedy(drafted: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> tuple[list[int], Verdict]:
    """The path the target takes down the tree: node indices, and its verdict.

    target_logits: [1 + N, V]; row 0 follows the root, row 1 + i follows node i.
    """
    if target_logits.shape[0] != len(drafted) + 1:
        raise ValueError(f"target_logits must have {len(drafted) + 1} rows, got {target_logits.shape[0]}")
    predicted = target_logits.argmax(dim=-1).tolist()
    return _walk(drafted, parents, lambda node, depth: predicted[node + 1])


def walk_sampled(drafted: Sequence[int], parents: Sequence[int], p_target: Any, draws: Draws) -> tuple[list[int], Verdict]:
    """The path a sampling target takes down the tree: node indices, and its verdict.

    p_target: the target's distributions after temperature and top-p, [1 + N, V] (or rows
    computed on demand, indexed the same way); row 0 follows the root, row 1 + i node i.

    At each node, x ~ p (the target's row there): a child whose token is x is descended
    into, else x is emitted. This is SpecInfer's multi-candidate rejection rule for
    candidates whose draft distribution is one-hot (the tree's top-k candidates are fixed
    by the context): accepting child c_i with probability p'(c_i), else zeroing c_i out of
    the residual p' and renormalising, and sampling p' when all are rejected, picks child
    c_i with probability exactly p(c_i) and any other token x with probability p(x). Each
    emitted token is therefore drawn from the target's own distribution given the tokens
    before it, whatever the tree holds. The draw at depth d comes from draws(d): keyed by
    position, the reply is the same whatever the tree held.
    """
    if len(p_target) != len(drafted) + 1:
        raise ValueError(f"p_target must have {len(drafted) + 1} rows, got {len(p_target)}")
    return _walk(drafted, parents, lambda node, depth: sample(p_target[node + 1], draws(depth)))


def _walk(drafted: Sequence[int], parents: Sequence[int], target_token: Callable[[int, int], int]) -> tuple[list[int], Verdict]:
    """Down from the root while target_token(node, depth) (the target's token after node) is a child."""
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        children.setdefault(parent, []).append(i)
    path: list[int] = []
    node = -1
    while True:
        wanted = target_token(node, len(path))
        match = next((child for child in children.get(node, []) if drafted[child] == wanted), None)
        if match is None:
            # A leaf reached means every depth passed: the target's token is the bonus.
            source = Source.BONUS if node not in children else Source.RECOVERED
            return path, Verdict(len(path), wanted, source)
        path.append(match)
        node = match


class _ProbRows:
    """target_probs of logits rows, computed when first read: a walk visits depth + 1 rows of
    the tree's 1 + N, and top-p sorts the whole vocabulary for each row it is given."""

    def __init__(self, logits: torch.Tensor, temperature: float, top_p: float) -> None:
        self.logits, self.temperature, self.top_p = logits, temperature, top_p
        self.rows: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return self.logits.shape[0]

    def __getitem__(self, row: int) -> torch.Tensor:
        if row not in self.rows:
            self.rows[row] = target_probs(self.logits[row], self.temperature, self.top_p)
        return self.rows[row]


def verify_tree(
    target: Any,
    token_ids: Sequence[int],
    drafted: Sequence[int],
    parents: Sequence[int],
    temperature: float = 0.0,
    top_p: float = 1.0,
    draws: Draws | None = None,
):
    """One target forward over the tree and the walk down it (greedy at T = 0, else sampled).

    Returns (drafted as a chain along the verified path: the accepted nodes, then the
    rejected top candidate if any, as a Step shows drafts; the verdict; the target's
    features of the context tail and the accepted nodes; the first position they describe).
    """
    logits, hidden, first_position = target.tree_logits_and_hidden(token_ids, drafted, parents)
    if temperature == 0.0:
        path, verdict = walk_greedy(drafted, parents, logits)
    else:
        path, verdict = walk_sampled(drafted, parents, _ProbRows(logits, temperature, top_p), draws or (lambda depth: None))
    last = path[-1] if path else -1
    rejected = [i for i, parent in enumerate(parents) if parent == last][:1]
    shown = [drafted[i] for i in path + rejected]
    num_tail = len(token_ids) - first_position
    rows = list(range(num_tail)) + [num_tail + i for i in path]
    return shown, verdict, hidden[rows], first_position
