"""A reasoning model in the chat: `<think>` shown as a dimmed block apart from the answer in
the token view, folded in the Markdown view, left out of the copy and of the next prompt; a
server's reasoning_content the same (issue 40)."""

from __future__ import annotations

import base64
import re

import pytest
from textual.widgets import Collapsible, Markdown

from fake_engines import TextEngine, factory_for
from fake_openai_server import FakeOpenAI, fake_server
from spectui.core.events import Source
from spectui.engines.server.engine import ServerEngine
from spectui.settings.config import ChatConfig
from spectui.tui.fences import PROSE, THINK, THINK_CLOSE, THINK_OPEN
from spectui.tui.widgets.conversation import ReplyView
from spectui.tui.widgets.token_view import REASONING_LABEL
from spectui.tui.wrap import StyledWrapper
from tui_helpers import notices, ready, reply_done, send, wait_for

SIZE = (110, 36)
D, T, B = Source.DRAFT, Source.TARGET, Source.BONUS
THINKING = [
    [("<think>", T), ("\n", T)],
    [("Two", D), (" plus", D), (" two", B)],
    [(".\n", T), ("</think>", T)],
    [("\n\n", T), ("Four", D), (".", B)],
]


def copied(written: list[str]) -> list[str]:
    payloads = re.findall(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07", "".join(written))
    return [base64.b64decode(payload).decode("utf-8") for payload in payloads]


async def test_thinking_is_a_block_apart_in_every_view(make_app, monkeypatch):
    monkeypatch.setattr("spectui.tui.clipboard.system_clipboard", lambda text: False)
    monkeypatch.delenv("TMUX", raising=False)
    engine = TextEngine(THINKING)
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "2 + 2?")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        blocks = view.token_view.rendered_blocks()
        assert [block for block, _ in blocks] == [THINK_OPEN, THINK, THINK_CLOSE, PROSE, PROSE]
        assert blocks[0][1] == [(REASONING_LABEL, "code-label")]  # the tag is a label, not text
        assert blocks[1][1] == [("Two plus", "draft"), (" two", "bonus"), (".", "target")]  # still coloured
        # Its own acceptance figures beside the answer's (2 drafts kept in one step, then 1).
        assert "thinking γ 1.00 τ 3.00 · answer γ 1.00 τ 2.00" in str(view.note.render())
        strip = view.token_view.render_line(1)
        assert strip.text.startswith("│ Two plus two.")
        assert all(segment.style.dim for segment in list(strip)[1:] if segment.text.strip())
        # A click on the label folds the thinking away, and another shows it again.
        await pilot.click(view.token_view, offset=(2, 0))
        await pilot.pause()
        assert view.token_view.reasoning_folded
        assert [block for block, _ in view.token_view.rendered_blocks()] == [THINK_OPEN, PROSE, PROSE]
        assert view.token_view.render_line(0).text.startswith(REASONING_LABEL + "▸ folded")
        assert view.token_view.render_line(2).text.startswith("Four.")
        await pilot.click(view.token_view, offset=(2, 0))
        await pilot.pause()
        assert not view.token_view.reasoning_folded and len(view.token_view.rendered_blocks()) == 5
        # Copy: the answer alone.
        written: list[str] = []
        app._driver.write = written.append
        await pilot.press(app.first_key("copy_reply"))
        await pilot.pause()
        assert copied(written)[-1] == "Four."
        assert any("reasoning left out" in notice for notice in notices(app))
        # Markdown view: the answer, the reasoning folded above it.
        await pilot.press(app.first_key("markdown"))
        await pilot.pause()
        folded = view.query_one(Collapsible)
        assert folded.collapsed and folded.title == "reasoning"
        assert "Four." in view.query_one(Markdown).source and "think" not in view.query_one(Markdown).source
        # The next turn sends the answer back, not the thinking.
        await send(pilot, "and 3 + 3?")
        await reply_done(pilot)
        assert engine.messages_seen[-1][1] == {"role": "assistant", "content": "Four."}


async def test_a_servers_reasoning_content_is_shown_apart(make_app):
    fake = FakeOpenAI(reasoning="Counting to two.", reply="one two")
    with fake_server(fake) as url:
        app = make_app(lambda progress: ServerEngine(url), ChatConfig(engine="server", server=url))
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await send(pilot, "count")
            await reply_done(pilot)
            view = app.chat_screen.query(ReplyView).last()
            blocks = [(block, "".join(text for text, _ in runs)) for block, runs in view.token_view.rendered_blocks()]
    assert blocks == [(THINK_OPEN, REASONING_LABEL), (THINK, "Counting to two. "), (THINK_CLOSE, ""), (PROSE, ""),
                      (PROSE, "one two")]


async def test_thinking_folded_while_it_streams_stays_folded(make_app):
    engine = TextEngine(THINKING, gated=True)
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "2 + 2?")
        engine.release()
        await wait_for(pilot, lambda: len(engine.steps) == 2)  # the tag and the first thought
        await wait_for(pilot, lambda: bool(app.chat_screen.query(ReplyView)))
        view = app.chat_screen.query_one(ReplyView)
        view.token_view.reasoning_folded = True
        engine.release(2)
        await reply_done(pilot)
        assert [block for block, _ in view.token_view.rendered_blocks()] == [THINK_OPEN, PROSE, PROSE]
        assert view.token_view.render_line(2).text.startswith("Four.")
        assert view.token_view.text.startswith("<think>\nTwo plus two.")  # the reply keeps it whole


# A model that writes its tags inline, one of them split over two tokens: the view showed
# "<think>Two plus two.</think>Four." as raw text.
INLINE_THINKING = [
    [("<th", T), ("ink>", T), ("Two", D), (" plus", D), (" two", B)],
    [(".</think>", T)],
    [("Four", D), (".", B)],
]


async def test_inline_thinking_tags_are_drawn_as_the_reasoning_block(make_app):
    engine = TextEngine(INLINE_THINKING)
    app = make_app(factory_for(engine))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "2 + 2?")
        await reply_done(pilot)
        view = app.chat_screen.query_one(ReplyView)
        blocks = [(block, "".join(text for text, _ in runs)) for block, runs in view.token_view.rendered_blocks()]
        assert blocks == [(THINK_OPEN, REASONING_LABEL), (THINK, "Two plus two."), (THINK_CLOSE, ""), (PROSE, "Four.")]
        assert view.token_view.text == "<think>Two plus two.</think>Four."  # the reply keeps what was written
        assert "thinking γ" in str(view.note.render())


@pytest.mark.parametrize("chunks, lines", [
    ([("a <", "target")], [("prose", "a <")]),  # a reply that ends on what could start a tag
    ([("x < y and </thin", "target"), ("g>", "target")], [("prose", "x < y and </thing>")]),
    ([("```\nprint('<think>')\n```", "target")], [("open", "```"), ("code", "print('<think>')"), ("close", "```")]),
    ([("ok <think>hm</think><think>", "target")],
     [("prose", "ok "), ("think-open", "<think>"), ("think", "hm"), ("think-close", "</think>"), ("think-open", "<think>")]),
])
def test_only_whole_tags_outside_code_move_to_lines_of_their_own(chunks, lines):
    wrapper = StyledWrapper(40)
    wrapper.extend(chunks)
    wrapper.flush()
    assert [(line.block, line.text) for line in wrapper.lines[: wrapper.num_lines]] == lines
