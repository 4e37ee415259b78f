"""The chat session without Textual (spectui.chat_session): what a submitted line means, what a
reply is started with (sent, regenerated, continued), edits, files, a new chat and a stored one,
and the commands that change the session. A real EngineHost with a fake engine; no pilot."""

from __future__ import annotations

import subprocess
import sys
import threading
from dataclasses import replace
from types import SimpleNamespace

import pytest

from spectui.chat_session.meaning import Ask, KeepEdit, Refuse, RunCommand, Send, Wait
from spectui.chat_session.reply import EndedReply
from spectui.chat_session.reply_words import reply_summary
from spectui.chat_session.streaming import StreamingReply
from spectui.chat_session.comparing import SWEEP_KS, CompareSession
from spectui.chat_session.changes import NO_SWITCH, context_used, drop_file, set_max, set_thinking
from spectui.chat_session.session import EDITED, EDITING_MESSAGE, ChatSession
from spectui.chat_session.stats import ReplyTracker
from spectui.core.commands import Command
from spectui.core.stats import ReplyStats
from spectui.core.words import counted
from spectui.core.events import K_MAX, TEMPERATURE_MAX, Done, GenerationParams, LiveSettings, Source, Step
from spectui.host.host import EngineHost
from spectui.host.plan import EnginePlan
from spectui.settings.config import ChatConfig
from spectui.store import RowId, Store

from fake_engines import LIVE, FixedKEngine, PlanEngine, factory_for


class SizedEngine(PlanEngine):
    """A fake engine that says its context."""

    def __init__(self, context: int) -> None:
        super().__init__([None])
        self.context = context

    @property
    def context_length(self) -> int | None:
        return self.context


def ready_host(engine: PlanEngine | None = None, k: int = 2) -> EngineHost:
    """A host whose engine has loaded (the test pumps what the loader hands over)."""
    host = EngineHost(EnginePlan(factory_for(engine or PlanEngine([None]))), LiveSettings(k, False, 0.0))
    woken = threading.Event()
    host.attach(woken.set)
    host.start()
    while not (host.state.ready or host.state.failed):
        assert woken.wait(30), "the loader went quiet"
        woken.clear()
        host.pump()
    return host


def loading_host() -> EngineHost:
    """A host that was never started: no engine yet, nothing failed."""
    return EngineHost(EnginePlan(factory_for(PlanEngine([None]))), LiveSettings(2, False, 0.0))


def session_on(host: EngineHost, config: ChatConfig | None = None, store: Store | None = None) -> ChatSession:
    return ChatSession(host, config or ChatConfig(), store, lambda text: pytest.fail(f"history warned: {text}"))


def ended(text: str, finish_reason: str = "stop", tokens: int = 3, message_id: int | RowId | None = None) -> EndedReply:
    """A reply (its history row `message_id`) ended with `text` (its steps: one target step of `tokens`)."""
    tracker = ReplyTracker(0.0)
    tracker.add(Step(list(range(tokens)), [Source.TARGET] * tokens, text, k=2), 1.0)
    tracker.finish(Done(finish_reason, seconds=1.0), 1.0)
    settings = {"k": 3, "temperature": 0.5, "seed": 7, "method": "draft"}
    return EndedReply(message_id, text, finish_reason, None, {"num_tokens": tokens, "num_steps": 1}, tracker, tracker.done,
                      settings)


def turn(session: ChatSession, text: str, reply: str, finish_reason: str = "stop") -> None:
    content, files = session.files.compose(text)
    session.add_user(text, content, files)
    request = session.next_reply()
    assert session.reply_ended(ended(reply, finish_reason, message_id=request.message_id))


# what a line means


def test_a_line_is_sent_when_the_engine_is_ready_and_waits_while_it_loads():
    assert session_on(ready_host()).meaning("\n\n  hello  \n") == Send("  hello")
    assert session_on(loading_host()).meaning("hello") == Wait("hello")


