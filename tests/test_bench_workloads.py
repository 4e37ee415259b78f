"""The benchmark's workload suite: shape, content rules, and no torch on import."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from spectui.bench.workloads import (
    CATEGORIES,
    SUITES,
    Workload,
    by_category,
    suite,
)

FULL = suite("full")
QUICK = suite("quick")

GREEDY_CATEGORIES = (
    "json",
    "sql",
    "code-python",
    "code-typescript",
    "code-go",
    "factual",
    "summarize",
    "retrieval",
)
# A passage is fenced by lines holding only triple quotes.
PASSAGE = re.compile(r'^"""\n(.*?)\n"""$', re.MULTILINE | re.DOTALL)


def user_prompt(workload: Workload) -> str:
    return workload.messages[-1]["content"]


def test_full_suite_has_at_least_three_prompts_per_category():
    grouped = by_category(FULL)
    assert list(grouped) == list(CATEGORIES)
    for category, cases in grouped.items():
        assert len(cases) >= 3, category
        assert all(case.category == category for case in cases)


def test_quick_suite_is_the_first_prompt_of_each_category():
    assert len(QUICK) == len(CATEGORIES) == 10
    assert [case.category for case in QUICK] == list(CATEGORIES)
    first_of_full = [cases[0] for cases in by_category(FULL).values()]
    assert QUICK == first_of_full


def test_names_and_seeds_are_unique():
    names = [case.name for case in FULL]
    seeds = [case.seed for case in FULL]
    assert len(set(names)) == len(names)
    assert len(set(seeds)) == len(seeds)
    assert all(name for name in names)


@pytest.mark.parametrize("workload", FULL, ids=lambda case: case.name)
def test_messages_are_well_formed(workload: Workload):
    assert isinstance(workload.messages, tuple) and workload.messages
    for message in workload.messages:
        assert set(message) == {"role", "content"}
        assert message["role"] in ("system", "user")
        assert isinstance(message["content"], str) and message["content"].strip()
        for line in message["content"].splitlines():
            assert line == line.rstrip(), f"trailing whitespace in {workload.name}: {line!r}"
        assert message["content"] == message["content"].strip()
    assert workload.messages[-1]["role"] == "user"
    # A system message may only open the conversation.
    assert all(message["role"] == "user" for message in workload.messages[1:])


@pytest.mark.parametrize(
    "workload",
    [case for case in FULL if case.category in ("summarize", "retrieval")],
    ids=lambda case: case.name,
)
def test_summarize_and_retrieval_prompts_carry_a_long_passage(workload: Workload):
    passages = PASSAGE.findall(user_prompt(workload))
    assert passages, f"{workload.name} has no fenced passage"
    assert max(len(passage.split()) for passage in passages) >= 120


def test_temperatures_and_budgets_follow_the_category():
    for case in FULL:
        if case.category in GREEDY_CATEGORIES:
            assert case.temperature == 0.0, case.name
            assert case.max_tokens == 96, case.name
        elif case.category == "creative":
            assert case.temperature == 1.0, case.name
            assert case.max_tokens == 128, case.name
        else:
            assert case.category == "math"
            assert case.temperature == 0.7, case.name
            assert case.max_tokens == 128, case.name


def test_prompts_are_in_english_ascii():
    # Written for the suite in English; a stray non-ASCII character usually means a paste slip.
    for case in FULL:
        for message in case.messages:
            assert message["content"].isascii(), case.name


def test_unknown_suite_names_the_valid_ones():
    with pytest.raises(ValueError) as error:
        suite("nope")
    message = str(error.value)
    assert "nope" in message
    assert "\n" not in message
    for name in SUITES:
        assert name in message


def test_suites_return_fresh_lists():
    first = suite("full")
    first.clear()
    assert len(suite("full")) == len(FULL)


def test_as_messages_returns_copies():
    workload = FULL[0]
    original = tuple(dict(message) for message in workload.messages)
    messages = workload.as_messages()
    assert messages == list(original)
    messages[-1]["content"] = "changed"
    messages.append({"role": "user", "content": "more"})
    assert workload.messages == original
    assert workload.as_messages() == list(original)


def test_workload_rejects_unknown_category():
    with pytest.raises(ValueError):
        Workload(
            category="poetry",
            name="poetry-1",
            messages=({"role": "user", "content": "hi"},),
            temperature=1.0,
            max_tokens=8,
            seed=1,
        )


def test_by_category_keeps_category_order_and_drops_absent_ones():
    shuffled = list(reversed(FULL))
    grouped = by_category(shuffled)
    assert list(grouped) == list(CATEGORIES)
    only_math_and_json = [case for case in FULL if case.category in ("math", "json")]
    assert list(by_category(reversed(only_math_and_json))) == ["json", "math"]


def test_import_does_not_pull_in_torch():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, spectui.bench.workloads; assert 'torch' not in sys.modules",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------- conversations

from spectui.bench.conversations import cached, fill_replies  # noqa: E402
from spectui.bench.workloads import (  # noqa: E402
    ATTACHED_EXAMPLE,
    CONVERSATION_CATEGORIES,
    MEASURED_TURNS,
    attached_example,
    conversation_script,
)
from spectui.core.attachments import block, message_with, read_attachment, split_blocks  # noqa: E402

CONVERSATIONS = suite("conversations")


def fake_reply(calls: list):
    def reply(messages):
        calls.append(messages)
        assert messages[-1]["role"] == "user"
        return f"reply {len(calls)} to: {messages[-1]['content'][:20]}"

    return reply


def test_conversations_are_the_last_turns_of_each_script():
    assert [case.category for case in CONVERSATIONS] == [c for c in CONVERSATION_CATEGORIES for _ in range(MEASURED_TURNS)]
    assert not set(CONVERSATION_CATEGORIES) & set(CATEGORIES)
    for category, cases in by_category(CONVERSATIONS).items():
        script = conversation_script(category)
        users = [i for i, message in enumerate(script) if message["role"] == "user"]
        assert len(users) >= MEASURED_TURNS + 1  # at least one reply is revised
        assert [case.messages for case in cases] == [script[: i + 1] for i in users[-MEASURED_TURNS:]]
        assert cases[1].messages[: len(cases[0].messages)] == cases[0].messages
        assert all(case.temperature == 0.0 for case in cases)


def test_conversation_names_and_seeds_are_unique_across_suites():
    every = FULL + CONVERSATIONS
    assert len({case.name for case in every}) == len(every)
    assert len({case.seed for case in every}) == len(every)


@pytest.mark.parametrize("category", CONVERSATION_CATEGORIES)
def test_a_script_alternates_user_turns_and_pending_replies(category):
    script = conversation_script(category)
    roles = [message["role"] for message in script]
    body = roles[1:] if roles[0] == "system" else roles
    assert body[0] == "user" and body[-1] == "user"
    assert all(a != b for a, b in zip(body, body[1:]))
    for message in script:
        if message["role"] == "assistant":
            assert message["content"] is None
        else:
            assert message["content"] == message["content"].strip()
            _, written = split_blocks(message["content"])  # an attached file's header has its "·"
            assert written.isascii()
            assert all(line == line.rstrip() for line in message["content"].splitlines())


@pytest.mark.parametrize("category", [c for c in CONVERSATION_CATEGORIES if c not in ("chat-document", "chat-attached-file")])
def test_later_turns_revise_the_earlier_reply(category):
    """A code or schema chat asks, turn after turn, for the artifact again with a change."""
    users = [m["content"] for m in conversation_script(category) if m["role"] == "user"]
    assert all(re.search(r"whole (function|program|schema) again|both functions", turn) for turn in users[1:])


def test_the_document_chat_asks_about_one_passage_again_and_again():
    users = [m["content"] for m in conversation_script("chat-document") if m["role"] == "user"]
    passages = PASSAGE.findall(users[0])
    assert passages and len(passages[0].split()) >= 120
    assert all(not PASSAGE.findall(turn) and "reference" in turn for turn in users[1:])


def test_a_conversation_cannot_be_sent_before_its_replies_are_written():
    with pytest.raises(ValueError, match="not written yet"):
        CONVERSATIONS[0].as_messages()


def test_replies_fill_every_pending_turn_once_per_chat():
    calls: list = []
    filled = fill_replies(CONVERSATIONS, fake_reply(calls))
    # each chat's two earlier replies are written once, though turn 3 holds turn 2's chat
    assert len(calls) == len(CONVERSATION_CATEGORIES) * MEASURED_TURNS
    assert not any(case.replies_pending for case in filled)
    for earlier, later in zip(filled[::2], filled[1::2]):
        assert later.messages[: len(earlier.messages)] == earlier.messages
        assert later.messages[len(earlier.messages)]["role"] == "assistant"
        assert later.as_messages()[-1] == dict(later.messages[-1])
    assert [(case.name, case.seed, case.max_tokens) for case in filled] == \
        [(case.name, case.seed, case.max_tokens) for case in CONVERSATIONS]
    assert fill_replies(FULL, fake_reply(calls)) == FULL  # single-turn workloads need nothing


def test_cached_replies_are_read_back_per_model(tmp_path):
    calls: list = []
    messages = [{"role": "user", "content": "hello"}]
    first = cached(fake_reply(calls), tmp_path, {"model": "a"})
    assert first(messages) == first(messages) == "reply 1 to: hello"
    assert len(calls) == 1
    assert cached(fake_reply(calls), tmp_path, {"model": "a"})(messages) == "reply 1 to: hello"
    assert cached(fake_reply(calls), tmp_path, {"model": "b"})(messages) == "reply 2 to: hello"
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_conversations_import_without_torch():
    result = subprocess.run(
        [sys.executable, "-c", "import sys, spectui.bench.conversations; assert 'torch' not in sys.modules"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------- a file attached as the chat does


def attached_cases() -> list:
    return [case for case in CONVERSATIONS if case.category == "chat-attached-file"]


def test_the_attached_file_chat_measures_a_code_edit_and_a_summary_of_the_file():
    edit, summary = attached_cases()
    assert "type hints to every function" in edit.messages[-1]["content"] and "whole module" in edit.messages[-1]["content"]
    assert summary.messages[-1]["content"].startswith("Summarise the attached module")
    first = edit.messages[0]
    assert first["role"] == "user" and summary.messages[0] == first  # the follow-ups keep the file's prefix
    # attached as `/file csv_tools.py` attaches it: the chat's own block, then the question
    chat = read_attachment("csv_tools.py", cwd=ATTACHED_EXAMPLE.parent)
    assert first["content"] == message_with([chat], "What is this module for? Answer in two sentences.")
    [(attachment, shown)], _ = split_blocks(first["content"])
    assert attachment.name == "csv_tools.py" and attachment.short_hash == chat.short_hash
    assert shown == block(chat) and ATTACHED_EXAMPLE.read_text(encoding="utf-8") in first["content"]


def test_the_suffix_drafter_proposes_the_attached_file_while_the_reply_copies_it(tiny_tokenizer):
    """The edit's reply repeats the module: once it has copied a few lines, suffix decoding
    drafts the file's next tokens from the prompt that holds it."""
    from spectui.engines.speculative.suffix import SuffixProposer

    [edit] = fill_replies(attached_cases()[:1], lambda messages: "It reads, sums and writes CSV rows.")
    prompt = "\n\n".join(message["content"] for message in edit.as_messages())
    text = attached_example().text
    lines = text.splitlines(keepends=True)
    copied, rest = "".join(lines[:30]), "".join(lines[30:])
    prompt_ids = tiny_tokenizer.encode(prompt, add_special_tokens=False)
    reply_ids = tiny_tokenizer.encode("```python\n" + copied, add_special_tokens=False)
    proposer = SuffixProposer(use_history=False)
    proposer.prefill(prompt_ids)
    proposal = proposer.propose(prompt_ids + reply_ids, 8, 0.0, 1.0, None)
    drafted = tiny_tokenizer.decode(proposal.drafted)
    assert len(proposal.drafted) == 8 and rest.startswith(drafted), (drafted, rest[:80])
    assert not proposal.evidence.history  # from this conversation: the attached file
