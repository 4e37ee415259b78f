"""The panel names a cross-vocabulary pair's overlap (TLI), and says nothing of it for one tokenizer."""

from __future__ import annotations

from dataclasses import replace

from fake_engines import StepsEngine
from spectui.core.events import Source, Step
from spectui.tui.widgets.stats_panel import panel_lines
from tui_helpers import ready, reply_done, send, wait_for

STEPS = [Step((5,), (Source.TARGET,), "a"), Step((6, 7), (Source.DRAFT, Source.BONUS), " b", drafted=(6,), k=1)]


def panel_text(app) -> str:
    lines = panel_lines(app.chat_screen.stats_panel.data, 40)
    return "\n".join("".join(part if isinstance(part, str) else part[0] for part in line) for line in lines)


def engine_with(draft_vocab: str) -> StepsEngine:
    engine = StepsEngine(STEPS, draft="smollm2-135m")
    engine.info = replace(engine.info, draft_vocab=draft_vocab)
    return engine


async def test_the_panel_says_how_much_of_a_cross_vocabulary_drafts_vocabulary_is_shared(make_app):
    app = make_app(lambda progress: engine_with("80% shared"))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: "draft vocabulary: 80% shared" in panel_text(app))
        await send(pilot, "hello")
        await reply_done(pilot)
        assert "draft vocabulary: 80% shared" in panel_text(app)


async def test_one_tokenizer_adds_no_vocabulary_line(make_app):
    app = make_app(lambda progress: engine_with(""))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        assert "draft vocabulary" not in panel_text(app)


def test_a_long_vocabulary_line_wraps_in_the_panel_and_is_never_cut():
    """The 120x36 walk's panel read 'draft vocabulary: 80% shared · T': which rule drafts was cut."""
    from spectui.chat_session.stats import PanelData

    words = "80% shared · SLEM (T = 0; 2.41 tokens a step, TLI 1.93)"
    lines = panel_lines(PanelData(k=4, temperature=0.0, draft_vocab=words), 36)
    texts = ["".join(part if isinstance(part, str) else part[0] for part in line) for line in lines]
    start = next(index for index, text in enumerate(texts) if text.startswith(" draft vocabulary: "))
    shown = " ".join(text.strip() for text in texts[start:start + 3])
    assert "SLEM (T = 0; 2.41 tokens a step, TLI 1.93)" in shown and texts[start + 1].startswith("  ")
    assert all(len(text) <= 35 for text in texts[start:start + 3])


async def test_a_reply_drafted_across_vocabularies_records_its_rule_and_advise_pairs_it(make_app):
    """The history saved a TLI or SLEM reply without its rule (--vocab auto picks per chat):
    `spectui advise --json`'s checks could not pair it with the replay's arm for that rule."""
    from spectui.advise.advice import Advice, ArmResult, replayed_arm_name
    from spectui.advise.chats import ChatReply, Selection
    from spectui.advise.costs import CostProfile

    stored, row = await one_stored_reply(make_app, "80% shared · SLEM at T = 0, TLI at T > 0")
    assert (row.settings["method"], row.settings["draft"], row.settings["vocab"]) == ("draft", "smollm2-135m", "slem")
    reply = ChatReply((1, 2), (5, 6, 7), "stop", stored.id, row.id, tuple(step.step for step in row.steps), dict(row.settings))
    assert reply.arm == replayed_arm_name(reply) == "smollm2-135m (SLEM) k 1"
    slem = ArmResult("smollm2-135m (SLEM)", 1, per_reply=[(1, 2)])
    tli = ArmResult("smollm2-135m (TLI)", 1, per_reply=[(0, 3)])
    advice = Advice(CostProfile("m", "b", 0.01, {1: 1.0, 2: 1.3}), ArmResult("", 0, per_reply=[(0, 3)]), [tli, slem],
                    Selection([reply]))
    check = advice.checks()[0]
    assert (check["ran"], check["replayed_as"], check["recorded_accepted"], check["replayed_accepted"]) == \
        ("smollm2-135m (SLEM) k 1", "smollm2-135m (SLEM) k 1", 1, 1)


async def one_stored_reply(make_app, draft_vocab: str):
    """One reply at --vocab slem, k 1 from an engine whose draft shares `draft_vocab`: the stored
    conversation and its reply's row."""
    from spectui.settings.config import ChatConfig

    app = make_app(lambda progress: engine_with(draft_vocab), ChatConfig(vocab="slem", k=1))
    async with app.run_test(size=(110, 36)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        stored = app.store.load_conversation(app.chat_screen.session.transcript.conversation_id)
    return stored, [message for message in stored.messages if message.role == "assistant"][-1]


async def test_a_reply_of_one_tokenizer_records_no_rule(make_app):
    _, row = await one_stored_reply(make_app, "")
    assert "vocab" not in row.settings and "draft" not in row.settings
