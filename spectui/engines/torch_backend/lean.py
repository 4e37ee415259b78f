"""A forward for Llama- and Qwen2-style models without transformers' plumbing.

It calls the modules transformers' forward calls (the int8 linears, the attention function,
the DynamicCache), in the same order with the same arguments, so the logits are bitwise the
same (tests check, for every dtype spectui loads); what it leaves out is what surrounds them:
output capture, mask building, keyword routing. On this CPU that is 2-4% of a one-token
forward and 1-10% of a 5-token verify (benchmarks/lean_forward.py). Other architectures, and
forwards that need hidden states or a tree mask, go through transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

ARCHITECTURES = ("llama", "qwen2")
# attention functions called the way transformers calls them for a causal forward: sdpa with
# its causal mask, spectui's batch-invariant attention with none (it implies causality)
ATTENTION = ("sdpa", "spectui_batch_invariant")


# RoPE whose frequencies follow the context's length: recomputed from the positions' maximum on
# the host, which a captured CUDA graph cannot do (eagerly, lean calls the same rotary module)
LENGTH_DEPENDENT_ROPE = ("dynamic", "longrope")


def supports(model: Any, capture: bool = False) -> bool:
    """lean_forward stands in for transformers' forward; capture: so does static_kv's forward,
    captured as a CUDA graph (no RoPE that depends on the context's length)."""
    config = model.config
    return (
        getattr(config, "model_type", None) in ARCHITECTURES
        and getattr(config, "_attn_implementation", None) in ATTENTION
        and getattr(config, "hidden_act", None) == "silu"
        and "sliding_attention" not in (getattr(config, "layer_types", None) or ())
        and getattr(config, "pretraining_tp", 1) == 1
        and not (capture and rope_type(config) in LENGTH_DEPENDENT_ROPE)
    )


def rope_type(config: object) -> str:
    """"default", "llama3", "dynamic", ...: rope_parameters in newer transformers, rope_scaling before."""
    scaling = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return str(scaling.get("rope_type") or scaling.get("type") or "default")


def rms_norm(norm: Any, x: "torch.Tensor") -> "torch.Tensor":
    """The model's RMSNorm as transformers computes it (in float32, then back to x's dtype)."""
    import torch

    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * x.to(dtype)


def lean_forward(model: Any, input_ids: "torch.Tensor", cache: Any, logits_to_keep: int = 1) -> "torch.Tensor":
    """Logits [1, logits_to_keep, V] for the last positions of input_ids [1, n], which the
    cache (a DynamicCache holding the positions before them) then holds too."""
    import torch
    import torch.nn.functional as F
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner, config = model.model, model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    half = head_dim // 2
    past, n = cache.get_seq_length(), input_ids.shape[1]
    hidden = inner.embed_tokens(input_ids)
    positions = torch.arange(past, past + n, device=input_ids.device).unsqueeze(0)
    cos, sin = inner.rotary_emb(hidden, positions)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    sdpa = config._attn_implementation == "sdpa"
    attention = None if sdpa else ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    # As transformers hands sdpa its mask: none for one token, is_causal for a prompt on an
    # empty cache, the causal mask past the cache otherwise.
    mask = None
    if sdpa and n > 1 and past:
        mask = torch.ones(n, past + n, dtype=torch.bool, device=input_ids.device).tril(past)[None, None]
    causal = sdpa and n > 1 and not past

    def rotate(x: torch.Tensor) -> torch.Tensor:
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    for index, layer in enumerate(inner.layers):
        attn, mlp = layer.self_attn, layer.mlp
        x = rms_norm(layer.input_layernorm, hidden)
        shape = (1, n, -1, head_dim)
        q = rotate(attn.q_proj(x).view(shape).transpose(1, 2))
        k = rotate(attn.k_proj(x).view(shape).transpose(1, 2))
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        k, v = cache.update(k, v, index)
        if attention is None:  # sdpa
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal, scale=attn.scaling, enable_gqa=q.shape[1] != k.shape[1]
            ).transpose(1, 2)
        else:
            out, _ = attention(attn, q, k, v, None, scaling=attn.scaling)
        hidden = hidden + attn.o_proj(out.reshape(1, n, -1))
        x = rms_norm(layer.post_attention_layernorm, hidden)
        hidden = hidden + mlp.down_proj(F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))
    return model.lm_head(rms_norm(inner.norm, hidden[:, -logits_to_keep:]))
