"""The chat's live settings: as the config file sets them at start, what a key press does to
them, given the engine that runs, and what a change of them does to that engine (a restart
for a new k where it fixed k at start) and to a running reply (read between its steps).

The settings themselves (LiveSettings: k, adaptive k, temperature) are held once, in
spectui.core.events, so that an engine's Control can read them from below the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from spectui.core.engine import AUTO, Engine, EngineInfo
from spectui.core.events import K_MAX, TEMPERATURE_MAX, TEMPERATURE_STEP, Control, LiveSettings, LiveValues
from spectui.host.waits import Uses

if TYPE_CHECKING:
    from spectui.settings.config import ChatConfig


def live_from_config(config: ChatConfig) -> LiveSettings:
    from spectui.settings.options import parse_k

    k, auto = parse_k(config.k)
    return LiveSettings(k, auto, config.temperature)


class KAdvice(Protocol):
    """What the panel's theory says of k (spectui.chat_session.stats.Theory), as far as the keys read it."""

    @property
    def alpha(self) -> float: ...
    @property
    def speedup(self) -> float: ...
    @property
    def best_k(self) -> int | None: ...  # None until v(k) is measured at two k
    @property
    def best_speedup(self) -> float | None: ...
    @property
    def missing(self) -> str: ...


class KeysHost(Protocol):
    """What the keys read of the engine host that holds them (spectui.host.host.EngineHost), and
    the one thing they tell it: a narrow view, so this module needs nothing of the host's."""

    @property
    def live(self) -> LiveSettings: ...
    @property
    def engine(self) -> Engine | None: ...
    @property
    def info(self) -> EngineInfo | None: ...
    @property
    def k_restarts_engine(self) -> bool: ...
    @property
    def k_fixed_elsewhere(self) -> bool: ...
    @property
    def k_from_engine(self) -> bool: ...
    @property
    def reported_k(self) -> int | None: ...

    def notice(self, text: str) -> None: ...


class FollowHost(Protocol):
    """What a change of the live settings reads of the engine host, and the restart it asks for."""

    @property
    def info(self) -> EngineInfo | None: ...
    @property
    def k_restarts_engine(self) -> bool: ...
    @property
    def uses(self) -> Uses: ...

    def notice(self, text: str) -> None: ...
    def want_k(self, k: int) -> None: ...


def follow_change(host: FollowHost, before: LiveValues, after: LiveValues) -> None:
    """What a change of the live settings does to the engine that runs: one that took k when it
    started is rebuilt with the new k; where a running reply cannot follow a setting, the
    change is said to wait for the next reply (a reply that can reads them between steps)."""
    if after.k != before.k and host.k_restarts_engine:
        host.want_k(after.k)
    elif after.k != before.k:
        _waits_for_next_reply(host, "k", str(after.k))
    if after.temperature != before.temperature:
        _waits_for_next_reply(host, "temperature", f"{after.temperature:.2f}")


def _waits_for_next_reply(host: FollowHost, name: str, shown: str) -> None:
    info = host.info  # the last ready engine's, as its capabilities
    if host.uses.replying and info is not None and not info.capabilities.live(name):
        host.notice(f"The {info.name} engine cannot change {name} during a reply: "
                    f"{name} = {shown} applies from the next reply.")


def reply_control(engine: Engine, live: LiveSettings, start: LiveValues) -> Control:
    """A reply's control, from `start`: it reads the live settings between steps where the
    engine follows them (any of them), else it is fixed at the start (a key waits for the next reply)."""
    if engine.capabilities.live_controls:
        return Control.reading(live, start)
    return Control(start.k, start.temperature, start.auto)


class LiveKeys:
    def __init__(self, host: KeysHost) -> None:
        self.host = host
        self._k_offer: int | None = None  # a recommended k waiting for the second key press

    def step_k(self, delta: int) -> None:
        host, live = self.host, self.host.live
        k = min(max(live.k + delta, 0), K_MAX)
        if k == live.k and not host.k_from_engine:
            host.notice(f"k stays within 0..{K_MAX}")
        else:
            self.set_k(k)

    def set_k(self, k: int) -> None:
        """A fixed k (the keys', or the first screen's "watch it"): it ends adaptive k."""
        host, live = self.host, self.host.live
        if host.k_from_engine:
            host.notice(k_not_sent(host))
        elif host.engine is not None and host.k_fixed_elsewhere:
            host.notice(f"{engine_words(host.engine.info)} fixed k when it started (num_speculative_tokens); restart it to change k.")
        elif (k, False) != (live.k, live.auto):
            live.update(k=min(max(k, 0), K_MAX), auto=False)  # a k chosen by hand ends adaptive k

    def step_temperature(self, direction: int) -> None:
        live = self.host.live
        temperature = min(max(live.temperature + direction * TEMPERATURE_STEP, 0.0), TEMPERATURE_MAX)
        live.update(temperature=round(temperature, 2))

    def toggle_auto(self, theory: KAdvice | None) -> None:
        """Adaptive k on or off. An engine that cannot follow it step by step gets the k the
        same model picks from what was measured (`theory`), restarted with on a second press."""
        host, live = self.host, self.host.live
        if host.engine is not None and not host.engine.capabilities.live(AUTO):
            self._recommend_k(host.engine.info.name, theory)
            return
        live.update(auto=not live.auto)
        host.notice("Adaptive k: on, from the next step" if live.auto else f"Adaptive k: off, k = {live.k}")

    def _recommend_k(self, name: str, theory: KAdvice | None) -> None:
        """name: the engine's, which fixes k when it starts."""
        host, k = self.host, self.host.live.k
        if theory is None:
            host.notice(f"The {name} engine fixes k when it starts; after a reply with drafts, "
                        f"this key recommends a k from the measured acceptance.")
            return
        offered, self._k_offer = self._k_offer, None
        if theory.best_k is None:
            host.notice(f"No k to recommend yet: {theory.missing}. A reply at another k times v(k) there.")
        elif theory.best_k == k:
            host.notice(f"k = {k} is already the best k for α {theory.alpha:.2f} (×{theory.best_speedup:.2f} predicted).")
        elif offered == theory.best_k and host.k_restarts_engine:
            host.live.update(k=theory.best_k)
        else:
            self._k_offer = theory.best_k
            restart = "press the key again to restart it with that k" if host.k_restarts_engine else \
                "restart the server with that num_speculative_tokens"
            host.notice(f"Recommended k = {theory.best_k} for α {theory.alpha:.2f}: ×{theory.best_speedup:.2f} "
                        f"predicted against ×{theory.speedup:.2f} for the last reply (k = {k}); {restart}.")


def k_not_sent(host: KeysHost) -> str:
    """Why a k key does nothing on an engine that runs its own k (a server)."""
    k = host.reported_k
    runs = f"runs k = {k}" if k is not None else "does not say which k it runs"
    return f"{engine_words(host.info)} {runs}, set when it started (num_speculative_tokens): spectui cannot send k."


def engine_words(info: EngineInfo | None) -> str:
    """The engine as a sentence starts with it: the server, the vllm engine (None: not loaded yet)."""
    if info is None:
        return "The engine"
    return "The server" if info.name == "server" else f"The {info.name} engine"
