"""The lean forward gives transformers' logits and cache bit for bit, and the engine uses it."""

from __future__ import annotations

import pytest

from spectui.engines.torch_backend import lean as lean_module
from spectui.engines.torch_backend.kv import CachedModel
from spectui.engines.torch_backend.lean import lean_forward, supports
from spectui.models.load import load_model
from spectui.models.registry import resolve
from tiny_models import make_tiny_model

PROMPT = 40
# a prompt on an empty cache, plain steps, verifies of 5 and 3 tokens, as the loop runs them
WIDTHS = (PROMPT, 1, 1, 5, 1, 3, 1)


def make_tiny_qwen2(vocab_size: int, seed: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
    )  # fmt: skip
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def tiny_folder(request, tmp_path_factory, tiny_tokenizer):
    folder = tmp_path_factory.mktemp(request.param)
    make = make_tiny_model if request.param == "llama" else make_tiny_qwen2
    make(len(tiny_tokenizer), seed=5).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "int8-dynamic"])
def test_lean_logits_and_cache_are_transformers_bit_for_bit(tiny_folder, dtype):
    import torch
    from transformers import DynamicCache

    model, _ = load_model(resolve(str(tiny_folder)), dtype)
    assert supports(model)
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    ours, theirs = DynamicCache(), DynamicCache()
    ids = torch.randint(0, vocab, (1, PROMPT), generator=generator)
    with torch.inference_mode():
        for width, next_width in zip(WIDTHS, (*WIDTHS[1:], 1)):
            lean_logits = lean_forward(model, ids, ours, width)
            hf_logits = model(input_ids=ids, past_key_values=theirs, use_cache=True, logits_to_keep=width).logits
            assert lean_logits.shape == hf_logits.shape == (1, width, vocab)
            assert torch.equal(lean_logits, hf_logits), f"{dtype}: logits differ on a {width}-token forward"
            ids = torch.cat([hf_logits[:, -1:].argmax(-1), torch.randint(0, vocab, (1, next_width - 1), generator=generator)], 1)
            if width == 5:  # a verify whose last drafts were refused
                ours.crop(-2)
                theirs.crop(-2)
    for mine, reference in zip(ours.layers, theirs.layers, strict=True):
        assert torch.equal(mine.keys, reference.keys) and torch.equal(mine.values, reference.values)


def test_other_attention_goes_through_transformers(tiny_folder):
    model, _ = load_model(resolve(str(tiny_folder)), "float32")
    model.set_attn_implementation("eager")
    assert not supports(model)
    assert not CachedModel(model).lean


def test_the_cached_model_runs_lean_unless_hidden_states_are_asked_for(tiny_folder, monkeypatch):
    model, _ = load_model(resolve(str(tiny_folder)), "float32")
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1].shape[1])
        return lean_forward(*args, **kwargs)

    monkeypatch.setattr(lean_module, "lean_forward", counting)
    cached = CachedModel(model)
    tokens = list(range(3, 23))
    plain = cached.logits(tokens, 1)
    assert calls == [20]
    with_hidden, hidden, first = cached.logits_and_hidden([*tokens, 7], 2)
    assert calls == [20] and first == 19 and hidden.shape[0] == 2  # transformers' forward ran
    reference = CachedModel(model)
    reference.lean = False
    assert (reference.logits(tokens, 1) == plain).all()
    assert (reference.logits([*tokens, 7], 2) == with_hidden).all()


@pytest.mark.parametrize("rope", [
    {"rope_type": "dynamic", "factor": 2.0},
    {"rope_type": "longrope", "factor": 2.0, "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
     "original_max_position_embeddings": 256},
])
def test_rope_that_follows_the_context_length_is_not_captured(rope, tiny_tokenizer):
    """Its frequencies are recomputed on the host from the positions: a CUDA graph would keep the
    first ones. The static cache refuses it; the lean forward, eager, calls the same module."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from spectui.engines.torch_backend import static_kv

    config = LlamaConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, rope_scaling=rope)
    model = LlamaForCausalLM(config).eval()
    assert supports(model) and not supports(model, capture=True)
    assert not static_kv.supports(model)
    plain = make_tiny_model(len(tiny_tokenizer), seed=5)
    assert supports(plain, capture=True) and static_kv.supports(plain)
