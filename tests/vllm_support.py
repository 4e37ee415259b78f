"""What the vLLM tests share: a truncated draft model and vLLM's own Prometheus counters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

TRUNCATED_LAYERS = 6  # of SmolLM2-135M's 30: a draft that agrees often, not always


def truncated_copy(source: Path, destination: Path, num_layers: int = TRUNCATED_LAYERS) -> Path:
    """The first `num_layers` decoder layers of a Llama-style model, with its embeddings, final
    norm and head: a legal draft for the full model (same tokenizer) with mid-range acceptance."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    if (destination / "model.safetensors").is_file():
        return destination
    destination.mkdir(parents=True, exist_ok=True)
    kept = {}
    with safe_open(source / "model.safetensors", framework="pt") as weights:
        for name in weights.keys():
            if ".layers." in name and int(name.split(".layers.")[1].split(".")[0]) >= num_layers:
                continue
            kept[name] = weights.get_tensor(name).contiguous()
    save_file(kept, destination / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((source / "config.json").read_text())
    config["num_hidden_layers"] = num_layers
    (destination / "config.json").write_text(json.dumps(config, indent=2))
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja", "special_tokens_map.json"):
        if (source / extra).is_file():
            shutil.copy(source / extra, destination / extra)
    return destination


def accepted_counter() -> float:
    """vLLM's own in-process counter of accepted draft tokens (its Prometheus logger's)."""
    from prometheus_client import REGISTRY

    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name == "vllm:spec_decode_num_accepted_tokens":
            total += sum(sample.value for sample in metric.samples if sample.name.endswith("_total"))
    return total
