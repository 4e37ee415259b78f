"""spectui's own speculative decoding loop, backend-neutral: propose, verify, emit one Step.

The engine (engine.SpeculativeEngine) is this loop given a backend (backend.Backend) that
computes the forwards: spectui.engines.torch_backend (PyTorch + transformers) or
spectui.engines.ggml (llama.cpp's CPU kernels). Both give the loop a model kept in step with a
token list (cached_model.CachedLogits); the rules run on its rows, numpy or torch (arrays).
"""
