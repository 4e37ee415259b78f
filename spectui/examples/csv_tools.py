"""Small helpers for CSV files: read rows, pick columns, sum and group, write them back.

spectui's first screen offers this file for a copy-heavy first request ("add type hints to
this module"): most of the reply repeats the file, so drafts that copy from it are kept.
Plain Python on purpose, without type hints.
"""

import csv
import io
from collections import defaultdict


def read_rows(path, delimiter=","):
    """Every row of the file as a dict keyed by the header's names."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter=delimiter))


def parse_text(text, delimiter=","):
    """Rows from CSV text already in memory."""
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


def column(rows, name, default=None):
    """One column's values, `default` where a row lacks it."""
    return [row.get(name, default) for row in rows]


def to_number(value, default=0.0):
    """A cell as a float; blank or unreadable cells give `default`."""
    if value is None:
        return default
    text = str(value).strip().replace("_", "")
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        return default


def total(rows, name):
    """The sum of a numeric column."""
    return sum(to_number(value) for value in column(rows, name))


def group_by(rows, key):
    """Rows grouped by one column's value, in the order the values first appear."""
    groups = defaultdict(list)
    for row in rows:
        groups[row.get(key, "")].append(row)
    return dict(groups)


def totals_by(rows, key, name):
    """The sum of column `name` for each value of column `key`."""
    return {value: total(group, name) for value, group in group_by(rows, key).items()}


def select(rows, names):
    """Only the columns in `names`, in that order."""
    return [{name: row.get(name, "") for name in names} for row in rows]


def where(rows, name, wanted):
    """The rows whose column `name` holds `wanted` (compared as text)."""
    return [row for row in rows if row.get(name) == str(wanted)]


def sort_rows(rows, name, numeric=False, reverse=False):
    """The rows ordered by one column, as numbers when `numeric`."""
    def key(row):
        value = row.get(name, "")
        return to_number(value) if numeric else value

    return sorted(rows, key=key, reverse=reverse)


def write_rows(path, rows, names=None, delimiter=","):
    """Write rows to a file with a header; the columns are `names` or the first row's keys."""
    if names is None:
        names = list(rows[0]) if rows else []
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names, delimiter=delimiter, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def summary(rows, key, name):
    """A line per group: its value, how many rows, and the column's total."""
    lines = []
    for value, group in group_by(rows, key).items():
        lines.append(f"{value}: {len(group)} rows, {name} {total(group, name):.2f}")
    return "\n".join(lines)
