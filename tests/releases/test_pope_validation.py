"""POPE releases: the Great Expectations suite holds labels, splits, balance and images."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from mmcurate.core.ledger import ledger_table
from mmcurate.core.schema import QUARANTINE
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.errors import ReleaseInvalid
from mmcurate.releases.pope.draft import KIND, PROBES
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b


def _draft(
    shas: list[str], labels: list[str], split: str = "random", datasets: list[str] | None = None
) -> ReleaseDraft:
    datasets = datasets or ["coco"] * len(labels)
    rows = [
        {
            "sample_id": f"s{i}",
            "source": "pope",
            "source_id": f"{dataset}/{split}/{i}",
            "dataset": dataset,
            "split": split,
            "question_id": i,
            "question": "Is there a cat in the image?",
            "label": label,
            "object": "cat",
            "image": shas[i % 2],
            "image_file": f"COCO_val2014_{i:012d}.jpg",
            "origin": "published",
        }
        for i, (label, dataset) in enumerate(zip(labels, datasets), 1)
    ]
    return ReleaseDraft(
        kind=KIND,
        version="1.0.0",
        parent=None,
        tables={"probes": pa.Table.from_pylist(rows, schema=PROBES)},
        ledger=ledger_table([], "r"),
        quarantine=QUARANTINE.empty_table(),
        config={},
        models=[],
        judge={"name": "none"},
        components={},
        source_files=[],
        counts={},
        statistics={},
        seed=0,
    )


def test_good_release_passes(tmp_path) -> None:
    store, shas = b.make_store(tmp_path / "images")
    path = write_release(_draft(shas, ["yes", "no", "yes", "no"]), tmp_path / "releases", store)
    result = json.loads((path / "quality" / "validation.json").read_text())
    assert result["success"] and set(result["results"]) == {"probes", "balance"}


@pytest.mark.parametrize(
    "labels, split, rule",
    [
        (["yes", "no", "yes"], "random", "balanced"),
        (["yes", "maybe"], "random", "label"),
        (["yes", "no"], "hard", "split"),
    ],
)
def test_a_broken_release_fails_with_its_rule(tmp_path, labels, split, rule) -> None:
    store, shas = b.make_store(tmp_path / "images")
    with pytest.raises(ReleaseInvalid, match=rule):
        write_release(_draft(shas, labels, split), tmp_path / "releases", store)


def test_balance_is_per_dataset_and_an_mme_subtask_is_a_split(tmp_path) -> None:
    store, shas = b.make_store(tmp_path / "images")
    # balanced when pooled, but COCO's random split is all yes and GQA's all no
    with pytest.raises(ReleaseInvalid, match="balanced"):
        write_release(
            _draft(shas, ["yes", "yes", "no", "no"], datasets=["coco", "coco", "gqa", "gqa"]),
            tmp_path / "releases",
            store,
        )
    path = write_release(
        _draft(shas, ["yes", "no"], split="existence", datasets=["mme", "mme"]), tmp_path / "ok", store
    )
    assert json.loads((path / "quality" / "validation.json").read_text())["success"]
