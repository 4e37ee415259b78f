"""Every `spectui …` command shown in README.md, benchmarks/README.md and docs/*.md parses with the real CLI.

Commands are taken from fenced code blocks (each line; `\\` continuations joined; `$ ` prompts,
`&&`, `;` and `|` split) and from inline code that starts with `spectui `. Each is parsed with
click's make_context, which checks commands, options, choices, types and required arguments
but runs nothing. Conventions a shown command may use:

- a placeholder is an ALL-CAPS word (PROMPT, ID, DIR, URL, HOST:8000, FILE) or `<…>`; it is
  parsed as the value 1, which every option type here accepts;
- `[…]` marks an optional part: it is checked as if given;
- `a|b` inside one word lists alternatives: each is checked;
- `...` or `…` alone is an elision and dropped; inside quotes it is just text.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest
import typer.main
from typer import Exit, TyperException  # typer vendors click; its usage errors derive from this

from spectui.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 300

PLACEHOLDER = re.compile(r"^(<[^>]+>|[A-Z][A-Z0-9_]*(:[0-9]+)?|[0-9]+\.\.[0-9]+)$")
ELISION = {"...", "…"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _segments(line: str) -> list[str]:
    """The parts of a shell line that could be one command each."""
    return [part.strip() for part in re.split(r"&&|\|\||;|(?<=\s)\|(?=\s)", line) if part.strip()]


def _from_fences(text: str) -> list[str]:
    found = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"^\s*\$\s+", "", line)
            found.extend(segment for segment in _segments(line) if "spectui " in segment)
    return found


def _from_inline(text: str) -> list[str]:
    outside_fences = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    spans = (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", outside_fences))
    return [span for span in spans if span.startswith("spectui ")]


def shown_commands(text: str) -> list[str]:
    return _from_fences(text) + _from_inline(text)


def _argv_variants(command: str) -> list[list[str]]:
    """The spectui arguments of one shown command, one list per combination of alternatives."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as error:
        raise AssertionError(f"{command!r}: not a shell command ({error})") from None
    while words and ASSIGNMENT.match(words[0]):  # NO_COLOR=1 spectui …
        words.pop(0)
    if not words or words[0] != "spectui":
        return []
    choices = []
    for word in words[1:]:
        word = word.strip("[]") if word.startswith("[") or word.endswith("]") else word
        if not word or word in ELISION:
            continue
        alternatives = word.split("|") if "|" in word and not word.startswith("{") else [word]
        choices.append(["1" if PLACEHOLDER.match(a) else a for a in alternatives])
    return [list(combination) for combination in itertools.product(*choices)]


def parse_without_running(argv: list[str]) -> None:
    """Resolve the sub-command and parse its options; raise click's error if any is wrong."""
    command = typer.main.get_command(app)
    name, parent, args = "spectui", None, list(argv)
    while True:
        try:
            context = command.make_context(name, args, parent=parent, resilient_parsing=False)
        except Exit as done:  # --help, --version: parsed fine
            if done.exit_code == 0:
                return
            raise
        if not hasattr(command, "resolve_command"):  # a command, not a group
            return
        rest = [*getattr(context, "_protected_args", []), *context.args]
        if not rest:
            return
        name, command, args = command.resolve_command(context, rest)
        parent = context


def problems_in(text: str) -> list[str]:
    problems = []
    for command in shown_commands(text):
        for argv in _argv_variants(command):
            try:
                parse_without_running(argv)
            except TyperException as error:
                problems.append(f"{command!r} -> spectui {shlex.join(argv)}: {error}")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shown_command_parses(doc):
    problems = problems_in(doc.read_text(encoding="utf-8"))
    assert not problems, "commands that the CLI refuses:\n" + "\n".join(problems)


def test_the_docs_show_commands():
    """The extractor must find the commands (a regex that matched nothing would pass all)."""
    readme = shown_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(readme) >= 20
    assert any(c.startswith("spectui chat") for c in readme)


def test_readme_is_a_short_guide():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the guide keeps to {README_MAX_LINES}"


@pytest.mark.parametrize(
    "text",
    [
        "```sh\nspectui chat --modle x\n```",
        "Run `spectui chats` to start.",
        "```sh\n$ spectui models fetch\n```",  # a required argument missing
        "```\nspectui generate PROMPT --method draft|nope\n```",  # one alternative is no choice
        "```\nspectui compare PROMPT \\\n  --runs many\n```",  # continued line, a bad integer
        "```\nspectui chat --engine server --server URL && spectui history list --jsn\n```",
    ],
)
def test_a_wrong_command_is_caught(text):
    assert problems_in(text)


@pytest.mark.parametrize(
    "text",
    [
        "```sh\nspectui chat --resume [ID]\nspectui bench --k 0,2,auto --contended\n```",
        "`spectui heads train --model M --kind medusa|eagle [--steps N]`",
        "```\ncat f.py | NO_COLOR=1 spectui generate 'explain this' - --plain  # comment\n```",
        "```\nspectui --help\nspectui history export ID -f jsonl -o out.jsonl\n```",
    ],
)
def test_a_right_command_passes(text):
    assert shown_commands(text)
    assert not problems_in(text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file(doc):
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8"))
    missing = [t for t in targets if "://" not in t and not (doc.parent / t).exists()]
    assert not missing, f"{doc.name} links to files that do not exist: {missing}"
