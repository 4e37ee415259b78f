"""spectui's own loop (spectui.engines.embedded.loop.decode_steps: the Step contract, exact
provenance, adaptive k, the same proposers and verify rules) with llama.cpp computing the
target's and the draft's forwards.

LlamaCached gives a LlamaModel the interface the loop expects of a model with a KV cache
(spectui.engines.embedded.kv.CachedModel): say which tokens it should have seen, get the
logits of the last rows; the common prefix stays cached, the rest is rolled back and run.
Prototype (issue 34): greedy output equals this engine's own plain greedy only as far as
llama.cpp's kernels give a batch of tokens the same logits as one token at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spectui.core.engine import EngineInfo
from spectui.engines.embedded.engine import EmbeddedEngine


class LlamaCached:
    """A LlamaModel kept in step with a token list, as CachedModel keeps a torch model."""

    device = "cpu"

    def __init__(self, model) -> None:
        self.model = model
        self.seen: list[int] = []

    def reset(self) -> None:
        self.model.clear()
        self.seen = []

    def logits(self, token_ids: Sequence[int], num_rows: int):
        import torch

        from spectui.engines.embedded.kv import common_prefix_len

        keep = min(common_prefix_len(self.seen, token_ids), len(token_ids) - num_rows)
        self.model.keep(keep)
        rows = self.model.decode(list(token_ids[keep:]), num_rows)
        self.seen = list(token_ids)
        return torch.from_numpy(rows)


def llama_draft_proposer(draft: LlamaCached, target_width: int):
    """spectui's draft-model proposer, its forwards run by llama.cpp."""
    from spectui.engines.embedded.proposers import DraftModelProposer

    class LlamaDraftProposer(DraftModelProposer):
        def __init__(self) -> None:  # the parent's wraps a torch model; this one is wrapped already
            self.draft, self.target_width = draft, target_width

    return LlamaDraftProposer()


class LlamaCppEngine(EmbeddedEngine):
    """The embedded engine (its loop, pieces, adaptive k, method switch) with llama.cpp computing
    every forward; the HF tokenizer of the same GGUF gives the chat template and the text."""

    @staticmethod
    def cached(target_model):
        return LlamaCached(target_model)

    @property
    def context_length(self) -> int:
        return self.target.model.context_length

    def close(self) -> None:
        super().close()
        self.target.model.close()
        draft = getattr(self.proposer, "draft", None)
        if isinstance(draft, LlamaCached):
            draft.model.close()


def build_llamacpp_engine(target_gguf: Path, tokenizer, method: str = "ngram", draft_gguf: Path | None = None,
                          threads: int | None = None, target_name: str = "", draft_name: str | None = None):
    """An engine whose target (and draft, for method "draft") run on llama.cpp."""
    from spectui.engines.embedded.proposers import NgramProposer
    from spectui.engines.embedded.suffix import SuffixProposer
    from spectui.engines.llamacpp.lib import LlamaModel

    target = LlamaModel(target_gguf, threads=threads)
    if method == "draft":
        if draft_gguf is None:
            raise ValueError("the llama.cpp engine's draft method needs the draft's GGUF")
        proposer = llama_draft_proposer(LlamaCached(LlamaModel(draft_gguf, threads=threads)), target.vocab_size)
    else:
        proposer = SuffixProposer(use_history=False) if method == "suffix" else NgramProposer()
    info = EngineInfo(name="llamacpp", target=target_name or target_gguf.name, draft=draft_name, method=method,
                      dtype=gguf_type(target_gguf), device="cpu")
    return LlamaCppEngine(target, tokenizer, proposer, info)


def gguf_type(path: Path) -> str:
    """The GGUF's weight type as its file names it (Q4_K_M, Q8_0, ...), else "gguf"."""
    import re

    found = re.search(r"(?i)(q\d_k_[sml]|q\d_k|q\d_\d|f16|bf16|f32)", path.name)
    return found.group(1).upper() if found else "gguf"
