"""Tiny random causal LMs for tests that must run offline in seconds."""

from __future__ import annotations

from spectui.engines.speculative.proposers import Proposer


def make_tiny_model(vocab_size: int, seed: int, layers: int = 2):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    # Sharpen the output so greedy choices are not near-ties of random noise.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


CORPUS = [
    "def add(a, b):\n    return a + b\n",
    '{"name": "spectui", "version": 1, "tags": ["tui", "llm"]}',
    "The quick brown fox jumps over the lazy dog. Héllo wörld, 日本語 🎉!",
    "SELECT id, name FROM users WHERE age > 30 ORDER BY name;",
] * 20


def make_tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>")


def make_tiny_draft(target):
    """The target with noise added: it agrees often but not always (mixed acceptance)."""
    import copy

    import torch

    draft = copy.deepcopy(target)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(0.35 * parameter.std() * torch.randn(parameter.shape, generator=generator))
    return draft


class SlowProposer(Proposer):
    """A proposer that takes `delay` seconds more per step: the reply outlasts a test's actions."""

    def __init__(self, inner: Proposer, delay: float) -> None:
        self.inner, self.delay, self.method = inner, delay, inner.method

    def reset(self) -> None:
        self.inner.reset()

    def prefill(self, token_ids) -> None:
        self.inner.prefill(token_ids)

    def propose(self, *args):
        import time

        time.sleep(self.delay)
        return self.inner.propose(*args)


class GatedProposer(Proposer):
    """A proposer that drafts only when let through: each `gate.release()` in the test lets one
    drafting step run, so the test knows which step the engine is in without a clock."""

    def __init__(self, inner: Proposer, gate) -> None:
        self.inner, self.gate, self.method = inner, gate, inner.method

    def reset(self) -> None:
        self.inner.reset()

    def prefill(self, token_ids) -> None:
        self.inner.prefill(token_ids)

    def propose(self, *args):
        self.gate.acquire()
        return self.inner.propose(*args)


def build_tiny_engine(progress=None, step_delay: float = 0.0, fail: str | None = None, gate=None,
                      settling=None):
    """The embedded engine on the tiny models, built the same way in any process (an engine
    process calls this by name). gate: a semaphore every drafting step waits on (GatedProposer).
    settling: (gate, log) for an engine with settling work to do (GatedSettling)."""
    from spectui.core.engine import EngineInfo
    from spectui.core.errors import ModelError
    from spectui.engines.torch_backend.backend import TorchBackend, torch_draft_proposer, torch_engine

    if progress is not None:
        progress("tiny models", 0, 1)
    if fail:
        raise ModelError(fail)
    tokenizer = make_tiny_tokenizer()
    target = make_tiny_model(len(tokenizer), seed=1)
    proposer = torch_draft_proposer(make_tiny_draft(target))
    if step_delay:
        proposer = SlowProposer(proposer, step_delay)
    if gate is not None:
        proposer = GatedProposer(proposer, gate)
    info = EngineInfo("embedded", "tiny", "tiny-draft", "draft", "float32", "cpu")
    if progress is not None:
        progress("tiny models", 1, 1)
    if settling is not None:
        gate_for_settling, log = settling
        return gated_settling_class()(TorchBackend(target), tokenizer, proposer, info, gate=gate_for_settling, log=log)
    return torch_engine(target, tokenizer, proposer, info)


def gated_settling_class():
    from spectui.engines.speculative.engine import SpeculativeEngine

    class GatedSettling(SpeculativeEngine):
        """The tiny engine with SETTLE_JOINS pieces of settling work (as the int8 joins), each
        let through by `gate.release()` in the test; what happens is put on `log`."""

        SETTLE_JOINS = 3

        def __init__(self, *engine_args, gate, log) -> None:
            super().__init__(*engine_args)
            self.gate, self.log, self.joins = gate, log, 0

        def settle(self, stop=lambda: False, progress=None) -> bool:
            while self.joins < self.SETTLE_JOINS:
                if stop():
                    self.log.put("stopped")
                    return False
                if self.gate.acquire(timeout=0.01):
                    self.joins += 1
                    self.log.put(f"join {self.joins}")
            self.log.put("settled")
            return True

    return GatedSettling


def build_tiny_tree_engine(progress=None, kind: str = "medusa", tree_width: int = 2):
    """The tiny target drafting a tree from untrained heads (perturbed, so that they draft
    something other than the next token), built the same way in any process."""
    import torch

    from spectui.core.engine import EngineInfo
    from spectui.engines.torch_backend.backend import torch_engine
    from spectui.engines.torch_backend.head_proposers import head_proposer
    from spectui.heads.train import new_heads

    tokenizer = make_tiny_tokenizer()
    target = make_tiny_model(len(tokenizer), seed=1)
    torch.manual_seed(0)
    heads = new_heads(kind, target.config.hidden_size, 4).eval().requires_grad_(False)
    with torch.no_grad():
        for parameter in heads.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape))
    info = EngineInfo("embedded", "tiny", "tiny-heads", kind, "float32", "cpu")
    return torch_engine(target, tokenizer, head_proposer(heads, kind, target, tree_width), info)
