"""Each engine's methods, and which proposer drafts for a method, decided once (issue 61): a name
added to the embedded list is not silently a vLLM method, and a method no backend can draft is
refused where it is built instead of drafting by prompt lookup."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from spectui.engines.speculative.methods import FROM_TOKENS, drafter, token_proposer
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.speculative.suffix import SuffixProposer
from spectui.engines.vllm.args import VLLM_METHOD
from spectui.settings import table
from spectui.settings.table import EMBEDDED_METHODS, HEAD_METHODS, METHODS, VLLM_METHODS

ROOT = Path(__file__).resolve().parents[1]


def test_each_engines_method_list_is_spelt_out_not_derived():
    tree = ast.parse(Path(table.__file__).read_text())
    assigned = {node.targets[0].id: node.value for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    for name in ("EMBEDDED_METHODS", "VLLM_METHODS"):
        value = assigned[name]
        assert isinstance(value, ast.Tuple) and all(isinstance(e, ast.Constant) for e in value.elts), name


def test_every_vllm_method_maps_to_vllms_name_and_nothing_else_does():
    assert set(VLLM_METHODS) == set(VLLM_METHOD)


def test_the_cli_offers_every_engines_methods_once():
    assert METHODS[0] == "auto" and len(set(METHODS)) == len(METHODS)
    assert set(METHODS) == {"auto", *EMBEDDED_METHODS, *VLLM_METHODS, *HEAD_METHODS}


# The decision table: what each method the embedded engine runs drafts with.
DRAFTERS = {"draft": "draft model", "ngram": "tokens", "suffix": "tokens", "medusa": "heads", "eagle": "heads"}


def test_every_embedded_method_has_one_drafter():
    assert {method: drafter(method) for method in EMBEDDED_METHODS + HEAD_METHODS} == DRAFTERS
    assert set(FROM_TOKENS) == {m for m, kind in DRAFTERS.items() if kind == "tokens"}


@pytest.mark.parametrize("method", ["eagle3", "mtp", "nonsense"])
def test_a_method_the_embedded_engine_cannot_draft_is_refused(method):
    with pytest.raises(ValueError, match=f"no proposer for method '{method}'"):
        drafter(method)


def test_the_token_proposers_and_a_loaded_drafter_is_not_one(tiny_tokenizer):
    ngram = token_proposer("ngram", tiny_tokenizer, (2, 5))
    assert isinstance(ngram, NgramProposer)
    assert isinstance(token_proposer("suffix", tiny_tokenizer), SuffixProposer)
    for method in ("draft", "medusa"):  # ggml's load once fell through to prompt lookup here
        with pytest.raises(ValueError, match="loaded beside the target"):
            token_proposer(method, tiny_tokenizer)


def test_with_method_builds_any_token_method_and_refuses_what_needs_loading(tiny_target, tiny_tokenizer):
    from spectui.core.engine import EngineInfo
    from spectui.core.errors import UsageError
    from spectui.engines.torch_backend.backend import torch_engine

    info = EngineInfo(name="embedded", target="tiny", draft=None, method="ngram", dtype="float32", device="cpu")
    engine = torch_engine(tiny_target, tiny_tokenizer, NgramProposer(), info)
    suffix = engine.with_method("suffix")  # was refused: only ngram could be built on demand
    assert isinstance(suffix.proposer, SuffixProposer) and suffix.info == replace(engine.info, method="suffix")
    assert engine.with_method("suffix").proposer is suffix.proposer  # built once, shared
    with pytest.raises(UsageError, match="no draft model is loaded"):
        engine.with_method("medusa")
    with pytest.raises(UsageError, match="no proposer for method 'mtp'"):
        engine.with_method("mtp")
