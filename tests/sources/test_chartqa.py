"""ChartQA adapter over its bundled fixture: one JSON array per split and subset."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "chartqa"


def test_samples_are_charts_with_positional_ids(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    assert set(samples) == {"test/human/0", "test/human/1", "test/human/2"}
    for index, case in enumerate(builder.cases_of("chartqa")):
        sample = samples[f"test/human/{index}"]
        assert sample["question"] == case.question and sample["answers"] == [case.truth]
        assert sample["meta"] | {"domain": "Chart", "split": "test", "subset": "human"} == sample["meta"]


def test_record_without_label_is_quarantined(result: IngestResult, rejected) -> None:
    assert rejected(result) == {"test_human.json:3": "malformed record: missing field label"}


def test_numbers_are_answers_and_missing_subsets_are_named(root: Path, tmp_path: Path, rows) -> None:
    (tmp_path / "test" / "png").mkdir(parents=True)
    image = next((root / "test" / "png").iterdir())
    (tmp_path / "test" / "png" / image.name).write_bytes(image.read_bytes())
    (tmp_path / "test" / "test_human.json").write_text(f'[{{"imgname": "{image.name}", "query": "q?", "label": 35}}]')
    result = ingest("chartqa", tmp_path, tmp_path / "out", options={"subsets": ["human"]})
    assert rows(result)["test/human/0"]["answers"] == ["35"]
    with pytest.raises(SourceError, match="test/test_augmented.json"):
        ingest("chartqa", tmp_path, tmp_path / "out2", options={"splits": ["test"]})
