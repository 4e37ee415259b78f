"""`spectui screenshots --engine embedded` gives a real model's replies a budget that fits its
picture: the hero needed a config with max_tokens 512, where the chat's own budget (what the
context leaves) let the reply run on far past the frame."""

from __future__ import annotations

from spectui.settings.config import ChatConfig
from spectui.tui import screenshots

from fake_engines import PlanEngine, factory_for


class LongContextEngine(PlanEngine):
    @property
    def context_length(self) -> int | None:
        return 8192


def shoot(tmp_path, monkeypatch, config: ChatConfig) -> PlanEngine:
    monkeypatch.setattr(screenshots, "png_converter", lambda: None)
    engine = LongContextEngine([None, 2, 2])
    written = screenshots.take_screenshots(tmp_path / "shots", engine_factory=factory_for(engine), themes=["dark"],
                                           screens=["chat"], config=config)
    assert [path.name for path in written] == ["chat-real-dark.svg"]
    return engine


def test_a_real_models_replies_get_the_pictures_budget(tmp_path, monkeypatch, data_dir):
    engine = shoot(tmp_path, monkeypatch, ChatConfig())
    assert len(engine.params_seen) == 2  # the warm-up and the first screen's file edit
    assert {params.max_tokens for params in engine.params_seen} == {screenshots.REPLY_BUDGET}


def test_a_lower_cap_of_the_users_own_stays(tmp_path, monkeypatch, data_dir):
    engine = shoot(tmp_path, monkeypatch, ChatConfig(max_tokens=100))
    assert {params.max_tokens for params in engine.params_seen} == {100}
