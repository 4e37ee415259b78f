"""Live numbers for the panels: rolling tokens/s, time to first token, memory.

Stdlib only at import; NVML, torch and psutil are imported when memory is first read.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass
from types import ModuleType

from spectui.core.engine import MemoryReading  # what the readings are (an engine that reads its own returns one too)


class RollingRate:
    """Tokens per second over the last `window_s` seconds of arrivals."""

    def __init__(self, window_s: float = 2.0) -> None:
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()
        self._count = 0

    def add(self, now: float, num_tokens: int) -> None:
        self._events.append((now, num_tokens))
        self._count += num_tokens
        self._expire(now)

    def rate(self, now: float) -> float | None:
        """None until two arrivals span some time: one point is not a rate."""
        self._expire(now)
        if len(self._events) < 2:
            return None
        first_time, first_tokens = self._events[0]
        span = max(now, self._events[-1][0]) - first_time
        if span <= 0:
            return None
        # The first arrival's tokens were produced before the window opened.
        return (self._count - first_tokens) / span

    def reset(self) -> None:
        self._events.clear()
        self._count = 0

    def _expire(self, now: float) -> None:
        while self._events and now - self._events[0][0] > self.window_s:
            _, tokens = self._events.popleft()
            self._count -= tokens


@dataclass
class ReplyClock:
    """Wall-clock marks of one reply, as the UI sees them (engine numbers come with Done)."""

    started: float
    first_token: float | None = None
    last_token: float | None = None
    num_tokens: int = 0

    def on_tokens(self, now: float, num_tokens: int) -> None:
        if num_tokens and self.first_token is None:
            self.first_token = now
        self.last_token = now
        self.num_tokens += num_tokens

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.started

    def tokens_per_s(self, now: float | None = None) -> float | None:
        end = now if now is not None else self.last_token
        if end is None or end <= self.started or not self.num_tokens:
            return None
        return self.num_tokens / (end - self.started)


def read_memory(device: str = "cpu") -> MemoryReading | None:
    """VRAM for a CUDA device (NVML, else torch.cuda), process RSS otherwise."""
    if device.startswith("cuda"):
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        reading = _nvml_memory(index) or _torch_cuda_memory(index)
        if reading is not None:
            return reading
    return _rss_memory()


def _nvml_memory(index: int) -> MemoryReading | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return MemoryReading("VRAM", int(info.used), int(info.total), "nvml")
    except Exception:  # no library, no driver, no device: try the next way
        return None


def _torch_cuda_memory(index: int) -> MemoryReading | None:
    # Only when the engine already imported torch: the UI must not pay for it.
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        free, total = torch.cuda.mem_get_info(index)
        return MemoryReading("VRAM", int(total - free), int(total), "torch.cuda")
    except Exception:
        return None


def _rss_memory() -> MemoryReading | None:
    try:
        import psutil

        rss = psutil.Process().memory_info().rss
        total = psutil.virtual_memory().total
        return MemoryReading("RSS", int(rss), int(total), "psutil")
    except Exception:
        return None


CHILDREN_RESCAN_SECONDS = 5.0
_tree: tuple[float, list] | None = None  # (when listed, [this process, its children])


def _process_tree(psutil: ModuleType) -> list:
    """This process and its children, listed again at most every few seconds: listing
    children reads every process's /proc entry, milliseconds the panel asks for twice a second
    on cores the engine is using."""
    global _tree
    now = time.monotonic()
    if _tree is None or now - _tree[0] > CHILDREN_RESCAN_SECONDS:
        me = psutil.Process()
        _tree = (now, [me, *me.children(recursive=True)])
    return _tree[1]


def tree_rss(pool_bytes: int | None = None) -> MemoryReading | None:
    """RSS of this process and its children: vLLM on CPU runs the model in its own processes."""
    try:
        import psutil

        processes = _process_tree(psutil)
        rss = 0
        for process in processes:
            try:
                rss += process.memory_info().rss
            except psutil.Error:  # a child that exited between the listing and the read
                pass
        return MemoryReading(
            "RSS", rss, int(psutil.virtual_memory().total), "psutil", pool_bytes=pool_bytes, with_children=True
        )
    except Exception:
        return None


def format_bytes(num_bytes: int | None) -> str:
    if num_bytes is None:
        return "–"
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit in ("B", "KiB") else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
