"""The proof corpus with a draft of another tokenizer: SmolLM2-135M drafting for
Qwen2.5-Coder-0.5B on ggml, by TLI and by SLEM at k 1, 2, 3, 4, 8 and auto, writes the target's
plain reply bit for bit: the same tokens, each chosen from the same logits (its top-two gap
equal to the last bit).

The replies run one after another on one warm cache, as a chat and benchmarks/cross_vocab.py
run them: each arm's reply starts from the prompt an earlier reply left cached, and the
conversation's third turn extends the second's. That is the shape issue 58's one divergence had
(the conversations suite, chat-code-typescript-turn3, TLI at k 4): the plain reply ran its
prompt's last token in a batch, the TLI reply after it ran that token alone, and Q4_K's kernels
round the two rows apart (docs/lossless.md, "A reply's first row")."""

from __future__ import annotations

import numpy
import pytest

from spectui.core.events import Control, Done, GenerationParams, Step

pytest.importorskip("llama_cpp_py_sync")

TOKENS = 16
TYPESCRIPT = "You are a coding assistant. Reply with TypeScript code only, in one fenced code block."
# The conversation's earlier replies as the suite's run had them: Qwen2.5-Coder-0.5B's own, cut at 48 tokens.
FIRST_REPLY = ("```typescript\nfunction parseCsvLine(line: string): string[] {\n    // Split the line by commas, handling double "
               "quotes\n    return line.split(/,+/);\n}\n\n// Example usage:\nconst csvLine = \"Name,Age,")
SECOND_REPLY = ("```typescript\nfunction parseCsvLine(line: string): string[] {\n    // Split the line by commas, handling double "
                "quotes and escaped quotes\n    return line.split(/,+/);\n}\n\n// Example usage:\nconst csvLine = \"Name")
TURNS = [
    {"role": "system", "content": TYPESCRIPT},
    {"role": "user", "content": "Write a TypeScript function `parseCsvLine(line: string): string[]` that splits a CSV line "
                                "on commas, where a field in double quotes may contain commas."},
    {"role": "assistant", "content": FIRST_REPLY},
    {"role": "user", "content": "Now also accept escaped quotes inside a quoted field (two double quotes stand for one). "
                                "Give the whole function again."},
    {"role": "assistant", "content": SECOND_REPLY},
    {"role": "user", "content": "Rename it to `splitCsvLine`, add a `delimiter` parameter that defaults to a comma, and add "
                                "a JSDoc comment. Give the whole function again."},
]
PROMPTS = [
    TURNS[:4],  # the conversation's second turn ...
    TURNS,  # ... and its third, its prompt extending the second's in the cache (issue 58's case)
    [{"role": "user", "content": "Write a Python function that checks whether a string is a palindrome."}],
    [{"role": "user", "content": "Écris une phrase en français sur les crêpes, puis traduis-la en 日本語."}],  # characters cut between tokens
]


@pytest.fixture(scope="module")
def qwen_drafted_by_smollm2():
    """Qwen2.5-Coder-0.5B with SmolLM2-135M drafting by SLEM ("slem") and by TLI ("tli"): one
    target and one draft loaded for both rules, the proposers sharing the draft."""
    from spectui.engines.ggml.build import build_ggml_engine
    from spectui.engines.speculative.cross_vocab import CrossVocabProposer
    from spectui.engines.speculative.slem import SlemProposer
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    engine = build_ggml_engine(EngineOptions(model="qwen2.5-coder-0.5b", method="draft", draft="smollm2-135m", vocab="slem"),
                               resolve_pair("qwen2.5-coder-0.5b", "smollm2-135m"))
    try:
        slem = engine.proposer
        assert isinstance(slem, SlemProposer) and slem.greedy == "slem"
        engine.add_proposer("slem", slem, "smollm2-135m")
        engine.add_proposer("tli", CrossVocabProposer(slem.draft, slem.vocab, slem.context.encode, slem.target_width),
                            "smollm2-135m")
        yield engine
    finally:
        engine.close()


def reply(engine, messages: list[dict], control: Control) -> tuple[list[int], list[float], int]:
    """Token ids, the top-two gap of the row each came from, and the drafts accepted; the cache
    as the last reply left it."""
    events = list(engine.stream(messages, GenerationParams(max_tokens=TOKENS, top_p=1.0, seed=0), control))
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length"), events[-1]
    steps = [event for event in events if isinstance(event, Step)]
    return ([token for step in steps for token in step.token_ids], [gap for step in steps for gap in step.margins],
            sum(step.num_accepted for step in steps))


@pytest.mark.real_weights
@pytest.mark.slow
def test_tli_and_slem_at_every_k_write_the_plain_reply_bit_for_bit_on_a_warm_cache(qwen_drafted_by_smollm2):
    """Each prompt's plain reply, then three arms (the 12 once each: TLI at every k on the
    conversation, TLI's k 4 first on its third turn, right after the plain reply as in issue 58;
    SLEM at every k on the prompts in other shapes), every one against the plain reply."""
    from spectui.bench.identity import arms

    engine = qwen_drafted_by_smollm2
    every_arm = arms(["tli"]) + arms(["slem"])
    assert len({arm.name for arm in every_arm}) == 12 and every_arm[3].name == "tli k 4"
    engine.forget_prompts()
    checked, accepted, differing = 0, 0, []
    for index, messages in enumerate(PROMPTS):
        plain, plain_gaps, _ = reply(engine, messages, Control(0, 0.0))
        assert len(plain) == TOKENS and len(plain_gaps) == TOKENS
        for arm in every_arm[3 * index:3 * index + 3]:
            tokens, gaps, drafts = reply(engine.with_method(arm.method), messages, Control(arm.k, 0.0, auto=arm.auto))
            checked, accepted = checked + 1, accepted + drafts
            if tokens != plain or gaps != plain_gaps:
                differing.append((index, arm.name, next((i for i, pair in enumerate(zip(tokens, gaps))
                                                         if pair != (plain[i], plain_gaps[i])), len(tokens))))
    assert checked == 12 and accepted > 12 * TOKENS // 10  # the draft did draft, across tokenizers
    assert differing == []


@pytest.mark.real_weights
def test_a_prompts_last_row_is_the_same_whether_its_prompt_was_cached_or_not(qwen_drafted_by_smollm2):
    """Issue 58's cause on the target alone, in its shape: the conversation so far cached in the
    exact context (as a follow-up's is), the third turn's last 61 tokens run after it; the row after
    the prompt then, and again once the prompt is cached (its last token run once more), bit for bit
    the same. Before the fix the first came from the 61-token batch, 0.38 apart in a logit."""
    engine = qwen_drafted_by_smollm2
    prompt = engine.prompt_ids(PROMPTS[1])
    target = engine.target
    engine.forget_prompts()
    target.fast_prefill, fast = False, target.fast_prefill  # the conversation so far, in the exact context
    try:
        target.logits(prompt[:-61], 1)
        fresh = target.logits(prompt, 1)[0].copy()
        cached = target.logits(prompt, 1)[0]
    finally:
        target.fast_prefill = fast
    assert numpy.array_equal(fresh, cached), float(numpy.abs(fresh - cached).max())
