"""`/save PATH [N]`: the last reply's code block (or its Nth) written to PATH. A new file is
written at once; an existing one only after its diff is shown and the user says yes, the
old file kept as a backup (spectui.core.saving). A device, FIFO or folder is refused."""

from __future__ import annotations

from spectui.chat_session.session import ChatSession
from spectui.core.commands import parse_save
from spectui.core.reasoning import split_reasoning
from spectui.core.saving import SavePlan, plan_save, save
from spectui.tui.chat.scroll import ConversationScroll
from spectui.tui.fences import code_blocks
from spectui.tui.messages import ActionWanted


def last_reply_text(session: ChatSession) -> str | None:
    reply = session.transcript.last("assistant")
    return reply.content if reply is not None else None


def save_reply(session: ChatSession, scroll: ConversationScroll, args: list[str]) -> None:
    """scroll: the conversation, where the outcome is noted (relative paths start at session.cwd)."""
    try:
        path, number = parse_save(args)
    except ValueError as error:
        scroll.notify(str(error), severity="warning")
        return
    text = last_reply_text(session)
    if text is None:
        scroll.notify("No reply to save from yet.")
        return
    blocks = code_blocks(split_reasoning(text)[1])  # the answer's blocks, not its reasoning's
    if not blocks:
        scroll.notify("The last reply has no code block to save.", severity="warning")
        return
    if number is not None and number > len(blocks):
        scroll.notify(f"The last reply has {len(blocks)} code block{'s' if len(blocks) != 1 else ''}, no block {number}.",
                      severity="warning")
        return
    block = blocks[(number or len(blocks)) - 1]
    plan = plan_save(path, block.text, session.cwd)
    cut = None if block.closed else CUT_SHORT
    if isinstance(plan, str):
        scroll.note(plan, error=True)
    elif plan.unchanged:
        scroll.note(f"{path} already holds that block: nothing written")
    elif plan.old is None and cut is None:
        scroll.note(save(plan))
    else:  # an existing file, or a block the reply never finished: the user decides
        confirm(scroll, plan, cut)


CUT_SHORT = "The reply stopped inside this code block (its fence never closed): the file would be cut short."


def confirm(scroll: ConversationScroll, plan: SavePlan, warning: str | None = None) -> None:
    from spectui.tui.chat.save_confirm import SaveConfirmScreen

    def answered(write: bool | None) -> None:
        scroll.note(save(plan) if write else f"{plan.path}: kept as it was, nothing written")
        scroll.post_message(ActionWanted("focus_prompt"))

    scroll.app.push_screen(SaveConfirmScreen(plan.title, plan.diff, warning, new=plan.old is None), answered)
