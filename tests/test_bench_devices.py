"""The bench's drafter costs run where the model lives (issue 50): `--method draft --device cuda`
measured the KV bytes with a CPU index into a CUDA embedding and stopped with a device mismatch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from spectui.bench.drafters import kv_bytes_per_token


class StrictEmbedding(torch.nn.Embedding):
    """An embedding on the meta device that refuses an index elsewhere, as CUDA does."""

    def forward(self, input):  # noqa: A002 - torch's name
        if input.device != self.weight.device:
            raise RuntimeError(f"index on {input.device}, embedding on {self.weight.device}")
        return super().forward(input)


class Model(torch.nn.Module):
    def __init__(self, embedding: torch.nn.Module, dtype=torch.bfloat16):
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=3, num_key_value_heads=2, num_attention_heads=4, hidden_size=32)
        self.embedding = embedding
        self.head = torch.nn.Linear(2, 2, device="meta", dtype=dtype)

    def get_input_embeddings(self):
        return self.embedding


def test_the_index_goes_to_the_embeddings_device():
    model = Model(StrictEmbedding(10, 32, device="meta", dtype=torch.bfloat16))
    assert kv_bytes_per_token(model) == 2 * 3 * 2 * 8 * 2


def test_an_embedding_without_tensors_gets_the_models_device():
    seen = []

    class Blocks(torch.nn.Module):  # GGUF blocks: no parameters of its own
        def forward(self, input_ids):
            seen.append(input_ids.device)
            return torch.zeros(*input_ids.shape, 32, dtype=torch.float32, device=input_ids.device)

    assert kv_bytes_per_token(Model(Blocks())) == 2 * 3 * 2 * 8 * 4
    assert seen == [torch.device("meta")]


def test_the_fake_refuses_a_cpu_index_as_cuda_does():
    with pytest.raises(RuntimeError, match="index on cpu"):
        StrictEmbedding(10, 32, device="meta")(torch.zeros(1, 1, dtype=torch.long))
