"""Encyclopedic-VQA adapter over its bundled fixture, ingested end to end."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import IngestResult, ingest

BUILDERS = Path(__file__).resolve().parents[1] / "fixtures" / "builders"


def builder(name: str) -> ModuleType:
    if str(BUILDERS) not in sys.path:
        sys.path.insert(0, str(BUILDERS))  # builders import images.py and each other
    spec = importlib.util.spec_from_file_location(f"fixture_builder_{name}", BUILDERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


FIX = builder("evqa")
ARTICLES = builder("infoseek").ARTICLES
PAGODA, SATURN, MOON = (ARTICLES[k].url for k in ("china", "rocket", "moon"))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("evqa_raw")
    FIX.build(path)
    return path


@pytest.fixture(scope="module")
def result(root: Path, tmp_path_factory: pytest.TempPathFactory) -> IngestResult:
    return ingest("evqa", root, tmp_path_factory.mktemp("evqa_out"))


def rows(result: IngestResult) -> dict[str, dict]:
    frame = pl.read_parquet(result.samples_path)
    return {r["source_id"]: {**r, "meta": json.loads(r["meta"])} for r in frame.to_dicts()}


def rejected(result: IngestResult) -> dict[str, str]:
    return {r["locator"]: r["reason"] for r in pl.read_parquet(result.quarantine_path).to_dicts()}


def test_counts_and_row_number_ids(result: IngestResult) -> None:
    assert result.samples == 16 and result.quarantined == 5
    assert set(rows(result)) == {f"val:{i}" for i in range(12)} | {"val:17", "train:0", "train:1", "train:2"}


def test_every_sample_has_an_answer_in_its_gold(result: IngestResult) -> None:
    for sample in rows(result).values():
        needles = sample["answers"] + [p for parts in sample["meta"].get("answer_parts", []) for p in parts]
        assert sample["gold_contexts"], sample["source_id"]
        text = " ".join(c["text"] for c in sample["gold_contexts"]).casefold()
        assert any(n.casefold() in text for n in needles), sample["source_id"]
        assert sample["negative_contexts"] == []


def test_gold_is_the_kb_section_at_evidence_section_id(result: IngestResult) -> None:
    sample = rows(result)["val:0"]
    assert sample["gold_contexts"] == [{
        "context_id": f"evqa:{PAGODA}#1", "modality": "text", "text": ARTICLES["china"].sections[1][1],
        "title": "Pagoda", "image": None}]
    assert sample["answers"] == ["stupa", "a stupa"]
    meta = sample["meta"]
    assert (meta["split"], meta["question_type"], meta["dataset_name"], meta["gold_from"]) == (
        "val", "templated", "landmarks", "kb")
    assert meta["evidence_section_title"] == "History" and meta["wikipedia_urls"] == [PAGODA]


def test_multi_answer_keeps_annotator_answers_and_parts(result: IngestResult) -> None:
    sample = rows(result)["val:5"]
    assert sample["answers"] == ["kerosene&&liquid oxygen", "liquid oxygen&&kerosene"]
    assert sample["meta"]["answer_parts"] == [["kerosene", "liquid oxygen"], ["liquid oxygen", "kerosene"]]
    assert "answer_parts" not in rows(result)["val:2"]["meta"]


def test_two_hop_row_has_one_section_per_url(result: IngestResult) -> None:
    samples = rows(result)
    ids = [c["context_id"] for c in samples["val:6"]["gold_contexts"]]
    assert ids == [f"evqa:{SATURN}#0", f"evqa:{MOON}#1"]
    assert samples["val:6"]["meta"]["wikipedia_titles"] == ["Saturn V", "Moon"]
    # one section id for two urls: the second article contributes its answer-bearing sections
    assert [c["context_id"] for c in samples["val:17"]["gold_contexts"]] == ids


def test_evidence_fallback_for_templated_row_missing_from_kb(result: IngestResult) -> None:
    sample = rows(result)["val:9"]
    [gold] = sample["gold_contexts"]
    assert gold["context_id"] == f"evqa:{FIX.COFFEE_BEAN}#1:evidence"
    assert gold["text"] == FIX.COFFEE_EVIDENCE and sample["meta"]["gold_from"] == "evidence"
    assert "gold_missing" not in sample["meta"]


def test_images_landmarks_and_inaturalist(root: Path, result: IngestResult) -> None:
    samples = rows(result)
    clock = FIX.landmark_id("clock")
    gld = root / "GLD" / clock[0] / clock[1] / clock[2] / f"{clock}.jpg"
    assert samples["val:7"]["images"] == [hashlib.sha256(gld.read_bytes()).hexdigest()]
    [missing] = samples["val:7"]["meta"]["missing_images"]  # the corrupt second image
    assert missing["image_id"] == FIX.landmark_id("corrupt") and missing["reason"].startswith("undecodable image")
    cat = json.loads((root / "inat_id2name.json").read_text())[FIX.inat_id("chelsea")]
    assert samples["val:1"]["images"] == [hashlib.sha256((root / cat).read_bytes()).hexdigest()]


def test_quarantine_reasons_and_locators(result: IngestResult) -> None:
    bad = rejected(result)
    assert set(bad) == {"val.csv:15", "val.csv:16", "val.csv:17", "val.csv:18", "val.csv:19"}
    gone = FIX.landmark_id("nowhere1")
    assert bad["val.csv:15"].startswith(
        f"no usable image: {gone}: image file missing: GLD/{gone[0]}/{gone[1]}/{gone[2]}/{gone}.jpg; ")
    assert bad["val.csv:16"] == (
        f"no usable image: {FIX.inat_id('unmapped')}: iNaturalist image {FIX.inat_id('unmapped')} "
        "not in the id map (inat_id2name.json)")
    assert "undecodable image" in bad["val.csv:17"]
    assert bad["val.csv:18"] == "evidence_section_id 'History' is not an integer"
    assert bad["val.csv:19"] == "malformed CSV row: 3 fields, header has 13"


def test_without_kb_only_templated_rows_have_gold(root: Path, tmp_path: Path) -> None:
    shutil.copytree(root, tmp_path / "raw", ignore=shutil.ignore_patterns("encyclopedic_kb_wiki.json"))
    out = ingest("evqa", tmp_path / "raw", tmp_path / "out", options={"splits": ["val"]})
    samples = rows(out)
    with_gold = {k for k, s in samples.items() if s["gold_contexts"]}
    assert with_gold == {"val:0", "val:4", "val:9"}
    assert samples["val:0"]["gold_contexts"][0]["context_id"] == f"evqa:{PAGODA}#1:evidence"
    assert samples["val:1"]["meta"]["gold_missing"] == "no KB given"


def test_source_files_and_missing_split(result: IngestResult, root: Path, tmp_path: Path) -> None:
    assert [Path(p).name for p in result.source_files] == [
        "train.csv", "val.csv", "encyclopedic_kb_wiki.json", "inat_id2name.json"]
    with pytest.raises(SourceError, match="test.csv"):
        ingest("evqa", root, tmp_path, options={"splits": ["test"]})
