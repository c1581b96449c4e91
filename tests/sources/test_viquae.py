"""ViQuAE adapter over its bundled fixture, ingested end to end."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "viquae"


def test_counts(result: IngestResult, builder, rows) -> None:
    good = {row[0] for split in builder.GOOD.values() for row in split}
    assert result.samples == 13 and result.quarantined == 6
    assert set(rows(result)) == good | {"tc_1094"}


def test_gold_is_the_answer_paragraphs_of_the_provenance_article(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    for split in builder.GOOD.values():
        for ident, key, question, original, _aliases, original_question in split:
            sample = samples[ident]
            assert sample["question"] == question and sample["answers"][0] == original
            assert sample["meta"]["original_question"] == original_question
            assert sample["meta"]["wikidata_id"] == builder.ARTICLES[key].qid
            assert sample["gold_contexts"], ident
            for gold in sample["gold_contexts"]:
                assert original.casefold() in gold["text"].casefold() and gold["title"] == builder.ARTICLES[key].title
                assert not gold["text"].startswith("Section::::")


def test_exact_gold_for_list_and_nested_paragraph_shapes(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    moon = builder.ARTICLES["moon"]  # KILT list shape; paragraphs: title, lead, header, Exploration, ...
    assert samples["tc_1005"]["gold_contexts"] == [
        {
            "context_id": f"kilt:{builder.KILT_ID['moon']}#3",
            "modality": "text",
            "text": moon.sections[1][1],
            "title": "Moon",
            "image": None,
        }
    ]
    rocket = samples["tc_1002"]  # {"paragraph": [...]} shape
    assert [c["context_id"] for c in rocket["gold_contexts"]] == [f"kilt:{builder.KILT_ID['rocket']}#3"]


def test_provenance_matched_by_title_when_it_has_no_id(result: IngestResult, builder, rows) -> None:
    sample = rows(result)["tc_1004"]
    assert sample["meta"]["provenance"] == [{"title": "Coin", "wikipedia_id": ""}]
    assert [c["context_id"] for c in sample["gold_contexts"]] == [f"kilt:{builder.KILT_ID['coins']}#3"]
    assert sample["answers"] == ["Electrum", "electrum"]


def test_missing_provenance_article_keeps_sample_without_gold(result: IngestResult, rows) -> None:
    sample = rows(result)["tc_1094"]
    assert sample["gold_contexts"] == []
    assert sample["meta"]["gold_missing"] == "provenance article '99999999' not in the KB"
    assert sample["answers"] == ["Santiago Ramón y Cajal", "Cajal"]


def test_quarantine_reasons_and_locators(result: IngestResult, rejected) -> None:
    bad = rejected(result)
    assert set(bad) == {
        "kb.jsonl:7",
        "validation.jsonl:9",
        "validation.jsonl:10",
        "validation.jsonl:11",
        "validation.jsonl:12",
        "validation.jsonl:13",
    }
    assert bad["kb.jsonl:7"].startswith("unreadable KB entry")
    assert bad["validation.jsonl:9"].startswith("malformed record: Unterminated string")
    assert bad["validation.jsonl:10"] == "image file missing: 512px-Not_Downloaded.jpg"
    assert bad["validation.jsonl:11"].startswith("undecodable image")
    assert bad["validation.jsonl:12"] == "image path '../escape.jpg' escapes the source root"
    assert bad["validation.jsonl:13"] == "duplicate source_id"


def test_images_and_meta(root: Path, result: IngestResult, rows) -> None:
    sample = rows(result)["tc_1001"]
    data = (root / "images" / "512px-Eileen_Collins.jpg").read_bytes()
    assert sample["images"] == [hashlib.sha256(data).hexdigest()]
    assert sample["meta"]["split"] == "validation" and sample["meta"]["kilt_id"] == "triviaqa_tc_1001"
    assert sample["meta"]["viquae_meta"] == {"image_source": "commons"}
    assert rows(result)["qw_2001"]["meta"]["split"] == "train"


def test_image_folder_override(root: Path, tmp_path: Path, rejected) -> None:
    (tmp_path / "elsewhere").mkdir()
    out = ingest("viquae", root, tmp_path / "out", images=tmp_path / "elsewhere", options={"splits": ["train"]})
    # 4 images not in the folder given; the KB's cut line names no article the train split wants, so it is not read
    assert out.samples == 0 and out.quarantined == 4
    assert set(rejected(out).values()) >= {"image file missing: 512px-Pagoda.jpg"}


def test_source_files_and_bad_options(result: IngestResult, root: Path, tmp_path: Path) -> None:
    assert [Path(p).name for p in result.source_files] == ["train.jsonl", "validation.jsonl", "kb.jsonl"]
    with pytest.raises(SourceError, match="kb file"):
        ingest("viquae", root, tmp_path, options={"kb": "nope.jsonl"})
