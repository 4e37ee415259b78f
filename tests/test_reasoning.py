"""A reasoning model's thinking kept apart from its answer: the split, the token view's
blocks, the server's reasoning_content field, history exports."""

from __future__ import annotations

import json

import pytest

from fake_openai_server import FakeOpenAI, fake_server
from spectui.core.events import Control, GenerationParams, Source, Step
from spectui.core.reasoning import answer_of, split_reasoning
from spectui.engines.server.engine import ServerEngine
from spectui.measure.run import run_reply
from spectui.store import Store, export_json, export_markdown
from spectui.tui.fences import PROSE, THINK, THINK_CLOSE, THINK_OPEN, code_blocks
from spectui.tui.wrap import StyledWrapper

REPLY = "<think>\nThe user wants a sum.\nAdd them.\n</think>\n\nThe sum is 4."


@pytest.mark.parametrize(("text", "parts"), [
    (REPLY, ("The user wants a sum.\nAdd them.", "The sum is 4.")),
    ("<think>\nstill thinking", ("still thinking", "")),  # streaming, or cut off by max_tokens
    ("thought begun by the template</think>\n\nanswer", ("thought begun by the template", "answer")),
    ("<think>\n\n</think>\n\nno thinking", ("", "no thinking")),  # a model told not to think
    ("no tags at all", ("", "no tags at all")),
    ("plain <b>html</b>", ("", "plain <b>html</b>")),
])
def test_split_reasoning(text, parts):
    assert split_reasoning(text) == parts
    assert answer_of(text) == parts[1]


def test_the_token_view_wraps_thinking_as_its_own_block():
    wrapper = StyledWrapper(40)
    for piece in ["<think>", "\nThe", " user", " wants", " a", " sum.\n", "```\n", "Add", " them.\n", "</think>",
                  "\n\nThe", " sum", " is", " 4."]:
        wrapper.append(piece, "draft" if "sum" in piece else "target")
    blocks = [(line.block, line.text) for line in wrapper.lines[: wrapper.num_lines]]
    assert blocks == [
        (THINK_OPEN, "<think>"), (THINK, "The user wants a sum."), (THINK, "```"), (THINK, "Add them."),
        (THINK_CLOSE, "</think>"), (PROSE, ""), (PROSE, "The sum is 4."),
    ]
    assert {kind for line in wrapper.lines[1:4] for kind in line.kinds} == {"draft", "target"}  # still coloured
    assert code_blocks("<think>\n```\nnot code\n```\n</think>\n\nok") == []  # a fence in thinking is thinking


def test_a_servers_reasoning_content_is_kept_apart_from_the_reply():
    fake = FakeOpenAI(reasoning="Let me count: one, two.", reply="Two words.")
    with fake_server(fake) as url:
        reply = run_reply(ServerEngine(url), [{"role": "user", "content": "hi"}], GenerationParams(max_tokens=64),
                          Control(k=0))
    assert reply.text == "<think>\nLet me count: one, two. \n</think>\n\nTwo words."
    assert split_reasoning(reply.text) == ("Let me count: one, two. ", "Two words.")
    assert reply.done.finish_reason == "stop"


def test_a_reply_cut_off_while_thinking_stays_reasoning():
    fake = FakeOpenAI(reasoning="a b c d e f", reply="never reached")
    with fake_server(fake) as url:
        reply = run_reply(ServerEngine(url), [{"role": "user", "content": "hi"}], GenerationParams(max_tokens=3),
                          Control(k=0))
    assert split_reasoning(reply.text) == ("a b c ", "")


def test_exports_keep_reasoning_apart(tmp_path):
    store = Store(tmp_path / "h.sqlite3")
    conversation_id = store.new_conversation({})
    store.add_message(conversation_id, "user", "2 + 2?")
    row = store.add_message(conversation_id, "assistant", "", settings={"k": 4})
    store.add_step(row, 0, Step((1,), (Source.TARGET,), REPLY), [REPLY], "", 0.1)
    store.finish_message(row, REPLY, "stop")
    conversation = store.load_conversation(conversation_id)
    markdown = export_markdown(conversation)
    assert "<details><summary>reasoning</summary>\n\nThe user wants a sum.\nAdd them.\n\n</details>\n\nThe sum is 4." \
        in markdown and "<think>" not in markdown
    [_, answer] = json.loads(export_json(conversation))["messages"]
    assert (answer["content"], answer["reasoning"]) == ("The sum is 4.", "The user wants a sum.\nAdd them.")
    store.close()
