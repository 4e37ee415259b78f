"""IncrementalDetokenizer: the deltas always join to the one-shot decode.

Tokenizers are built here, offline, in the three styles that matter: byte-level BPE
(Qwen, SmolLM2, GPT-2), and SentencePiece-style BPE with byte fallback, once with
Llama-2's decoder (replace, byte fallback, strip one leading space) and once with the
Metaspace decoder. Multi-byte characters are split over tokens in all three.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.engines.speculative.detokenize import IncrementalDetokenizer

CORPUS = [
    "héllo wörld 日本語 🎉",
    "hello world, hello there. Hello again!",
    "naïve café — über straße, déjà vu",
    "日本語のテキストです。 emoji 🎉🎉 party 🥳 ok",
    "def add(a, b):\n    return a + b\n",
    "User: hi\nAssistant: hello",
] * 5
TEXT = "héllo wörld 日本語 🎉 café!"
SPECIALS = ["<unk>", "<s>", "</s>"]


def byte_level_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=330,
        special_tokens=["<|endoftext|>", "<|im_start|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, clean_up_tokenization_spaces=False)


def sentencepiece_tokenizer(decoder_style: str):
    """BPE over "▁"-marked words with <0xNN> byte fallback, like Llama 2 / Mistral."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    # ASCII plus two multi-byte characters as whole tokens; ö, 本, 🎉 ... go through bytes.
    alphabet = list(string.ascii_letters + string.digits + string.punctuation) + ["▁", "é", "日"]
    trainer = trainers.BpeTrainer(
        vocab_size=150, initial_alphabet=alphabet, limit_alphabet=len(alphabet), show_progress=False
    )
    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    base.train_from_iterator(CORPUS, trainer)
    trained = json.loads(base.to_str())["model"]

    vocab = {token: i for i, token in enumerate(SPECIALS + [f"<0x{b:02X}>" for b in range(256)])}
    for token in sorted(trained["vocab"], key=trained["vocab"].get):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(merge) for merge in trained["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True, unk_token="<unk>"))
    if decoder_style == "llama":
        tokenizer.normalizer = base.normalizer
        tokenizer.decoder = decoders.Sequence(
            [
                decoders.Replace("▁", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tokenizer.decoder = decoders.Sequence(
            [decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first")]
        )
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in SPECIALS]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, clean_up_tokenization_spaces=False)


TOKENIZERS = {
    "byte_level": byte_level_tokenizer(),
    "llama": sentencepiece_tokenizer("llama"),
    "metaspace": sentencepiece_tokenizer("metaspace"),
}
STYLES = sorted(TOKENIZERS)


def chunks(token_ids: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """token_ids cut into steps of the given sizes (cycled); the last step takes the rest."""
    steps, start, i = [], 0, 0
    while start < len(token_ids):
        size = sizes[i % len(sizes)] if sizes else 1
        steps.append(list(token_ids[start : start + size]))
        start += size
        i += 1
    return steps


def stream(tokenizer, steps: Sequence[Sequence[int]], prompt_ids=None) -> tuple[list[str], str]:
    detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids)
    deltas = [detokenizer.add(step) for step in steps]
    return deltas, detokenizer.flush()


def one_shot(tokenizer, token_ids: Sequence[int]) -> str:
    return tokenizer.decode(list(token_ids), skip_special_tokens=True)


# ---------------------------------------------------------------- the tokenizers are what we think


@pytest.mark.parametrize("style", STYLES)
def test_the_text_splits_characters_over_tokens(style):
    tokenizer = TOKENIZERS[style]
    token_ids = tokenizer.encode(TEXT)
    assert one_shot(tokenizer, token_ids) == TEXT
    # Some single token decodes to a partial character: the hard case is really exercised.
    assert any("\ufffd" in tokenizer.decode([i]) for i in token_ids)


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize("style", STYLES)
def test_one_token_at_a_time_gives_the_text_with_no_partial_characters(style):
    tokenizer = TOKENIZERS[style]
    token_ids = tokenizer.encode(TEXT)
    deltas, rest = stream(tokenizer, [[i] for i in token_ids])
    assert "".join(deltas) + rest == TEXT
    assert rest == ""
    assert not any("\ufffd" in delta for delta in deltas)
    assert "" in deltas  # something was held back until its character completed


def test_a_character_is_held_until_its_last_byte():
    tokenizer = TOKENIZERS["llama"]
    hon = tokenizer.convert_tokens_to_ids(["<0xE6>", "<0x9C>", "<0xAC>"])  # 本 in UTF-8
    detokenizer = IncrementalDetokenizer(tokenizer)
    assert detokenizer.add(tokenizer.encode("hello", add_special_tokens=False)) == "hello"
    assert [detokenizer.add([i]) for i in hon] == ["", "", ""]
    # A byte run only closes at the next ordinary token: a later byte could still
    # turn the whole run into U+FFFD, as the one-shot decode would.
    assert detokenizer.add(tokenizer.convert_tokens_to_ids(["!"])) == "本!"


@pytest.mark.parametrize("style", ["llama", "metaspace"])
def test_word_starts_keep_their_space(style):
    tokenizer = TOKENIZERS[style]
    token_ids = tokenizer.encode("hello world hello there")
    deltas, rest = stream(tokenizer, [[i] for i in token_ids])
    assert "".join(deltas) + rest == "hello world hello there"


@pytest.mark.parametrize("style", STYLES)
def test_special_tokens_are_skipped_without_losing_spaces(style):
    tokenizer = TOKENIZERS[style]
    special = 1  # <|im_start|> in the byte-level vocabulary, <s> in the others
    assert tokenizer.convert_ids_to_tokens(special) in ("<|im_start|>", "<s>")
    hello = tokenizer.encode("hello", add_special_tokens=False)
    world = tokenizer.encode(" world", add_special_tokens=False)
    token_ids = [special] + hello + [special] + world + [special]
    expected = one_shot(tokenizer, token_ids)
    assert expected.replace(" ", "") == "helloworld"
    for sizes in ([1], [2], [3, 1], [100]):
        deltas, rest = stream(tokenizer, chunks(token_ids, sizes))
        assert "".join(deltas) + rest == expected


@pytest.mark.parametrize("style", ["llama", "metaspace"])
def test_a_special_token_does_not_close_a_byte_run(style):
    # decode() drops special tokens before its decoder runs, so E6 97 A5 80 is one run,
    # invalid as a whole: even the complete 日 becomes U+FFFD in the one-shot decode.
    tokenizer = TOKENIZERS[style]
    token_ids = tokenizer.convert_tokens_to_ids(["<0xE6>", "<0x97>", "<0xA5>", "</s>", "<0x80>", "!"])
    assert one_shot(tokenizer, token_ids) == "\ufffd" * 4 + "!"
    for sizes in ([1], [4, 2], [3, 1]):
        deltas, rest = stream(tokenizer, chunks(token_ids, sizes))
        assert "".join(deltas) + rest == "\ufffd" * 4 + "!"


@pytest.mark.parametrize("style", STYLES)
def test_prompt_context_decodes_the_reply_as_a_continuation(style):
    tokenizer = TOKENIZERS[style]
    prompt_ids = tokenizer.encode("User: hi\nAssistant:")
    # SentencePiece-style encoders mark the word start themselves ("▁hello").
    reply = " hello wörld 日本語" if style == "byte_level" else "hello wörld 日本語"
    reply_ids = tokenizer.encode(reply, add_special_tokens=False)
    deltas, rest = stream(tokenizer, [[i] for i in reply_ids], prompt_ids)
    whole = one_shot(tokenizer, prompt_ids + reply_ids)
    prompt = one_shot(tokenizer, prompt_ids)
    assert whole.startswith(prompt)
    assert "".join(deltas) + rest == whole[len(prompt) :] == " hello wörld 日本語"


def test_flush_gives_up_an_unfinished_character():
    tokenizer = TOKENIZERS["byte_level"]
    partial = tokenizer.encode("日")[:1]
    assert tokenizer.decode(partial).endswith("\ufffd")
    detokenizer = IncrementalDetokenizer(tokenizer)
    assert detokenizer.add(partial) == ""
    assert detokenizer.flush() == tokenizer.decode(partial)
    assert detokenizer.flush() == ""


@pytest.mark.parametrize("style", STYLES)
def test_window_stays_short_on_a_long_reply(style):
    """Each add decodes a window of recent tokens, never the whole reply."""
    tokenizer = TOKENIZERS[style]

    def longest_window(token_ids: list[int]) -> int:
        window_lengths: list[int] = []

        class CountingTokenizer:
            def __getattr__(self, name):
                return getattr(tokenizer, name)

            def decode(self, ids, **kwargs):
                window_lengths.append(len(ids))
                return tokenizer.decode(ids, **kwargs)

        deltas, rest = stream(CountingTokenizer(), chunks(token_ids, [3, 1, 5]))
        assert "".join(deltas) + rest == one_shot(tokenizer, token_ids)
        return max(window_lengths)

    short_reply = tokenizer.encode(" ".join(CORPUS))
    long_reply = tokenizer.encode(" ".join(CORPUS * 8))
    assert len(long_reply) > 2000
    # The window spans two steps plus whatever is held (a long byte-fallback run
    # here: the Japanese line is all <0xNN> tokens); it does not grow with the reply.
    assert longest_window(long_reply) == longest_window(short_reply) < 60


# ---------------------------------------------------------------- properties


def ids_and_steps(vocab_size: int):
    return st.tuples(
        st.lists(st.integers(0, vocab_size - 1), max_size=40),
        st.lists(st.integers(1, 6), min_size=1, max_size=8),
    )


@pytest.mark.parametrize("style", STYLES)
def test_any_ids_in_any_steps_join_to_the_one_shot_decode(style):
    tokenizer = TOKENIZERS[style]

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(ids_and_steps(len(tokenizer)))
    def check(case):
        token_ids, sizes = case
        deltas, rest = stream(tokenizer, chunks(token_ids, sizes))
        assert "".join(deltas) + rest == one_shot(tokenizer, token_ids)

    check()


@pytest.mark.parametrize("style", STYLES)
def test_text_in_any_steps_after_a_prompt(style):
    tokenizer = TOKENIZERS[style]
    prompt_ids = tokenizer.encode("User: hi\nAssistant:")
    prompt = one_shot(tokenizer, prompt_ids)

    @settings(max_examples=150, deadline=None)
    @given(
        st.text(alphabet="héllo wörld日本語🎉 \n!", max_size=30),
        st.lists(st.integers(1, 6), min_size=1, max_size=8),
    )
    def check(text, sizes):
        reply_ids = tokenizer.encode(text, add_special_tokens=False)
        deltas, rest = stream(tokenizer, chunks(reply_ids, sizes), prompt_ids)
        assert "".join(deltas) + rest == one_shot(tokenizer, prompt_ids + reply_ids)[len(prompt) :]

    check()


# ---------------------------------------------------------------- real tokenizers, when converted


def cached_tokenizer_files() -> list[Path]:
    roots = {Path.home() / ".cache" / "spectui"}
    try:
        import platformdirs

        roots.add(Path(platformdirs.user_cache_dir("spectui")))
    except ImportError:
        pass
    return sorted({path for root in roots if root.is_dir() for path in root.rglob("tokenizer.json")})


@pytest.mark.parametrize(
    "tokenizer_file",
    cached_tokenizer_files()
    or [pytest.param(None, marks=pytest.mark.skip(reason="no tokenizer.json in ~/.cache/spectui"))],
    ids=lambda path: path.parent.name if path else "none",
)
def test_real_tokenizer(tokenizer_file):
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file))
    rng = random.Random(0)
    text = "Héllo wörld! 日本語のテキスト 🎉🥳 naïve café\n    return {'ok': True}"
    samples = [tokenizer.encode(text, add_special_tokens=False)]
    # Arbitrary ids too: byte tokens, special tokens, rare pieces.
    for _ in range(200):
        samples.append([rng.randrange(len(tokenizer)) for _ in range(rng.randrange(1, 60))])
    for token_ids in samples:
        sizes = [rng.randrange(1, 6) for _ in range(4)]
        deltas, rest = stream(tokenizer, chunks(token_ids, sizes))
        assert "".join(deltas) + rest == one_shot(tokenizer, token_ids)

    prompt_ids = tokenizer.encode("User: hi\nAssistant:", add_special_tokens=False)
    deltas, rest = stream(tokenizer, chunks(samples[0], [2, 1, 3]), prompt_ids)
    whole = one_shot(tokenizer, prompt_ids + samples[0])
    assert "".join(deltas) + rest == whole[len(one_shot(tokenizer, prompt_ids)) :]
