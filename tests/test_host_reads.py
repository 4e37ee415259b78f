"""Per-step host work on the torch backend (issue 60): a greedy verify reads the device once, a
drafted token once, and the target's per-row draws come from host generators (a CUDA generator
per row cost a device call to make and seed). Counted on CPU tensors: each read is a call."""

from __future__ import annotations

import pytest
import torch

from spectui.core.events import GenerationParams
from spectui.engines.speculative.loop import Draft, start_reply, verify_chain
from spectui.engines.speculative.proposers import DraftModelProposer
from spectui.engines.speculative.sampling import PositionDraws, sample
from spectui.engines.speculative.torch_arrays import TORCH

READS = ("tolist", "item", "__int__", "__float__")


@pytest.fixture
def reads(monkeypatch):
    """Every read of a tensor's values into Python, counted."""
    counted = []
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counting(self, *args, _original=original, _name=name, **kwargs):
            counted.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counting)
    return counted


class Rows:
    """A target or a draft that answers every call with the next of `answers` (logits rows)."""

    arrays, device, exact_rows, prefill_chunk = "torch", torch.device("cpu"), None, None

    def __init__(self, *answers: torch.Tensor) -> None:
        self.answers = list(answers)
        self.seen: list[int] = []

    def logits(self, token_ids, num_rows):
        return self.answers.pop(0)

    def reset(self) -> None:
        pass


def one_hot_rows(ids: list[int], vocab: int = 50) -> torch.Tensor:
    rows = torch.zeros(len(ids), vocab)
    rows[range(len(ids)), ids] = torch.arange(1.0, len(ids) + 1)  # distinct gaps, row i: i + 1
    return rows


def test_a_greedy_verify_reads_the_device_once(reads):
    reply = start_reply([1, 2, 3], GenerationParams(max_tokens=10), "cpu")
    target = Rows(one_hot_rows([7, 8, 30, 4]))  # the drafts 7, 8 kept, 9 refused: 30 recovered
    checked = verify_chain(target, reply, Draft(3, 0.0, drafted=[7, 8, 9]))  # type: ignore[arg-type]
    assert (checked.verdict.num_accepted, checked.verdict.next_token) == (2, 30)
    assert checked.margins == (1.0, 2.0, 3.0)  # the emitted rows' top-two gaps, as before
    assert len(reads) == 1, reads


def test_a_drafted_token_is_read_once_with_its_confidence(reads):
    draft = Rows(*(one_hot_rows([token]) for token in (11, 12, 13)))
    proposal = DraftModelProposer(draft).propose([1, 2], 3, 0.0, 1.0, None, stop_below=1e-9)  # type: ignore[arg-type]
    assert proposal.drafted == [11, 12, 13]
    assert len(reads) == 3, reads


def test_the_targets_draws_come_from_host_generators():
    draws = PositionDraws(seed=5, device="cuda")  # no CUDA here: a CUDA generator could not be made
    generator = draws.at(12)
    assert generator.device.type == "cpu"
    probs = torch.full((8,), 1 / 8)
    first = sample(probs, draws.at(12))
    assert first == sample(probs, draws.at(12)) and 0 <= first < 8  # keyed by position: the same draw
    assert TORCH.uniforms(draws.at(3), 4, torch.empty(1, device="meta")).device.type == "meta"
