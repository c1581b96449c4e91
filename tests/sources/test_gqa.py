"""GQA adapter over its bundled fixture: one keyed JSON object, images by imageId."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "gqa"


def test_samples_are_general_qa_with_short_answers(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    cases = builder.cases_of("gqa")
    assert result.samples == len(cases) == 5
    by_question = {s["question"]: s for s in samples.values()}
    for case in cases:
        sample = by_question[case.question]
        assert sample["answers"] == [case.truth] and len(sample["images"]) == 1
        assert sample["meta"]["domain"] == "General QA" and sample["meta"]["split"] == "val"
        assert sample["meta"]["full_answer"] == f"The answer is {case.truth}."


def test_quarantine_reasons(result: IngestResult, rejected) -> None:
    assert rejected(result) == {
        "val_balanced_questions.json:09990001": "image file missing: 2999999.jpg",
        "val_balanced_questions.json:09990002": "malformed record: missing field answer",
    }


def test_unlabelled_test_split_is_skipped_not_quarantined(result: IngestResult) -> None:
    assert result.skipped == {"test: no answers in this split: not curatable": 2}
    assert "skipped: 2 (test: no answers in this split: not curatable)" in result.summary()


def test_broken_file_keeps_the_records_before_the_break(root: Path, tmp_path: Path, quarantine_of) -> None:
    text = (root / "val_balanced_questions.json").read_text()
    broken = tmp_path / "broken"
    (broken / "images").mkdir(parents=True)
    for image in (root / "images").iterdir():
        (broken / "images" / image.name).write_bytes(image.read_bytes())
    second = text.index('"0201')  # cut inside the second member
    (broken / "val_balanced_questions.json").write_text(text[: second + 40])
    result = ingest("gqa", broken, tmp_path / "out")
    assert result.samples == 1
    [(locator, reason)] = quarantine_of(result)
    assert locator.startswith("val_balanced_questions.json:char") and "rest of file unreadable" in reason


def test_root_without_question_files(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no \\*_balanced_questions.json"):
        ingest("gqa", tmp_path, tmp_path / "out")
    with pytest.raises(SourceError, match="none of missing.json"):
        ingest("gqa", tmp_path, tmp_path / "out", options={"files": ["missing.json"]})


def test_the_console_says_what_was_skipped(root: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mmcurate.cli import app

    out = CliRunner().invoke(app, ["ingest", "gqa", str(root), "--out", str(tmp_path / "out")])
    assert out.exit_code == 0, out.output
    assert "2 quarantined" in out.output and "skipped: 2 (test: no answers in this split: not curatable)" in out.output
