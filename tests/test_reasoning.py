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


def drafting_step(text: str, drafted: int, accepted: int) -> Step:
    sources = (Source.DRAFT,) * accepted + (Source.TARGET,)
    return Step(tuple(range(len(sources))), sources, text, drafted=tuple(range(drafted)))


@pytest.mark.parametrize("texts, thinking", [
    (["<think>", "a", "b</think>", "\n\nc", "d"], [0, 1, 2]),
    (["a", "b", "</think>", "c", "d"], [0, 1, 2]),  # the chat template opened the thinking
    (["x", "<think>a", "b", "c"], [1, 2, 3]),  # cut off while thinking
    (["<think>a</think>", "b<think>", "c</think>", "d"], [0, 2]),  # a block begun inside a step: where it begins counts
], ids=["closed", "opened by the template", "cut off", "two blocks"])
def test_acceptance_of_thinking_and_answer_counts_each_step_where_it_begins(texts, thinking):
    from spectui.core.reasoning import acceptance_apart

    steps = [drafting_step(text, drafted=4, accepted=i) for i, text in enumerate(texts)]
    counts = acceptance_apart(steps)
    expected_thinking = [i for i in range(len(texts)) if i in thinking]
    expected_answer = [i for i in range(len(texts)) if i not in thinking]
    assert counts[0].num_accepted_tokens == sum(expected_thinking)
    assert counts[1].num_accepted_tokens == sum(expected_answer)
    assert counts[0].num_draft_tokens == 4 * len(expected_thinking)


def test_a_reply_without_thinking_has_no_figures_apart():
    from spectui.core.reasoning import acceptance_apart, acceptance_apart_text

    steps = [drafting_step("plain", 4, 2), drafting_step(" answer", 4, 4)]
    assert acceptance_apart(steps) is None and acceptance_apart_text(steps) == ""
    thought = [drafting_step("<think>hm", 4, 1), drafting_step("</think>", 0, 0), drafting_step("yes", 4, 3)]
    assert acceptance_apart_text(thought) == " · thinking γ 0.25 τ 2.00 · answer γ 0.75 τ 4.00"
