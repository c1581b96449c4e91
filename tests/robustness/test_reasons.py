"""Quarantine reasons say what is wrong, where, with what the file held (issue 22, item 14)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from mmcurate.sources.ingest import ingest


def jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buf, format="JPEG")
    return buf.getvalue()


def quarantine(source: str, root: Path, out: Path) -> dict[str, dict]:
    result = ingest(source, root, out)
    return {row["locator"]: row for row in pq.read_table(result.quarantine_path).to_pylist()}


def viquae_root(tmp_path: Path, lines: list[bytes]) -> Path:
    root = tmp_path / "viquae"
    (root / "images").mkdir(parents=True)
    (root / "images" / "good.jpg").write_bytes(jpeg())
    (root / "validation.jsonl").write_bytes(b"\n".join(lines))
    return root


def record(ident: str, **fields: object) -> bytes:
    return json.dumps(
        {"id": ident, "image": "good.jpg", "input": "Who is this?", "output": {"answer": ["Paris"]}, **fields}
    ).encode()


def test_a_numeric_question_is_not_a_string_and_a_missing_answer_is_a_missing_field(tmp_path: Path) -> None:
    root = viquae_root(tmp_path, [record("v1", input=42), record("v2", output={"answer": []}), record("v3")])
    rows = quarantine("viquae", root, tmp_path / "out")
    assert rows["validation.jsonl:1"]["reason"] == "malformed record: input is not a string"
    assert rows["validation.jsonl:2"]["reason"] == "malformed record: missing field output.answer"


def test_infoseek_numeric_question_and_missing_answer(fixtures_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "infoseek"
    shutil.copytree(fixtures_root / "infoseek", root)
    good = json.loads((root / "infoseek_val.jsonl").read_text().splitlines()[0])
    numeric = {**good, "data_id": "infoseek_val_numeric", "question": 7}
    missing = {k: v for k, v in good.items() if k != "answer"} | {"data_id": "infoseek_val_noanswer"}
    (root / "infoseek_val.jsonl").write_text("\n".join(json.dumps(r) for r in (numeric, missing)) + "\n")
    rows = quarantine("infoseek", root, tmp_path / "out")
    assert rows["infoseek_val.jsonl:1"]["reason"] == "malformed record: question is not a string"
    assert rows["infoseek_val.jsonl:2"]["reason"] == "malformed record: missing field answer"


def test_invalid_utf8_keeps_the_raw_bytes_escaped(tmp_path: Path) -> None:
    bad_in_text = record("v2").replace(b"Who", b"Wh\xff")  # the sample cannot be stored
    bad_outside = b"\xff" + record("v3")  # the line is not JSON
    rows = quarantine("viquae", viquae_root(tmp_path, [record("v1"), bad_in_text, bad_outside]), tmp_path / "out")
    assert rows["validation.jsonl:2"]["reason"] == "text is not valid Unicode: surrogates not allowed"
    assert rows["validation.jsonl:2"]["raw"] == bad_in_text.decode("utf-8", "backslashreplace")  # the line, not the id
    assert "Wh\\xff is this?" in rows["validation.jsonl:2"]["raw"]
    assert rows["validation.jsonl:3"]["raw"].startswith('\\xff{"id": "v3"')


def test_an_oversize_csv_row_is_located_at_its_own_line(fixtures_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "evqa"
    shutil.copytree(fixtures_root / "evqa", root)
    lines = (root / "val.csv").read_text().splitlines(keepends=True)
    huge = '"' + "x" * 200_000 + '",' + lines[1].split(",", 1)[1]
    (root / "val.csv").write_text("".join([lines[0], lines[1], huge, *lines[2:]]))
    rows = quarantine("evqa", root, tmp_path / "out")
    assert rows["val.csv:3"]["reason"] == "malformed CSV row: field larger than field limit (131072)"


@pytest.mark.parametrize(
    "source, file, text, reason",
    [
        ("gqa", "val_balanced_questions.json", "", "file unreadable: expected '{' at character 0, found end of file"),
        ("chartqa", "test/test_human.json", '{"a": 1}', "file unreadable: expected '[' at character 0, found '{'"),
        (
            "textvqa",
            "TextVQA_0.5.1_train.json",
            '{"data": 5}',
            "file unreadable: member data is not a list at character 9",
        ),
        (
            "webqa",
            "WebQA_train_val.json",
            "[]",
            "malformed JSON, file unreadable: expected '{' at character 0, found '['",
        ),
    ],
)
def test_a_problem_of_the_whole_file_is_located_at_the_bare_file(
    fixtures_root: Path, tmp_path: Path, source: str, file: str, text: str, reason: str
) -> None:
    root = tmp_path / source
    shutil.copytree(fixtures_root / source, root)
    (root / file).write_text(text)
    rows = quarantine(source, root, tmp_path / "out")
    assert rows[Path(file).name]["reason"] == reason
