"""EAGLE (Li et al. 2024): draft at the feature level, one decoder layer deep.

Input at position j: concat(feature_j, embedding(token_{j+1})) -> fc to the hidden size
-> one causal decoder layer -> a prediction of feature_{j+1}. The target's frozen LM
head turns a predicted feature into a token; drafting rolls features forward.

The layer is written here rather than borrowed from transformers: it sees at most
`window` positions, with a learned bias per head and distance instead of rotary
positions, so training (banded causal mask) and drafting see exactly the same thing.
Drafting (`start`, then `step` per drafted token) keeps the window's keys and values: a
row's key and value depend on that row's inputs alone, so a new row needs one row of work.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from spectui.heads.lm import VocabSubset, token_loss

# The paper's weights: regress features, with a light token-level term through the LM head.
FEATURE_LOSS_WEIGHT = 1.0
TOKEN_LOSS_WEIGHT = 0.1
# Uniform noise on the input features (the paper's U(-0.1, 0.1), relative to the features'
# scale here): drafting feeds the layer its own slightly wrong predictions.
FEATURE_NOISE = 0.1


KeysValues = tuple[torch.Tensor, torch.Tensor]  # [heads, L, head size] each


class EagleDrafter(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, window: int) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.window = window
        self.fc = nn.Linear(2 * hidden_size, hidden_size)
        self.attention_norm = nn.RMSNorm(hidden_size)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.attention_out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.mlp_norm = nn.RMSNorm(hidden_size)
        self.gate = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.distance_bias = nn.Parameter(torch.zeros(num_heads, window))

    def sizes(self) -> dict:
        return {
            "hidden_size": self.hidden_size,
            "num_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "window": self.window,
        }

    def forward(self, features: torch.Tensor, next_embeddings: torch.Tensor) -> torch.Tensor:
        """features [B, L, H] at positions j, next_embeddings [B, L, H] of tokens j + 1
        -> predicted features [B, L, H] at positions j + 1."""
        x = self.fc(torch.cat([features, next_embeddings], dim=-1))
        x = x + self._attention(self.attention_norm(x))
        return self._mlp(x)

    def start(self, features: torch.Tensor, next_embeddings: torch.Tensor) -> tuple[torch.Tensor, KeysValues]:
        """features [L, H] at positions j, next_embeddings [L, H] of tokens j + 1 -> the
        predicted feature at the last position + 1 [H], and the window's keys and values.
        Only the last row's output is needed: the other rows stop at their keys and values."""
        x = self.fc(torch.cat([features, next_embeddings], dim=-1))
        q, k, v = self._qkv(self.attention_norm(x))
        return self._last_row(x[-1:], q[:, -1:], (k, v)), (k, v)

    def step(self, feature: torch.Tensor, next_embedding: torch.Tensor, keys_values: KeysValues) -> tuple[torch.Tensor, KeysValues]:
        """One more position: its feature (a prediction) [H] and the drafted token's
        embedding [H] -> the next predicted feature [H], and the window moved on by one."""
        x = self.fc(torch.cat([feature, next_embedding])[None])
        q, new_keys, new_values = self._qkv(self.attention_norm(x))
        keys, values = keys_values
        keys_values = (torch.cat([keys, new_keys], dim=1)[:, -self.window :],
                       torch.cat([values, new_values], dim=1)[:, -self.window :])
        return self._last_row(x, q, keys_values), keys_values

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [..., L, H], normalised -> queries, keys and values [..., heads, L, head size]."""
        head_size = self.hidden_size // self.num_heads
        qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, head_size))  # [..., L, 3, heads, head size]
        q, k, v = qkv.movedim(-3, 0).transpose(-3, -2)
        return q, k, v

    def _last_row(self, x: torch.Tensor, q: torch.Tensor, keys_values: KeysValues) -> torch.Tensor:
        """x [1, H] and its query: the window's newest row, whose key and value end
        keys_values -> its output [H]."""
        keys, values = keys_values
        bias = self._mask(keys.shape[1], x.device, x.dtype)[:, -1:]  # the newest row's, as in training
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias)
        x = x + self.attention_out(out.transpose(0, 1).reshape(1, self.hidden_size))
        return self._mlp(x)[0]

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self._qkv(x)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self._mask(length, x.device, x.dtype))
        return self.attention_out(out.transpose(1, 2).reshape(batch, length, self.hidden_size))

    def _mask(self, length: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """[heads, L, L] additive: the learned distance bias inside the causal window, -inf outside."""
        positions = torch.arange(length, device=device)
        distance = positions[:, None] - positions[None, :]
        allowed = (distance >= 0) & (distance < self.window)
        bias = self.distance_bias[:, distance.clamp(0, self.window - 1)].to(dtype)
        return bias.masked_fill(~allowed, float("-inf"))


def eagle_loss(
    drafter: EagleDrafter,
    lm_head: nn.Module,
    embedding: nn.Module,
    features: torch.Tensor,
    token_ids: torch.Tensor,
    generator: torch.Generator | None = None,
    vocab: VocabSubset | None = None,
) -> torch.Tensor:
    """Smooth L1 between predicted and true features, plus cross-entropy of the predicted
    feature's tokens against the sequence. features [L, H], token_ids [L]."""
    inputs = features[:-1]
    if FEATURE_NOISE:
        scale = inputs.pow(2).mean().sqrt()
        noise = torch.rand(inputs.shape, generator=generator, device=inputs.device) * 2 - 1
        inputs = inputs + FEATURE_NOISE * scale * noise
    next_embeddings = embedding(token_ids[1:]).float()
    predicted = drafter(inputs[None], next_embeddings[None])[0]
    feature_loss = F.smooth_l1_loss(predicted, features[1:])
    # predicted[j] is feature j + 1, which predicts token j + 2.
    next_token_loss = token_loss(lm_head, predicted[:-1], token_ids[2:], vocab)
    return FEATURE_LOSS_WEIGHT * feature_loss + TOKEN_LOSS_WEIGHT * next_token_loss


def default_sizes(hidden_size: int) -> dict:
    """Heads of 64 dimensions, as most targets use; an MLP twice as wide as the model."""
    num_heads = max(1, hidden_size // 64)
    while hidden_size % num_heads:
        num_heads -= 1
    return {"hidden_size": hidden_size, "num_heads": num_heads, "intermediate_size": 2 * hidden_size, "window": 32}
