"""One name for each token source wherever a user reads it: the target's token at the first
rejected draft is a "correction" (README, F1 help, the first screen, `spectui generate`'s
legend). `recovered` stays the identifier in code, themes and trace files."""

from __future__ import annotations

from pathlib import Path

from spectui.cli.render import Look, legend
from spectui.tui.screens.help import GLOSSARY, LEGEND
from spectui.tui.widgets.first_screen import LEGEND as FIRST_SCREEN_LEGEND

ROOT = Path(__file__).resolve().parents[1]


def test_the_correction_has_one_name_wherever_a_user_reads_it():
    generate = legend(Look.COLOUR)
    assert generate is not None and generate.plain == "accepted draft · correction · bonus · target"
    help_legend = {kind: text.strip() for text, kind in LEGEND if text.strip()}
    assert help_legend["recovered"] == "correction" and "correction" in dict(GLOSSARY)
    assert {kind: sample.strip() for kind, sample, _ in FIRST_SCREEN_LEGEND}["recovered"] == "correction"
    shown = [generate.plain, *help_legend.values(), *(f"{term} {meaning}" for term, meaning in GLOSSARY),
             *(f"{sample} {meaning}" for _, sample, meaning in FIRST_SCREEN_LEGEND), (ROOT / "README.md").read_text()]
    assert [text for text in shown if "recovered" in text.lower()] == []