def test_a_line_is_refused_while_a_reply_streams_or_a_message_waits_and_when_no_engine_came():
    session = session_on(ready_host())
    started(session)  # the session knows its reply in progress: nobody tells it
    assert session.meaning("hello") == Refuse("A reply is streaming; Esc cancels it.")
    loading = session_on(loading_host())
    loading.waiting = "sent while the engine loads"
    assert loading.meaning("hello") == Refuse("A message already waits for the engine; this one stays in the box.")

    def broken(progress):
        raise RuntimeError("no weights here")

    host = EngineHost(EnginePlan(broken), LiveSettings(2, False, 0.0))
    woken = threading.Event()
    host.attach(woken.set)
    host.start()
    while not host.state.failed:
        assert woken.wait(30)
        woken.clear()
        host.pump()
    refused = session_on(host).meaning("hello")
    assert isinstance(refused, Refuse) and refused.severity == "error" and "no weights here" in refused.why


def test_commands_are_run_never_sent_and_a_file_line_sends_the_request_below_it():
    session = session_on(ready_host())
    assert session.meaning("/ctx") == RunCommand(Command("ctx", ""))
    assert session.meaning("/file a.py\nexplain it") == RunCommand(Command("file", "a.py"), Send("explain it"))
    unknown = session.meaning("/nosuch")
    assert isinstance(unknown, Refuse) and unknown.severity == "warning" and "/nosuch" in unknown.why
    assert session.meaning("//etc is a path") == Send("/etc is a path")
    # the request below still waits its turn: a streaming reply refuses it
    started(session)
    assert session.meaning("/file a.py\nexplain it") == \
        RunCommand(Command("file", "a.py"), Refuse("A reply is streaming; Esc cancels it."))


def test_files_named_with_at_would_go_to_a_server_only_when_sent_twice(tmp_path):
    (tmp_path / "notes.txt").write_text("secret")
    server = PlanEngine([None], name="server")
    session = session_on(ready_host(server))
    session.cwd = str(tmp_path)
    asked = session.meaning("read @notes.txt")
    assert isinstance(asked, Ask) and asked.lines[0].startswith("notes.txt would go to the server at cpu")
    assert session.meaning("read @notes.txt") == Send("read @notes.txt")  # the second Enter
    local = session_on(ready_host())
    local.cwd = str(tmp_path)
    assert local.meaning("read @notes.txt") == Send("read @notes.txt")


def test_the_box_holding_the_last_reply_keeps_the_edit_whatever_it_says():
    session = session_on(ready_host())
    session.editing = "reply"
    assert session.meaning("/clear") == KeepEdit("/clear")


# replies


def test_a_reply_is_asked_for_with_the_chat_the_live_values_and_the_budget():
    session = session_on(ready_host(SizedEngine(4096), k=3), ChatConfig(system="Be brief.", seed=11, top_p=0.9))
    content, files = session.files.compose("hi")
    session.add_user("hi", content, files)
    request = session.next_reply()
    assert request.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert (request.params.max_tokens, request.params.seed, request.params.top_p) == (4096, 11, 0.9)
    assert request.cap is None and request.earlier is None  # only the context stops it
    assert (request.values.k, request.settings["k"], request.settings["seed"]) == (3, 3, 11)
    set_max(session, "100")
    assert session.next_reply().params.max_tokens == 100 and session.next_reply().cap == 100


def test_an_ended_reply_joins_the_chat_and_its_figures_and_a_detached_one_only_its_row():
    session = session_on(ready_host())
    turn(session, "hi", "hello there")
    assert [entry.role for entry in session.transcript.entries] == ["user", "assistant"]
    assert session.last_reply is not None and session.stats.acceptance.num_drafts == 0
    left_behind = EndedReply(None, "late", "cancelled", None, {})
    assert session.reply_ended(left_behind) is False
    assert [entry.content for entry in session.transcript.entries] == ["hi", "hello there"]


