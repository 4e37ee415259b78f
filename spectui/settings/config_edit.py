"""A few top-level settings written into the user's config file, the rest of it kept as written
(comments, [keys], other settings): how the chat keeps a choice made in the app (the advise
screen's method and k) for the next `spectui chat`. Checked by the same parser that reads it."""

from __future__ import annotations

import re
from pathlib import Path

from spectui.core.files import write_user_file
from spectui.settings.config import ConfigError, _toml_value, config_path, parse_config

TABLE = re.compile(r"^\s*\[")


def with_settings(text: str, values: dict[str, object]) -> str:
    """`text` with each name's top-level line set to its value (added above the first table
    when the file has none); a commented-out line stays a comment."""
    lines = text.splitlines()
    first_table = next((index for index, line in enumerate(lines) if TABLE.match(line)), len(lines))
    added = []
    for name, value in values.items():
        line = f"{name} = {_toml_value(value)}"
        pattern = re.compile(rf"^\s*\"?{re.escape(name)}\"?\s*=")
        found = next((index for index in range(first_table) if pattern.match(lines[index])), None)
        if found is None:
            added.append(line)
        else:
            lines[found] = line
    end = first_table  # after the top level's last line, before the blank lines above a table
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    lines[end:end] = added
    return "\n".join(lines) + "\n"


def keep_settings(values: dict[str, object], path: Path | None = None) -> Path:
    """Write `values` into the config file (made if missing); ConfigError in one line when the
    file cannot be read or written, or would not read back (it is then left as it was)."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it ({getattr(error, 'strerror', None) or error})") from None
    changed = with_settings(text, values)
    parse_config(changed, str(path))  # a file that does not read is refused here, not at the next start
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_user_file(path, changed, overwrite=True)
    except OSError as error:
        raise ConfigError(f"{path}: cannot write it ({error.strerror or error})") from None
    return path
