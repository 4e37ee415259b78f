"""Word wrap, per-token pieces, charts: the pure parts of the token view and panels."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from spectui.core.events import Source, Step
from spectui.tui.charts import bar, bucket_means, sparkline
from spectui.core.pieces import (
    StepPieces,
    align_pieces,
    decoded_pieces,
    display_chunks,
    guessed_pieces,
)
from spectui.tui.wrap import StyledWrapper

KINDS = ["draft", "recovered", "bonus", "target", "ghost"]
chunk = st.tuples(st.text(alphabet="ab cd\n日é", max_size=12), st.sampled_from(KINDS))


def test_wrap_breaks_at_the_last_space_and_keeps_kinds():
    wrapper = StyledWrapper(10)
    wrapper.extend([("hello ", "draft"), ("wonder", "bonus"), ("ful", "recovered")])
    assert wrapper.plain_lines() == ["hello ", "wonderful"]
    assert wrapper.lines[1].runs() == [("wonder", "bonus"), ("ful", "recovered")]


def test_wrap_hard_breaks_a_long_word_and_honours_newlines():
    wrapper = StyledWrapper(4)
    wrapper.append("abcdefghij\nxy", "target")
    assert wrapper.plain_lines() == ["abcd", "efgh", "ij", "xy"]


def test_wrap_hides_ghosts_when_asked():
    wrapper = StyledWrapper(80, hidden=("ghost",))
    wrapper.extend([("a", "draft"), (" nope", "ghost"), (" b", "recovered")])
    assert wrapper.plain_lines() == ["a b"]


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(chunk, max_size=30), width=st.integers(min_value=2, max_value=15))
def test_wrap_never_overflows_and_keeps_every_character_in_order(chunks, width):
    wrapper = StyledWrapper(width)
    wrapper.extend(chunks)
    for line in wrapper.lines:
        assert line.width == sum(cell_len(c) for c in line.chars) <= width
    # Only spaces at a break and the newlines themselves may vanish.
    shown = [(c, k) for line in wrapper.lines for c, k in zip(line.chars, line.kinds)]
    source = [(c, k) for text, kind in chunks for c in text if c != "\n" for k in [kind]]
    position = 0
    for char, kind in source:
        if position < len(shown) and shown[position] == (char, kind):
            position += 1
        else:
            assert char == " ", f"{char!r} went missing"
    assert position == len(shown)


def _sentencepiece_decode(vocab):
    # Like SentencePiece: a token decoded alone loses its leading space.
    def decode(ids):
        return "".join(vocab[i] for i in ids).lstrip(" ")

    return decode


def test_pieces_use_left_context_to_keep_leading_spaces():
    vocab = {1: "Hello", 2: " world", 3: "!", 4: " again"}
    decode = _sentencepiece_decode(vocab)
    assert decoded_pieces(decode, [], [2]) == ["world"]  # alone: the space is gone
    splitter = StepPieces(decode)
    assert splitter.split(Step((1,), (Source.TARGET,), "Hello")) == (["Hello"], "")
    pieces, _ = splitter.split(Step((2, 3), (Source.DRAFT, Source.RECOVERED), " world!"))
    assert pieces == [" world", "!"]


def test_pieces_always_join_to_the_step_text():
    # The engine held back a partial character: its text lags the decoded pieces.
    assert align_pieces(["ab", "c\ufffd"], "ab") == ["ab", ""]
    assert align_pieces(["x", "y"], "zxy") == ["", "zxy"]
    assert "".join(align_pieces(["a", "b"], "ab€")) == "ab€"


def test_pieces_from_a_byte_level_tokenizer_join_across_multibyte_text(tiny_tokenizer):
    from spectui.engines.speculative.detokenize import IncrementalDetokenizer

    text = "Héllo wörld, 日本語 🎉!"
    ids = tiny_tokenizer.encode(text, add_special_tokens=False)
    detokenizer = IncrementalDetokenizer(tiny_tokenizer)  # makes the Step texts, as the engine does
    splitter = StepPieces(lambda token_ids: tiny_tokenizer.decode(list(token_ids)))
    pieces = []
    for start in range(0, len(ids), 3):
        chunk_ids = tuple(ids[start : start + 3])
        step = Step(chunk_ids, (Source.TARGET,) * len(chunk_ids), detokenizer.add(chunk_ids))
        step_pieces, _ = splitter.split(step)
        assert "".join(step_pieces) == step.text
        pieces += step_pieces
    assert "".join(pieces) + detokenizer.flush() == text
    assert sum(1 for p in pieces if p) > len(ids) // 3  # most tokens got their own text


def test_guessed_pieces_without_a_tokenizer():
    assert guessed_pieces(" one two three", 2) == [" one", " two three"]
    assert guessed_pieces("x", 3) == ["x", "", ""]
    assert guessed_pieces("", 0) == []


def test_ghost_goes_between_accepted_drafts_and_the_recovered_token():
    step = Step((1, 2, 3), (Source.DRAFT, Source.DRAFT, Source.RECOVERED), "abc", drafted=(1, 2, 9, 9))
    chunks = display_chunks(step, ["a", "b", "c"], "XY\nZ")
    assert chunks == [("a", "draft"), ("b", "draft"), ("XY↵Z", "ghost"), ("c", "recovered")]
    vocab = {1: "a", 2: "b", 3: "c", 9: "X"}
    splitter = StepPieces(lambda ids: "".join(vocab[i] for i in ids))
    assert splitter.split(step) == (["a", "b", "c"], "XX")
    assert StepPieces(None).split(step)[1] == "✗✗"


def test_sparkline_and_bar():
    assert sparkline([0.0, 1.0, None, 0.5], 10) == "▁█ ▅"
    assert len(sparkline([0.5] * 100, 20)) == 20
    assert bucket_means([1.0, 0.0, None, None], 2) == [0.5, None]
    assert bar(1.0, 4) == "████"
    assert bar(0.5, 4) == "██  "
    assert bar(0.0, 3) == "   "
    assert bar(0.3, 10) == "███" + " " * 7
    assert bar(0.55, 2) == "█▏"
