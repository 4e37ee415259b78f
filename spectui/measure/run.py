"""Run one reply to the end and keep what it produced. Stdlib only.

`generate --json`, compare and bench all report a reply in this one shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.core.engine import Engine
from spectui.core.events import Control, Done, GenerationParams, Message, Step
from spectui.core.stats import ReplyStats, summarize


def prompt_messages(prompt: str, system: str | None = None) -> list[Message]:
    """One user turn, after the system message when there is one."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    return messages


@dataclass
class Reply:
    steps: list[Step] = field(default_factory=list)
    done: Done | None = None

    def finish(self, done: Done) -> None:
        """Keep the Done; an engine's restated colouring replaces what was streamed."""
        self.done = done
        if done.restated_steps is not None:
            self.steps = list(done.restated_steps)

    @property
    def text(self) -> str:
        return "".join(step.text for step in self.steps)

    @property
    def token_ids(self) -> list[int]:
        return [t for step in self.steps for t in step.token_ids]

    @property
    def stats(self) -> ReplyStats:
        return summarize(self.steps, self.done.seconds if self.done else 0.0)

    def as_dict(self, engine: Engine, k: int) -> dict:
        info = engine.info
        return {
            "text": self.text,
            "finish_reason": self.done.finish_reason if self.done else None,
            "error": self.done.error if self.done else None,
            "approximate": self.done.approximate if self.done else False,
            "prompt_token_ids": list(self.done.prompt_token_ids) if self.done else [],
            "token_ids": self.token_ids,
            "steps": [
                {
                    "token_ids": list(step.token_ids),
                    "sources": [source.value for source in step.sources],
                    "drafted": list(step.drafted),
                    "num_drafted": step.num_drafted,
                    "k": step.k,
                    "exact": step.exact,
                    # Only a tree step has it: chain steps print as they always did.
                    **({"tree_nodes": step.tree_nodes} if step.tree_nodes is not None else {}),
                }
                for step in self.steps
            ],
            "stats": {
                **self.stats.as_dict(),
                "time_to_first_token": self.done.time_to_first_token if self.done else None,
            },
            "model": {
                "engine": info.name,
                "target": info.target,
                "draft": info.draft,
                "method": info.method,
                "k": k,
                "dtype": info.dtype,
                "device": info.device,
            },
        }


def run_reply(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    control: Control,
    on_step: Callable[[Step], None] | None = None,
) -> Reply:
    reply = Reply()
    for event in engine.stream(messages, params, control):
        if isinstance(event, Step):
            reply.steps.append(event)
            if on_step is not None:
                on_step(event)
        else:
            reply.finish(event)
    return reply
