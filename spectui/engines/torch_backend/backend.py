"""The torch backend: a transformers model kept in step with a token list (kv.CachedModel, or
static_kv's on CUDA) for spectui's loop; torch tensors as its rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spectui.engines.adaptive import PRIOR_VERIFY_SLOPE
from spectui.engines.speculative.backend import LOOP_CAPABILITIES
from spectui.engines.speculative.cached_model import CachedLogits
from spectui.engines.speculative.engine import SpeculativeEngine
from spectui.engines.speculative.proposers import DraftModelProposer, Proposer

if TYPE_CHECKING:
    import torch

    from spectui.core.engine import EngineInfo
    from spectui.engines.speculative.cross_vocab import Encode
    from spectui.models.vocab_map import VocabMap


class TorchBackend:
    name = "torch"
    capabilities = LOOP_CAPABILITIES
    verify_slope = PRIOR_VERIFY_SLOPE  # not measured at load: adaptive k learns it
    measured_verify_slope = None

    def __init__(self, model: torch.nn.Module) -> None:
        from spectui.engines.torch_backend.kv import CachedModel

        self.model = model
        # kv.CachedModel; static_kv.use_static_caches puts a StaticCachedModel here on CUDA
        self.target: CachedLogits = CachedModel(model)

    @property
    def generation_config(self) -> object | None:
        return getattr(self.model, "generation_config", None)

    @property
    def context_length(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def use_threads(self, threads: int, draft: CachedLogits | None) -> None:
        import torch

        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)

    def settle(self, draft: CachedLogits | None, stop: Callable[[], bool],
               progress: Callable[[int, int], None] | None) -> bool:
        """Join the int8 weights' load-time slices (spectui.models.quantize.settle_int8), the
        target's and the draft model's."""
        from spectui.models.quantize import settle_int8

        models = [model for model in (self.model, getattr(draft, "model", None)) if model is not None]
        return settle_int8(models, stop, progress)

    def reply_ended(self, prompt_length: int, emitted: int) -> None:
        """Nothing to trim: torch's cache rolls back to any prefix exactly."""

    def close(self, draft: CachedLogits | None) -> None:
        """Nothing beyond the caches the engine resets: the weights go with the engine."""


def torch_engine(target_model: torch.nn.Module, tokenizer: Any, proposer: Proposer | None, info: EngineInfo) -> SpeculativeEngine:
    """spectui's loop on a loaded transformers model."""
    return SpeculativeEngine(TorchBackend(target_model), tokenizer, proposer, info)


def torch_draft_proposer(draft_model: torch.nn.Module, target_width: int | None = None) -> DraftModelProposer:
    """A transformers draft model as the loop's drafter (its KV cache kept by kv.CachedModel)."""
    from spectui.engines.torch_backend.kv import CachedModel

    return DraftModelProposer(CachedModel(draft_model), target_width)


def torch_vocab_proposer(draft_model: torch.nn.Module, target_width: int, vocab: VocabMap | None,
                         encode: Encode | None, target_encode: Encode | None = None, how: str = "tli") -> Proposer:
    """A transformers draft model for a pair whose vocabularies the map relates: the plain
    drafter for one tokenizer (its padding never drafted), TLI or SLEM (how) for two (encode:
    the draft's tokenizer, target_encode the target's)."""
    from spectui.engines.speculative.slem import vocab_proposer
    from spectui.engines.torch_backend.kv import CachedModel

    return vocab_proposer(CachedModel(draft_model), target_width, vocab, encode, target_encode, how)
