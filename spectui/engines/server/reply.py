"""What one reply's stream has said so far: its steps, the server's records and counts, how
it ended, and the reasoning field's <think> tags."""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.events import Step
from spectui.core.reasoning import THINK_CLOSE, THINK_OPEN
from spectui.engines.server.chunks import ChatChunk, DraftCounts


def chunk_tokens(chunk: ChatChunk) -> int:
    """Tokens a chunk brings: its ids, or one for text without ids."""
    return len(chunk.token_ids) or (1 if chunk.text or chunk.reasoning else 0)


@dataclass
class ReplyState:
    """What one reply's stream has said so far."""

    started: float
    max_tokens: int = 2**31  # what the request allowed: the server's numbers are bounded by it
    steps: list[Step] = field(default_factory=list)
    num_tokens: int = 0
    prompt_ids: tuple[int, ...] = ()
    record: dict | None = None  # vLLM's per-request speculative_decoding record
    usage: dict | None = None
    draft_counts: DraftCounts | None = None  # llama-server's or LM Studio's counts
    finish: str | None = None
    ended_normally: bool = False  # [DONE] came
    answered: bool = False  # the server sent its response headers
    plain: bool = False  # text without token ids: a server that is not vLLM
    failure: str | None = None
    first_token_at: float | None = None
    last_token_at: float = 0.0
    thinking: bool = False  # inside the reasoning field: the <think> tag is open
    thought: str = ""  # the reasoning so far

    def __post_init__(self) -> None:
        self.last_token_at = self.started

    def note(self, chunk: ChatChunk) -> None:
        self.prompt_ids = chunk.prompt_token_ids or self.prompt_ids
        self.record = chunk.speculative_decoding or self.record
        self.usage = chunk.usage or self.usage
        self.draft_counts = chunk.draft_counts or self.draft_counts
        self.finish = chunk.finish_reason or self.finish

    def tagged_text(self, chunk: ChatChunk) -> str:
        """The chunk's text, a reasoning field's between <think> tags on their own lines (as a
        reasoning model writes them itself), so the reply keeps its thinking apart."""
        text = ""
        if chunk.reasoning:
            if not self.thinking:
                text, self.thinking = THINK_OPEN + "\n", True
                self.thought = ""
            reasoning = chunk.reasoning if self.thought else chunk.reasoning.lstrip("\n")
            self.thought += reasoning
            text += reasoning
        if chunk.text and self.thinking:
            text += ("" if self.thought.endswith("\n") else "\n") + THINK_CLOSE + "\n\n"
            self.thinking = False
            return text + chunk.text.lstrip("\n")
        return text + chunk.text

    def add(self, step: Step, now: float) -> None:
        self.steps.append(step)
        self.num_tokens += len(step.token_ids)
        self.first_token_at = self.first_token_at or now
        self.last_token_at = now

    def timing(self) -> dict:
        return {
            "prompt_token_ids": self.prompt_ids,
            "seconds": self.last_token_at - self.started,
            "time_to_first_token": (self.first_token_at - self.started) if self.first_token_at else 0.0,
        }
