"""spectui's speculative loop on llama.cpp's CPU kernels (libllama through llama-cpp-py-sync)."""
