"""One captured CUDA graph per forward width, as vLLM keeps one per batch size.

A one-token forward of an 8B model enqueues about a thousand kernels; launched one by one
from Python they take longer than the GPU takes to run them. Captured once, a width replays
with one launch. Where graphs are off (a CPU, SPECTUI_CUDA_GRAPHS=0, a capture that failed)
the same forward runs eagerly: one code path, two ways to launch it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import torch

Forward = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (input_ids [1, n], positions [n]) -> out


def graphs_unavailable(device: torch.device) -> str:
    """Why graphs cannot run on `device` ("" where they can)."""
    if os.environ.get("SPECTUI_CUDA_GRAPHS", "1") == "0":
        return "SPECTUI_CUDA_GRAPHS=0"
    if torch.device(device).type != "cuda":
        return f"CUDA graphs need a CUDA device, not {torch.device(device).type}"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    return ""


class CapturedWidth:
    """A width's static inputs, its graph and the output tensor every replay refills."""

    def __init__(self, forward: Forward, width: int, device: torch.device, pool,
                 tokens: Sequence[int], start: int) -> None:
        self.inputs = torch.zeros(2, width, dtype=torch.long, device=device)  # ids, positions
        self.staging = torch.zeros(2, width, dtype=torch.long, pin_memory=True)
        self.fill(tokens, start)
        ids, positions = self.inputs[0:1], self.inputs[1]
        # Warm-up on a side stream, as torch's capture recipe asks; it computes what the replay
        # will (the same keys and values at the same positions), so it changes nothing.
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            forward(ids, positions)
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.output = forward(ids, positions)

    def fill(self, tokens: Sequence[int], start: int) -> None:
        width = self.inputs.shape[1]
        self.staging[0].copy_(torch.tensor(list(tokens), dtype=torch.long))
        torch.arange(start, start + width, out=self.staging[1])
        self.inputs.copy_(self.staging)  # blocking: the staging buffer is refilled next call

    def replay(self, tokens: Sequence[int], start: int) -> torch.Tensor:
        self.fill(tokens, start)
        self.graph.replay()
        return self.output


class WidthGraphs:
    """forward(ids, positions) by width: replayed from a capture where graphs are on,
    eager otherwise. `disabled` says why graphs are off ("" while they are on)."""

    def __init__(self, forward: Forward, device: torch.device | str, enabled: bool | None = None) -> None:
        self.forward = forward
        self.device = torch.device(device)
        reason = graphs_unavailable(self.device)
        self.disabled = "turned off" if enabled is False else reason
        self.captured: dict[int, CapturedWidth] = {}
        self.pool = None

    @property
    def on(self) -> bool:
        return not self.disabled

    def prepare(self, width: int) -> None:
        """Capture `width` now (load time, on an empty cache: the positions 0..width-1 it
        writes hold nothing yet)."""
        if self.on and width not in self.captured:
            self.run([0] * width, 0)

    def forget(self) -> None:
        self.captured.clear()

    def run(self, tokens: Sequence[int], start: int) -> torch.Tensor:
        width = len(tokens)
        if self.on:
            try:
                return self._replay(tokens, start, width)
            except RuntimeError as error:  # an op that cannot be captured: eager from now on
                self.disabled = f"capture failed: {str(error).splitlines()[0][:200]}"
                self.captured.clear()
                torch.cuda.synchronize(self.device)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + width, device=self.device)
        return self.forward(ids, positions)

    def _replay(self, tokens: Sequence[int], start: int, width: int) -> torch.Tensor:
        graph = self.captured.get(width)
        if graph is None:
            if self.pool is None:
                self.pool = torch.cuda.graph_pool_handle()
            graph = self.captured[width] = CapturedWidth(self.forward, width, self.device, self.pool, tokens, start)
        return graph.replay(tokens, start)