def test_regenerate_takes_the_values_the_reply_was_made_with_or_the_live_ones_and_a_new_seed():
    session = session_on(ready_host(k=2))
    assert session.busy("regenerate it") == "No reply to regenerate it yet."
    turn(session, "hi", "hello")
    session.waiting = "a message sent while the engine loads"
    assert session.busy("regenerate it") == "Wait for the reply to end (Esc cancels it) before you regenerate it."
    session.waiting = None
    assert session.busy("regenerate it") is None
    request, note = session.regenerate(as_made=True)
    assert (request.values.k, request.values.temperature, request.params.seed) == (3, 0.5, 7)
    assert note == "Regenerating the last reply with k 3, T 0.50, seed 7"
    assert [entry.role for entry in session.transcript.entries] == ["user"]  # the old reply left the chat
    session.reply_ended(ended("hello again"))
    request, note = session.regenerate(as_made=False)
    assert request.values == session.host.live.values and request.params.seed != 7
    assert note.startswith("Regenerating the last reply with k 2, T 0.00, seed ")


def test_a_reply_cut_short_is_continued_from_where_it_stopped_and_one_that_ended_is_not():
    session = session_on(ready_host())
    turn(session, "count", "one two", finish_reason="stop")
    assert session.why_not_continue(True) == \
        "The last reply ended on its own: nothing to continue (edit it, /edit, and it continues from the edit)."
    session.start_over()
    turn(session, "count", "one two", finish_reason="length")
    assert session.why_not_continue(False) == "No reply to continue yet."  # its view is gone
    session.waiting = "a message sent while the engine loads"
    assert session.why_not_continue(True) == "A reply is streaming; Esc cancels it."
    session.waiting = None
    assert session.why_not_continue(True) is None
    request = session.continuation()
    assert request.messages[-1] == {"role": "assistant", "content": "one two"} and request.earlier == (3, 1)
    assert request.params.seed == 7  # the reply's own seed goes on


def test_an_edited_reply_takes_the_place_of_the_models_and_can_be_continued():
    session = session_on(ready_host())
    turn(session, "write", "draft")
    session.editing = "reply"
    assert session.note.startswith("editing the last reply")
    assert session.keep_reply_edit("my own start")
    last = session.transcript.entries[-1]
    assert (last.content, last.finish_reason, session.editing) == ("my own start", EDITED, None)
    assert session.why_not_continue(True) is None


def test_an_edited_message_replaces_its_turn_and_its_files_wait_again(tmp_path):
    (tmp_path / "rows.py").write_text("x = 1\n")
    session = session_on(ready_host())
    session.cwd = str(tmp_path)
    session.files.attach(["rows.py"], session.cwd)
    turn(session, "explain", "it sets x")
    session.editing = "message"
    assert session.note == EDITING_MESSAGE
    assert session.files.question(session.transcript.entries[-2]) == "explain"
    taken_back = session.replace_last_turn()
    assert [attachment.name for attachment in taken_back] == ["rows.py"]
    assert session.files.pending == taken_back and session.transcript.entries == [] and session.editing is None


# another chat


def test_a_new_chat_forgets_the_last_ones_turns_files_figures_and_waiting_compare():
    session = session_on(ready_host(), ChatConfig(system="Be brief."))
    turn(session, "hi", "hello")
    session.compare_after_reply = [{"role": "user", "content": "hi"}]
    session.start_over()
    assert [entry.role for entry in session.transcript.entries] == ["system"]
    assert (session.last_reply, session.compare_after_reply, session.files.sent) == (None, None, [])
    assert session.stats.acceptance.num_drafts == 0 and session.transcript.conversation is None


def test_a_stored_chat_resumes_with_its_questions_and_replies(tmp_path):
    store = Store(tmp_path / "history.sqlite3")
    first = session_on(ready_host(), store=store)
    turn(first, "one", "reply one")
    turn(first, "two", "reply two")
    conversation = store.load_conversation(first.transcript.conversation_id)
    resumed = session_on(ready_host(), store=store)
    tracker = ReplyTracker(0.0)
    questions = list(resumed.resume(conversation, [tracker]))
    assert questions == ["one", "two"] and resumed.last_reply is tracker
    assert [entry.content for entry in resumed.transcript.entries] == ["one", "reply one", "two", "reply two"]
    turn(resumed, "three", "reply three")  # continues the same stored conversation
    assert [m.content for m in store.load_conversation(conversation.id).messages][-2:] == ["three", "reply three"]


