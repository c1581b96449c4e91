"""Shared by the review tests: ``write_labels`` saves filled-in batch rows the way annotators
hand them back (JSONL or CSV)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest


@pytest.fixture
def write_labels():
    def write(path: Path, rows: list[dict], joined: tuple[str, ...] = ()) -> Path:
        """``rows`` as JSONL or CSV by the path's suffix; in CSV the list fields ``joined`` are
        written ``;``-separated."""
        if path.suffix == ".jsonl":
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            with path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows({**r, **{k: ";".join(r[k]) for k in joined}} for r in rows)
        return path

    return write
