"""Medusa and EAGLE drafting on tiny random models: lossless at T = 0 and T > 0, trained
heads draft better than untrained ones, stored heads refuse another target, the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from spectui.engine import EngineInfo
from spectui.engines.embedded.engine import EmbeddedEngine
from spectui.engines.embedded.head_proposers import EagleProposer, MedusaProposer, head_proposer
from spectui.errors import SpectuiError
from spectui.events import Control, Done, GenerationParams, Source, Step
from spectui.heads.store import fingerprint, load_heads, save_heads
from spectui.heads.train import CachedSequence, cache_features, loss_function, mean_loss, new_heads, train_heads

from test_engine import PROMPTS, collect, greedy_reference

# A reply that repeats itself: what trained heads should learn to predict.
REPETITIVE = "abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc abc"


def make_engine(target, tokenizer, proposer):
    info = EngineInfo("embedded", "tiny", None, proposer.method, "float32", "cpu", live_k=True)
    return EmbeddedEngine(target, tokenizer, proposer, info)


def untrained(kind, target, num_heads=4):
    torch.manual_seed(0)
    heads = new_heads(kind, target.config.hidden_size, num_heads).eval().requires_grad_(False)
    if kind == "medusa":
        # Zero-initialised blocks would make every head the LM head itself: perturb them
        # so the untrained heads draft something other than the next token.
        with torch.no_grad():
            for parameter in heads.parameters():
                parameter.add_(0.05 * torch.randn(parameter.shape))
    return heads


def trained(kind, target, sequences, steps, num_heads=4):
    heads = new_heads(kind, target.config.hidden_size, num_heads)
    examples = cache_features(target, sequences)
    loss_of = loss_function(kind, heads, target)
    record = train_heads(heads, loss_of, examples, steps=steps, learning_rate=3e-3, seed=0)
    heads.requires_grad_(False)
    return heads, record


@pytest.fixture(scope="module")
def repetitive_ids(tiny_tokenizer):
    return tiny_tokenizer(REPETITIVE)["input_ids"]


@pytest.fixture(scope="module")
def training_sequences(tiny_target, tiny_tokenizer, repetitive_ids):
    """The target's own greedy continuations of the test prompts and of the repetitive text."""
    from spectui.heads.train import greedy_replies

    prompts = [tiny_tokenizer(p)["input_ids"] for p in PROMPTS] + [repetitive_ids[:12]]
    return greedy_replies(tiny_target, prompts, 40, {tiny_tokenizer.eos_token_id})


@pytest.fixture(scope="module")
def trained_heads(tiny_target, training_sequences):
    return {kind: trained(kind, tiny_target, training_sequences, steps=150) for kind in ("medusa", "eagle")}


@pytest.mark.parametrize("kind", ["medusa", "eagle"])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_with_heads_equals_plain_greedy(tiny_target, tiny_tokenizer, kind, prompt):
    prompt_ids = tiny_tokenizer(prompt)["input_ids"]
    expected = greedy_reference(tiny_target, prompt_ids, 40, tiny_tokenizer.eos_token_id)
    engine = make_engine(tiny_target, tiny_tokenizer, head_proposer(untrained(kind, tiny_target), kind, tiny_target))
    drafted_any = False
    for k in (0, 1, 3, 4, 6):
        steps, done = collect(engine, prompt_ids, GenerationParams(max_tokens=40), Control(k=k))
        assert [t for s in steps for t in s.token_ids] == expected, f"{kind} k={k} diverged from greedy"
        for step in steps:
            assert len(step.drafted) <= (min(k, 4) if kind == "medusa" else k)
            assert step.method == (kind if step.drafted else "")
            drafted_any |= bool(step.drafted)
    assert drafted_any
