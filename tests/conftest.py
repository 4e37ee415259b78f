"""Tiny random models and a tiny tokenizer: the engine's unit tests run in seconds, offline."""

from __future__ import annotations

import os

import pytest

from tiny_models import make_tiny_draft, make_tiny_model, make_tiny_tokenizer
from vllm_ran import pytest_configure  # noqa: F401 (a run where vLLM is installed but its tests all skipped fails)

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

