"""The torch backend of spectui's speculative loop: PyTorch + transformers models kept in step
with a token list (kv.CachedModel; static_kv with CUDA graphs on a GPU), and the proposers that
read a torch target's hidden states (Medusa, EAGLE heads)."""
