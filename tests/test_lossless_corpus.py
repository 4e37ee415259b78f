"""T = 0 identity proven on a corpus, not one prompt: the ggml kernels compute a verify row bit
for bit as a plain step at every cached length (the cause of the old divergence, past 256 cached
tokens, is in docs/lossless.md), and every method at every k writes the plain reply on 60
prompts with 512-token replies (spectui.bench.identity; the default pair: benchmarks/identity.py)."""

from __future__ import annotations

import numpy
import pytest

from spectui.models.registry import resolve

pytest.importorskip("llama_cpp_py_sync")


def smollm2_gguf():
    from spectui.models.gguf_local import local_gguf

    return local_gguf(resolve("smollm2-135m"))


@pytest.mark.real_weights
def test_verify_rows_equal_plain_steps_past_512_cached_cells():
    """llama.cpp splits a single row's attention over the threads once 512 cells are cached and
    sums the pieces in another order than a batch does: every row differed from plain decoding
    there until the engine kept its value cache in bf16 (LlamaModel's batch_invariant)."""
    from spectui.engines.ggml.lib import LlamaModel

    model = LlamaModel(smollm2_gguf(), context=1024, threads=2)
    try:
        prefix = [(97 * i + 13) % 4000 + 100 for i in range(300)]  # past 256: 512 cells in view
        tail = [(89 * i + 7) % 4000 + 100 for i in range(12)]
        model.decode(prefix, 1)
        alone = numpy.stack([model.decode([token], 1)[0] for token in tail])
        for width in (2, 3, 5):
            model.keep(len(prefix))
            together = numpy.concatenate([model.decode(tail[start:start + width], len(tail[start:start + width]))
                                          for start in range(0, len(tail), width)])
            differing = [row for row in range(len(tail)) if not numpy.array_equal(together[row], alone[row])]
            assert not differing, (width, differing, float(numpy.abs(together - alone).max()))
    finally:
        model.close()


@pytest.mark.real_weights
@pytest.mark.slow
def test_every_method_at_every_k_writes_the_plain_reply_on_the_proof_corpus(smollm2_ggml):
    from spectui.bench.identity import arms, check_identity, corpus, rotating

    """27 prompts of five kinds after a ~270-token system prompt, so every token is decoded past
    256 cached tokens (where the old attention path changed its sums); each prompt's plain reply
    against two arms, the 18 arms in turn: every arm meets three prompts of three kinds. 32-token
    replies (a k 8 reply still verifies 3 full widths) keep it to minutes on 2 cores;
    benchmarks/identity.py runs 60 prompts of 512."""
    every_arm = arms(["draft", "ngram", "suffix"])  # k 1, 2, 3, 4, 8 and auto: 18 arms
    prompts = corpus(27, preamble=True)
    schedule = rotating(every_arm, 2)
    met = [{prompts[index].kind for index in range(27) if arm in schedule(index)} for arm in every_arm]
    assert all(len(kinds) == 3 for kinds in met)
    assert len(smollm2_ggml.prompt_ids(prompts[0].messages)) > 256
    result = check_identity(smollm2_ggml, prompts, schedule, max_tokens=32)
    assert result.replies == 54 and result.tokens > 54 * 24
    assert result.accepted > result.tokens // 5  # the drafters did draft
    assert smollm2_ggml.capabilities.greedy_identical
    assert result.divergences == [], result.divergences[:5]
