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

import torch

MAX_SEQUENCE_TOKENS = 256  # one training example; longer replies and texts are cut to crops
TEXT_CHUNK_TOKENS = 256

ProgressFn = Callable[[str, int, int, dict], None]


def _no_progress(stage: str, done: int, total: int, info: dict) -> None:
    pass


@dataclass
class CachedSequence:
    token_ids: torch.Tensor  # [L]
    features: torch.Tensor  # [L, H], float32: the target's feature at each position


def workload_prompt_ids(
    tokenizer, suite_name: str = "full", context: int | None = None, max_new_tokens: int = 0
) -> list[list[int]]:
    """The shipped workload prompts, as the chat engine would prompt the target; a prompt
    too long for the context keeps its end (where the reply starts) and leaves room for it."""
    from spectui.bench.workloads import suite
    from spectui.engines.prompt import chat_prompt_ids

    prompts = [chat_prompt_ids(tokenizer, workload.as_messages()) for workload in suite(suite_name)]
    if context:
        room = max(1, context - max_new_tokens)
        prompts = [ids[-room:] for ids in prompts]
    return prompts


def text_sequences(tokenizer, paths: Sequence[Path]) -> list[list[int]]:
    sequences = []
    for path in paths:
        ids = tokenizer(Path(path).read_text(errors="replace"))["input_ids"]
        sequences += [ids[i : i + TEXT_CHUNK_TOKENS] for i in range(0, len(ids), TEXT_CHUNK_TOKENS)]
    return [ids for ids in sequences if len(ids) >= 4]


@torch.no_grad()
def greedy_replies(
    model, prompts: Sequence[list[int]], max_new_tokens: int, stop_ids: set[int], progress: ProgressFn = _no_progress
) -> list[list[int]]:
    """Each prompt followed by the target's own greedy reply: what the heads must predict
    is what this target says, not what some dataset says."""
    device = next(model.parameters()).device
    sequences = []
    for done, prompt in enumerate(prompts):
        progress("replies", done, len(prompts), {})
        stop = sorted(stop_ids)
        output = model.generate(
            torch.tensor([prompt], device=device), max_new_tokens=max_new_tokens, do_sample=False,
            eos_token_id=stop or None, pad_token_id=stop[0] if stop else None,
        )
        sequences.append(output[0].tolist())
    progress("replies", len(prompts), len(prompts), {})
    return sequences


@torch.no_grad()
def cache_features(model, sequences: Sequence[list[int]], progress: ProgressFn = _no_progress) -> list[CachedSequence]:
    """One target forward per sequence; its last hidden state (after the final norm, what
    the LM head reads) at every position, kept for all the training steps."""
    device = next(model.parameters()).device
    cached = []
    for done, ids in enumerate(sequences):
        progress("features", done, len(sequences), {})
        input_ids = torch.tensor([ids], device=device)
        out = model(input_ids=input_ids, output_hidden_states=True, logits_to_keep=1)
        cached.append(CachedSequence(input_ids[0], out.hidden_states[-1][0].float()))
    progress("features", len(sequences), len(sequences), {})
    return cached


def loss_function(kind: str, heads, model) -> Callable[[CachedSequence, torch.Generator | None], torch.Tensor]:
    lm_head = model.get_output_embeddings()
    if kind == "medusa":
        from spectui.heads.medusa import medusa_loss

        return lambda example, generator: medusa_loss(heads, lm_head, example.features, example.token_ids)
    from spectui.heads.eagle import eagle_loss

    embedding = model.get_input_embeddings()
    return lambda example, generator: eagle_loss(heads, lm_head, embedding, example.features, example.token_ids, generator)


def mean_loss(loss_of, examples: Sequence[CachedSequence]) -> float:
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
    loss_of,
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


def new_heads(kind: str, hidden_size: int, num_heads: int) -> torch.nn.Module:
    from spectui.heads.store import build_heads

    if kind == "medusa":
        return build_heads("medusa", {"hidden_size": hidden_size, "num_heads": num_heads, "num_layers": 1})
    from spectui.heads.eagle import default_sizes

    return build_heads("eagle", default_sizes(hidden_size))
