"""MME: the four hallucination subtasks in MME's published layouts (the release folder, with
images beside their question files or in images/ + questions_answers_YN/, and the evaluation
tool's image<TAB>question<TAB>answer files), read as probes (dataset mme, the subtask as split)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.sources.ingest import IngestResult, ingest
from mmcurate.sources.mme import mme_object

from .conftest import quarantine_pairs, samples_by_id

SOURCE = "mme"
RELEASE = "MME_Benchmark_release_version"


def _samples(result: IngestResult) -> dict[str, dict]:
    return {sid: {**r, "meta": json.loads(r["meta"])} for sid, r in samples_by_id(result).items()}


def test_the_release_folders_four_subtasks(root: Path, tmp_path: Path) -> None:
    result = ingest("mme", root / RELEASE, tmp_path / "out")  # found one level down, in MME_Benchmark/
    samples = _samples(result)
    assert sorted({sid.rsplit("/", 1)[0] for sid in samples}) == [
        "mme/color",
        "mme/count",
        "mme/existence",
        "mme/position",
    ]
    cup = samples["mme/existence/1"]
    assert cup["question"] == "Is there a cup in this image? Please answer yes or no." and cup["answers"] == ["yes"]
    assert cup["meta"] == {
        "split": "existence",
        "dataset": "mme",
        "question_id": 1,
        "object": "cup",
        "image": "000000000001.jpg",
        "origin": "published",
    }
    assert samples["mme/existence/2"]["answers"] == ["no"]  # "No" read case-insensitively
    assert samples["mme/count/2"]["meta"]["object"] is None  # "Are there two rockets ...": no POPE-like object
    # every image kept has its pair: one yes, one no
    pairs: dict[tuple[str, str], list[str]] = {}
    for s in samples.values():
        pairs.setdefault((s["meta"]["split"], s["meta"]["image"]), []).append(s["answers"][0])
    assert all(sorted(labels) == ["no", "yes"] for labels in pairs.values()) and len(pairs) == 7
    assert quarantine_pairs(result) == [
        ("existence/000000000003.txt:1", "image file missing: 000000000003.jpg"),
        ("existence/000000000003.txt:2", "image file missing: 000000000003.jpg"),
        ("position/000000000003.txt:2", "malformed line: not question<TAB>answer"),
        (
            "position/000000000003.txt:1",
            "image 000000000003.jpg has 1 question answered yes: MME scores an "
            "image by its two questions, one yes and one no",
        ),
    ]


def test_the_split_layout_of_the_other_subtasks(root: Path, tmp_path: Path) -> None:
    # scene/images/000000000004.jpg and scene/questions_answers_YN/000000000004.txt
    samples = _samples(ingest("mme", root / RELEASE, tmp_path / "out", options={"subtasks": ["scene"]}))
    assert [(s["meta"]["image"], s["answers"]) for s in samples.values()] == [
        ("000000000004.jpg", ["yes"]),
        ("000000000004.jpg", ["no"]),
    ]


def test_the_evaluation_tools_files(root: Path, tmp_path: Path) -> None:
    release = root / RELEASE / "MME_Benchmark"
    tool = ingest(
        "mme",
        root / "eval_tool" / "Your_Results",
        tmp_path / "tool",
        images=release,
        options={"subtasks": ["existence"]},
    )
    folder = ingest("mme", root / RELEASE, tmp_path / "folder", options={"subtasks": ["existence"]})

    def strip(result):
        return [(r["question"], r["answers"], r["images"], r["meta"]) for r in _samples(result).values()]

    assert strip(tool) == strip(folder) and tool.samples == 4  # the same probes from either layout
    with pytest.raises(SourceError, match="no folder color/ or file color.txt"):
        ingest("mme", root / "eval_tool" / "Your_Results", tmp_path / "x", options={"subtasks": ["color"]})


def test_options_are_mmes_subtasks(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mme option subtasks"):
        ingest("mme", root / RELEASE, tmp_path / "bad", options={"subtasks": ["colour"]})
    assert mme_object("Is there a train in this image? Please answer yes or no.") == "train"
