"""The ggml backend of spectui's speculative loop: llama.cpp's CPU kernels (libllama through
llama-cpp-py-sync) compute the target's and the draft's forwards; no torch is imported."""
