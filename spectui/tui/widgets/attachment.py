"""An attached file as it sits in the conversation: one line (name, size, lines, token
estimate, hash), its text folded until asked for (Enter on the line, or a click)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Collapsible, Static

from spectui.core.attachments import Attachment
from spectui.core.safe_text import safe_text


def attachment_title(attachment: Attachment, tokens: str) -> str:
    return f"📎 {safe_text(attachment.header())} · {tokens}"


class AttachmentView(Collapsible):
    DEFAULT_CSS = """
    AttachmentView { margin: 1 0 0 0; padding: 0; border-top: none; background: $boost; color: $text-muted; }
    AttachmentView > Contents { padding: 0 1; max-height: 20; overflow-y: auto; }
    """

    def __init__(self, attachment: Attachment, tokens: str) -> None:
        # the file's text is shown, never obeyed: no markup, no controls
        self.body = Static(Content(safe_text(attachment.text)))
        super().__init__(self.body, title=attachment_title(attachment, tokens), collapsed=True)
        self.attachment = attachment

    @property
    def text(self) -> str:
        return self.attachment.text
