"""InfoSeek adapter over its bundled fixture, ingested end to end."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import polars as pl
import pytest

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.sources.ingest import IngestResult, ingest

SOURCE = "infoseek"


def test_counts_and_every_good_sample(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    good = {data_id for split in builder.GOOD.values() for data_id, *_ in split}
    assert result.samples == 15 and result.quarantined == 8
    assert set(samples) == good | {"infoseek_train_00000004", "infoseek_train_00000005"}


def test_good_samples_carry_answer_in_gold(result: IngestResult, builder, rows) -> None:
    samples = rows(result)
    for split in builder.GOOD.values():
        for data_id, key, _image_id, question, answer, _ in split:
            sample = samples[data_id]
            article = builder.ARTICLES[key]
            assert sample["question"] == question
            assert sample["answers"][0] == answer[0]
            assert sample["negative_contexts"] == []
            [gold] = sample["gold_contexts"]
            assert answer[0] in gold["text"] and gold["title"] == article.title
            assert gold["context_id"] == f"wiki6m:{article.qid}#w0"  # short articles: window from word 0
            assert sample["meta"]["entity_id"] == article.qid and sample["meta"]["gold_from"] == "content"
            assert sample["meta"]["split"] == ("train" if data_id.startswith("infoseek_train") else "val")


def test_answers_append_answer_eval_strings_deduplicated(result: IngestResult, rows) -> None:
    samples = rows(result)
    assert samples["infoseek_val_00000006"]["answers"] == ["Christiaan Huygens", "Huygens", "Christiaan Huyghens"]
    assert samples["infoseek_train_00000002"]["answers"] == ["Brazil", "Federative Republic of Brazil"]


def test_numeric_answer_eval_kept_as_range(result: IngestResult, rows) -> None:
    sample = rows(result)["infoseek_val_00000002"]
    assert sample["answers"] == ["110.6"]
    assert sample["meta"]["numeric_ranges"] == [{"wikidata": 110.6, "range": [99.54, 121.66]}]


def test_summary_is_gold_when_content_lacks_the_answer(result: IngestResult, builder, rows) -> None:
    sample = rows(result)["infoseek_train_00000004"]
    [gold] = sample["gold_contexts"]
    assert gold["context_id"] == "wiki6m:Q1136414#summary"
    assert gold["text"] == builder.ARTICLES["hubble"].summary
    assert sample["meta"]["gold_from"] == "summary"


def test_entity_missing_summary_uses_content_passage(result: IngestResult, builder, rows) -> None:
    sample = rows(result)["infoseek_val_00000009"]  # flower: no wikipedia_summary in Wiki6M
    [gold] = sample["gold_contexts"]
    assert gold["text"] == builder.ARTICLES["flower"].content
    assert "gold_missing" not in sample["meta"]


def test_entity_absent_from_kb_keeps_sample_without_gold(result: IngestResult, rows) -> None:
    sample = rows(result)["infoseek_train_00000005"]
    assert sample["gold_contexts"] == []
    assert sample["meta"]["gold_missing"] == "entity Q23635 not in the KB"
    assert sample["meta"]["entity_text"] == "Rubiaceae"


def test_quarantine_reasons_and_locators(result: IngestResult, rows, rejected) -> None:
    bad = rejected(result)
    assert set(bad) == {
        "Wiki6M_ver_1_0.jsonl.gz:8",
        "infoseek_val.jsonl:11",
        "infoseek_val.jsonl:12",
        "infoseek_val.jsonl:13",
        "infoseek_val.jsonl:14",
        "infoseek_val.jsonl:15",
        "infoseek_val.jsonl:17",
        "infoseek_val.jsonl:16",
    }
    assert bad["Wiki6M_ver_1_0.jsonl.gz:8"].startswith("unreadable KB entry")
    assert bad["infoseek_val.jsonl:11"].startswith("malformed record: Unterminated string")
    assert bad["infoseek_val.jsonl:12"] == "malformed record: missing field question"
    assert bad["infoseek_val.jsonl:13"] == "image file missing: 09/oven_09999999.jpg"
    assert bad["infoseek_val.jsonl:14"].startswith("undecodable image")
    assert bad["infoseek_val.jsonl:15"] == "image path '../../outside.jpg' escapes the source root"
    assert bad["infoseek_val.jsonl:17"].startswith("malformed record: answer_eval item")
    assert bad["infoseek_val.jsonl:16"] == "duplicate source_id"
    # the first of the duplicated ids is the one kept
    assert rows(result)["infoseek_val_00000001"]["answers"] == ["STS-93", "STS 93"]


def test_images_from_sharded_folder_and_id2image(root: Path, result: IngestResult, rows) -> None:
    samples = rows(result)
    mapped = hashlib.sha256((root / "oven_images" / "custom" / "temple.jpg").read_bytes()).hexdigest()
    sharded = hashlib.sha256((root / "oven_images" / "02" / "oven_02200001.jpg").read_bytes()).hexdigest()
    assert samples["infoseek_val_00000008"]["images"] == [mapped]
    assert samples["infoseek_val_00000001"]["images"] == [sharded]
    assert all((result.images_dir / s[:2]).glob(f"{s}.*") for r in samples.values() for s in r["images"])


def test_passage_window_around_the_answer(root: Path, tmp_path: Path, rows) -> None:
    out = ingest("infoseek", root, tmp_path, options={"passage_words": 12, "splits": ["val"]})
    [gold] = rows(out)["infoseek_val_00000002"]["gold_contexts"]
    assert gold["text"] == "liquid fuel.\n\nThe Saturn V was 110.6 metres (363 ft) tall and"
    assert gold["context_id"] == "wiki6m:Q54363#w34"


def test_without_kb_samples_have_no_gold(root: Path, tmp_path: Path, rows) -> None:
    bare = tmp_path / "raw"
    shutil.copytree(root, bare, ignore=shutil.ignore_patterns("Wiki6M*"))
    out = ingest("infoseek", bare, tmp_path / "out", options={"splits": ["train"]})
    samples = rows(out)
    assert out.samples == 5 and out.quarantined == 0
    assert all(s["gold_contexts"] == [] and s["meta"]["gold_missing"] == "no Wiki6M KB given" for s in samples.values())


def test_options_and_unusable_roots(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="infoseek option bogus"):
        ingest("infoseek", root, tmp_path / "a", options={"bogus": 1})
    with pytest.raises(SourceError, match="infoseek_test.jsonl"):
        ingest("infoseek", root, tmp_path / "b", options={"splits": ["test"]})
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="none of infoseek_train.jsonl"):
        ingest("infoseek", tmp_path / "empty", tmp_path / "c")


def test_source_files(result: IngestResult, root: Path) -> None:
    assert [Path(p).name for p in result.source_files] == [
        "infoseek_train.jsonl",
        "infoseek_val.jsonl",
        "infoseek_train_withkb.jsonl",
        "infoseek_val_withkb.jsonl",
        "id2image.jsonl",
        "Wiki6M_ver_1_0.jsonl.gz",
    ]


def test_parquet_round_trip_with_datasets_and_polars(result: IngestResult, tmp_path: Path) -> None:
    hf = datasets.load_dataset(
        "parquet", data_files=str(result.samples_path), split="train", cache_dir=str(tmp_path / "hf")
    )
    frame = pl.read_parquet(result.samples_path)
    assert hf.num_rows == frame.height == 15
    assert hf["source_id"] == frame["source_id"].to_list()
    by_id = dict(zip(hf["source_id"], hf["gold_contexts"]))
    assert by_id["infoseek_val_00000002"][0]["context_id"] == "wiki6m:Q54363#w0"


def test_cli_ingest(root: Path, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("mmcurate")
    done = subprocess.run(
        [str(exe), "ingest", "infoseek", str(root), "--out", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "infoseek: 15 samples" in done.stdout and "8 quarantined" in done.stdout
    assert pl.read_parquet(tmp_path / "samples.parquet").height == 15


def _question_root(tmp_path: Path, root: Path, split: str, records: list[dict]) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(root / "oven_images", raw / "oven_images")
    (raw / f"infoseek_{split}.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return raw


def test_test_split_without_answers_is_counted_once_not_quarantined(root: Path, tmp_path: Path) -> None:
    questions = [
        {
            "data_id": f"infoseek_test_{i:08d}",
            "image_id": "oven_02200001",
            "question": "Who is this?",
            "data_split": "test_unseen_entity",
        }
        for i in range(4)
    ]
    raw = _question_root(
        tmp_path,
        root,
        "test",
        [
            *questions,
            {
                "data_id": "infoseek_test_9",
                "image_id": "oven_02200001",
                "question": "Who?",
                "answer": ["Eileen Collins"],
            },
        ],
    )
    out = ingest("infoseek", raw, tmp_path / "out")
    assert (out.samples, out.quarantined) == (1, 0)
    assert out.skipped == {"test: no answers in this split: not curatable": 4}
    assert json.loads((tmp_path / "out" / "ingest.json").read_text())["skipped"] == out.skipped


def test_answer_eval_as_one_object_and_with_bare_numbers(root: Path, tmp_path: Path, rows, rejected) -> None:
    base = {"image_id": "oven_02200001", "question": "How tall is it?", "data_split": "val_unseen_entity"}
    records = [
        {**base, "data_id": "v1", "answer": ["110.6 m"], "answer_eval": {"wikidata": 110.6, "range": [99.5, 121.7]}},
        {**base, "data_id": "v2", "answer": ["1999"], "answer_eval": [1999, 1998.0, 12.5, "nineteen ninety-nine"]},
        {**base, "data_id": "v3", "answer": ["x"], "answer_eval": [True]},
        {**base, "data_id": "v4", "answer": ["x"], "answer_eval": "x"},
    ]
    out = ingest("infoseek", _question_root(tmp_path, root, "val", records), tmp_path / "out")
    samples = rows(out)
    assert samples["v1"]["answers"] == ["110.6 m"]
    assert samples["v1"]["meta"]["numeric_ranges"] == [{"wikidata": 110.6, "range": [99.5, 121.7]}]
    assert samples["v2"]["answers"] == ["1999", "1998", "12.5", "nineteen ninety-nine"]
    assert rejected(out) == {
        "infoseek_val.jsonl:3": "malformed record: answer_eval item True is neither a string, a number nor a numeric range",
        "infoseek_val.jsonl:4": "malformed record: answer_eval is neither a list nor an object",
    }
