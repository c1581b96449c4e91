"""Labelling batch files: written twice (JSONL and CSV, the same rows), read back with line
numbers so every bad label can be named as ``file:line``."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted
from mmcurate.core.tables import jsonl_objects
from mmcurate.releases.reader import refuse_inside_release

LIST_SEP = ";"  # how a list cell (document ids) is written in the CSV


def labels_in(out: Path, labels: Sequence[str]) -> int:
    """How many rows of the batch already in ``out`` (``batch.csv``, ``batch.jsonl``) have a
    ``labels`` cell filled in; a file that cannot be read counts as labelled (it may be)."""
    found = 0
    for path in (out / "batch.csv", out / "batch.jsonl"):
        if not path.is_file():
            continue
        try:
            rows = read_records(path, ()) if path.stat().st_size else []
        except (MmcurateError, OSError, UnicodeDecodeError, csv.Error):  # unreadable: it may hold labels
            return 1
        found = max(found, sum(any(str(record.get(c) or "").strip() for c in labels) for _, record in rows))
    return found


def refuse_inside_source(out: Path) -> None:
    """Refuse an ``--out`` inside a Python package (a folder with ``__init__.py``, such as the
    checkout's ``review/``, which is ``mmcurate.review``) or at the root of a source checkout:
    a batch with its images, Label Studio's database and its API token would land among the code."""
    resolved = out.resolve()
    for folder in (resolved, *resolved.parents):
        if (folder / "__init__.py").is_file():
            raise MmcurateError(
                f"--out {out} lies inside the Python package {folder} (source code); write the batch "
                "to a folder of its own, e.g. review-work/"
            )
    if (resolved / "pyproject.toml").is_file() or (resolved / ".git").exists():
        raise MmcurateError(
            f"--out {out} is the root of a source checkout; write the batch to a folder of its own, e.g. review-work/"
        )


def prepare_batch_folder(release: Path, out: Path, labels: Sequence[str], force: bool = False) -> None:
    """Refuse ``out`` when it lies inside a release (``release`` or any other) or the source
    (``refuse_inside_source``), or when a batch there already holds labels people filled in
    (unless ``force``): an export would overwrite them."""
    refuse_inside_release(out, "--out", release)
    refuse_inside_source(out)
    filled = labels_in(out, labels) if out.is_dir() else 0
    if filled and not force:
        raise MmcurateError(
            f"{out} holds a batch with {counted(filled, 'labelled row')} (batch.csv / batch.jsonl); "
            "export to another --out, or pass --force to replace it"
        )


def refuse_over_results(out: Path, results: Sequence[str], force: bool = False) -> None:
    """Refuse an import into ``out`` when it holds an earlier import's ``results`` (unless
    ``force``): imports are not merged, and replacing, say, two annotators' agreement by one's
    without a word loses it."""
    found = [name for name in results if (out / name).exists()]
    if found and not force:
        raise MmcurateError(
            f"{out} holds an earlier import ({', '.join(found)}); imports are not merged: import "
            "every annotator's labels at once to another --out, or pass --force to replace it"
        )


def labels_import(
    release: Path | str, files: Sequence[Path | str], out: Path | str, results: Sequence[str], force: bool = False
) -> tuple[Path, Path]:
    """The release and the output folder of an import of labelled ``files``, refused before any
    file is read: none given, an ``out`` inside the release, or an ``out`` holding an earlier
    import's ``results`` (unless ``force``)."""
    if not files:
        raise MmcurateError("give at least one labelled file")
    release, out = Path(release), Path(out)
    refuse_inside_release(out, "--out", release)
    refuse_over_results(out, results, force)
    return release, out


def write_batch(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], out: Path) -> tuple[Path, Path]:
    """``out/batch.jsonl`` and ``out/batch.csv`` with ``columns`` (lists joined by ``;`` in the CSV)."""
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "batch.jsonl"
    jsonl.write_text(
        "".join(json.dumps({c: r[c] for c in columns}, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    csv_path = out / "batch.csv"
    with csv_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        for r in rows:
            writer.writerow({c: LIST_SEP.join(r[c]) if isinstance(r[c], list) else r[c] for c in columns})
    return jsonl, csv_path


def read_records(path: Path, required: Sequence[str], what: str = "labelled") -> list[tuple[int, dict[str, Any]]]:
    """(line, record) of a labelled CSV or JSONL file; a CSV must have the ``required`` columns;
    ``what`` names its rows in errors ("labelled", "rated")."""
    if not path.is_file():
        raise MmcurateError(f"{path}: no such file")
    if path.suffix == ".jsonl":
        return list(jsonl_objects(path, f"{what} row"))
    if path.suffix != ".csv":
        raise MmcurateError(f"{path}: {what} files must be .csv or .jsonl")
    out: list[tuple[int, dict[str, Any]]] = []
    with path.open(encoding="utf-8-sig", newline="") as handle:  # spreadsheets often save a byte-order mark
        reader = csv.DictReader(handle)
        start = 1
        try:
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise MmcurateError(f"{path}:1: missing {counted(len(missing), 'column')}: {', '.join(missing)}")
            start = reader.line_num + 1
            for record in reader:
                out.append((start, record))
                start = reader.line_num + 1
        except UnicodeDecodeError:
            raise MmcurateError(f"{path}:{start}: not UTF-8 text (save the file as UTF-8)") from None
    return out


def cell_list(value: Any) -> list[str]:
    """A list cell as written by ``write_batch``: a JSON list, or ``;``-separated text in a CSV."""
    if isinstance(value, list):
        return [str(v).strip() for v in value]
    text = "" if value is None else str(value)
    return [part.strip() for part in text.split(LIST_SEP)] if text.strip() else []
