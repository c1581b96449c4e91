"""MRAG-Bench adapter on the bundled Parquet fixture (two shards, small row groups)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.core.errors import SourceError
from mmcurate.sources.ingest import ingest

SOURCE = "mragbench"
SHARD0, SHARD1 = "data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"


def raw_rows(root: Path) -> dict[int, dict]:
    rows = pq.read_table(root / SHARD0).to_pylist() + pq.read_table(root / SHARD1).to_pylist()
    return {row["id"]: row for row in rows}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_fixture_is_multi_shard_with_several_row_groups(root: Path) -> None:
    for shard in (SHARD0, SHARD1):
        assert pq.ParquetFile(root / shard).metadata.num_row_groups == 3


def test_default_run_reads_every_shard(result, samples_of) -> None:
    assert (result.samples, result.quarantined) == (12, 3)
    assert set(samples_of(result)) == {str(n) for n in range(12)}
    assert [Path(f).name for f in result.source_files] == [Path(SHARD0).name, Path(SHARD1).name]


def test_quarantine_rows(result, quarantine_of) -> None:
    rows = quarantine_of(result)
    assert rows[0][0] == f"{SHARD0}:1"
    assert rows[0][1].startswith("dropped retrieved_images[2]: undecodable image")
    assert rows[1][0] == f"{SHARD1}:5"
    assert rows[1][1].startswith("image: undecodable image")
    assert rows[2][0] == f"{SHARD1}:6"
    assert rows[2][1].startswith("gt_images[1]: decompression bomb")
    raw = json.loads(pq.read_table(result.quarantine_path).to_pylist()[2]["raw"])
    assert raw["id"] == 13 and raw["gt_images"][0]["bytes"].endswith(" bytes>")


def test_sample_fields(result, root: Path, samples_of) -> None:
    raw = raw_rows(root)[0]
    sample = samples_of(result)["0"]
    assert sample["question"] == "Which animal is shown in the image?"
    assert sample["answers"] == ["tabby cat"]
    assert sample["images"] == [sha(raw["image"]["bytes"])]
    assert sample["gold_contexts"] == [
        {
            "context_id": f"mragbench:0:gt{k}",
            "modality": "image",
            "text": None,
            "title": None,
            "image": sha(img["bytes"]),
        }
        for k, img in enumerate(raw["gt_images"])
    ]
    assert sample["negative_contexts"] == []
    meta = json.loads(sample["meta"])
    assert meta == {
        "aspect": "Perspective",
        "scenario": "Angle",
        "image_type": "animal",
        "source": "ImageNet",
        "choices": {"A": "Egyptian cat", "B": "Persian cat", "C": "tabby cat", "D": "lynx"},
        "answer_choice": "C",
        "retrieved_images": [sha(img["bytes"]) for img in raw["retrieved_images"]],
    }
    for digest in [*sample["images"], *meta["retrieved_images"]]:
        assert next((result.images_dir / digest[:2]).glob(f"{digest}.*")).read_bytes() in {
            raw["image"]["bytes"],
            *(img["bytes"] for img in raw["retrieved_images"]),
        }


def test_option_text_added_when_it_differs_from_answer(result, samples_of) -> None:
    assert samples_of(result)["4"]["answers"] == ["horse", "a horse"]
    assert samples_of(result)["10"]["answers"] == ["camera", "a camera"]


def test_bad_retrieved_image_left_out_of_meta(result, root: Path, samples_of) -> None:
    raw = raw_rows(root)[1]
    meta = json.loads(samples_of(result)["1"]["meta"])
    assert meta["retrieved_images"] == [sha(img["bytes"]) for img in raw["retrieved_images"][:2]]


def test_shard_without_required_columns_is_quarantined(root: Path, tmp_path: Path, quarantine_of) -> None:
    mixed = tmp_path / "raw"
    (mixed / "data").mkdir(parents=True)
    (mixed / SHARD0).write_bytes((root / SHARD0).read_bytes())
    pq.write_table(pa.table({"id": [1], "question": ["q"]}), mixed / "data" / "extra.parquet")
    result = ingest("mragbench", mixed, tmp_path / "out")
    assert result.samples == 7
    assert (
        "data/extra.parquet",
        "shard skipped: it lacks 8 columns: answer, answer_choice, image, gt_images, A, B, C, D",
    ) in quarantine_of(result)


def test_no_shards_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no \\*.parquet shards"):
        ingest("mragbench", tmp_path, tmp_path / "out")


def test_hf_dataset_option_reads_a_local_datasets_folder(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples_of, quarantine_of
) -> None:
    """Exercises the ``load_dataset(name, split="test")`` path with a local dataset folder
    written by ``datasets`` itself (Image features). A hub name resolved from the local HF
    cache goes through the same call, but is not exercised here: that needs a populated cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    rows = sorted(raw_rows(root).values(), key=lambda r: r["id"])[:4]
    features = datasets.Features(
        {
            "id": datasets.Value("int64"),
            "aspect": datasets.Value("string"),
            "scenario": datasets.Value("string"),
            "image": datasets.Image(),
            "gt_images": [datasets.Image()],
            "question": datasets.Value("string"),
            **{c: datasets.Value("string") for c in "ABCD"},
            "answer_choice": datasets.Value("string"),
            "answer": datasets.Value("string"),
            "image_type": datasets.Value("string"),
            "source": datasets.Value("string"),
            "retrieved_images": [datasets.Image()],
        }
    )
    local = tmp_path / "MRAG-Bench"
    (local / "data").mkdir(parents=True)
    datasets.Dataset.from_list(rows, features=features).to_parquet(str(local / "data" / "test-00000-of-00001.parquet"))
    options = {"hf_dataset": str(local), "hf_cache_dir": str(tmp_path / "hf_cache")}
    result = ingest("mragbench", tmp_path, tmp_path / "out", options=options)
    samples = samples_of(result)
    assert set(samples) == {"0", "1", "2", "3"}
    assert samples["2"]["gold_contexts"][0]["image"] == sha(rows[2]["gt_images"][0]["bytes"])
    assert result.source_files == []
    assert quarantine_of(result)[0][0] == f"{local}:1"  # the truncated retrieved image of row 1


def test_hf_dataset_not_in_cache_is_a_source_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    options = {"hf_dataset": "no-such-org/no-such-dataset", "hf_cache_dir": str(tmp_path / "hf_cache")}
    with pytest.raises(SourceError, match="cannot load 'no-such-org/no-such-dataset'"):
        ingest("mragbench", tmp_path, tmp_path / "out", options=options)
