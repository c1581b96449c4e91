"""Which release an evaluation run evaluated: ``<run>/release.json`` with its benchmark, version
and content id (``Release.content_id``), so two releases that share a name are never compared
as one run of the same release (``evaluation.compare``); the model and answering system, so a
run never merges its rows into another model's folder (``evaluation.runs``); and what the run was
asked with (a DeflectionBench run's decoding settings, ``evaluation.decoding``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmcurate.core.errors import MmcurateError

RELEASE_FILE = "release.json"


def record_release(
    out: Path,
    benchmark: str,
    version: str,
    content_id: str,
    model: str | None = None,
    system: str | None = None,
    **run: Any,
) -> Path:
    """Write ``out/release.json``; ``run``: what else the run records (e.g. its ``decoding``)."""
    path = out / RELEASE_FILE
    record = {
        "benchmark": benchmark,
        "version": version,
        "content_id": content_id,
        "model": model,
        "system": system,
        **run,
    }
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}, indent=2) + "\n")
    return path


def recorded_run(run: Path) -> dict[str, Any]:
    """What ``run/release.json`` records (empty for a run written before runs recorded it)."""
    path = run / RELEASE_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except ValueError:
        raise MmcurateError(f"{path} is not JSON") from None
    if not isinstance(value, dict):
        raise MmcurateError(f"{path} does not hold a JSON object")
    return value


def recorded_content_id(run: Path) -> str | None:
    """The content id a run folder recorded, or None for a run written before runs recorded it."""
    path = run / RELEASE_FILE
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["content_id"]
    except (ValueError, KeyError, TypeError):
        value = None
    if not isinstance(value, str):
        raise MmcurateError(f"{path} does not name the evaluated release's content_id")
    return value
