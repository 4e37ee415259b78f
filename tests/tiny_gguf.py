"""A tiny random Qwen2 model as a GGUF file (quantized blocks included): conversion tests in seconds."""

from __future__ import annotations

import json
from pathlib import Path

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS = 64, 128, 2, 4, 2


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    import gguf
    import numpy as np

    from tiny_models import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer()
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = sorted(backend["model"]["vocab"].items(), key=lambda item: item[1])
    tokens = [token for token, _ in vocab]
    merges = [merge if isinstance(merge, str) else " ".join(merge) for merge in backend["model"]["merges"]]
    eos = tokens.index("<eos>")

    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("Tiny Qwen2")
    writer.add_block_count(LAYERS)
    writer.add_context_length(512)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(INTERMEDIATE)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if token == "<eos>" else 1 for token in tokens])
    writer.add_token_merges(merges)
    writer.add_eos_token_id(eos)
    writer.add_bos_token_id(eos)
    writer.add_pad_token_id(eos)
    writer.add_chat_template("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}")

    rng = np.random.default_rng(seed)

    def normal(*shape, scale=0.05):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def quantized(name, values, kind=gguf.GGMLQuantizationType.Q8_0):
        blocks = gguf.quants.quantize(values, kind)
        writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=kind)

    head_dim = HIDDEN // HEADS
    quantized("token_embd.weight", normal(len(tokens), HIDDEN, scale=0.5))
    for layer in range(LAYERS):
        prefix = f"blk.{layer}."
        writer.add_tensor(prefix + "attn_norm.weight", 1 + normal(HIDDEN))
        quantized(prefix + "attn_q.weight", normal(HIDDEN, HIDDEN))
        quantized(prefix + "attn_k.weight", normal(KV_HEADS * head_dim, HIDDEN))
        writer.add_tensor(prefix + "attn_v.weight", normal(KV_HEADS * head_dim, HIDDEN))  # F32, as in some files
        for name, size in (("attn_q", HIDDEN), ("attn_k", KV_HEADS * head_dim), ("attn_v", KV_HEADS * head_dim)):
            writer.add_tensor(prefix + name + ".bias", normal(size))
        quantized(prefix + "attn_output.weight", normal(HIDDEN, HIDDEN))
        writer.add_tensor(prefix + "ffn_norm.weight", 1 + normal(HIDDEN))
        quantized(prefix + "ffn_gate.weight", normal(INTERMEDIATE, HIDDEN))
        quantized(prefix + "ffn_up.weight", normal(INTERMEDIATE, HIDDEN))
        quantized(prefix + "ffn_down.weight", normal(HIDDEN, INTERMEDIATE))
    writer.add_tensor("output_norm.weight", 1 + normal(HIDDEN))
    quantized("output.weight", normal(len(tokens), HIDDEN, scale=0.5))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def count_decodes(engine) -> list[int]:
    """The tokens of each decode call the engine's target runs from now on, in its exact
    context or in the second context a long prompt prefills in (ggml.fast_prefill)."""
    decoded: list[int] = []
    target = engine.target
    model = target.model
    original, open_prefill = model.decode, target.open_prefill

    def counted(tokens, rows, stop=None):
        decoded.append(len(tokens))
        return original(tokens, rows, stop)

    def counted_prefill(cells):
        pending = open_prefill(cells)
        run = pending.decode

        def counted_fast(tokens, stop=None):
            if tokens:
                decoded.append(len(tokens))
            return run(tokens, stop)

        pending.decode = counted_fast
        return pending

    model.decode = counted
    target.open_prefill = counted_prefill
    return decoded
