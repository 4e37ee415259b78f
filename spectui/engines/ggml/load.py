"""Loading spectui's loop on the ggml backend: the target's and the draft's GGUFs map and repack
side by side (libllama's calls release the GIL). Nothing here imports torch: the loop samples and verifies
llama.cpp's rows with numpy (spectui.engines.speculative.arrays)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.core.engine import EngineInfo, Kernels

if TYPE_CHECKING:
    from spectui.engines.speculative.cross_vocab import Encode
    from spectui.engines.speculative.engine import SpeculativeEngine
    from spectui.models.vocab_map import VocabMap


def load_ggml_engine(target_gguf: Path, tokenizer: Any, method: str = "ngram", draft_gguf: Path | None = None,
                     threads: int | None = None, target_name: str = "", draft_name: str | None = None,
                     lookup: tuple[int, int] | None = None, history_drafting: bool = False,
                     vocab: VocabMap | None = None, draft_encode: Encode | None = None,
                     vocab_how: str = "tli") -> SpeculativeEngine:
    """spectui's loop with its target (and draft, for method "draft") run by llama.cpp. The models load
    side by side: libllama's calls release the GIL. vocab: the pair's vocabulary map (with
    draft_encode, the draft's tokenizer, when the draft's tokenizer is another one: TLI, or SLEM
    where vocab_how is "slem")."""
    from concurrent.futures import ThreadPoolExecutor

    from spectui.engines.ggml.lib import LlamaModel, library, library_version

    from spectui.engines.speculative.methods import drafter

    drafts_with = drafter(method)
    if drafts_with == "draft model" and draft_gguf is None:
        raise ValueError("the llama.cpp engine's draft method needs the draft's GGUF")
    library()  # once, before the threads share it
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending_draft = pool.submit(LlamaModel, draft_gguf, threads=threads) if drafts_with == "draft model" and draft_gguf else None
        loaded = []
        try:
            loaded.append(LlamaModel(target_gguf, threads=threads))
            if pending_draft is not None:
                loaded.append(pending_draft.result())
        except BaseException:  # whichever model did load is closed
            if pending_draft is not None and pending_draft.exception() is None and pending_draft.result() not in loaded:
                loaded.append(pending_draft.result())
            for model in loaded:
                model.close()
            raise
    target, draft_model = loaded[0], (loaded[1] if len(loaded) > 1 else None)
    from spectui.engines.ggml.backend import GgmlBackend, ggml_draft_proposer
    from spectui.engines.speculative.engine import SpeculativeEngine
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.engines.speculative.methods import token_proposer

    if draft_model is not None:
        proposer = ggml_draft_proposer(draft_model, target.vocab_size, vocab, draft_encode, encoder_of(tokenizer), vocab_how)
    else:  # heads run on torch (ggml_problem says so): a method ggml cannot draft is refused here
        proposer = token_proposer(method, tokenizer, lookup, history_drafting)
    info = EngineInfo(name="embedded", target=target_name or target_gguf.name, draft=draft_name, method=method,
                      draft_vocab=proposer.vocab_words,
                      dtype=target.weight_type, device="cpu",
                      backend=f"ggml {target.weight_type} · {target.threads} threads",
                      kernels=Kernels("ggml", target.threads, "llama-cpp-py-sync", library_version()))
    return SpeculativeEngine(GgmlBackend(target), tokenizer, proposer, info)
