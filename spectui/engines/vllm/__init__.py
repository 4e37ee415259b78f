"""vLLM in-process (AsyncLLM with a speculative_config) and the `vllm serve` command line."""
