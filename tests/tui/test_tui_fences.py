"""The pure parts of the chat client: code fences (the view's and the copy key's), the
streaming wrapper's fence lines, prompt recall, the clipboard's sequences."""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from spectui.core.events import LiveValues
from spectui.core.engine import EngineInfo
from spectui.tui.chat.recall import PromptRecall
from spectui.chat_session.reply_settings import made_with, message_text, reply_settings
from spectui.tui.clipboard import extra_sequences, osc52, tmux_passthrough
from spectui.tui.fences import CodeBlock, code_blocks
from spectui.tui.wrap import StyledWrapper

REPLY = "Try:\n```python\ndef f(x):\n\treturn x\n```\nthen\n  ~~~~\n  shell\n   line\n  ~~~~\n```js\nopen"


def test_code_blocks_are_the_lines_between_the_fences():
    assert code_blocks(REPLY) == [
        CodeBlock("python", "def f(x):\n\treturn x"),
        CodeBlock("", "shell\n line"),  # the fence's two spaces of indentation come off each line
        CodeBlock("js", "open", closed=False),  # cut off: to the end, and said so
    ]
    assert code_blocks("no code here") == []
    assert code_blocks("``` a`b\nnot a fence") == []  # a backtick fence's info holds no backtick
    assert code_blocks("````\n```\nstill code\n````") == [CodeBlock("", "```\nstill code")]
    assert code_blocks("```\nx\n```\n") == [CodeBlock("", "x")]
    assert code_blocks("```py\nx\n")[0].text == "x"  # a cut-off block's last newline is no line


def test_the_wrapper_marks_fence_lines_and_wraps_code_inside_the_block():
    wrapper = StyledWrapper(12)
    wrapper.append(REPLY, "draft")
    shown = [(line.block, line.text) for line in wrapper.lines]
    assert shown == [
        ("prose", "Try:"),
        ("open", "```python"),
        ("code", "def f(x):"),
        ("code", "    return"),  # a tab is four columns in code; code wraps at 12 - 2
        ("code", "x"),
        ("close", "```"),
        ("prose", "then"),
        ("open", "  ~~~~"),
        ("code", "  shell"),
        ("code", "   line"),
        ("close", "  ~~~~"),
        ("open", "```js"),
        ("code", "open"),
    ]
    assert wrapper.lines[1].language == "python" and wrapper.lines[11].language == "js"


def test_a_line_becomes_a_fence_as_its_backticks_arrive_and_stops_being_one():
    wrapper = StyledWrapper(40)
    for piece in ["x\n", "`", "`", "`", "py", "`"]:
        wrapper.append(piece, "target")
        wrapper.rewrapped_from = None
    assert [line.block for line in wrapper.lines] == ["prose", "prose"]  # "```py`" is no fence
    wrapper = StyledWrapper(40)
    seen = []
    for piece in ["x\n", "``", "`", "rust", "\n", "fn"]:
        wrapper.append(piece, "target")
        seen.append([line.block for line in wrapper.lines])
    assert seen == [["prose", "prose"], ["prose", "prose"], ["prose", "open"], ["prose", "open"],
                    ["prose", "open", "code"], ["prose", "open", "code"]]
    assert wrapper.lines[1].language == "rust"


fence_text = st.lists(st.sampled_from(["```", "py", "~~~", "`", "a b", "  ", "\n", "\t", "x" * 13, "日本"]), max_size=25)


@settings(max_examples=200, deadline=None)
@given(pieces=fence_text, width=st.integers(min_value=4, max_value=16), cuts=st.lists(st.integers(0, 3), max_size=25))
def test_fences_come_out_the_same_however_the_text_is_streamed(pieces, width, cuts):
    text = "".join(pieces)
    whole = StyledWrapper(width)
    whole.append(text, "draft")
    streamed = StyledWrapper(width)
    position = 0
    for index, cut in enumerate(cuts + [len(text)]):
        end = len(text) if index == len(cuts) else min(len(text), position + cut)
        streamed.append(text[position:end], "draft")
        position = end
    assert [(line.block, line.text, line.language) for line in streamed.lines] == [(line.block, line.text, line.language) for line in whole.lines]
    for line in whole.lines:
        limit = {"prose": width, "code": whole.code_width}.get(line.block)
        assert limit is None or cell_len(line.text) <= limit
    # What the view shows as code is what the copy key takes.
    code_lines = []
    for line in whole.lines:
        if line.block == "open":
            code_lines.append([])
        elif line.block == "code":
            code_lines[-1].append(line.text)
    assert len(code_lines) == len(code_blocks(text))