def test_a_switched_engine_starts_the_figures_anew_and_brings_its_config():
    session = session_on(ready_host())
    turn(session, "hi", "hello")
    wanted = ChatConfig(model="another")
    session.switching_to = wanted
    before = session.stats
    session.engine_switched()
    assert session.stats is not before and session.config is wanted and session.switching_to is None


# commands that change the session


def test_max_ctx_and_think_change_and_say_what_the_session_holds():
    session = session_on(ready_host())
    assert set_max(session, "250") == "Replies stop at 250 tokens from now on." and session.config.max_tokens == 250
    assert set_max(session, "off").startswith("Replies may fill") and session.config.max_tokens is None
    with pytest.raises(ValueError, match="/max takes a number"):
        set_max(session, "lots")
    assert context_used(session) == "This engine does not say its context; a reply may fill what is left (/max N caps it)."
    turn(session, "hi there", "hello")
    counted = session_on(ready_host(SizedEngine(1000)))
    turn(counted, "hi there", "hello")  # the tracker's Done has no prompt ids: the text is counted
    assert context_used(counted).startswith("Context: ≈") and "of 1,000 tokens used" in context_used(counted)
    with pytest.raises(ValueError, match="no thinking switch") as refused:
        set_thinking(session, "off")
    assert str(refused.value) == NO_SWITCH and session.thinking is True
    switch = PlanEngine([None], capabilities=replace(LIVE, thinking_switch=True))
    thinking = session_on(ready_host(switch))
    assert set_thinking(thinking, "off") == "Thinking off: the next replies answer at once" and not thinking.thinking
    assert set_thinking(thinking, "") == "Thinking on: the next replies think first" and thinking.thinking
    with pytest.raises(ValueError, match="/think takes on or off"):
        set_thinking(thinking, "maybe")
    assert thinking.next_reply().params.thinking is True


def test_a_file_dropped_from_a_sent_turn_rewrites_that_turn(tmp_path):
    (tmp_path / "rows.py").write_text("x = 1\n")
    session = session_on(ready_host())
    session.cwd = str(tmp_path)
    session.files.attach(["rows.py"], session.cwd)
    turn(session, "explain", "it sets x")
    assert "x = 1" in session.transcript.entries[0].content
    dropped, line = drop_file(session, "rows.py")
    assert dropped is not None and line.startswith("Dropped rows.py from the chat")
    assert session.transcript.entries[0].content == "explain"
    assert drop_file(session, "rows.py") == (None, "No file rows.py in this chat (/files lists them)")


# the reply in progress


def started(session: ChatSession, request=None) -> tuple[StreamingReply, threading.Event]:
    """The session's next reply started (request: another than the next one); the event is set
    once the host ran its thread, which does nothing: the test hands the steps in itself."""
    ran = threading.Event()
    reply = session.replies.start(request or session.next_reply(), lambda reply_id, engine, control: ran.set())
    assert ran.wait(10), "the host did not run the reply's thread"
    return reply, ran


def step(text: str, k: int = 2, temperature: float = 0.0) -> Step:
    """One plain step of one token, run at `k` and `temperature`."""
    return Step((0,), (Source.TARGET,), text, k=k, temperature=temperature)


