"""↑ and ↓ through the prompts of this chat, as a shell's history: the text being written
is kept aside and comes back past the newest prompt. No textual here."""

from __future__ import annotations

from collections.abc import Iterable


class PromptRecall:
    def __init__(self, prompts: Iterable[str] = ()) -> None:
        self.reset(prompts)

    def reset(self, prompts: Iterable[str] = ()) -> None:
        self.prompts = list(prompts)
        self.index: int | None = None  # the prompt shown now; None: the user's own text
        self.draft = ""

    def add(self, text: str) -> None:
        self.prompts.append(text)
        self.index = None

    @property
    def browsing(self) -> bool:
        return self.index is not None

    def back(self, current: str) -> str | None:
        """The prompt before the one shown (the newest, from the user's own `current`
        text, which is kept); None when there is none further back."""
        if self.index is None:
            if not self.prompts:
                return None
            self.draft, self.index = current, len(self.prompts)
        if self.index == 0:
            return None
        self.index -= 1
        return self.prompts[self.index]

    def forward(self) -> str | None:
        """The next prompt, or the user's own text past the newest; None when not browsing."""
        if self.index is None:
            return None
        self.index += 1
        if self.index < len(self.prompts):
            return self.prompts[self.index]
        self.index = None
        return self.draft
