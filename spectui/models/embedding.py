"""A token embedding kept as the GGUF's own blocks and dequantised a few rows at a time.

A float32 table of 151936 x 1536 is 0.93 GB on disk and in memory; its Q4_K blocks are
0.13 GB, memory-mapped. Looking up a token dequantises that token's row with the function
that converted the rest of the model (gguf-py's `dequantize`), whose arithmetic is per block,
so a row comes out bitwise as it does in the full table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def __getattr__(name: str):
    # Built on first use: importing this module must not import torch.
    if name == "BlockEmbedding":
        return _block_embedding_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dequantize_rows(blocks: "np.ndarray", ggml_type: int, rows: Sequence[int] | np.ndarray) -> "np.ndarray":
    """float32 [len(rows), dim] from the blocks of those rows of the table."""
    from gguf import GGMLQuantizationType, dequantize

    return dequantize(blocks[rows], GGMLQuantizationType(ggml_type))


@functools.cache
def _block_embedding_class():
    import numpy as np
    import torch
    from torch import nn

    class BlockEmbedding(nn.Module):
        """nn.Embedding's lookup over a table of GGUF blocks [num_embeddings, bytes per row]."""

        def __init__(self, blocks: np.ndarray, ggml_type: int, embedding_dim: int):
            super().__init__()
            self.blocks = blocks
            self.ggml_type = ggml_type
            self.num_embeddings = blocks.shape[0]
            self.embedding_dim = embedding_dim
            self.padding_idx = None

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            rows = input_ids.reshape(-1).cpu().numpy()
            values = dequantize_rows(self.blocks, self.ggml_type, rows)
            out = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
            return out.reshape(*input_ids.shape, self.embedding_dim).to(input_ids.device)

        def extra_repr(self) -> str:
            return f"{self.num_embeddings}, {self.embedding_dim}, ggml_type={self.ggml_type}"

    return BlockEmbedding
