"""What `spectui generate` writes: the model's text never obeyed by the terminal, accepted
drafts told apart from target tokens with colours, without them (NO_COLOR), on a terminal
without styles, and nothing added with --plain; --raw gives the exact text."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given, settings, strategies as st
from rich.console import Console
from typer.testing import CliRunner

from spectui.cli import render
from spectui.cli.app import app as cli
from spectui.core.events import Source, Step
from spectui.core.safe_text import safe_text

from fake_engines import StepsEngine

D, R, B, T = Source.DRAFT, Source.RECOVERED, Source.BONUS, Source.TARGET
ATTACK = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\x9bH"
SGR = re.compile(r"\x1b\[[0-9;]*m")  # what rich itself writes for a style
OBEYED = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


# "def" and " add" accepted drafts, "(" recovered; then "a" a plain target token.
STEPS = [
    Step((1, 2, 3), (D, D, R), "def add(", pieces=("def", " add", "("), drafted=(1, 2, 9), k=3),
    Step((4,), (T,), "a" + ATTACK, pieces=("a" + ATTACK,)),
]


def generate(monkeypatch, *options: str, env: dict | None = None, steps=STEPS):
    from spectui.engines import factory

    monkeypatch.setattr(factory, "_build", lambda engine_options, models, progress: StepsEngine(steps))
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLORTERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["generate", "hello", *options])
    assert result.exit_code == 0, result.output
    return result


def styled_runs(output: str) -> list[tuple[str, str]]:
    """(SGR parameters in force, text) for each run of text rich wrote."""
    runs, style = [], ""
    for part in re.split(r"(\x1b\[[0-9;]*m)", output):
        if SGR.fullmatch(part):
            style = part[2:-1] if part != "\x1b[0m" else ""
        elif part:
            runs.append((style, part))
    return runs


def test_colour_terminal_keeps_the_colours_and_shows_controls(monkeypatch):
    output = generate(monkeypatch, env={"FORCE_COLOR": "1", "TERM": "xterm-256color"}).stdout
    runs = styled_runs(output)
    assert ("32", "def") in runs and ("32", " add") in runs  # green drafts, as before
    assert "␛]0;pwned␇␛[2J␛[31m\\x9bH" in output
    assert not OBEYED.search(SGR.sub("", output).replace("\n", ""))


def test_no_color_underlines_accepted_drafts_and_uses_no_colour(monkeypatch):
    output = generate(monkeypatch, env={"FORCE_COLOR": "1", "NO_COLOR": "1", "TERM": "xterm-256color"}).stdout
    runs = styled_runs(output)
    assert ("4", "def") in runs and ("4", " add") in runs
    assert ("1", "(") in runs  # the target's correction: bold
    assert [style for style, text in runs if text.startswith("a␛")] == [""]  # a target token: plain
    colours = [style for style, _ in runs if re.search(r"(^|;)(3[0-9]|9[0-7]|38)", style)]
    assert colours == []


def test_a_terminal_without_styles_marks_the_drafts_and_plain_removes_the_marks(monkeypatch):
    dumb = {"FORCE_COLOR": "1", "TERM": "dumb"}
    marked = generate(monkeypatch, env=dumb)
    assert marked.stdout.startswith("⟦def add⟧(a␛]0;pwned")
    assert "⟦accepted draft⟧" in marked.stderr
    plain = generate(monkeypatch, "--plain", env=dumb)
    assert plain.stdout.startswith("def add(a␛]0;pwned")
    assert "\x1b" not in plain.stdout


def test_piped_output_is_the_text_with_controls_shown_and_raw_is_exact(monkeypatch):
    piped = generate(monkeypatch).stdout
    assert piped == "def add(a␛]0;pwned␇␛[2J␛[31m\\x9bH\n"
    raw = generate(monkeypatch, "--raw").stdout
    assert raw == "def add(a" + ATTACK + "\n"
    as_json = generate(monkeypatch, "--json").stdout
    assert not OBEYED.search(as_json.rstrip("\n"))  # json.dumps escapes them
    assert json.loads(as_json)["text"] == "def add(a" + ATTACK


def test_raw_on_a_terminal_warns_in_one_line_and_raw_to_a_pipe_does_not(monkeypatch):
    on_terminal = generate(monkeypatch, "--raw", env={"FORCE_COLOR": "1", "TERM": "xterm-256color"})
    assert on_terminal.stdout == "def add(a" + ATTACK + "\n"  # still exact: the user asked for it
    warnings = [line for line in on_terminal.stderr.splitlines() if "--raw" in line]
    assert len(warnings) == 1 and "unfiltered" in warnings[0]
    piped = generate(monkeypatch, "--raw")
    assert "--raw" not in piped.stderr


def test_bidi_controls_in_a_reply_are_shown_not_laid_out(monkeypatch):
    # "safe", RIGHT-TO-LEFT OVERRIDE, "txt.exe" would read "safeexe.txt" on the terminal.
    steps = [Step((1,), (T,), "safe\u202etxt.exe \u2066x\u2069", pieces=("safe\u202etxt.exe \u2066x\u2069",))]
    for env in ({}, {"FORCE_COLOR": "1", "TERM": "xterm-256color"}, {"FORCE_COLOR": "1", "TERM": "dumb"}):
        output = generate(monkeypatch, env=env, steps=steps).stdout
        assert "safe\\u202etxt.exe \\u2066x\\u2069" in output
        assert not re.search("[\u202a-\u202e\u2066-\u2069]", output)


def test_help_documents_raw_and_plain(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(cli, ["generate", "--help"])
    assert "--raw" in result.stdout and "--plain" in result.stdout and "NO_COLOR" in result.stdout


def render_to_terminal(text: render.Text, **console_options) -> str:
    console = Console(file=io.StringIO(), force_terminal=True, width=200, **console_options)
    console.print(text, end="", soft_wrap=True)
    return console.file.getvalue()


SOURCE = st.sampled_from([D, R, B, T])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.tuples(st.text(max_size=12), SOURCE), min_size=1, max_size=8), raw=st.binary(max_size=40))
def test_fuzz_no_look_lets_a_control_through(pieces, raw):
    pieces = pieces + [(raw.decode("utf-8", "replace"), T)]
    text = "".join(piece for piece, _ in pieces)
    step = Step(tuple(range(len(pieces))), tuple(source for _, source in pieces), text, pieces=tuple(p for p, _ in pieces))
    for look, options in (
        (render.Look.COLOUR, {"color_system": "truecolor"}),
        (render.Look.SHAPES, {"color_system": "standard", "no_color": True}),
        (render.Look.MARKERS, {"color_system": None}),
        (render.Look.PLAIN, {"color_system": None}),
    ):
        written = render_to_terminal(render.step_text(step, look), **options)
        assert not OBEYED.search(SGR.sub("", written).replace("\n", "")), (look, written)
        if look is render.Look.PLAIN:  # the text itself, tabs expanded
            assert re.sub(r"\s", "", written) == re.sub(r"\s", "", safe_text(text))


@pytest.mark.parametrize("engine_text", ["[bold]x[/]", "[/nope]", ATTACK])
def test_error_and_summary_lines_are_never_markup(engine_text):
    line = render.shown(f"spectui: error: {engine_text}")
    written = render_to_terminal(line, color_system=None)
    assert written == safe_text(f"spectui: error: {engine_text}")
