"""Encyclopedic-VQA adapter over its bundled fixture, ingested end to end."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "evqa"


def test_counts_and_row_number_ids(result: IngestResult, rows) -> None:
    assert result.samples == 16 and result.quarantined == 5
    assert set(rows(result)) == {f"val:{i}" for i in range(12)} | {"val:17", "train:0", "train:1", "train:2"}


def test_every_sample_has_an_answer_in_its_gold(result: IngestResult, rows) -> None:
    for sample in rows(result).values():
        needles = sample["answers"] + [p for parts in sample["meta"].get("answer_parts", []) for p in parts]
        assert sample["gold_contexts"], sample["source_id"]
        text = " ".join(c["text"] for c in sample["gold_contexts"]).casefold()
        assert any(n.casefold() in text for n in needles), sample["source_id"]
        assert sample["negative_contexts"] == []


def test_gold_is_the_kb_section_at_evidence_section_id(result: IngestResult, builder, rows) -> None:
    pagoda = builder.ARTICLES["china"]
    sample = rows(result)["val:0"]
    assert sample["gold_contexts"] == [
        {
            "context_id": f"evqa:{pagoda.url}#1",
            "modality": "text",
            "text": pagoda.sections[1][1],
            "title": "Pagoda",
            "image": None,
        }
    ]
    assert sample["answers"] == ["stupa", "a stupa"]
    meta = sample["meta"]
    assert (meta["split"], meta["question_type"], meta["dataset_name"], meta["gold_from"]) == (
        "val",
        "templated",
        "landmarks",
        "kb",
    )
    assert meta["evidence_section_title"] == "History" and meta["wikipedia_urls"] == [pagoda.url]


def test_multi_answer_keeps_annotator_answers_and_parts(result: IngestResult, rows) -> None:
    sample = rows(result)["val:5"]
    assert sample["answers"] == ["kerosene&&liquid oxygen", "liquid oxygen&&kerosene"]
    assert sample["meta"]["answer_parts"] == [["kerosene", "liquid oxygen"], ["liquid oxygen", "kerosene"]]
    assert "answer_parts" not in rows(result)["val:2"]["meta"]


def test_two_hop_row_has_one_section_per_url(result: IngestResult, builder, rows) -> None:
    saturn, moon = builder.ARTICLES["rocket"].url, builder.ARTICLES["moon"].url
    samples = rows(result)
    ids = [c["context_id"] for c in samples["val:6"]["gold_contexts"]]
    assert ids == [f"evqa:{saturn}#0", f"evqa:{moon}#1"]
    assert samples["val:6"]["meta"]["wikipedia_titles"] == ["Saturn V", "Moon"]
    # one section id for two urls: the second article contributes its answer-bearing sections
    assert [c["context_id"] for c in samples["val:17"]["gold_contexts"]] == ids


def test_evidence_fallback_for_templated_row_missing_from_kb(result: IngestResult, builder, rows) -> None:
    sample = rows(result)["val:9"]
    [gold] = sample["gold_contexts"]
    assert gold["context_id"] == f"evqa:{builder.COFFEE_BEAN}#1:evidence"
    assert gold["text"] == builder.COFFEE_EVIDENCE and sample["meta"]["gold_from"] == "evidence"
    assert "gold_missing" not in sample["meta"]


def test_images_landmarks_and_inaturalist(root: Path, result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    clock = builder.landmark_id("clock")
    gld = root / "GLD" / clock[0] / clock[1] / clock[2] / f"{clock}.jpg"
    assert samples["val:7"]["images"] == [hashlib.sha256(gld.read_bytes()).hexdigest()]
    [missing] = samples["val:7"]["meta"]["missing_images"]  # the corrupt second image
    assert missing["image_id"] == builder.landmark_id("corrupt") and missing["reason"].startswith("undecodable image")
    cat = json.loads((root / "inat_id2name.json").read_text())[builder.inat_id("chelsea")]
    assert samples["val:1"]["images"] == [hashlib.sha256((root / cat).read_bytes()).hexdigest()]


def test_quarantine_reasons_and_locators(result: IngestResult, builder, rejected) -> None:
    bad = rejected(result)
    assert set(bad) == {"val.csv:15", "val.csv:16", "val.csv:17", "val.csv:18", "val.csv:19"}
    gone = builder.landmark_id("nowhere1")
    assert bad["val.csv:15"].startswith(
        f"no usable image: {gone}: image file missing: GLD/{gone[0]}/{gone[1]}/{gone[2]}/{gone}.jpg; "
    )
    assert bad["val.csv:16"] == (
        f"no usable image: {builder.inat_id('unmapped')}: iNaturalist image {builder.inat_id('unmapped')} "
        "not in the id map (inat_id2name.json)"
    )
    assert "undecodable image" in bad["val.csv:17"]
    assert bad["val.csv:18"] == "evidence_section_id 'History' is not an integer"
    assert bad["val.csv:19"] == "malformed CSV row: 3 fields, header has 13"


def test_without_kb_only_templated_rows_have_gold(root: Path, tmp_path: Path, builder, rows) -> None:
    shutil.copytree(root, tmp_path / "raw", ignore=shutil.ignore_patterns("encyclopedic_kb_wiki.json"))
    out = ingest("evqa", tmp_path / "raw", tmp_path / "out", options={"splits": ["val"]})
    samples = rows(out)
    with_gold = {k for k, s in samples.items() if s["gold_contexts"]}
    assert with_gold == {"val:0", "val:4", "val:9"}
    assert samples["val:0"]["gold_contexts"][0]["context_id"] == f"evqa:{builder.ARTICLES['china'].url}#1:evidence"
    assert samples["val:1"]["meta"]["gold_missing"] == "no KB given"


def test_source_files_and_missing_split(result: IngestResult, root: Path, tmp_path: Path) -> None:
    assert [Path(p).name for p in result.source_files] == [
        "train.csv",
        "val.csv",
        "encyclopedic_kb_wiki.json",
        "inat_id2name.json",
    ]
    with pytest.raises(SourceError, match="test.csv"):
        ingest("evqa", root, tmp_path, options={"splits": ["test"]})
