"""The target's frozen pieces a head borrows: its LM head and its token embedding."""

from __future__ import annotations

import torch


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
