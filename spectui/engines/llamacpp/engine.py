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

from collections.abc import Iterator, Sequence
from pathlib import Path

from spectui.core.engine import EngineInfo
from spectui.core.events import Control, Done, GenerationParams, Message, Step


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


class LlamaCppEngine:
    """The Engine protocol on llama.cpp: the HF tokenizer of the same GGUF for chat templates
    and text, llama.cpp for every forward."""

    def __init__(self, target, tokenizer, proposer, info: EngineInfo) -> None:
        from spectui.engines.adaptive import AdaptiveK
        from spectui.engines.prompt import stop_token_ids

        self.target = LlamaCached(target)
        self.tokenizer = tokenizer
        self.proposer = proposer
        self.info = info
        self.stop_ids = stop_token_ids(tokenizer)
        self._chooser = AdaptiveK()

    @property
    def context_length(self) -> int:
        return self.target.model.context_length

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        from spectui.engines.prompt import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages)

    def stream(self, messages: Sequence[Message], params: GenerationParams, control: Control) -> Iterator[Step | Done]:
        from spectui.engines.prompt import stream_conversation

        yield from stream_conversation(self, messages, params, control, self.context_length)

    def stream_ids(self, prompt_ids: Sequence[int], params: GenerationParams, control: Control) -> Iterator[Step | Done]:
        from spectui.engines.embedded.detokenize import IncrementalDetokenizer
        from spectui.engines.embedded.loop import decode_steps

        detokenizer = IncrementalDetokenizer(self.tokenizer, list(prompt_ids))
        stop_ids = self.stop_ids | set(params.stop_token_ids)
        try:
            yield from decode_steps(self.target, self.proposer, prompt_ids, params, control, stop_ids, detokenizer,
                                    self._chooser)
        except Exception as error:
            yield Done("error", tuple(prompt_ids), error=f"{type(error).__name__}: {error}")

    def forget_prompts(self) -> None:
        self.target.reset()
        if self.proposer is not None:
            self.proposer.reset()

    def close(self) -> None:
        self.forget_prompts()
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
                      dtype=gguf_type(target_gguf), device="cpu", live_k=True)
    return LlamaCppEngine(target, tokenizer, proposer, info)


def gguf_type(path: Path) -> str:
    """The GGUF's weight type as its file names it (Q4_K_M, Q8_0, ...), else "gguf"."""
    import re

    found = re.search(r"(?i)(q\d_k_[sml]|q\d_k|q\d_\d|f16|bf16|f32)", path.name)
    return found.group(1).upper() if found else "gguf"
