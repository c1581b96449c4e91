"""MMDocRAG adapter on the bundled fixture (published dataset/ + images/ layout)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.sources.ingest import ingest

SOURCE = "mmdocrag"
COFFEE = "Northwind_Coffee_Annual_Report_2022"
MUSEUM = "City_Museum_Collection_Catalogue"


def test_default_reads_the_20_quote_files(result, samples_of) -> None:
    assert (result.samples, result.quarantined) == (12, 4)
    assert set(samples_of(result)) == {f"dev_20:{q}" for q in range(101, 107)} | {
        f"evaluation_20:{q}" for q in range(201, 207)
    }
    assert [Path(f).name for f in result.source_files] == ["dev_20.jsonl", "evaluation_20.jsonl"]


def test_quarantine_rows(result, quarantine_of) -> None:
    rows = quarantine_of(result)
    assert rows[0] == ("dev_20.jsonl:3", "dropped quote image3: image file missing: not_unzipped.jpg")
    assert rows[1] == ("dev_20.jsonl:7", "gold quote image1 unusable: image file missing: not_unzipped.jpg")
    assert rows[2][0] == "evaluation_20.jsonl:3" and rows[2][1].startswith("malformed JSON: Unterminated string")
    assert rows[3] == (
        "evaluation_20.jsonl:6",
        "dropped quote image3: image path '../../etc/passwd' escapes the source root",
    )


def test_missing_non_gold_image_drops_only_that_quote(result, samples_of) -> None:
    sample = samples_of(result)["dev_20:103"]
    meta = json.loads(sample["meta"])
    assert "image3" not in meta["quote_ids"] and "image2" in meta["quote_ids"]
    assert len(sample["negative_contexts"]) == 10 - 2 - 1
    assert [c["modality"] for c in sample["gold_contexts"]] == ["text", "image"]


def test_text_gold_and_candidate_negatives(result, samples_of) -> None:
    sample = samples_of(result)["dev_20:101"]
    assert sample["question"] == "By how much did net revenue grow in fiscal 2022?"
    assert sample["answers"] == ["12%"]
    assert sample["images"] == []
    assert sample["gold_contexts"] == [
        {
            "context_id": f"mmdocrag:{COFFEE}:p2:l4",
            "modality": "text",
            "image": None,
            "title": None,
            "text": "Net revenue grew 12% to 4.8 billion dollars in fiscal 2022, driven by new stores in Asia.",
        }
    ]
    negatives = sample["negative_contexts"]
    assert [c["modality"] for c in negatives] == ["text"] * 6 + ["image"] * 3
    assert f"mmdocrag:{COFFEE}:p2:l4" not in {c["context_id"] for c in negatives}


def test_image_quotes_resolve_both_path_shapes(result, root: Path, samples_of) -> None:
    sample = samples_of(result)["dev_20:102"]
    raw = json.loads((root / "dataset" / "dev_20.jsonl").read_text().splitlines()[1])
    paths = [q["img_path"] for q in raw["img_quotes"]]
    assert paths[0].startswith("images/") and not paths[1].startswith("images/")
    (gold,) = sample["gold_contexts"]
    cover = (root / "images" / f"{COFFEE}_cover_coffee.jpg").read_bytes()
    assert gold == {
        "context_id": f"mmdocrag:{COFFEE}:p1:l1",
        "modality": "image",
        "title": None,
        "image": hashlib.sha256(cover).hexdigest(),
        "text": "The report cover shows a cup of black coffee on a white saucer with a silver spoon.",
    }
    farm = (root / "images" / f"{COFFEE}_farm_map.jpg").read_bytes()
    assert hashlib.sha256(farm).hexdigest() in {c["image"] for c in sample["negative_contexts"]}


def test_context_ids_name_the_layout_element_not_the_quote_number(result, samples_of) -> None:
    samples = samples_of(result)
    first, other = samples["dev_20:101"], samples["evaluation_20:201"]
    ids_first = json.loads(first["meta"])["quote_ids"]
    ids_other = json.loads(other["meta"])["quote_ids"]
    assert ids_first["text1"] != ids_other["text1"]  # same quote number, different paragraphs
    assert ids_other["text1"] in set(ids_first.values())  # same paragraph, same id in both questions


def test_meta(result, samples_of) -> None:
    meta = json.loads(samples_of(result)["evaluation_20:206"]["meta"])
    assert meta == {
        "q_id": 206,
        "doc_name": MUSEUM,
        "domain": "Brochure",
        "question_type": "Descriptive",
        "evidence_modality_type": ["Figure"],
        "answer_interleaved": "The answer is garden pavilion, as the document states [text1] ![](image1).",
        "quote_ids": meta["quote_ids"],
    }
    assert len(meta["quote_ids"]) == 10


def test_every_sample_has_six_negatives_and_answer_in_gold(result, samples_of) -> None:
    for sample in samples_of(result).values():
        assert len(sample["negative_contexts"]) >= 6
        gold = " ".join(c["text"] for c in sample["gold_contexts"])
        assert sample["answers"][0] in gold


def test_train_jsonl_is_never_read(result, root: Path, quarantine_of) -> None:
    assert (root / "dataset" / "train.jsonl").is_file()
    assert not any("train" in locator for locator, _ in quarantine_of(result))
    assert not any("train" in f for f in result.source_files)


def test_both_variants_have_distinct_ids(root: Path, tmp_path: Path, samples_of) -> None:
    result = ingest("mmdocrag", root, tmp_path, options={"quotes": "both"})
    samples = samples_of(result)
    assert (result.samples, result.quarantined) == (24, 8)
    assert len(samples["dev_15:101"]["negative_contexts"]) == 8
    assert len(samples["dev_20:101"]["negative_contexts"]) == 9
    assert samples["dev_15:101"]["sample_id"] != samples["dev_20:101"]["sample_id"]


def test_split_option_and_images_folder_option(root: Path, tmp_path: Path, samples_of) -> None:
    moved = tmp_path / "unzipped"
    shutil.copytree(root / "images", moved)
    raw = tmp_path / "raw"
    shutil.copytree(root / "dataset", raw / "dataset")
    result = ingest("mmdocrag", raw, tmp_path / "out", images=moved, options={"splits": ["dev"], "quotes": "15"})
    assert set(samples_of(result)) == {f"dev_15:{q}" for q in range(101, 107)}


def test_bad_options_and_layouts(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mmdocrag option quotes"):
        ingest("mmdocrag", root, tmp_path / "a", options={"quotes": "25"})
    partial = tmp_path / "partial"
    shutil.copytree(root / "dataset", partial / "dataset")
    with pytest.raises(SourceError, match="image folder"):
        ingest("mmdocrag", partial, tmp_path / "b")
    (partial / "dataset" / "evaluation_20.jsonl").unlink()
    (partial / "images").mkdir()
    with pytest.raises(SourceError, match="evaluation_20.jsonl missing"):
        ingest("mmdocrag", partial, tmp_path / "c")


def _copy(tmp_path: Path, root: Path, questions: list[dict]) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(root / "images", raw / "images")
    (raw / "dataset").mkdir()
    (raw / "dataset" / "dev_20.jsonl").write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    (raw / "dataset" / "evaluation_20.jsonl").write_text("")
    return raw


def _question(q_id: int, answer: str, **quote_fields) -> dict:
    return {
        "q_id": q_id,
        "doc_name": COFFEE,
        "question": "Which values?",
        "answer_short": answer,
        "text_quotes": [{"quote_id": "text1", "type": "text", "text": "Values 46, 27 and 64.", **quote_fields}],
        "img_quotes": [
            {
                "quote_id": "image1",
                "type": "image",
                "img_path": f"images/{COFFEE}_cover_coffee.jpg",
                "img_description": "A cup.",
                **quote_fields,
            }
        ],
        "gold_quotes": ["text1"],
    }


@pytest.mark.parametrize(
    "answer, answers",
    [
        ("['46', '27', '64']", ["46", "27", "64"]),
        ('["12%", 7, 2.5]', ["12%", "7", "2.5"]),
        ("12%", ["12%"]),
        ("[46, 27] or so", ["[46, 27] or so"]),
        ("[__import__('os')]", ["[__import__('os')]"]),  # not a list of scalars: one literal answer
        ("[['a']]", ["[['a']]"]),
    ],
)
def test_answer_short_written_as_a_python_list(root: Path, tmp_path: Path, samples_of, answer, answers) -> None:
    result = ingest("mmdocrag", _copy(tmp_path, root, [_question(1, answer, page_id=1, layout_id=2)]), tmp_path / "out")
    assert samples_of(result)["dev_20:1"]["answers"] == answers


def test_quotes_without_page_or_layout_fall_back_to_image_path_or_quote_id(
    root: Path, tmp_path: Path, samples_of, quarantine_of
) -> None:
    result = ingest("mmdocrag", _copy(tmp_path, root, [_question(1, "46"), _question(2, "46")]), tmp_path / "out")
    assert quarantine_of(result) == []
    first, second = samples_of(result)["dev_20:1"], samples_of(result)["dev_20:2"]
    assert [c["context_id"] for c in first["gold_contexts"]] == [f"mmdocrag:{COFFEE}:q1:text1"]
    assert [c["context_id"] for c in second["gold_contexts"]] == [f"mmdocrag:{COFFEE}:q2:text1"]
    image_id = f"mmdocrag:{COFFEE}:{COFFEE}_cover_coffee.jpg"  # the same image file in both questions
    assert [c["context_id"] for c in first["negative_contexts"]] == [image_id]
    assert [c["context_id"] for c in second["negative_contexts"]] == [image_id]
