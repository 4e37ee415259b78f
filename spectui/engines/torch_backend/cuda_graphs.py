"""One captured CUDA graph per forward width (and attended span), as vLLM keeps one per batch size.

A one-token forward of an 8B model enqueues about a thousand kernels; launched one by one
from Python they take longer than the GPU takes to run them. Captured once, a width replays
with one launch. Where graphs are off (a CPU, SPECTUI_CUDA_GRAPHS=0, a capture that failed)
the same forward runs eagerly: one code path, two ways to launch it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Protocol

import torch

from spectui.core.errors import is_out_of_memory

class Forward(Protocol):
    """(input_ids [1, n], positions [n], bucket) -> out; bucket: the attended span the forward
    is for (named so: a capture gets the forward with it bound by keyword)."""

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor, bucket: int) -> torch.Tensor: ...


class Replay(Protocol):
    def replay(self, tokens: Sequence[int], start: int) -> torch.Tensor: ...


# capture(forward, width, device, tokens, start): a width captured (its first run done)
Capture = Callable[[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], int, torch.device, Sequence[int], int], Replay]


def graphs_unavailable(device: torch.device | str) -> str:
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

    def __init__(self, forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], width: int,
                 device: torch.device, pool: Any, tokens: Sequence[int], start: int) -> None:  # pool: graph_pool_handle()
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


class CudaCapture:
    """The default Capture: CUDA graphs sharing one memory pool."""

    def __init__(self) -> None:
        self.pool: Any = None  # torch.cuda.graph_pool_handle(), made with the first capture

    def __call__(self, forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], width: int,
                 device: torch.device, tokens: Sequence[int], start: int) -> Replay:
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        return CapturedWidth(forward, width, device, self.pool, tokens, start)


class WidthGraphs:
    """forward(ids, positions, bucket) by (bucket, width): replayed from a capture where graphs
    are on, eager otherwise. `disabled` says why graphs are off ("" while they are on); the
    first capture that fails turns them off for good, and `on_failure` hears why, once."""

    def __init__(self, forward: Forward, device: torch.device | str, enabled: bool | None = None,
                 capture: Capture | None = None, on_failure: Callable[[str], None] | None = None) -> None:
        self.forward = forward
        self.device = torch.device(device)
        # An injected capture (tests on a CPU) stands in for CUDA: only a switch turns it off.
        reason = "" if capture is not None else graphs_unavailable(self.device)
        self.disabled = "turned off" if enabled is False else reason
        self.failed = False  # a capture failed (disabled then says where and why)
        self.capture: Capture = capture or CudaCapture()
        self.on_failure = on_failure
        self.captured: dict[tuple[int, int], Replay] = {}

    @property
    def on(self) -> bool:
        return not self.disabled

    def prepare(self, width: int, bucket: int = 0) -> None:
        """Capture `width` now (load time, on an empty cache: the positions 0..width-1 it
        writes hold nothing yet)."""
        if self.on and (bucket, width) not in self.captured:
            self.run([0] * width, 0, bucket)

    def forget(self, bucket: int | None = None) -> None:
        """Drop the captures of one bucket (None: all of them)."""
        for key in [key for key in self.captured if bucket is None or key[0] == bucket]:
            del self.captured[key]

    def widths(self, bucket: int | None = None) -> list[int]:
        """The widths captured (for one bucket, or any), in order."""
        return sorted({width for b, width in self.captured if bucket is None or b == bucket})

    def buckets(self) -> list[int]:
        return sorted({bucket for bucket, _ in self.captured})

    @torch.inference_mode()  # a capture records no autograd and holds no warm-up's activations
    def run(self, tokens: Sequence[int], start: int, bucket: int = 0) -> torch.Tensor:
        width = len(tokens)
        if self.on:
            try:
                return self._replay(tokens, start, width, bucket)
            except RuntimeError as error:  # an op that cannot be captured: eager from now on
                if is_out_of_memory(error):
                    raise  # no fallback hides a full device: the reply ends saying so
                self._fail(width, bucket, error)
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
        positions = torch.arange(start, start + width, device=self.device)
        return self.forward(ids, positions, bucket)

    def _replay(self, tokens: Sequence[int], start: int, width: int, bucket: int) -> torch.Tensor:
        graph = self.captured.get((bucket, width))
        if graph is None:
            forward = partial(self.forward, bucket=bucket)  # a keyword, so a capture can tell the span
            graph = self.captured[(bucket, width)] = self.capture(forward, width, self.device, tokens, start)
        return graph.replay(tokens, start)

    def _fail(self, width: int, bucket: int, error: RuntimeError) -> None:
        lines = str(error).strip().splitlines()
        cause = f"{type(error).__name__}: {lines[0][:200] if lines else ''}"
        self.disabled = f"capture failed at width {width}{f' (span {bucket})' if bucket else ''}: {cause}"
        self.failed = True
        self.captured.clear()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if self.on_failure is not None:
            self.on_failure(self.disabled)

    def status(self) -> str:
        """What captured, for the load log, F3 and the records: the widths per span, or why none."""
        if self.disabled:
            return f"off ({self.disabled})"
        if not self.captured:
            return "on, none captured yet"
        return "; ".join(f"{spans(self.widths(bucket))}{f' (span {bucket})' if bucket else ''}"
                         for bucket in self.buckets())


def spans(widths: Sequence[int]) -> str:
    """[1, 2, 3, 5] -> "widths 1-3, 5"."""
    runs: list[list[int]] = []
    for width in widths:
        if runs and width == runs[-1][-1] + 1:
            runs[-1].append(width)
        else:
            runs.append([width])
    text = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
    return f"width{'s' if len(widths) != 1 else ''} {text}"
