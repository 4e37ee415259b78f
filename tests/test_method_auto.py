"""--method auto: suffix with adaptive k where the embedded engine runs on a CPU, draft elsewhere."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import spectui.engines.vllm.build as vllm_build
from spectui.engines.factory import settled_method
from spectui.settings.options import EngineOptions


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(vllm_build, "cuda_present", lambda: False)


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_on_a_cpu_auto_is_suffix_with_adaptive_k_from_the_given_k(no_gpu, device):
    settled = settled_method(EngineOptions(device=device))
    assert (settled.method, settled.k, settled.auto_k) == ("suffix", 4, True)
    assert settled_method(EngineOptions(device=device, k=6)).k == 6  # where adaptive k starts


def test_k_zero_stays_plain_decoding(no_gpu):
    settled = settled_method(EngineOptions(k=0))
    assert (settled.k, settled.auto_k) == (0, False)


@pytest.mark.parametrize("options", [
    EngineOptions(draft="qwen2.5-coder-0.5b"),  # a named draft model is asked for
    EngineOptions(device="cuda"),
    EngineOptions(device="mps"),
    EngineOptions(engine="vllm"),
    EngineOptions(engine="server", server="http://127.0.0.1:1"),
], ids=["draft named", "cuda", "mps", "vllm", "server"])
def test_elsewhere_auto_is_the_draft_model_at_the_given_k(no_gpu, options):
    settled = settled_method(options)
    assert (settled.method, settled.k, settled.auto_k) == ("draft", 4, False)


def test_a_gpu_found_by_auto_gets_the_draft_model(monkeypatch):
    monkeypatch.setattr(vllm_build, "cuda_present", lambda: True)
    monkeypatch.setattr(vllm_build, "vllm_installed", lambda: False)  # the embedded engine, on CUDA
    assert settled_method(EngineOptions()).method == "draft"


@pytest.mark.parametrize("method", ["draft", "ngram", "suffix"])
def test_a_named_method_is_left_as_it_is(no_gpu, method):
    options = EngineOptions(method=method)
    assert settled_method(options) == options


def test_the_chat_starts_with_the_live_k_on_auto_where_auto_picks_suffix(no_gpu):
    from spectui.host.live import live_from_config
    from spectui.host.plan import settled_config
    from spectui.settings.config import ChatConfig

    config = settled_config(ChatConfig(device="cpu"))
    assert (config.method, config.k) == ("suffix", "auto")
    live = live_from_config(config)
    assert (live.k, live.auto) == (4, True)
    assert settled_config(ChatConfig(device="cpu", method="draft")).method == "draft"
    assert settled_config(ChatConfig(device="cuda")).method == "draft"


@pytest.mark.slow
def test_generate_by_default_runs_suffix_with_adaptive_k_and_writes_the_plain_reply(no_gpu):
    from spectui.cli.app import app

    def reply(*args):
        result = CliRunner().invoke(app, ["generate", "def add(a, b):", "--model", "smollm2-135m",
                                          "--max-tokens", "40", "--json", *args])
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    speculative, plain = reply(), reply("-k", "0")
    assert speculative["model"]["method"] == "suffix"
    assert any(step["auto"] is not None for step in speculative["steps"])
    assert speculative["token_ids"] == plain["token_ids"]
