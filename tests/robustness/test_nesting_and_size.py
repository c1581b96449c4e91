"""A record nested deeper than the JSON parser can recurse, or far too large, is one
quarantine row at its locator; the rest of its file still ingests (issue 22, item 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mmcurate.sources.base import MAX_RECORD_CHARS
from mmcurate.sources.ingest import MAX_SAMPLE_BYTES, ingest

DEPTH = 1200  # deeper than the standard library's parser recurses (about 1,000)
DEEP = '{"a":' * DEPTH + "1" + "}" * DEPTH
TOO_DEEP = "JSON nested too deeply to parse"


def _copy(fixtures_root: Path, source: str, tmp_path: Path) -> Path:
    root = tmp_path / source
    shutil.copytree(fixtures_root / source, root)
    return root


def _ingest(source: str, root: Path, out: Path) -> tuple[int, dict[str, str]]:
    result = ingest(source, root, out)
    return result.samples, {r["locator"]: r["reason"] for r in pq.read_table(result.quarantine_path).to_pylist()}


@pytest.mark.parametrize(
    "source, file",
    [("infoseek", "infoseek_val.jsonl"), ("viquae", "validation.jsonl"), ("mmdocrag", "dataset/dev_20.jsonl")],
)
def test_deep_jsonl_line(fixtures_root: Path, tmp_path: Path, source: str, file: str) -> None:
    root = _copy(fixtures_root, source, tmp_path)
    before, _ = _ingest(source, root, tmp_path / "before")
    path = root / file
    lines = path.read_text().count("\n") + (not path.read_text().endswith("\n"))
    path.write_text(path.read_text().rstrip("\n") + "\n" + DEEP + "\n")
    samples, quarantine = _ingest(source, root, tmp_path / "after")
    assert samples == before
    assert quarantine[f"{Path(file).name}:{lines + 1}"].endswith(TOO_DEEP)


@pytest.mark.parametrize(
    "source, shape",
    [
        ("webqa", "member"),
        ("gqa", "member"),
        ("fire", "item"),
        ("chartqa", "item"),
        ("textvqa", "data"),
        ("docvqa", "data"),
    ],
)
def test_deep_record_in_a_one_object_json_file(fixtures_root: Path, tmp_path: Path, source: str, shape: str) -> None:
    root = _copy(fixtures_root, source, tmp_path)
    before, _ = _ingest(source, root, tmp_path / "before")
    path = next(p for p in sorted(root.rglob("*.json")) if "test" not in p.name or source in ("fire", "chartqa"))
    text = path.read_text().rstrip()
    if shape == "member":
        text, where = text[:-1] + f', "deep": {DEEP}}}', "deep"
    elif shape == "item":
        where = str(len(json.loads(text)))
        text = text[:-1] + f", {DEEP}]"
    else:
        text, where = text.replace('"data": [', f'"data": [{DEEP}, ', 1), "data[0]"
    path.write_text(text)
    samples, quarantine = _ingest(source, root, tmp_path / "after")
    assert samples == before  # the records after the deep one are read too
    assert quarantine[f"{path.name}:{where}"] == f"malformed record: {TOO_DEEP}"


def test_jsonl_line_over_the_record_cap_is_quarantined_unread(fixtures_root: Path, tmp_path: Path) -> None:
    root = _copy(fixtures_root, "viquae", tmp_path)
    before, _ = _ingest("viquae", root, tmp_path / "before")
    path = root / "validation.jsonl"
    record = json.dumps({"id": "huge", "image": "x.jpg", "input": "q" * MAX_RECORD_CHARS, "output": {"answer": ["a"]}})
    lines = path.read_text().rstrip("\n").split("\n")
    path.write_text("\n".join([record, *lines]) + "\n")
    samples, quarantine = _ingest("viquae", root, tmp_path / "after")
    assert samples == before
    assert quarantine["validation.jsonl:1"] == f"line longer than {MAX_RECORD_CHARS} characters ({len(record)})"
    assert quarantine["validation.jsonl:10"].startswith("malformed record: Unterminated string")  # line 9 before


def test_sample_over_the_size_cap_is_quarantined(fixtures_root: Path, tmp_path: Path) -> None:
    """A one-object JSON file gives no line to cap: the stored sample row is capped instead."""
    root = _copy(fixtures_root, "gqa", tmp_path)
    path = root / "val_balanced_questions.json"
    questions = json.loads(path.read_text())
    first = next(iter(questions))
    questions[first]["question"] = "What is it? " * (MAX_SAMPLE_BYTES // 10)
    path.write_text(json.dumps(questions))
    _, quarantine = _ingest("gqa", root, tmp_path / "out")
    reason = quarantine[f"val_balanced_questions.json:{first}"]
    assert reason.startswith(f"sample larger than {MAX_SAMPLE_BYTES} bytes (")


def test_deep_entry_of_a_one_object_knowledge_base(fixtures_root: Path, tmp_path: Path) -> None:
    root = _copy(fixtures_root, "evqa", tmp_path)
    before, _ = _ingest("evqa", root, tmp_path / "before")
    kb = root / "encyclopedic_kb_wiki.json"
    articles = json.loads(kb.read_text())
    first = next(iter(articles))
    rest = json.dumps({url: article for url, article in articles.items() if url != first})
    kb.write_text("{" + json.dumps(first) + ": " + DEEP + ", " + rest[1:])
    samples, quarantine = _ingest("evqa", root, tmp_path / "after")
    assert quarantine[f"encyclopedic_kb_wiki.json:{first}"] == f"unreadable KB entry: {TOO_DEEP}"
    assert samples <= before  # the questions on that article lose their gold, the others keep theirs
