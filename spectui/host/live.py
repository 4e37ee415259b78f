"""The chat's live settings as the config file sets them at start.

The settings themselves (LiveSettings: k, adaptive k, temperature) are held once, in
spectui.core.events, so that an engine's Control can read them from below the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectui.core.events import LiveSettings

if TYPE_CHECKING:
    from spectui.settings.config import ChatConfig


def live_from_config(config: ChatConfig) -> LiveSettings:
    from spectui.settings.options import parse_k

    k, auto = parse_k(config.k)
    return LiveSettings(k, auto, config.temperature)
