"""One decision of what runs (engines/factory.py engine_choice): the method (auto made
concrete), the engine, the embedded engine's backend and what drafts. The command line's path,
the chat's plan and the bench ask it, and the factory builds what it says."""

from __future__ import annotations

from dataclasses import replace

import pytest

import spectui.engines.ggml.build as ggml_build
import spectui.engines.torch_backend.build as torch_build
import spectui.engines.vllm.build as vllm_build
from spectui.core.errors import UsageError
from spectui.engines.factory import build_engine, engine_choice
from spectui.engines.ggml.build import BackendChoice
from spectui.settings.options import EngineOptions

TARGET, DRAFT = "qwen2.5-coder-0.5b", "smollm2-135m"


class Built(Exception):
    """Raised by the stand-in builders with what they were asked to build."""

    def __init__(self, backend: str, options: EngineOptions, why: str = "") -> None:
        super().__init__(backend)
        self.seen = (options.method, options.k, options.auto_k, BackendChoice(backend, why))


@pytest.fixture
def builders(monkeypatch):
    """Every engine is a CPU one (no vLLM, no CUDA), and nothing loads: the builders raise Built."""
    monkeypatch.setattr(vllm_build, "cuda_present", lambda: False)
    monkeypatch.setattr(vllm_build, "vllm_installed", lambda: False)
    monkeypatch.setenv("SPECTUI_ENGINE_PROCESS", "0")

    def ggml(options: EngineOptions, models: object, progress: object = None) -> None:
        raise Built("ggml", options)

    def torch(options: EngineOptions, models: object, progress: object = None, why_torch: str = "",
              static: bool | None = None) -> None:
        raise Built("torch", options, why_torch)

    monkeypatch.setattr(ggml_build, "build_ggml_engine", ggml)
    monkeypatch.setattr(torch_build, "build_embedded_engine", torch)


def built(build) -> tuple:
    with pytest.raises(Built) as raised:
        build()
    return raised.value.seen


SETTINGS = [
    {"device": "cpu"},  # auto: suffix with adaptive k
    {"device": "cpu", "method": "draft", "draft": DRAFT},
    {"device": "cpu", "method": "ngram", "backend": "torch"},
    {"device": "cpu", "method": "suffix", "dtype": "float32"},  # a dtype: torch, and why
    {"device": "cpu", "draft": DRAFT, "k": "auto"},  # auto with a draft named: the draft model
]


@pytest.mark.parametrize("given", SETTINGS, ids=lambda given: ",".join(f"{k}={v}" for k, v in given.items()))
def test_the_cli_the_chat_and_the_factory_run_what_engine_choice_says(builders, given):
    from spectui.cli.engine_options import Given
    from spectui.host.plan import plan_for, settled_config
    from spectui.settings.config import ChatConfig, engine_options
    from spectui.settings.table import settings_for

    values = {setting.name: None for setting in settings_for("generate")} | {"engine": "embedded", "model": TARGET} | given
    cli = Given("generate", values)
    options = cli.engine_options()  # the command line's: generate, compare, bench
    models = cli.models(options)
    choice = engine_choice(options, models)
    said = (choice.options.method, choice.options.k, choice.options.auto_k, choice.backend)

    assert built(lambda: build_engine(options, models)) == said
    config = settled_config(ChatConfig(**{"engine": "embedded", "model": TARGET} | given))  # the chat's
    assert (config.method, config.k == "auto") == (choice.options.method, choice.options.auto_k)
    assert engine_choice(engine_options(config), models) == choice
    assert built(lambda: plan_for(config, models).build(lambda *_: None)) == said
    assert choice.engine == "embedded" and choice.drafter == ("draft model" if choice.options.method == "draft" else "tokens")


def test_the_backend_follows_the_method_through_the_methods_table(builders):
    from spectui.models.registry import resolve_pair

    models = resolve_pair(TARGET, DRAFT)
    heads = engine_choice(EngineOptions(engine="embedded", model=TARGET, method="medusa", heads="somewhere"), models)
    assert heads.drafter == "heads"
    assert heads.backend == BackendChoice("torch", "medusa heads run on torch")


def test_a_method_the_embedded_engine_cannot_draft_is_one_line(builders):
    from spectui.models.registry import resolve_pair

    options = replace(EngineOptions(engine="embedded", model=TARGET), method="mtp")
    with pytest.raises(UsageError, match="no proposer for method 'mtp'"):
        engine_choice(options, resolve_pair(TARGET, None))
