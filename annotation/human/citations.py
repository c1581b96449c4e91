"""Human verification of RefLVQA citations (seed paper 3.4): labelling export and import.

Export samples N items from a release. An item is one answer sentence that has at least
one cited document, shown with the question, the answer and its cited documents. Each
annotator fills three yes/no columns, the paper's annotation questions:

- ``needs_verification``: does the sentence need fact verification?
- ``documents_support``: do the cited documents support the sentence?
- ``sentence_grounded``: is the sentence grounded by the documents?

and may fill ``annotator`` (else the file name stands for the annotator). The batch is
written twice, ``batch.jsonl`` and ``batch.csv``, with the same rows.

Import reads one labelled file per annotator (CSV or JSONL, as exported), validates every
label (a bad one raises one line naming ``file:line``), and writes, beside and never into
the immutable release, ``human_verified.parquet``: one row per labelled item with the yes
counts and ``human_verified`` = a strict majority of its annotators said the documents
support the sentence AND that it is grounded. Agreement per question goes to
``agreement.json``: Cohen's kappa for two annotators, Fleiss' kappa for three or more, and
raw agreement, over the items every annotator labelled. A row whose three labels are all
empty is an item the annotator did not do; a partly filled row is an error.
"""
from __future__ import annotations

import csv
import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.tables import jsonl_objects, write_table

from .agreement import agreement_summary

QUESTIONS = ("needs_verification", "documents_support", "sentence_grounded")
LABELS = ("yes", "no")
COLUMNS = (
    "item_id", "sample_id", "sentence_index", "question", "answer", "sentence",
    "document_ids", "documents", *QUESTIONS, "annotator",
)
DOC_SEP = "\n\n"
HUMAN_VERIFIED = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("sentence_index", pa.int32(), nullable=False),
        pa.field("annotators", pa.int32(), nullable=False),
        *(pa.field(f"{q}_yes", pa.int32(), nullable=False) for q in QUESTIONS),
        pa.field("human_verified", pa.bool_(), nullable=False),
    ]
)


def item_id(sample_id: str, index: int) -> str:
    return f"{sample_id}:{index}"


def _shards(release: Path, config: str) -> list[str]:
    paths = sorted((release / "data").glob(f"{config}-*.parquet"))
    if not paths:
        raise MmcurateError(f"{release}: no data/{config}-*.parquet (is this a RefLVQA release folder?)")
    return [str(p) for p in paths]


def _outside(release: Path, out: Path) -> None:
    """Refuse an output folder inside the (immutable, checksummed) release."""
    if out.resolve() == release.resolve() or release.resolve() in out.resolve().parents:
        raise MmcurateError(f"--out {out} lies inside the release; releases are immutable, write elsewhere")


def release_items(release: Path | str) -> list[dict[str, Any]]:
    """Every sentence of the release that has at least one cited document, as a labelling item."""
    release = Path(release)
    qa = pl.read_parquet(_shards(release, "qa"), columns=["sample_id", "question", "answer", "sentences"])
    docs = pl.read_parquet(_shards(release, "documents"), columns=["doc_id", "modality", "text", "image", "title"])
    by_id = {d["doc_id"]: d for d in docs.to_dicts()}
    items = []
    for row in qa.to_dicts():
        for s in row["sentences"] or []:
            cited = [*(s["text_citations"] or []), *(s["image_citations"] or [])]
            if not cited:
                continue
            missing = [d for d in cited if d not in by_id]
            if missing:
                raise MmcurateError(f"{release}: cited document {missing[0]!r} is not in the documents table")
            items.append({
                "item_id": item_id(row["sample_id"], s["index"]), "sample_id": row["sample_id"],
                "sentence_index": int(s["index"]), "question": row["question"], "answer": row["answer"],
                "sentence": s["text"], "document_ids": cited,
                "documents": DOC_SEP.join(_render(by_id[d]) for d in cited),
            })
    return items


def _render(doc: dict[str, Any]) -> str:
    if doc["modality"] == "image":
        return f"[{doc['doc_id']}] image sha256 {doc['image']}"
    title = f"{doc['title']}: " if doc.get("title") else ""
    return f"[{doc['doc_id']}] {title}{doc['text']}"


@dataclass(frozen=True)
class ExportResult:
    items: int
    available: int
    jsonl: Path
    csv: Path