def test_prompt_recall_walks_back_and_returns_the_draft():
    recall = PromptRecall(["one", "two"])
    assert recall.forward() is None  # not browsing
    assert recall.back("typing") == "two"
    assert recall.back("two") == "one"
    assert recall.back("one") is None
    assert recall.forward() == "two"
    assert recall.forward() == "typing"
    assert not recall.browsing
    assert PromptRecall().back("x") is None


def test_message_text_keeps_a_pasted_blocks_indentation():
    assert message_text("\n  \n    indented()\n    more()\n\n") == "    indented()\n    more()"
    assert message_text("  hi  ") == "  hi"
    assert message_text(" \n\t\n") == ""


def engine_info(method: str, draft: str | None = None, draft_vocab: str = "") -> EngineInfo:
    return EngineInfo("embedded", "smollm2-135m", draft, method, "Q4_K_M", "cpu", draft_vocab=draft_vocab)


def test_reply_settings_round_trip_through_made_with():
    ngram = engine_info("ngram")
    values = LiveValues(3, False, 0.7)
    settings = reply_settings(values, 42, ngram, vocab="auto")
    assert settings == {"k": 3, "temperature": 0.7, "seed": 42, "method": "ngram"}
    live = LiveValues(6, True, 0.0)
    assert made_with(settings, live, 0, ngram) == (values, 42, "")
    # A row from before seeds were recorded: the config's seed stands in; another method is said.
    draft = engine_info("draft", "smollm2-135m")
    old, seed, note = made_with({"k": 2, "temperature": 0.5, "auto_k": True}, live, 7, draft)
    assert (old, seed, note) == (LiveValues(2, True, 0.5), 7, "")
    assert "made with ngram; this engine runs draft" in made_with(settings, live, 0, draft)[2]
    # A draft of another tokenizer records its name and the --vocab rule; one of the same does not.
    assert reply_settings(values, 1, draft, vocab="slem") == {"k": 3, "temperature": 0.7, "seed": 1, "method": "draft"}
    across = engine_info("draft", "smollm2-135m", "80% shared")
    assert reply_settings(values, 1, across, vocab="slem") == {"k": 3, "temperature": 0.7, "seed": 1, "method": "draft",
                                                              "draft": "smollm2-135m", "vocab": "slem"}


def test_osc52_and_its_tmux_wrapping_carry_the_text():
    text = "naïve 日本 `code`\n"
    sequence = osc52(text)
    assert sequence.startswith("\x1b]52;c;") and sequence.endswith("\a")
    assert base64.b64decode(sequence[7:-1]).decode("utf-8") == text
    wrapped = tmux_passthrough(sequence)
    assert wrapped == "\x1bPtmux;\x1b\x1b]52;c;" + sequence[7:] + "\x1b\\"
    assert extra_sequences(text, {}) == []
    assert extra_sequences(text, {"TMUX": "/tmp/tmux-1/default,2,0"}) == [wrapped]


async def test_a_fences_language_is_a_label_on_the_blocks_top_edge(make_app):
    """Issue 59: the opening fence drew as a bare " python" line that read like the reply's
    text; it is now the code block's top edge, a rule with the language set in it."""
    from spectui.core.events import Source
    from spectui.settings.config import ChatConfig
    from spectui.tui.widgets.conversation import ReplyView
    from spectui.tui.widgets.token_view import EDGE

    from fake_engines import TextEngine, factory_for
    from tui_helpers import ready, reply_done, send

    pieces = ["Here:\n", "```py\n", "x = 1\n", "```\n", "done"]
    app = make_app(factory_for(TextEngine([[(piece, Source.TARGET)] for piece in pieces])), ChatConfig())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "code")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView).token_view
        lines = ["".join(segment.text for segment in view.render_line(y)) for y in range(view.size.height)]
        label = next(line for line in lines if "py" in line and "x = 1" not in line)
        assert label.startswith(f"{EDGE} py {EDGE}") and label.rstrip().endswith(EDGE * 10), label
        assert cell_len(label) == view.size.width
        assert [line.strip() for line in lines].count("py") == 0
