"""Settings kept in the user's config file from the app (the advise screen's method and k):
the rest of the file as written, the result read back by the same parser, a bad file left alone."""

from __future__ import annotations

import pytest

from spectui.settings.config import ConfigError, load_config
from spectui.settings.config_edit import keep_settings, with_settings

WRITTEN = """# my settings
model = "smollm2-135m"  # the small one
k = 4
# method = "draft"

[keys]
help = "f1"
"""


def test_a_set_line_is_replaced_and_a_new_one_goes_above_the_first_table():
    changed = with_settings(WRITTEN, {"method": "suffix", "k": "auto"})
    assert changed == """# my settings
model = "smollm2-135m"  # the small one
k = "auto"
# method = "draft"
method = "suffix"

[keys]
help = "f1"
"""


def test_a_file_without_tables_gets_the_lines_at_its_end():
    assert with_settings("k = 2\n", {"k": 0, "lookup_min": 3}) == "k = 0\nlookup_min = 3\n"
    assert with_settings("", {"history_drafting": False}) == "history_drafting = false\n"


def test_keep_settings_writes_what_load_config_reads_back(tmp_path):
    path = tmp_path / "config" / "config.toml"
    assert keep_settings({"method": "ngram", "k": 3, "lookup_min": 3, "lookup_max": 8}, path) == path  # made
    config = load_config(path)
    assert (config.method, config.k, config.lookup_min, config.lookup_max) == ("ngram", 3, 3, 8)
    path.write_text(WRITTEN)
    keep_settings({"method": "suffix", "k": "auto", "history_drafting": False}, path)
    config = load_config(path)
    assert (config.model, config.method, config.k, config.history_drafting) == ("smollm2-135m", "suffix", "auto", False)
    assert "# my settings" in path.read_text() and config.keys["help"] == "f1"


def test_a_file_that_does_not_read_is_left_as_it_was(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('temperature = "hot"\n')
    with pytest.raises(ConfigError, match="temperature"):
        keep_settings({"k": 2}, path)
    assert path.read_text() == 'temperature = "hot"\n'
