"""The array operations of spectui.engines.speculative.arrays on torch tensors (the torch backend)."""

from __future__ import annotations

import torch


class TorchOps:
    name = "torch"

    def generator(self, seed: int, device: str | torch.device = "cpu") -> torch.Generator:
        return torch.Generator(device=device).manual_seed(seed)

    def uniforms(self, generator: torch.Generator | None, size: int, like: torch.Tensor) -> torch.Tensor:
        return torch.rand(size, generator=generator, device=like.device, dtype=like.dtype)

    def uniform64(self, generator: torch.Generator | None, like: torch.Tensor) -> float:
        return float(torch.rand((), generator=generator, dtype=torch.float64, device=like.device))

    def softmax(self, logits: torch.Tensor, temperature: float) -> torch.Tensor:
        return torch.softmax(logits.float() / temperature, dim=-1)

    def sort_descending(self, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.sort(probs, dim=-1, descending=True, stable=True)

    def unsort(self, values: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(values).scatter(-1, order, values)

    def cumsum(self, values: torch.Tensor, float64: bool = False) -> torch.Tensor:
        return torch.cumsum(values, -1, dtype=torch.float64 if float64 else None)

    def blocks(self, probs: torch.Tensor, block: int) -> torch.Tensor:
        return torch.nn.functional.pad(probs, (0, (-probs.shape[0]) % block)).view(-1, block)

    def row_sums64(self, blocks: torch.Tensor) -> torch.Tensor:
        return blocks.sum(dim=1, dtype=torch.float64)

    def searchsorted_right(self, cumulative: torch.Tensor, value: float) -> int:
        wanted = torch.tensor([value], dtype=cumulative.dtype, device=cumulative.device)
        return int(torch.searchsorted(cumulative, wanted, right=True))

    def last_with_mass(self, cumulative: torch.Tensor) -> int:
        steps = torch.diff(cumulative, prepend=cumulative.new_zeros(1))
        return int(torch.nonzero(steps > 0)[-1])

    def prob_of(self, logits: torch.Tensor, token: int) -> float:
        return float(torch.exp(logits[token] - torch.logsumexp(logits, dim=0)))

    def pad_columns(self, probs: torch.Tensor, width: int) -> torch.Tensor:
        return torch.nn.functional.pad(probs, (0, width - probs.shape[-1]))

    def stack(self, rows: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(rows)

    def like(self, array: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return array.to(device=reference.device, dtype=reference.dtype)

    def top_two_gaps(self, rows: torch.Tensor) -> list[float]:
        top = rows.float().topk(2, dim=-1).values
        return (top[:, 0] - top[:, 1]).tolist()


TORCH = TorchOps()
