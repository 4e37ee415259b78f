"""The array operations of spectui.engines.speculative.arrays on torch tensors (the torch backend)."""

from __future__ import annotations

import torch


class TorchOps:
    name = "torch"

    def generator(self, seed: int, device: str | torch.device = "cpu") -> torch.Generator:
        """A CPU generator whatever the device: the target draws from one per row (keyed by
        position), and a CUDA generator per row costs a device call to make and to seed."""
        return torch.Generator().manual_seed(seed)

    def uniforms(self, generator: torch.Generator | None, size: int, like: torch.Tensor) -> torch.Tensor:
        return torch.rand(size, generator=generator, dtype=like.dtype).to(like.device)

    def uniform64(self, generator: torch.Generator | None, like: torch.Tensor) -> float:
        return float(torch.rand((), generator=generator, dtype=torch.float64))  # on the host: no device read

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

    def greedy_rows(self, rows: torch.Tensor) -> tuple[list[int], list[float]]:
        ids = rows.argmax(-1)
        top = rows.float().topk(2, dim=-1).values
        gaps = top[:, 0] - top[:, 1]
        if rows.shape[-1] > EXACT_IDS:
            return ids.tolist(), gaps.tolist()
        read = torch.cat((ids.to(gaps.dtype), gaps)).tolist()  # one device-to-host copy, not two
        return [int(token) for token in read[: len(ids)]], read[len(ids):]

    def argmax_and_prob(self, logits: torch.Tensor) -> tuple[int, float]:
        token = logits.argmax()
        prob = torch.exp(logits[token] - torch.logsumexp(logits, dim=0))
        if logits.shape[-1] > EXACT_IDS:
            return int(token), float(prob)
        read = torch.stack((token.to(prob.dtype), prob)).tolist()  # one read of both
        return int(read[0]), read[1]


EXACT_IDS = 1 << 24  # ids a float32 holds exactly: read back beside a float, in one copy


TORCH = TorchOps()
