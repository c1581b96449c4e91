"""TextVQA adapter over its bundled fixture: ``data`` list, ten annotator answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.image_qa import answers_by_frequency
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "textvqa"


def test_samples_are_scene_text_with_consensus_answer_first(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    assert result.samples == 3
    for case in builder.cases_of("textvqa"):
        [sample] = [s for s in samples.values() if s["question"] == case.question]
        assert sample["answers"][0] == case.truth
        assert sample["meta"]["domain"] == "Scene text" and len(sample["meta"]["annotator_answers"]) == 10


def test_answers_by_frequency() -> None:
    assert answers_by_frequency(["b", "a", "a", " ", "c", "b", "a", 7]) == ["a", "b", "c", "7"]


def test_record_without_answers_is_quarantined_unless_its_split_is_unlabelled(result: IngestResult, rejected) -> None:
    assert rejected(result) == {"TextVQA_0.5.1_train.json:data[3]": "malformed record: missing field answers"}
    assert result.skipped == {"test: no answers in this split: not curatable": 2}


def test_split_option_and_missing_files(root: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="TextVQA_0.5.1_val.json"):
        ingest("textvqa", root, tmp_path / "a", options={"splits": ["val"]})
    with pytest.raises(SourceError, match="none of TextVQA_0.5.1_train.json"):
        ingest("textvqa", tmp_path, tmp_path / "b")
    assert ingest("textvqa", root, tmp_path / "c", options={"splits": ["train"]}).skipped == {}
