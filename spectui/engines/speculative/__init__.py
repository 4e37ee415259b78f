"""The embedded engine: a speculative decoding loop on PyTorch + transformers models."""
