"""The target's frozen pieces a head borrows: its LM head and its token embedding."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F


def input_dtype(module: torch.nn.Module) -> torch.dtype:
    """The dtype a target module's float inputs must have. A quantized module (int8) keeps
    no float weight to read it from, and takes float32."""
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.is_floating_point():
        return weight.dtype
    return torch.float32


def lm_logits(lm_head: torch.nn.Module, features: torch.Tensor) -> torch.Tensor:
    """Float32 logits of features [..., H] through the target's LM head, whatever its dtype."""
    return lm_head(features.to(input_dtype(lm_head))).float()


def embed(embedding: torch.nn.Module, token_ids: torch.Tensor) -> torch.Tensor:
    return embedding(token_ids).float()


@dataclass(frozen=True)
class VocabSubset:
    """Token ids a training step's softmax runs over, and where each id sits in it (-1: absent)."""

    ids: torch.Tensor  # [S]
    position: torch.Tensor  # [V]


def sampled_vocab(always: torch.Tensor, vocab_size: int, negatives: int, generator: torch.Generator | None) -> VocabSubset:
    """`always` (every token the training data holds) and `negatives` random others.

    A softmax over a 152k vocabulary costs most of a training step on a CPU. Every target
    token is in `always`, so the loss still names the right answer; the random negatives,
    new each step, keep pushing down the logits of tokens the data never shows.
    """
    device = always.device
    drawn = torch.randint(vocab_size, (negatives,), generator=generator, device=device)
    ids = torch.unique(torch.cat([always, drawn]))
    position = torch.full((vocab_size,), -1, dtype=torch.long, device=device)
    position[ids] = torch.arange(ids.shape[0], device=device)
    return VocabSubset(ids, position)


def token_loss(lm_head: torch.nn.Module, features: torch.Tensor, targets: torch.Tensor, vocab: VocabSubset | None = None) -> torch.Tensor:
    """Cross-entropy of features [N, H] through the LM head against targets [N], over the
    whole vocabulary or, in training, over a sampled subset of it."""
    if vocab is None:
        return F.cross_entropy(lm_logits(lm_head, features), targets)
    weight, bias = lm_head.weight, getattr(lm_head, "bias", None)
    assert isinstance(weight, torch.Tensor), "a sampled vocabulary reads the float LM head's own rows"
    rows = weight[vocab.ids]
    logits = features.to(rows.dtype) @ rows.T
    if isinstance(bias, torch.Tensor):
        logits = logits + bias[vocab.ids]
    return F.cross_entropy(logits.float(), vocab.position[targets])