def test_the_reply_in_progress_is_the_sessions_its_status_its_steps_and_how_it_ended():
    session = session_on(ready_host())
    content, files = session.files.compose("count")
    session.add_user("count", content, files)
    reply, _ = started(session)
    assert session.reply is reply and (reply.status, reply.settings["k"]) == ("streaming", 2)
    assert session.turn_open and session.busy("edit your message") == \
        "Wait for the reply to end (Esc cancels it) before you edit your message."
    assert reply.prefill((1.0, 0), 40, 100, 3.0) and (reply.status, reply.detail) == ("prefill", "40/100 · 20 tok/s · 3 s left")
    assert reply.add([(step(" one"), 4.0)]) and (reply.status, reply.ran) == ("streaming", None)  # the first step ran nothing
    assert reply.add([(step(" two"), 5.0)]) and reply.ran == (2, 0.0)  # the bar says the k and T that ran
    assert not reply.add([(step(" three"), 5.5)])  # as it already says
    assert reply.add([(step(" four", k=3, temperature=0.5), 6.0)]) and reply.ran == (3, 0.5)
    assert reply.text == " one two three four"
    assert session.replies.cancel() and reply.control.cancelled and reply.status == "cancelling"
    assert not reply.restarting("loading", 1, 2) and not reply.prefill((1.0, 0), 50, 100, 4.0)  # Esc said it ends
    ending = session.replies.end(reply.reply_id + 1, Done("cancelled"), None, 7.0, "F9", "")
    assert ending is None and session.reply is reply  # another reply's end is not this one's
    ending = session.replies.end(reply.reply_id, Done("cancelled", seconds=3.0), None, 7.0, "F9", "")
    assert ending is not None and session.reply is None and not session.turn_open
    assert (ending.ended.content, ending.ended.finish_reason, ending.problem) == (" one two three four", "cancelled", "cancelled")
    assert ending.summary.startswith("4 tokens in 4 steps") and " · k 2→3 · T 0.00→0.50" in ending.summary  # keys mid-reply
    assert ending.ended.stats["num_tokens"] == 4 and ending.ended.settings == reply.settings
    assert session.reply_ended(ending.ended) and session.transcript.entries[-1].content == " one two three four"
    assert session.last_reply is reply.tracker


def test_a_new_chat_leaves_the_reply_in_progress_to_finish_for_its_history_row_only():
    session = session_on(ready_host())
    content, files = session.files.compose("count")
    session.add_user("count", content, files)
    reply, _ = started(session)
    reply.add([(step(" one"), 1.0)])
    session.start_over()
    assert session.reply is None and reply.control.cancelled and reply.reply_id in session.replies.detached
    session.replies.left_behind(reply.reply_id, " two")  # a step that was still on its way
    session.replies.left_behind(reply.reply_id + 7, " lost")  # no such reply: nothing kept
    ended = session.replies.end_detached(reply.reply_id, Done("cancelled"), None)
    assert (ended.content, ended.finish_reason, ended.tracker) == (" one two", "cancelled", None)
    assert not session.reply_ended(ended) and session.transcript.entries == [] and not session.replies.detached


def test_a_continued_reply_counts_on_from_its_row_and_says_when_it_goes_on_from_the_users_edit():
    session = session_on(ready_host())
    turn(session, "count", "one two", finish_reason="length")
    reply, _ = started(session, session.continuation())
    reply.add([(step(" three"), 1.0)])
    ending = session.replies.end(reply.reply_id, Done("stop"), None, 2.0, "F9", "")
    assert ending is not None and ending.ended.content == "one two three" and ending.ended.continued
    assert ending.summary.startswith("continued: 1 token in 1 step") and ending.summary.endswith("the whole reply 4 tokens")
    assert ending.ended.stats["reply_tokens"] == 4 and "edited" not in ending.ended.stats
    session.reply_ended(ending.ended)
    assert session.keep_reply_edit("my own")
    for round in range(2):  # from the edit, and on again: the user's text is still in it
        reply, _ = started(session, session.continuation())
        reply.add([(step(" more"), 1.0)])
        ending = session.replies.end(reply.reply_id, Done("length"), None, 2.0, "F9", "")
        assert ending is not None and ending.summary.startswith("continued from your edit: 1 token in 1 step")
        assert ending.ended.stats["edited"] and ending.ended.content == "my own" + " more" * (round + 1)
        session.reply_ended(ending.ended)


