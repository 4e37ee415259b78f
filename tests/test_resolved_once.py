"""A model name is resolved once, where a command reads its options; everything below takes
the resolved model (issue 41: "nothing below resolves or validates a name again")."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from typer.testing import CliRunner


@pytest.fixture
def resolves(monkeypatch) -> Counter:
    """How often each name was resolved: the registry's resolve counted, wherever a module
    holds it (some import it at their top, others inside a function)."""
    import spectui.models.registry as registry

    original = registry.resolve
    counts: Counter = Counter()

    def counted(name):
        counts[name] += 1
        return original(name)

    for module in list(sys.modules.values()):
        if module is not None and module.__name__.startswith("spectui") and vars(module).get("resolve") is original:
            monkeypatch.setattr(module, "resolve", counted)
    return counts


def generate(*arguments: str):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["generate", "hello world", "--device", "cpu", "--max-tokens", "4", *arguments])


@pytest.mark.parametrize("method", ["draft", "ngram"])
def test_generate_resolves_each_name_once(tiny_folders, resolves, method):
    draft = ["--draft", tiny_folders["draft"]] if method == "draft" else []
    result = generate("--model", tiny_folders["target"], *draft, "--method", method, "-k", "2", "--dtype", "float32")
    assert result.exit_code == 0, result.stderr
    expected = {tiny_folders["target"]: 1} | ({tiny_folders["draft"]: 1} if draft else {})
    assert dict(resolves) == expected


def test_generate_on_the_default_backend_resolves_the_target_once(tiny_folders, resolves):
    """--dtype auto asks whether ggml can run the model (it has no GGUF: torch runs it)."""
    result = generate("--model", tiny_folders["target"], "--method", "ngram", "-k", "2")
    assert result.exit_code == 0, result.stderr
    assert dict(resolves) == {tiny_folders["target"]: 1}
