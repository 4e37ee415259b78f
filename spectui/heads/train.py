"""Self-distillation: heads learn from the target's own greedy replies, target frozen.

Three plain stages: the sequences (the target's replies to the workload prompts, and
local text), their features (one target forward per sequence, cached), and the training
steps on the cached features. Nothing is downloaded: the data is made here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from spectui.core.engine import Engine
from spectui.core.events import Message

if TYPE_CHECKING:
    from spectui.heads.eagle import EagleDrafter
    from spectui.heads.lm import VocabSubset
    from spectui.heads.medusa import MedusaHeads

MAX_SEQUENCE_TOKENS = 256  # one training example; longer replies and texts are cut to crops
TEXT_CHUNK_TOKENS = 256

ProgressFn = Callable[[str, int, int, dict], None]


def _no_progress(stage: str, done: int, total: int, info: dict) -> None:
    pass


@dataclass
class CachedSequence:
    token_ids: torch.Tensor  # [L]
    features: torch.Tensor  # [L, H], float32: the target's feature at each position


# One example's loss under a noise generator (loss_function's result).
LossFn = Callable[[CachedSequence, "torch.Generator | None"], torch.Tensor]


class TrainingPrompt(Protocol):
    """One prompt to write a training reply for (the cli hands in the bench's workloads)."""

    @property
    def name(self) -> str: ...

    def as_messages(self) -> list[Message]: ...


def text_sequences(tokenizer: Any, paths: Sequence[Path]) -> list[list[int]]:
    from spectui.core.errors import UsageError
    from spectui.core.files import TEXT_FILE_LIMIT, read_capped, reason

    sequences = []
    for path in paths:
        try:
            text = read_capped(path, TEXT_FILE_LIMIT).decode("utf-8", errors="replace")
        except OSError as error:
            raise UsageError(f"--text {path}: cannot read it ({reason(error)})") from None
        ids = tokenizer(text)["input_ids"]
        sequences += [ids[i : i + TEXT_CHUNK_TOKENS] for i in range(0, len(ids), TEXT_CHUNK_TOKENS)]
    return [ids for ids in sequences if len(ids) >= 4]


def cache_file(folder: str, key: object, suffix: str) -> Path:
    """A file in the heads cache named by a hash of everything its content depends on."""
    import hashlib
    import json

    from spectui.models.registry import cache_dir

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir() / "heads" / folder / f"{digest}{suffix}"


def save_atomically(path: Path, save: Callable[[Path], object]) -> None:
    """save(partial) then a rename: a run killed halfway leaves no cache file to trust."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    save(partial)
    partial.replace(path)


def replies_path(name: str, dtype: str, prompts: Sequence[TrainingPrompt], max_new_tokens: int) -> Path:
    """Where the replies for these settings are kept: medusa and eagle heads for one target
    learn from the same replies, and writing them is the slow part on a CPU."""
    messages = [prompt.as_messages() for prompt in prompts]
    return cache_file("replies", [name, dtype, max_new_tokens, messages], ".json")


def cached_replies(path: Path, write: Callable[[], list[list[int]]]) -> list[list[int]]:
    import json

    if path.is_file():
        return json.loads(path.read_text())
    sequences = write()
    save_atomically(path, lambda partial: partial.write_text(json.dumps(sequences)))
    return sequences


def engine_replies(
    engine: Engine, workloads: Sequence[TrainingPrompt], max_new_tokens: int, progress: ProgressFn = _no_progress
) -> list[list[int]]:
    """Each workload prompt followed by the target's greedy reply, written by spectui's own
    engine as it will run with the heads: the target in the engine's dtype, prompt lookup
    drafting (lossless at T = 0: faster, not different). A prompt that leaves no room for
    the reply in the model's context is left out."""
    from spectui.core.errors import SpectuiError
    from spectui.core.events import Control, Done, GenerationParams, Prefill

    sequences = []
    for done, workload in enumerate(workloads):
        progress("replies", done, len(workloads), {})
        context = engine.context_length
        if context is not None and len(engine.prompt_ids(workload.as_messages())) + max_new_tokens > context:
            continue
        reply: list[int] = []
        params = GenerationParams(max_tokens=max_new_tokens, seed=0, truncate=True)
        for event in engine.stream(workload.as_messages(), params, Control(4, 0.0)):
            if isinstance(event, Done):
                if event.finish_reason == "error":
                    raise SpectuiError(f"writing the reply to {workload.name}: {event.error}")
                sequences.append(list(event.prompt_token_ids) + reply)
                break
            if not isinstance(event, Prefill):
                reply += event.token_ids
    progress("replies", len(workloads), len(workloads), {})
    return sequences


@torch.no_grad()
def cache_features(model: Any, sequences: Sequence[list[int]], progress: ProgressFn = _no_progress) -> list[CachedSequence]:
    """One target forward per sequence; its last hidden state (after the final norm, what
    the LM head reads) at every position, kept for all the training steps."""
    device = next(model.parameters()).device
    cached = []
    for done, ids in enumerate(sequences):
        progress("features", done, len(sequences), {})
        input_ids = torch.tensor([ids], device=device)
        out = model(input_ids=input_ids, output_hidden_states=True, logits_to_keep=1, use_cache=False)
        cached.append(CachedSequence(input_ids[0], out.hidden_states[-1][0].float()))
    progress("features", len(sequences), len(sequences), {})
    return cached


def features_path(name: str, sequences: Sequence[list[int]]) -> Path:
    """Where the features of these sequences under this target are kept: a 1.5B target's
    float32 forwards over the data cost more than training one kind of heads on them."""
    return cache_file("features", [name, list(sequences)], ".pt")


def cached_features(path: Path, compute: Callable[[], list[CachedSequence]]) -> list[CachedSequence]:
    if path.is_file():
        saved = torch.load(path, weights_only=True)
        return [CachedSequence(ids, features) for ids, features in zip(saved["token_ids"], saved["features"])]
    examples = compute()
    saved = {"token_ids": [e.token_ids for e in examples], "features": [e.features for e in examples]}
    save_atomically(path, lambda partial: torch.save(saved, partial))
    return examples


def loss_function(
    kind: str, heads: Any, model: Any, vocab_sample: int = 0, examples: Sequence[CachedSequence] = ()
) -> LossFn:
    """vocab_sample > 0: each call's softmax runs over the tokens `examples` hold and that
    many random others (see sampled_vocab), not the whole vocabulary."""
    from spectui.heads.lm import sampled_vocab

    lm_head = model.get_output_embeddings()
    vocab_size = lm_head.weight.shape[0]
    always = torch.unique(torch.cat([example.token_ids for example in examples])) if vocab_sample and examples else None

    def vocab(generator: torch.Generator | None) -> VocabSubset | None:
        return None if always is None else sampled_vocab(always, vocab_size, vocab_sample, generator)

    if kind == "medusa":
        from spectui.heads.medusa import medusa_loss

        return lambda example, generator: medusa_loss(heads, lm_head, example.features, example.token_ids, vocab(generator))
    from spectui.heads.eagle import eagle_loss

    embedding = model.get_input_embeddings()
    return lambda example, generator: eagle_loss(
        heads, lm_head, embedding, example.features, example.token_ids, generator, vocab(generator)
    )


def mean_loss(loss_of: LossFn, examples: Sequence[CachedSequence]) -> float:
    """The loss over every cached sequence, without noise or gradients: before/after figures."""
    with torch.no_grad():
        generator = torch.Generator(device=examples[0].features.device).manual_seed(0)
        return sum(float(loss_of(example, generator)) for example in examples) / len(examples)


def crop(example: CachedSequence, rng: random.Random) -> CachedSequence:
    length = example.token_ids.shape[0]
    if length <= MAX_SEQUENCE_TOKENS:
        return example
    start = rng.randrange(length - MAX_SEQUENCE_TOKENS + 1)
    end = start + MAX_SEQUENCE_TOKENS
    return CachedSequence(example.token_ids[start:end], example.features[start:end])


def train_heads(
    heads: torch.nn.Module,
    loss_of: LossFn,
    examples: Sequence[CachedSequence],
    steps: int,
    learning_rate: float = 1e-3,
    seed: int = 0,
    progress: ProgressFn = _no_progress,
) -> dict:
    """Adam on one cached sequence (a random crop) per step; the target stays frozen since
    only the heads' parameters are optimised. Returns what heads.json records."""
    if not examples:
        raise ValueError("no sequences to train on")
    rng = random.Random(seed)
    generator = torch.Generator(device=examples[0].features.device).manual_seed(seed)
    heads.train()
    optimizer = torch.optim.AdamW(heads.parameters(), lr=learning_rate, weight_decay=0.0)
    loss_before = mean_loss(loss_of, examples)
    started = time.perf_counter()
    running = loss_before
    for step in range(steps):
        loss = loss_of(crop(rng.choice(examples), rng), generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(heads.parameters(), 1.0)
        optimizer.step()
        running = 0.95 * running + 0.05 * float(loss.detach())
        progress("train", step + 1, steps, {"loss": running})
    heads.eval()
    return {
        "steps": steps,
        "seconds": round(time.perf_counter() - started, 2),  # the training steps alone
        "learning_rate": learning_rate,
        "sequences": len(examples),
        "tokens": int(sum(example.token_ids.shape[0] for example in examples)),
        "loss_before": round(loss_before, 5),
        "loss_after": round(mean_loss(loss_of, examples), 5),
    }


def new_heads(kind: str, hidden_size: int, num_heads: int) -> MedusaHeads | EagleDrafter:
    from spectui.heads.store import build_heads

    if kind == "medusa":
        return build_heads("medusa", {"hidden_size": hidden_size, "num_heads": num_heads, "num_layers": 1})
    from spectui.heads.eagle import default_sizes

    return build_heads("eagle", default_sizes(hidden_size))
