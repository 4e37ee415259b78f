"""The array operations of spectui.engines.speculative.arrays on torch tensors (the torch backend)."""

from __future__ import annotations

import torch


class TorchOps:
    name = "torch"

    def generator(self, seed: int, device="cpu") -> torch.Generator:
        return torch.Generator(device=device).manual_seed(seed)

    def uniforms(self, generator, size: int, like):
        return torch.rand(size, generator=generator, device=like.device, dtype=like.dtype)

    def uniform64(self, generator, like) -> float:
        return float(torch.rand((), generator=generator, dtype=torch.float64, device=like.device))

    def softmax(self, logits, temperature: float):
        return torch.softmax(logits.float() / temperature, dim=-1)

    def sort_descending(self, probs):
        return torch.sort(probs, dim=-1, descending=True, stable=True)

    def unsort(self, values, order):
        return torch.zeros_like(values).scatter(-1, order, values)

    def cumsum(self, values, float64: bool = False):
        return torch.cumsum(values, -1, dtype=torch.float64 if float64 else None)

    def blocks(self, probs, block: int):
        return torch.nn.functional.pad(probs, (0, (-probs.shape[0]) % block)).view(-1, block)

    def row_sums64(self, blocks):
        return blocks.sum(dim=1, dtype=torch.float64)

    def searchsorted_right(self, cumulative, value: float) -> int:
        wanted = torch.tensor([value], dtype=cumulative.dtype, device=cumulative.device)
        return int(torch.searchsorted(cumulative, wanted, right=True))

    def last_with_mass(self, cumulative) -> int:
        steps = torch.diff(cumulative, prepend=cumulative.new_zeros(1))
        return int(torch.nonzero(steps > 0)[-1])

    def prob_of(self, logits, token: int) -> float:
        return float(torch.exp(logits[token] - torch.logsumexp(logits, dim=0)))

    def pad_columns(self, probs, width: int):
        return torch.nn.functional.pad(probs, (0, width - probs.shape[-1]))

    def stack(self, rows: list):
        return torch.stack(rows)

    def like(self, array, reference):
        return array.to(device=reference.device, dtype=reference.dtype)

    def top_two_gaps(self, rows) -> list[float]:
        top = rows.float().topk(2, dim=-1).values
        return (top[:, 0] - top[:, 1]).tolist()


TORCH = TorchOps()
