"""Tiny random models and a tiny tokenizer: the engine's unit tests run in seconds, offline."""

from __future__ import annotations

import os

import pytest

from tiny_models import make_tiny_draft, make_tiny_model, make_tiny_tokenizer
from vllm_ran import pytest_configure  # noqa: F401 (a run where vLLM is installed but its tests all skipped fails)

# A fresh shell exports neither: rich would wrap at 80 columns there and at whatever a CI runner
# sets elsewhere, so the suite sees the width a new user's pipe sees, wherever it runs.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return make_tiny_tokenizer()


@pytest.fixture(scope="session")
def tiny_target(tiny_tokenizer):
    return make_tiny_model(len(tiny_tokenizer), seed=1)


@pytest.fixture(scope="session")
def tiny_draft(tiny_tokenizer, tiny_target):
    """The target with noise added: it agrees often but not always (mixed acceptance)."""
    return make_tiny_draft(tiny_target)

@pytest.fixture(scope="session")
def tiny_folders(tmp_path_factory, tiny_target, tiny_draft, tiny_tokenizer):
    """The tiny models saved as Hugging Face folders: `--model PATH` loads them like any model."""
    folders = {}
    for name, model in (("target", tiny_target), ("draft", tiny_draft)):
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        tiny_tokenizer.save_pretrained(folder)
        folders[name] = str(folder)
    return folders


@pytest.fixture(scope="session")
def fetched_ggufs():
    """The GGUFs that advise and bench --history read from the cache as a user's holds them (the
    commands never fetch): fetched here once, so their tests pass on a fresh machine in any order,
    not only after another test happened to fetch them."""
    from spectui.models.gguf_local import gguf_model
    from spectui.models.registry import resolve

    pytest.importorskip("llama_cpp_py_sync")
    for name in ("smollm2-135m", "qwen2.5-coder-0.5b"):
        gguf_model(resolve(name))


@pytest.fixture(scope="module")
def smollm2_ggml():
    """SmolLM2 on ggml drafting for itself (every draft accepted), with prompt lookup and suffix
    decoding over the same target: every method on one loaded model."""
    from spectui.engines.speculative.suffix import SuffixProposer
    from spectui.engines.ggml.build import build_ggml_engine
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    pytest.importorskip("llama_cpp_py_sync")
    engine = build_ggml_engine(EngineOptions(model="smollm2-135m", method="draft", draft="smollm2-135m"),
                               resolve_pair("smollm2-135m", "smollm2-135m"))
    engine.add_proposer("ngram", engine.with_method("ngram").proposer, None)
    engine.add_proposer("suffix", SuffixProposer(use_history=False), None)
    yield engine
    engine.close()


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty data folder and config folder of its own: the history and config a command sees."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(folder))
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path / "config"))
    return folder