def test_a_count_of_one_is_said_in_the_singular():
    assert [counted(n, "token") for n in (0, 1, 2)] == ["0 tokens", "1 token", "2 tokens"]
    assert counted(1024, "step", thousands=True) == "1,024 steps"
    assert counted(1, "oldest message", "oldest messages") == "1 oldest message"
    assert reply_summary(ReplyStats(num_steps=1, num_tokens=1, seconds=0.0)) == "1 token in 1 step"
    assert reply_summary(ReplyStats(num_steps=2, num_tokens=5, seconds=0.0)) == "5 tokens in 2 steps"
    session = session_on(ready_host())
    content, files = session.files.compose("hi")
    session.add_user("hi", content, files)
    reply, _ = started(session)
    reply.add([(step(" a"), 1.0)])
    ending = session.replies.end(reply.reply_id, Done("stop", dropped_messages=1), None, 2.0, "F9", "")
    assert ending is not None and ending.summary == "1 token in 1 step · the 1 oldest message left out to fit the context"


# the compare view's state


def compare_on(host: EngineHost) -> CompareSession:
    return CompareSession(host, [{"role": "user", "content": "go"}], GenerationParams(max_tokens=8))


def test_the_compare_view_runs_the_chats_settings_and_a_changed_k_starts_a_new_comparison():
    host = ready_host(k=0)
    compare = compare_on(host)
    assert (compare.k, compare.auto, compare.k_label, compare.method) == (1, False, "k = 1", "draft")  # k 0 drafts nothing
    assert compare.step_k(-1) == f"k stays within 1..{K_MAX} here (the baseline is k = 0)" and compare.k == 1
    generation = compare.start("running speculative then baseline")
    assert compare.busy and compare.done_so_far() == {"speculative": 0, "baseline": 0}
    assert compare.run_ended(generation, SimpleNamespace(path="speculative"))
    assert compare.done_so_far() == {"speculative": 1, "baseline": 0}
    assert compare.step_k(+2) is None and compare.k_label == "k = 3"
    assert compare.settings_changed() and compare.rerun_when_idle  # in flight: cancel it, run again once it stopped
    assert compare.comparison.runs == [] and compare.generation == generation + 1
    assert not compare.run_ended(generation, SimpleNamespace(path="baseline"))  # the old settings' run is dropped
    assert compare.work_ended(generation, "boom") == (None, True)  # the old comparison's failure is not this one's
    assert not compare.busy and not compare.rerun_when_idle
    assert not compare.settings_changed()  # nothing in flight: the view runs at once
    compare.start("again")
    assert compare.work_ended(compare.generation, "boom") == ("boom", False)


def test_the_compare_views_temperature_and_method_keys_say_why_not_where_they_cannot_act():
    compare = compare_on(ready_host())
    assert not compare.step_temperature(-1) and compare.temperature == 0.0  # T stays within 0..max
    assert compare.step_temperature(+1) and compare.temperature > 0.0
    compare.temperature = TEMPERATURE_MAX
    assert not compare.step_temperature(+1)
    assert compare.cannot_swap_method() == "The fake engine cannot change its method here."
    fixed = compare_on(ready_host(FixedKEngine([None], 4)))
    assert fixed.fixed_k and (fixed.k, fixed.k_label) == (4, "k = 4")
    assert fixed.step_k(+1) == "k = 4 is fixed while the vllm engine runs: change it in the chat (it restarts the engine)."


def test_the_compare_views_sweep_keeps_only_its_own_points():
    compare = compare_on(ready_host())
    generation = compare.start("sweeping k")
    compare.sweep_started()
    assert compare.sweep_point(generation, SimpleNamespace(k=0)) and compare.sweep_left == len(SWEEP_KS) - 1
    compare.settings_changed()
    assert not compare.sweep_point(generation, SimpleNamespace(k=1)) and len(compare.sweep_points) == 1
    compare.sweep_started()
    assert compare.sweep_points == [] and compare.sweep_left == len(SWEEP_KS)


def test_the_session_loads_without_textual():
    code = ("import sys, spectui.chat_session.session, spectui.chat_session.meaning, spectui.chat_session.streaming, "
            "spectui.chat_session.comparing; "
            "sys.exit(any(name == 'textual' or name.startswith('textual.') for name in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
