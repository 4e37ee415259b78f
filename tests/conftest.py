"""Tiny random models and a tiny tokenizer: the engine's unit tests run in seconds, offline."""

from __future__ import annotations

import os

import pytest

from tiny_models import make_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CORPUS = [
    "def add(a, b):\n    return a + b\n",
    '{"name": "spectui", "version": 1, "tags": ["tui", "llm"]}',
    "The quick brown fox jumps over the lazy dog. Héllo wörld, 日本語 🎉!",
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name;",
] * 20


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>")


@pytest.fixture(scope="session")
def tiny_target(tiny_tokenizer):
    return make_tiny_model(len(tiny_tokenizer), seed=1)


@pytest.fixture(scope="session")
def tiny_draft(tiny_tokenizer, tiny_target):
    """The target with noise added: it agrees often but not always (mixed acceptance)."""
    import copy

    import torch

    draft = copy.deepcopy(tiny_target)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(0.35 * parameter.std() * torch.randn(parameter.shape, generator=generator))
    return draft
