"""Medusa heads (Cai et al. 2024): h small residual blocks on the target's last hidden
state; head i reads the feature at position t and predicts token t + 1 + i through the
target's own (frozen) LM head. The LM head itself already predicts t + 1.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from spectui.heads.lm import VocabSubset, token_loss

# The paper weights head i's loss by 0.8^i: later heads are harder and noisier, and should
# not pull the shared training away from the heads that get accepted most.
HEAD_LOSS_DECAY = 0.8


class ResBlock(nn.Module):
    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size)
        # Zero weights make an untrained head the identity: it starts as the target's own
        # LM head, a sane draft from the first step of training.
        nn.init.zeros_(self.linear.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_layers: int = 1) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.num_layers = num_layers
        self.heads = nn.ModuleList(
            nn.Sequential(*[ResBlock(hidden_size) for _ in range(num_layers)]) for _ in range(num_heads)
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """features [..., H] -> [num_heads, ..., H]: what each head hands the LM head."""
        return torch.stack([head(features) for head in self.heads])

    def sizes(self) -> dict:
        return {"hidden_size": self.hidden_size, "num_heads": self.num_heads, "num_layers": self.num_layers}


def medusa_loss(
    heads: MedusaHeads, lm_head: nn.Module, features: torch.Tensor, token_ids: torch.Tensor, vocab: VocabSubset | None = None
) -> torch.Tensor:
    """Cross-entropy of head i (0-based) at position t against token t + 2 + i.

    features [L, H]: the target's feature at each position; token_ids [L]: the sequence.
    """
    length = token_ids.shape[0]
    head_features = heads(features)
    total = features.new_zeros(())
    weight_sum = 0.0
    for i in range(heads.num_heads):
        shift = 2 + i
        if length <= shift:
            break
        weight = HEAD_LOSS_DECAY**i
        total = total + weight * token_loss(lm_head, head_features[i, : length - shift], token_ids[shift:], vocab)
        weight_sum += weight
    return total / max(weight_sum, 1e-9)