def export_batch(release: Path | str, n: int, out: Path | str, seed: int = 0) -> ExportResult:
    """Sample ``n`` items (all if fewer exist), seeded, into ``out/batch.{jsonl,csv}``."""
    if n < 1:
        raise MmcurateError(f"--n must be at least 1, got {n}")
    items = sorted(release_items(release), key=lambda i: i["item_id"])
    if not items:
        raise MmcurateError(f"{release}: no sentence has a cited document; nothing to verify")
    chosen = random.Random(seed).sample(items, min(n, len(items)))
    out = Path(out)
    _outside(Path(release), out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{**item, **{q: "" for q in QUESTIONS}, "annotator": ""} for item in chosen]
    jsonl = out / "batch.jsonl"
    jsonl.write_text("".join(json.dumps({c: r[c] for c in COLUMNS}, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    csv_path = out / "batch.csv"
    with csv_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow({**{c: r[c] for c in COLUMNS}, "document_ids": ";".join(r["document_ids"])})
    return ExportResult(len(rows), len(items), jsonl, csv_path)


# ---------------------------------------------------------------------------- import
def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, record) of a labelled CSV or JSONL file."""
    if not path.is_file():
        raise MmcurateError(f"{path}: no such file")
    out: list[tuple[int, dict[str, Any]]] = []
    if path.suffix == ".jsonl":
        out = list(jsonl_objects(path, "labelled row"))
    elif path.suffix == ".csv":  # utf-8-sig: spreadsheets often save a byte-order mark first
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            start = 1
            try:
                missing = [c for c in ("item_id", *QUESTIONS) if c not in (reader.fieldnames or [])]
                if missing:
                    raise MmcurateError(f"{path}:1: missing column(s) {', '.join(missing)}")
                start = reader.line_num + 1
                for record in reader:
                    out.append((start, record))
                    start = reader.line_num + 1
            except UnicodeDecodeError:
                raise MmcurateError(f"{path}:{start}: not UTF-8 text (save the file as UTF-8)") from None
    else:
        raise MmcurateError(f"{path}: labelled files must be .csv or .jsonl")
    return out


def read_labels(path: Path | str, known: set[str] | None = None) -> tuple[str, dict[str, dict[str, str]]]:
    """(annotator, {item_id: {question: yes/no}}) of one labelled file; raise on any bad row."""
    path = Path(path)
    labels: dict[str, dict[str, str]] = {}
    names: set[str] = set()
    for line, record in _records(path):
        where = f"{path}:{line}"
        item = str(record.get("item_id") or "").strip()
        if not item:
            raise MmcurateError(f"{where}: missing item_id")
        if known is not None and item not in known:
            raise MmcurateError(f"{where}: item_id {item!r} is not a cited sentence of this release")
        raw = {q: record.get(q) for q in QUESTIONS}
        values = {q: "" if v is None else str(v).strip().lower() for q, v in raw.items()}
        if all(v == "" for v in values.values()):
            continue  # not labelled by this annotator
        for q, v in values.items():
            if v not in LABELS:
                shown = "empty" if v == "" else repr(raw[q])
                raise MmcurateError(f"{where}: {q} is {shown}; expected yes or no")
        if item in labels:
            raise MmcurateError(f"{where}: item_id {item!r} labelled twice")
        annotator = str(record.get("annotator") or "").strip()
        if annotator:
            names.add(annotator)
        labels[item] = values
    if len(names) > 1:
        raise MmcurateError(f"{path}: one file per annotator, found annotators {sorted(names)}")
    return (names.pop() if names else path.stem), labels


@dataclass(frozen=True)
class ImportResult:
    annotators: list[str]
    items: int
    verified: int
    agreement: dict[str, dict[str, Any]]  # question -> agreement_summary
    path: Path
    agreement_path: Path


def import_labels(release: Path | str, files: list[Path | str], out: Path | str) -> ImportResult:
    """Validate labelled files, write ``out/human_verified.parquet`` and ``out/agreement.json``."""
    if not files:
        raise MmcurateError("give at least one labelled file")
    release, out = Path(release), Path(out)
    _outside(release, out)
    items = {i["item_id"]: i for i in release_items(release)}
    per_annotator: dict[str, dict[str, dict[str, str]]] = {}
    for file in files:
        name, labels = read_labels(file, set(items))
        if name in per_annotator:
            raise MmcurateError(f"{file}: annotator {name!r} already given by another file")
        per_annotator[name] = labels
    labelled = sorted({i for labels in per_annotator.values() for i in labels})
    if not labelled:
        raise MmcurateError("no labelled item in the given files")
    rows = []
    for item in labelled:
        votes = [labels[item] for labels in per_annotator.values() if item in labels]
        yes = {q: sum(v[q] == "yes" for v in votes) for q in QUESTIONS}
        majority = len(votes) / 2
        verified = yes["documents_support"] > majority and yes["sentence_grounded"] > majority
        rows.append({
            "item_id": item, "sample_id": items[item]["sample_id"],
            "sentence_index": items[item]["sentence_index"], "annotators": len(votes),
            **{f"{q}_yes": yes[q] for q in QUESTIONS}, "human_verified": verified,
        })
    agreement = {
        q: agreement_summary({a: {i: v[q] for i, v in labels.items()} for a, labels in per_annotator.items()})
        for q in QUESTIONS
    }
    out.mkdir(parents=True, exist_ok=True)
    path = write_table(pa.Table.from_pylist(rows, schema=HUMAN_VERIFIED), out / "human_verified.parquet")
    report = {
        "release": str(release), "annotators": sorted(per_annotator), "items": len(rows),
        "human_verified": sum(r["human_verified"] for r in rows),
        "rule": "strict majority says documents_support=yes and sentence_grounded=yes",
        "agreement": agreement,
        "labels": {q: dict(Counter(v[q] for ls in per_annotator.values() for v in ls.values())) for q in QUESTIONS},
    }
    agreement_path = out / "agreement.json"
    agreement_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return ImportResult(sorted(per_annotator), len(rows), report["human_verified"], agreement, path, agreement_path)
