"""The proof corpus for lossless decoding at T = 0: prompts whose replies run long, and every
drafting method at every k checked token for token against the engine's own plain reply.

A kernel's rounding can depend on the batch width, the cached length or the thread split, so
one short prompt proves nothing about a 500-token reply (docs/lossless.md). The suite runs this
on SmolLM2 (tests/test_lossless_corpus.py); benchmarks/identity.py on the default pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spectui.core.engine import Engine
from spectui.core.events import Control, Done, GenerationParams, Message, Step

CODE = ["parses a CSV file into a list of dictionaries", "merges two sorted lists", "validates an email address",
        "computes the edit distance of two strings", "flattens a nested list", "reads a config file with defaults",
        "counts word frequencies in a text", "retries a function with exponential backoff",
        "converts Roman numerals to integers", "finds all prime numbers below n", "groups records by a key",
        "renders a table of rows as Markdown"]
TOPICS = ["the water cycle", "how a compiler works", "the history of the printing press", "photosynthesis",
          "how vaccines train the immune system", "the rules of chess", "why the sky is blue", "how bread rises",
          "the causes of the French Revolution", "how a bicycle stays upright", "plate tectonics", "how money is created"]
THINGS = ["a library book", "a weather station reading", "a user account", "a flight booking", "a recipe",
          "a shipping order", "a music album", "a job posting", "a hotel room", "a laptop", "a bank transfer", "a movie"]
ITEMS = ["fruits", "programming languages", "countries in Europe", "animals that live in the sea", "musical instruments",
         "kitchen tools", "famous scientists", "board games", "chemical elements", "rivers", "sports", "colours"]


@dataclass(frozen=True)
class CorpusPrompt:
    kind: str  # code, prose, json, list, chat
    messages: tuple[Message, ...]


# A system prompt of ~300 tokens puts every reply past 256 cached tokens, where llama.cpp's
# attention used to change its summation order: short replies then test long-context rows too.
PREAMBLE = " ".join([
    "You are a careful assistant for engineers. Answer in plain English, completely and in order.",
    "When you write code, write complete functions with names that explain themselves, a docstring that",
    "says what the function returns and why it exists, and comments only where the reason is not obvious.",
    "Prefer the standard library. Handle bad input with one clear error message. Never invent an API.",
    "When you explain, start from what the reader already knows, define each new word once, give one",
    "example for each idea and say where the idea stops being true. Use short paragraphs and lists where",
    "they help the reader find things again. When you give data, keep units and say where numbers come",
    "from. When a question is ambiguous, say which reading you answer and why. When you list things,",
    "number them and keep each item to one line unless asked for more. When you summarise, keep the order",
    "of the original and leave nothing important out. Do not apologise, do not repeat the question, and",
    "do not add a closing remark. If you are asked to continue, continue exactly where you stopped, in the",
    "same style, without repeating what you already wrote. Be concrete: names, numbers, steps, examples.",
])


def corpus(size: int = 60, preamble: bool = False) -> list[CorpusPrompt]:
    """`size` prompts, the five kinds in turn, each asking for a long reply; with `preamble`,
    each after the same long system prompt."""
    kinds: list[list[CorpusPrompt]] = [
        [CorpusPrompt("code", (user(f"Write a Python function that {task}. Add a docstring, type hints, three "
                                    "examples of use and a short explanation of each step."),)) for task in CODE],
        [CorpusPrompt("prose", (user(f"Explain {topic} in detail, in several paragraphs."),)) for topic in TOPICS],
        [CorpusPrompt("json", (user(f"Return a JSON object describing {thing} with at least twelve fields, "
                                    "nested objects and a list, then explain each field."),)) for thing in THINGS],
        [CorpusPrompt("list", (user(f"List thirty {items}, one per line, numbered, with one sentence about each."),))
         for items in ITEMS],
        [CorpusPrompt("chat", (user(f"What is {topic}?"), {"role": "assistant", "content": f"It is a broad subject: {topic}."},
                               user("Go on: explain it step by step, then summarise it in ten bullet points.")))
         for topic in reversed(TOPICS)],
    ]
    prompts = [prompt for group in itertools.zip_longest(*kinds) for prompt in group if prompt is not None][:size]
    if preamble:
        system: Message = {"role": "system", "content": PREAMBLE}
        prompts = [CorpusPrompt(prompt.kind, (system, *prompt.messages)) for prompt in prompts]
    return prompts


def user(content: str) -> Message:
    return {"role": "user", "content": content}


@dataclass(frozen=True)
class Arm:
    method: str
    k: int
    auto: bool = False

    @property
    def name(self) -> str:
        return f"{self.method} k {'auto' if self.auto else self.k}"


def arms(methods: Sequence[str], ks: Sequence[int] = (1, 2, 3, 4, 8)) -> list[Arm]:
    """Every method at every k, and at adaptive k."""
    return [Arm(method, k) for method in methods for k in ks] + [Arm(method, 4, auto=True) for method in methods]


@dataclass(frozen=True)
class Divergence:
    prompt: int
    arm: str
    position: int
    plain_token: int
    drafted_token: int
    gap: float | None  # the plain reply's top-two logit gap there


@dataclass
class IdentityResult:
    replies: int = 0  # speculative replies checked
    tokens: int = 0  # their tokens
    accepted: int = 0  # drafts accepted, over all of them: a corpus that drafts nothing proves nothing
    divergences: list[Divergence] | None = None

    def __post_init__(self) -> None:
        self.divergences = self.divergences or []


def reply(engine: Engine, messages: Sequence[Message], control: Control, max_tokens: int) -> tuple[list[int], list[float], int]:
    """Token ids, their T = 0 margins and the drafts accepted, for one reply from a clean cache."""
    engine.forget_prompts()
    steps: list[Step] = []
    for event in engine.stream(messages, GenerationParams(max_tokens=max_tokens, top_p=1.0, seed=0), control):
        if isinstance(event, Step):
            steps.append(event)
        elif isinstance(event, Done) and event.finish_reason not in ("stop", "length"):
            raise RuntimeError(f"a reply ended with {event.finish_reason}: {event.error}")
    tokens = [token for step in steps for token in step.token_ids]
    margins = [margin for step in steps for margin in step.margins]
    return tokens, margins, sum(step.num_accepted for step in steps)


def check_identity(engine: Engine, prompts: Sequence[CorpusPrompt], arm_schedule: Callable[[int], Sequence[Arm]],
                   max_tokens: int = 512, progress: Callable[[str], None] = lambda line: None) -> IdentityResult:
    """Each prompt's plain reply (k = 0), then the arms `arm_schedule(i)` gives prompt i, each
    compared token for token with it."""
    from spectui.measure.compare import first_difference

    result = IdentityResult()
    for index, prompt in enumerate(prompts):
        plain, margins, _ = reply(engine.with_method("ngram"), prompt.messages, Control(0, 0.0), max_tokens)
        for arm in arm_schedule(index):
            tokens, _, accepted = reply(engine.with_method(arm.method), prompt.messages,
                                        Control(arm.k, 0.0, auto=arm.auto), max_tokens)
            result.replies += 1
            result.tokens += len(tokens)
            result.accepted += accepted
            position = first_difference(tokens, plain)
            if position is not None:
                assert result.divergences is not None
                result.divergences.append(Divergence(
                    index, arm.name, position, plain[position] if position < len(plain) else -1,
                    tokens[position] if position < len(tokens) else -1,
                    margins[position] if position < len(margins) else None))
        progress(f"{index + 1}/{len(prompts)} prompts · {result.replies} replies · "
                 f"{len(result.divergences or [])} divergences")
    return result


def rotating(all_arms: Sequence[Arm], per_prompt: int) -> Callable[[int], list[Arm]]:
    """Prompt i gets `per_prompt` arms, taken in turn, so every arm meets many prompts."""
    return lambda index: [all_arms[(index * per_prompt + j) % len(all_arms)] for j in range(per_prompt)]
