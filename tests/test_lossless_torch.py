"""T = 0 on torch in bfloat16 (the CUDA default), where nothing promises identity: a verify row
and a plain step may round a near-tie apart. The engine says so (greedy_identical is False),
and the proof corpus must find every divergence at a near-tie, located with its top-two gap:
a divergence at a wide gap would be a broken verify, not rounding."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

# One bfloat16 step is 2^-7 of a logit's magnitude (SmolLM2's top logits are ~10-30): a gap under
# a few such steps is a tie the rounding of a differently shaped matmul can turn.
NEAR_TIE = 0.5


@pytest.mark.real_weights
@pytest.mark.slow
def test_bf16_replies_leave_the_plain_reply_only_at_near_ties_each_reported_with_its_gap():
    from spectui.bench.identity import arms, check_identity, corpus, rotating
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.engines.speculative.suffix import SuffixProposer
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    engine = build_embedded_engine(
        EngineOptions(model="smollm2-135m", method="draft", draft="smollm2-135m", dtype="bfloat16", device="cpu"),
        resolve_pair("smollm2-135m", "smollm2-135m"))
    engine.add_proposer("ngram", engine.with_method("ngram").proposer, None)
    engine.add_proposer("suffix", SuffixProposer(use_history=False), None)
    try:
        assert engine.info.dtype == "bfloat16" and not engine.capabilities.greedy_identical
        every_arm = arms(["draft", "ngram", "suffix"])
        # Six prompts (all five kinds), two arms each: the same 12 arms' replies as one arm on
        # each of 12 prompts, against half the plain replies (bf16 matmuls are emulated here).
        result = check_identity(engine, corpus(6, preamble=True), rotating(every_arm, 2), max_tokens=48)
    finally:
        engine.close()
    assert result.replies == 12 and result.accepted > result.tokens // 5  # the drafters did draft
    for divergence in result.divergences or []:
        assert divergence.gap is not None, divergence  # located and measured, never silent
        assert divergence.gap <= NEAR_TIE, divergence
