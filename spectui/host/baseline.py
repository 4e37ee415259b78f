"""The compare view's baseline (k = 0) where the chat's engine cannot run k = 0 itself
(k fixed at start): a second engine, built once when first asked for, closed with the view."""

from __future__ import annotations

import threading

from spectui.core.engine import Engine
from spectui.core.errors import UsageError
from spectui.host.plan import Build
from spectui.host.waits import start_thread


class Baseline:
    def __init__(self, build: Build | None) -> None:
        self.build = build
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def engine(self, engine_name: str) -> Engine:
        """Built in the caller's thread (it can take a minute)."""
        with self._lock:
            if self._engine is None:
                if self.build is None:
                    raise UsageError(
                        f"the {engine_name} engine fixes k when it starts and no baseline engine is "
                        "configured (a server needs --baseline-server URL)"
                    )
                self._engine = self.build(lambda stage, done, total: None)
            return self._engine

    def take(self) -> Engine | None:
        with self._lock:
            engine, self._engine = self._engine, None
        return engine

    def close_after(self, threads: list[threading.Thread]) -> None:
        """Close it once `threads` have ended (a request in flight would break)."""
        engine = self.take()
        if engine is None:
            return

        def close() -> None:
            for thread in threads:
                thread.join(60.0)
            engine.close()

        start_thread(close, "spectui-baseline-close")
