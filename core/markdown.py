"""The one markdown table renderer (dataset cards, reports, evaluation tables)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def cell(value: Any) -> str:
    """A value as table text: floats to 4 significant digits, lists and dicts as JSON."""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, sort_keys=True)
    else:
        text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, right: Iterable[str] = ()
) -> str:
    """Rows of dicts as a GitHub markdown table; columns in first-seen order unless given,
    those in ``right`` right-aligned. No rows: ``_(empty)_``."""
    if not rows:
        return "_(empty)_"
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    aligned = set(right)
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---:" if c in aligned else "---" for c in columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)
