"""Tiny random causal LMs for tests that must run offline in seconds."""

from __future__ import annotations


def make_tiny_model(vocab_size: int, seed: int, layers: int = 2):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    # Sharpen the output so greedy choices are not near-ties of random noise.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model
