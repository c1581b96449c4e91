"""The adapter base: split discovery, the JSONL reader and image-store reasons."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from mmcurate.core.errors import SourceError
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample
from mmcurate.sources.base import JsonLine, SourceAdapter, jsonl_records
from mmcurate.sources.ingest import ingest


class Bare(SourceAdapter):
    name = "bare"

    def records(self) -> Iterator[Sample | Rejected]:
        return iter(())

    def source_files(self) -> list[Path]:
        return []


def jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (10, 200, 30)).save(buf, format="JPEG")
    return buf.getvalue()


def test_split_files_present_chosen_and_missing(tmp_path: Path) -> None:
    for name in ("val.jsonl", "test.jsonl"):
        (tmp_path / name).write_text("{}\n")
    adapter = Bare(tmp_path, ImageStore(tmp_path / "s"))
    name = "{}.jsonl".format
    assert adapter.split_files(None, ("train", "val", "test"), name) == {
        "val": tmp_path / "val.jsonl",
        "test": tmp_path / "test.jsonl",
    }
    assert list(adapter.split_files(["test", "val", "test"], ("train", "val", "test"), name)) == ["test", "val"]
    with pytest.raises(SourceError, match="bare: train.jsonl missing under"):
        adapter.split_files(["train", "val"], ("train", "val", "test"), name)
    with pytest.raises(SourceError, match="bare: none of a.csv, b.csv found under"):
        adapter.split_files(None, ("a", "b"), "{}.csv".format)


def test_jsonl_records_locates_every_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl.gz"
    lines = ['{"a": 1}', "", '{"a": ', "[1, 2]", '\ufeff{"b": 2}', '  {"c": 3}  ']
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\ufeff" + "\n".join(lines) + "\n")
    items = list(jsonl_records(path, "bad line"))
    assert items[0] == JsonLine("q.jsonl.gz:1", {"a": 1}, '{"a": 1}')
    assert items[1] == Rejected("q.jsonl.gz:3", "bad line: Expecting value: line 1 column 7 (char 6)", '{"a":')
    assert items[2] == Rejected("q.jsonl.gz:4", "bad line: expected a JSON object, got list", "[1, 2]")
    assert isinstance(items[3], Rejected) and items[3].locator == "q.jsonl.gz:5"  # a BOM inside the file
    assert items[4] == JsonLine("q.jsonl.gz:6", {"c": 3}, '{"c": 3}')
    assert [i.locator for i in jsonl_records(path, keep=lambda line: '"c"' in line)] == ["q.jsonl.gz:6"]


def test_two_ingests_of_unreadable_images_write_the_same_quarantine(tmp_path: Path) -> None:
    root = tmp_path / "raw"
    (root / "images").mkdir(parents=True)
    (root / "images" / "junk.jpg").write_bytes(b"not an image at all")
    (root / "images" / "good.jpg").write_bytes(jpeg())
    rows = [
        {"id": i, "image": image, "input": "Who is this?", "output": {"answer": ["Paris"]}}
        for i, image in (("v1", "junk.jpg"), ("v2", "good.jpg"), ("v3", "x" * 300 + ".jpg"))
    ]
    (root / "validation.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    first = ingest("viquae", root, tmp_path / "a")
    second = ingest("viquae", root, tmp_path / "b")
    table = pq.read_table(first.quarantine_path)
    assert table.equals(pq.read_table(second.quarantine_path))
    reasons = dict(zip(table["locator"].to_pylist(), table["reason"].to_pylist()))
    assert reasons["validation.jsonl:1"] == "undecodable image: UnidentifiedImageError: cannot identify image file"
    assert " at 0x" not in reasons["validation.jsonl:3"] and str(tmp_path) not in reasons["validation.jsonl:3"]
